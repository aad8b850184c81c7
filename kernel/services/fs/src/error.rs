//! The errors of the file system: what the store reports ([`IoError`]), what is wrong with
//! a superblock ([`SuperblockError`]), with format options ([`OptionsError`]), with a name
//! or path given by the caller ([`NameError`], [`PathError`]), with something read from
//! the disk ([`Corruption`]), and the error of every operation ([`FsError`]).

use core::fmt;

/// A failure of the block store below the file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoError {
    /// The block lies past the end of the store.
    OutOfRange {
        /// The block asked for.
        block: u64,
    },
    /// The device reported an error.
    Device {
        /// The block of the failed request.
        block: u64,
        /// The device's (or driver's) error code.
        code: i32,
    },
}

impl fmt::Display for IoError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoError::OutOfRange { block } => write!(formatter, "block {block} is past the end of the store"),
            IoError::Device { block, code } => write!(formatter, "device error {code} at block {block}"),
        }
    }
}

/// A superblock field whose value does not fit the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// Total blocks.
    Blocks,
    /// Number of inodes.
    Inodes,
    /// First block of the block bitmap.
    BitmapStart,
    /// Length of the block bitmap in blocks.
    BitmapBlocks,
    /// First block of the inode table.
    InodeStart,
    /// Length of the inode table in blocks.
    InodeBlocks,
    /// First block of the data area.
    DataStart,
}

impl Field {
    /// The field's name as docs/file-system.md spells it.
    pub fn name(self) -> &'static str {
        match self {
            Field::Blocks => "blocks",
            Field::Inodes => "inodes",
            Field::BitmapStart => "bitmap_start",
            Field::BitmapBlocks => "bitmap_blocks",
            Field::InodeStart => "inode_start",
            Field::InodeBlocks => "inode_blocks",
            Field::DataStart => "data_start",
        }
    }
}

/// Why a superblock was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuperblockError {
    /// Block 0 does not start with the magic number: not a Spindle file system.
    BadMagic,
    /// A format version this code does not know.
    UnsupportedVersion(u32),
    /// A block size other than [`crate::BLOCK_BYTES`].
    BadBlockSize(u32),
    /// The checksum does not match the block's contents.
    BadChecksum {
        /// The checksum stored in the superblock.
        stored: u32,
        /// The checksum of the block as read.
        computed: u32,
    },
    /// A region field disagrees with the rest of the geometry.
    BadGeometry {
        /// The field.
        field: Field,
        /// Its value.
        found: u64,
        /// What the other fields imply (for `blocks` and `inodes`: the limit crossed).
        expected: u64,
    },
    /// The last block the superblock claims cannot be read: the store is smaller.
    StoreTooSmall {
        /// Blocks the superblock claims.
        blocks: u64,
    },
}

impl fmt::Display for SuperblockError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SuperblockError::BadMagic => formatter.write_str("no Spindle file system (bad magic number)"),
            SuperblockError::UnsupportedVersion(version) => write!(formatter, "unsupported format version {version}"),
            SuperblockError::BadBlockSize(size) => write!(formatter, "block size {size} is not {}", crate::BLOCK_BYTES),
            SuperblockError::BadChecksum { stored, computed } => {
                write!(formatter, "superblock checksum {stored:#010x} does not match its contents ({computed:#010x})")
            }
            SuperblockError::BadGeometry { field, found, expected } => {
                write!(formatter, "superblock field {} is {found}, expected {expected}", field.name())
            }
            SuperblockError::StoreTooSmall { blocks } => {
                write!(formatter, "the superblock claims {blocks} blocks but the store cannot read the last one")
            }
        }
    }
}

/// Why [`crate::format`] refused its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionsError {
    /// Too few blocks for the superblock, the bitmap, the inode table and one data block.
    TooFewBlocks {
        /// Blocks asked for.
        blocks: u64,
        /// Blocks the layout needs at least.
        needed: u64,
    },
    /// More blocks than a 32-bit block pointer can name.
    TooManyBlocks {
        /// Blocks asked for.
        blocks: u64,
    },
    /// Fewer than two inodes (inode 0 is reserved, inode 1 is the root).
    TooFewInodes {
        /// Inodes asked for.
        inodes: u32,
    },
    /// More inodes than the format allows ([`crate::MAX_INODES`]).
    TooManyInodes {
        /// Inodes asked for.
        inodes: u32,
    },
}

impl fmt::Display for OptionsError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionsError::TooFewBlocks { blocks, needed } => write!(formatter, "{blocks} blocks are too few (the layout needs at least {needed})"),
            OptionsError::TooManyBlocks { blocks } => write!(formatter, "{blocks} blocks are more than a 32-bit block pointer can name"),
            OptionsError::TooFewInodes { inodes } => write!(formatter, "{inodes} inodes are too few (at least 2)"),
            OptionsError::TooManyInodes { inodes } => write!(formatter, "{inodes} inodes are more than the format allows ({})", crate::MAX_INODES),
        }
    }
}

/// Why a name was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameError {
    /// The empty name.
    Empty,
    /// Longer than [`crate::NAME_BYTES`] bytes.
    TooLong {
        /// Its length in bytes.
        bytes: usize,
    },
    /// Contains `/` or a NUL byte.
    BadByte,
    /// `.` or `..` (the format has no such entries).
    Dots,
}

impl fmt::Display for NameError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => formatter.write_str("empty name"),
            NameError::TooLong { bytes } => write!(formatter, "name of {bytes} bytes is longer than {}", crate::NAME_BYTES),
            NameError::BadByte => formatter.write_str("name contains '/' or a NUL byte"),
            NameError::Dots => formatter.write_str("'.' and '..' are not names in this file system"),
        }
    }
}

/// Why a path was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathError {
    /// Does not start with `/`.
    NotAbsolute,
    /// More than [`crate::MAX_PATH_DEPTH`] components.
    TooDeep,
    /// The path names the root where a name inside a directory is needed.
    NoName,
}

impl fmt::Display for PathError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::NotAbsolute => formatter.write_str("path does not start with '/'"),
            PathError::TooDeep => write!(formatter, "path has more than {} components", crate::MAX_PATH_DEPTH),
            PathError::NoName => formatter.write_str("path names the root directory"),
        }
    }
}

/// What is wrong with an inode or with something it points to, as read from the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corruption {
    /// A block pointer outside the data area.
    BlockOutOfRange(u64),
    /// A block the inode references is already free in the bitmap (found when freeing it).
    BlockAlreadyFree(u64),
    /// An unknown kind code.
    BadKind(u16),
    /// A live inode with link count 0.
    NoLinks,
    /// A size larger than [`crate::MAX_FILE_BYTES`].
    SizeTooLarge(u64),
    /// A directory size that is not a multiple of the entry size or is over [`crate::MAX_DIR_BYTES`].
    BadDirectorySize(u64),
    /// A directory entry with a name that is empty, too long, or contains `/`, NUL, or is `.`/`..`.
    BadEntryName {
        /// The entry's slot in the directory.
        slot: u64,
    },
    /// A directory entry naming an inode outside the inode table.
    EntryInodeOutOfRange {
        /// The entry's slot in the directory.
        slot: u64,
        /// The inode it names.
        inode: u32,
    },
    /// A directory entry naming a free inode.
    EntryInodeFree {
        /// The entry's slot in the directory.
        slot: u64,
        /// The inode it names.
        inode: u32,
    },
    /// The root inode is not a directory.
    RootNotDirectory,
    /// A directory entry naming the root directory.
    EntryNamesRoot {
        /// The entry's slot in the directory.
        slot: u64,
    },
}

impl fmt::Display for Corruption {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corruption::BlockOutOfRange(block) => write!(formatter, "block pointer {block} outside the data area"),
            Corruption::BlockAlreadyFree(block) => write!(formatter, "block {block} is referenced but free in the bitmap"),
            Corruption::BadKind(kind) => write!(formatter, "unknown inode kind {kind}"),
            Corruption::NoLinks => formatter.write_str("live inode with link count 0"),
            Corruption::SizeTooLarge(size) => write!(formatter, "size {size} larger than the largest file"),
            Corruption::BadDirectorySize(size) => write!(formatter, "directory size {size} is not a whole number of entries within the limit"),
            Corruption::BadEntryName { slot } => write!(formatter, "directory entry {slot} has an invalid name"),
            Corruption::EntryInodeOutOfRange { slot, inode } => write!(formatter, "directory entry {slot} names inode {inode} outside the inode table"),
            Corruption::EntryInodeFree { slot, inode } => write!(formatter, "directory entry {slot} names free inode {inode}"),
            Corruption::RootNotDirectory => formatter.write_str("the root inode is not a directory"),
            Corruption::EntryNamesRoot { slot } => write!(formatter, "directory entry {slot} names the root directory"),
        }
    }
}

/// The error of a file-system operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsError {
    /// The store failed.
    Io(IoError),
    /// The superblock was refused (mount).
    Superblock(SuperblockError),
    /// The format options were refused.
    Options(OptionsError),
    /// Something read from the disk is inconsistent.
    Corrupt {
        /// The inode concerned (for directory entries: the directory).
        inode: u32,
        /// What is wrong.
        what: Corruption,
    },
    /// The inode number is outside the table or names a free inode.
    NoSuchInode(u32),
    /// No entry of that name.
    NotFound,
    /// An entry of that name exists already.
    Exists,
    /// A directory was needed.
    NotADirectory,
    /// A file was needed.
    IsADirectory,
    /// The directory still has entries.
    NotEmpty,
    /// No free data block.
    NoSpace,
    /// No free inode.
    NoInodes,
    /// The name was refused.
    Name(NameError),
    /// The path was refused.
    Path(PathError),
    /// The offset or size is past [`crate::MAX_FILE_BYTES`].
    FileTooLarge,
    /// The directory has [`crate::MAX_DIR_BYTES`] of entries and no free slot.
    DirectoryFull,
}

impl fmt::Display for FsError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsError::Io(error) => write!(formatter, "I/O error: {error}"),
            FsError::Superblock(error) => write!(formatter, "bad superblock: {error}"),
            FsError::Options(error) => write!(formatter, "bad format options: {error}"),
            FsError::Corrupt { inode, what } => write!(formatter, "inode {inode} is corrupt: {what}"),
            FsError::NoSuchInode(inode) => write!(formatter, "no inode {inode}"),
            FsError::NotFound => formatter.write_str("no such file or directory"),
            FsError::Exists => formatter.write_str("the name exists already"),
            FsError::NotADirectory => formatter.write_str("not a directory"),
            FsError::IsADirectory => formatter.write_str("is a directory"),
            FsError::NotEmpty => formatter.write_str("directory not empty"),
            FsError::NoSpace => formatter.write_str("no free block left"),
            FsError::NoInodes => formatter.write_str("no free inode left"),
            FsError::Name(error) => write!(formatter, "bad name: {error}"),
            FsError::Path(error) => write!(formatter, "bad path: {error}"),
            FsError::FileTooLarge => write!(formatter, "past the largest file size ({} bytes)", crate::MAX_FILE_BYTES),
            FsError::DirectoryFull => formatter.write_str("the directory has no room for another entry"),
        }
    }
}

impl From<IoError> for FsError {
    fn from(error: IoError) -> Self {
        FsError::Io(error)
    }
}
