//! `spindle-service-fs`: Spindle's on-disk file system — `no_std`, no `unsafe`,
//! host-tested.
//!
//! A classic layout (docs/file-system.md describes every byte): a superblock at block 0,
//! a block bitmap, an inode table, and a data area. Inodes hold 12 direct block pointers,
//! a single and a double indirect pointer (files up to about 4 GiB); directories are files
//! of 64-byte entries (inode number, name of up to [`NAME_BYTES`] bytes); the root is
//! inode 1. Everything runs over a [`BlockStore`]: the kernel implements it over its
//! buffer cache, `cargo xtask fs` over an image file, the tests over a [`MemoryStore`].
//!
//! - [`format`] writes an empty file system; [`FileSystem::mount`] validates the
//!   superblock and gives the operations on inode numbers (create, mkdir, unlink,
//!   read_at, write_at, truncate, stat, readdir, block_of, lookup by path).
//! - [`check`] (fsck, read-only) reports every inconsistency it finds as a [`Finding`].
//!
//! Nothing read from the disk is trusted: block pointers, inode numbers, sizes, names and
//! entries are validated where they are used, and a corrupt image gives an error such as
//! [`FsError::Corrupt`] naming the inode and what is wrong — never a panic, a loop without
//! bound, or an allocation sized by the disk beyond the device's own size.
//!
//! ```
//! use spindle_service_fs::{FileSystem, FormatOptions, MemoryStore, format};
//!
//! let mut store = MemoryStore::new(256);
//! format(&mut store, FormatOptions { blocks: 256, inodes: 64 }).unwrap();
//! let mut fs = FileSystem::mount(store).unwrap();
//! let dir = fs.mkdir(FileSystem::<MemoryStore>::ROOT, "etc").unwrap();
//! let file = fs.create(dir, "motd").unwrap();
//! fs.write_at(file, 0, b"hello").unwrap();
//! assert_eq!(fs.lookup("/etc/motd"), Ok(file));
//! let mut buffer = [0u8; 16];
//! assert_eq!(fs.read_at(file, 0, &mut buffer), Ok(5));
//! assert!(spindle_service_fs::check(&mut fs.into_store()).is_clean());
//! ```

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod check;
mod error;
mod fs;
mod layout;
mod memory;

#[cfg(test)]
mod tests;

pub use check::{Finding, Report, Severity, check};
pub use error::{Corruption, Field, FsError, IoError, NameError, OptionsError, PathError, SuperblockError};
pub use fs::{DirEntry, FileSystem, FormatOptions, FsStats, Stat, format};
pub use layout::{ENTRY_BYTES, INODE_BYTES, Kind, MAGIC, ROOT_INODE, Superblock, VERSION, check_name};
pub use memory::MemoryStore;

/// Bytes per block.
pub const BLOCK_BYTES: usize = 4096;
/// Longest name of a directory entry, in bytes.
pub const NAME_BYTES: usize = 59;
/// Largest file: 12 direct blocks, 1024 through the single and 1024² through the double
/// indirect block.
pub const MAX_FILE_BYTES: u64 = fs::MAX_FILE_BLOCKS * BLOCK_BYTES as u64;
/// Largest directory: 65536 entries (4 MiB), so a directory scan is bounded.
pub const MAX_DIR_BYTES: u64 = 65536 * ENTRY_BYTES as u64;
/// Most components a path may have.
pub const MAX_PATH_DEPTH: usize = 64;
/// Most inodes a file system may have (2^24: the checker's per-inode tables stay small).
pub const MAX_INODES: u32 = 1 << 24;

/// The inode count [`format`] is given unless told otherwise: one per 64 KiB of the file
/// system (16 blocks), at least 32 and at most [`MAX_INODES`]. Mounting reads the whole
/// inode table (to count free inodes), so it is kept small: 4,096 inodes, 128 blocks, for
/// 256 MiB.
pub fn default_inodes(blocks: u64) -> u32 {
    (blocks / 16).clamp(32, u64::from(MAX_INODES)) as u32
}

/// What a block is for: lets a cache below tell metadata from file data, and which file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    /// Superblock, bitmap, inode table, indirect blocks and directory contents.
    Metadata,
    /// Contents of a regular file.
    Data {
        /// The file's inode.
        inode: u32,
        /// The block's index in the file.
        file_block: u64,
    },
}

/// The blocks a file system lives on (block 0 is its superblock).
pub trait BlockStore {
    /// Reads block `block` (0 = first block of the file system) into `buf`.
    ///
    /// Errors: [`IoError`] (a block past the end is [`IoError::OutOfRange`]).
    fn read(&mut self, block: u64, usage: Usage, buf: &mut [u8; BLOCK_BYTES]) -> Result<(), IoError>;
    /// Writes `buf` to block `block`; durable only after [`BlockStore::sync`].
    ///
    /// Errors: [`IoError`].
    fn write(&mut self, block: u64, usage: Usage, buf: &[u8; BLOCK_BYTES]) -> Result<(), IoError>;
    /// Everything written so far is durable when this returns.
    ///
    /// Errors: [`IoError`].
    fn sync(&mut self) -> Result<(), IoError>;
    /// Reads `out.len()` bytes of block `block` from byte `offset` into `out`: the file
    /// system's reads of an inode, a pointer or part of a file block. The default reads the
    /// whole block into a buffer and copies the part; a store over a cache copies only the
    /// part (no buffer, no allocation).
    ///
    /// Errors: [`IoError`] (a part outside the block is [`IoError::OutOfRange`]).
    fn read_part(&mut self, block: u64, usage: Usage, offset: usize, out: &mut [u8]) -> Result<(), IoError> {
        let mut whole = fs::buffer();
        self.read(block, usage, &mut whole)?;
        let part = offset.checked_add(out.len()).and_then(|end| whole.get(offset..end)).ok_or(IoError::OutOfRange { block })?;
        out.copy_from_slice(part);
        Ok(())
    }
}

impl<T: BlockStore + ?Sized> BlockStore for &mut T {
    fn read(&mut self, block: u64, usage: Usage, buf: &mut [u8; BLOCK_BYTES]) -> Result<(), IoError> {
        (**self).read(block, usage, buf)
    }

    fn write(&mut self, block: u64, usage: Usage, buf: &[u8; BLOCK_BYTES]) -> Result<(), IoError> {
        (**self).write(block, usage, buf)
    }

    fn sync(&mut self) -> Result<(), IoError> {
        (**self).sync()
    }

    fn read_part(&mut self, block: u64, usage: Usage, offset: usize, out: &mut [u8]) -> Result<(), IoError> {
        (**self).read_part(block, usage, offset, out)
    }
}
