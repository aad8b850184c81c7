//! The on-disk format: the superblock, inodes and directory entries, encoded and decoded
//! field by field in little-endian (docs/file-system.md describes every byte).

use crate::error::{Corruption, Field, FsError, NameError, OptionsError, SuperblockError};
use crate::{BLOCK_BYTES, NAME_BYTES};

/// The first eight bytes of block 0.
pub const MAGIC: [u8; 8] = *b"SPINDLFS";
/// The format version this code reads and writes.
pub const VERSION: u32 = 1;
/// Bytes of one inode in the inode table.
pub const INODE_BYTES: usize = 128;
/// Inodes per inode-table block.
pub const INODES_PER_BLOCK: u32 = (BLOCK_BYTES / INODE_BYTES) as u32;
/// Bytes of one directory entry.
pub const ENTRY_BYTES: usize = 64;
/// Directory entries per block.
pub const ENTRIES_PER_BLOCK: usize = BLOCK_BYTES / ENTRY_BYTES;
/// Block pointers per indirect block.
pub const POINTERS_PER_BLOCK: u64 = (BLOCK_BYTES / 4) as u64;
/// Direct block pointers in an inode.
pub const DIRECT: usize = 12;
/// Bits (blocks) per bitmap block.
pub const BITS_PER_BLOCK: u64 = (BLOCK_BYTES * 8) as u64;
/// The inode of the root directory.
pub const ROOT_INODE: u32 = 1;

/// Offset of the checksum in the superblock.
const CHECKSUM_AT: usize = 72;

pub(crate) fn get_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

pub(crate) fn get_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

pub(crate) fn get_u64(bytes: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(raw)
}

pub(crate) fn put_u16(bytes: &mut [u8], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// FNV-1a (32 bits) of the superblock block with its checksum field read as zero.
pub(crate) fn superblock_checksum(block: &[u8; BLOCK_BYTES]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for (index, byte) in block.iter().enumerate() {
        let byte = if (CHECKSUM_AT..CHECKSUM_AT + 4).contains(&index) { 0 } else { *byte };
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// The geometry recorded in the superblock: where each region lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Total blocks of the file system (block 0 is the superblock).
    pub blocks: u64,
    /// Inodes in the inode table (inode 0 is reserved, inode 1 is the root).
    pub inodes: u32,
    /// First block of the block bitmap (always 1).
    pub bitmap_start: u64,
    /// Blocks of the bitmap: one bit per block of the file system.
    pub bitmap_blocks: u64,
    /// First block of the inode table.
    pub inode_start: u64,
    /// Blocks of the inode table.
    pub inode_blocks: u64,
    /// First block of the data area; it runs to `blocks`.
    pub data_start: u64,
}

impl Superblock {
    /// The layout for `blocks` blocks and at least `inodes` inodes (rounded up to fill the
    /// last inode-table block).
    pub fn plan(blocks: u64, inodes: u32) -> Result<Superblock, OptionsError> {
        if blocks > u64::from(u32::MAX) {
            return Err(OptionsError::TooManyBlocks { blocks });
        }
        if inodes < 2 {
            return Err(OptionsError::TooFewInodes { inodes });
        }
        if inodes > crate::MAX_INODES {
            return Err(OptionsError::TooManyInodes { inodes });
        }
        let inode_blocks = u64::from(inodes.div_ceil(INODES_PER_BLOCK));
        let inodes = (inode_blocks as u32) * INODES_PER_BLOCK;
        let bitmap_blocks = blocks.div_ceil(BITS_PER_BLOCK).max(1);
        let inode_start = 1 + bitmap_blocks;
        let data_start = inode_start + inode_blocks;
        if blocks <= data_start {
            return Err(OptionsError::TooFewBlocks { blocks, needed: data_start + 1 });
        }
        Ok(Superblock { blocks, inodes, bitmap_start: 1, bitmap_blocks, inode_start, inode_blocks, data_start })
    }

    /// Encodes the superblock with its checksum.
    pub fn encode(&self) -> [u8; BLOCK_BYTES] {
        let mut block = [0u8; BLOCK_BYTES];
        block[0..8].copy_from_slice(&MAGIC);
        put_u32(&mut block, 8, VERSION);
        put_u32(&mut block, 12, BLOCK_BYTES as u32);
        put_u64(&mut block, 16, self.blocks);
        put_u32(&mut block, 24, self.inodes);
        put_u64(&mut block, 32, self.bitmap_start);
        put_u64(&mut block, 40, self.bitmap_blocks);
        put_u64(&mut block, 48, self.inode_start);
        put_u64(&mut block, 56, self.inode_blocks);
        put_u64(&mut block, 64, self.data_start);
        let checksum = superblock_checksum(&block);
        put_u32(&mut block, CHECKSUM_AT, checksum);
        block
    }

    /// Decodes and validates a superblock: magic, version, block size, checksum, and that
    /// every region field is what the block and inode counts imply.
    pub fn decode(block: &[u8; BLOCK_BYTES]) -> Result<Superblock, SuperblockError> {
        if block[0..8] != MAGIC {
            return Err(SuperblockError::BadMagic);
        }
        let version = get_u32(block, 8);
        if version != VERSION {
            return Err(SuperblockError::UnsupportedVersion(version));
        }
        let block_bytes = get_u32(block, 12);
        if block_bytes as usize != BLOCK_BYTES {
            return Err(SuperblockError::BadBlockSize(block_bytes));
        }
        let stored = get_u32(block, CHECKSUM_AT);
        let computed = superblock_checksum(block);
        if stored != computed {
            return Err(SuperblockError::BadChecksum { stored, computed });
        }
        let found = Superblock {
            blocks: get_u64(block, 16),
            inodes: get_u32(block, 24),
            bitmap_start: get_u64(block, 32),
            bitmap_blocks: get_u64(block, 40),
            inode_start: get_u64(block, 48),
            inode_blocks: get_u64(block, 56),
            data_start: get_u64(block, 64),
        };
        let bad = |field, found, expected| SuperblockError::BadGeometry { field, found, expected };
        if found.blocks > u64::from(u32::MAX) {
            return Err(bad(Field::Blocks, found.blocks, u64::from(u32::MAX)));
        }
        if found.inodes < 2 || found.inodes > crate::MAX_INODES || !found.inodes.is_multiple_of(INODES_PER_BLOCK) {
            return Err(bad(Field::Inodes, u64::from(found.inodes), u64::from(found.inodes.clamp(INODES_PER_BLOCK, crate::MAX_INODES))));
        }
        let expected = match Superblock::plan(found.blocks, found.inodes) {
            Ok(expected) => expected,
            Err(OptionsError::TooFewBlocks { needed, .. }) => return Err(bad(Field::Blocks, found.blocks, needed)),
            Err(_) => return Err(bad(Field::Inodes, u64::from(found.inodes), u64::from(INODES_PER_BLOCK))),
        };
        let fields = [
            (Field::BitmapStart, found.bitmap_start, expected.bitmap_start),
            (Field::BitmapBlocks, found.bitmap_blocks, expected.bitmap_blocks),
            (Field::InodeStart, found.inode_start, expected.inode_start),
            (Field::InodeBlocks, found.inode_blocks, expected.inode_blocks),
            (Field::DataStart, found.data_start, expected.data_start),
        ];
        for (field, value, wanted) in fields {
            if value != wanted {
                return Err(bad(field, value, wanted));
            }
        }
        Ok(found)
    }

    /// Whether `block` lies in the data area.
    pub fn in_data_area(&self, block: u64) -> bool {
        block >= self.data_start && block < self.blocks
    }

    /// The inode-table block and the byte offset in it of inode `inode` (in range).
    pub(crate) fn inode_location(&self, inode: u32) -> (u64, usize) {
        let block = self.inode_start + u64::from(inode / INODES_PER_BLOCK);
        let offset = (inode % INODES_PER_BLOCK) as usize * INODE_BYTES;
        (block, offset)
    }
}

/// What an inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory: a file of [`ENTRY_BYTES`]-byte entries.
    Directory,
}

impl Kind {
    pub(crate) fn code(self) -> u16 {
        match self {
            Kind::File => 1,
            Kind::Directory => 2,
        }
    }
}

/// An inode as decoded, before validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Inode {
    /// 0 free, 1 file, 2 directory; anything else is corrupt.
    pub kind_code: u16,
    pub links: u16,
    pub size: u64,
    pub blocks: u64,
    pub changes: u64,
    pub direct: [u32; DIRECT],
    pub single: u32,
    pub double: u32,
}

impl Inode {
    pub fn new(kind: Kind) -> Inode {
        Inode { kind_code: kind.code(), links: 1, ..Inode::default() }
    }

    pub fn decode(bytes: &[u8]) -> Inode {
        let mut direct = [0u32; DIRECT];
        for (index, pointer) in direct.iter_mut().enumerate() {
            *pointer = get_u32(bytes, 32 + 4 * index);
        }
        Inode {
            kind_code: get_u16(bytes, 0),
            links: get_u16(bytes, 2),
            size: get_u64(bytes, 8),
            blocks: get_u64(bytes, 16),
            changes: get_u64(bytes, 24),
            direct,
            single: get_u32(bytes, 80),
            double: get_u32(bytes, 84),
        }
    }

    pub fn encode(&self, bytes: &mut [u8]) {
        bytes[..INODE_BYTES].fill(0);
        put_u16(bytes, 0, self.kind_code);
        put_u16(bytes, 2, self.links);
        put_u64(bytes, 8, self.size);
        put_u64(bytes, 16, self.blocks);
        put_u64(bytes, 24, self.changes);
        for (index, pointer) in self.direct.iter().enumerate() {
            put_u32(bytes, 32 + 4 * index, *pointer);
        }
        put_u32(bytes, 80, self.single);
        put_u32(bytes, 84, self.double);
    }

    pub fn is_free(&self) -> bool {
        self.kind_code == 0
    }

    /// The kind of a live inode, checking kind, links and size.
    pub fn validate(&self) -> Result<Kind, Corruption> {
        let kind = match self.kind_code {
            1 => Kind::File,
            2 => Kind::Directory,
            other => return Err(Corruption::BadKind(other)),
        };
        if self.links == 0 {
            return Err(Corruption::NoLinks);
        }
        if self.size > crate::MAX_FILE_BYTES {
            return Err(Corruption::SizeTooLarge(self.size));
        }
        if kind == Kind::Directory && (!self.size.is_multiple_of(ENTRY_BYTES as u64) || self.size > crate::MAX_DIR_BYTES) {
            return Err(Corruption::BadDirectorySize(self.size));
        }
        Ok(kind)
    }
}

/// Checks a name for a directory entry.
pub fn check_name(name: &[u8]) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > NAME_BYTES {
        return Err(NameError::TooLong { bytes: name.len() });
    }
    if name.iter().any(|byte| *byte == b'/' || *byte == 0) {
        return Err(NameError::BadByte);
    }
    if name == b"." || name == b".." {
        return Err(NameError::Dots);
    }
    Ok(())
}

/// A directory entry as stored: the inode it names (0 = empty slot) and the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawEntry {
    pub inode: u32,
    pub name: [u8; NAME_BYTES],
    pub name_len: u8,
}

impl RawEntry {
    pub fn new(inode: u32, name: &[u8]) -> RawEntry {
        let mut stored = [0u8; NAME_BYTES];
        let length = name.len().min(NAME_BYTES);
        stored[..length].copy_from_slice(&name[..length]);
        RawEntry { inode, name: stored, name_len: length as u8 }
    }

    pub fn decode(bytes: &[u8]) -> RawEntry {
        let mut name = [0u8; NAME_BYTES];
        name.copy_from_slice(&bytes[5..5 + NAME_BYTES]);
        RawEntry { inode: get_u32(bytes, 0), name_len: bytes[4], name }
    }

    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut bytes = [0u8; ENTRY_BYTES];
        put_u32(&mut bytes, 0, self.inode);
        bytes[4] = self.name_len;
        bytes[5..5 + NAME_BYTES].copy_from_slice(&self.name);
        bytes
    }

    /// The name, or `None` if the length byte is out of range.
    pub fn name(&self) -> Option<&[u8]> {
        self.name.get(..usize::from(self.name_len))
    }

    /// Validates a live entry of directory `dir` at `slot` against a table of `inodes`.
    pub fn validate(&self, dir: u32, slot: u64, inodes: u32) -> Result<(), FsError> {
        let name_ok = self.name().is_some_and(|name| check_name(name).is_ok());
        if !name_ok {
            return Err(FsError::Corrupt { inode: dir, what: Corruption::BadEntryName { slot } });
        }
        if self.inode >= inodes {
            return Err(FsError::Corrupt { inode: dir, what: Corruption::EntryInodeOutOfRange { slot, inode: self.inode } });
        }
        Ok(())
    }
}
