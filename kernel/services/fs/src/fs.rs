//! The mounted file system: allocation, block mapping, files and directories.

use alloc::boxed::Box;

use crate::error::{Corruption, FsError, PathError};
use crate::layout::{
    BITS_PER_BLOCK, DIRECT, ENTRIES_PER_BLOCK, ENTRY_BYTES, INODE_BYTES, INODES_PER_BLOCK, Inode, Kind, POINTERS_PER_BLOCK, ROOT_INODE, RawEntry,
    Superblock, check_name, get_u32, put_u32,
};
use crate::{BLOCK_BYTES, BlockStore, MAX_DIR_BYTES, MAX_FILE_BYTES, MAX_PATH_DEPTH, NAME_BYTES, Usage};

/// A heap block buffer (kept off the stack: kernel stacks are small).
pub(crate) type Buffer = Box<[u8; BLOCK_BYTES]>;

pub(crate) fn buffer() -> Buffer {
    Box::new([0u8; BLOCK_BYTES])
}

/// File blocks reached through the single indirect block.
const SINGLE_SPAN: u64 = POINTERS_PER_BLOCK;
/// File blocks reached through the double indirect block.
const DOUBLE_SPAN: u64 = POINTERS_PER_BLOCK * POINTERS_PER_BLOCK;
/// First file block behind the single indirect block.
const SINGLE_FIRST: u64 = DIRECT as u64;
/// First file block behind the double indirect block.
const DOUBLE_FIRST: u64 = SINGLE_FIRST + SINGLE_SPAN;
/// Number of file blocks a file can have.
pub(crate) const MAX_FILE_BLOCKS: u64 = DOUBLE_FIRST + DOUBLE_SPAN;

/// What [`FileSystem::find`] found: the named entry's slot and inode, and the first empty slot.
type Found = (Option<(u64, u32)>, Option<u64>);

/// Sizes for [`format`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormatOptions {
    /// Total blocks of the file system ([`BLOCK_BYTES`] each), at most `u32::MAX`.
    pub blocks: u64,
    /// Inodes (rounded up to a whole inode-table block; inode 0 is reserved).
    pub inodes: u32,
}

/// What [`FileSystem::stat`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The inode number.
    pub inode: u32,
    /// File or directory.
    pub kind: Kind,
    /// Size in bytes.
    pub size: u64,
    /// Blocks allocated to it, indirect blocks included.
    pub blocks: u64,
    /// Directory entries naming it (the root counts 1).
    pub links: u16,
    /// Modification counter: grows by one with every change of contents or size.
    pub changes: u64,
}

/// What [`FileSystem::statfs`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsStats {
    /// Bytes per block.
    pub block_bytes: u64,
    /// Total blocks.
    pub blocks: u64,
    /// Blocks of the data area.
    pub data_blocks: u64,
    /// Free blocks of the data area.
    pub free_blocks: u64,
    /// Inodes in the table (inode 0 reserved included).
    pub inodes: u32,
    /// Free inodes.
    pub free_inodes: u32,
}

/// One directory entry as [`FileSystem::readdir`] returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The inode it names.
    pub inode: u32,
    /// What that inode is.
    pub kind: Kind,
    name: [u8; NAME_BYTES],
    name_len: u8,
}

impl DirEntry {
    /// The name's bytes.
    pub fn name(&self) -> &[u8] {
        &self.name[..usize::from(self.name_len).min(NAME_BYTES)]
    }

    /// The name as text, if it is UTF-8.
    pub fn name_str(&self) -> Option<&str> {
        core::str::from_utf8(self.name()).ok()
    }
}

/// Writes an empty file system over `store`: superblock, bitmap, a zeroed inode table and
/// an empty root directory, then syncs.
///
/// Errors: [`FsError::Options`] for sizes the format cannot hold, [`FsError::Io`].
pub fn format<S: BlockStore>(store: &mut S, options: FormatOptions) -> Result<(), FsError> {
    let layout = Superblock::plan(options.blocks, options.inodes).map_err(FsError::Options)?;
    let mut zero = buffer();
    // The store must hold the last block.
    store.read(layout.blocks - 1, Usage::Metadata, &mut zero)?;
    zero.fill(0);
    for index in 0..layout.bitmap_blocks {
        let mut block = buffer();
        let first_bit = index * BITS_PER_BLOCK;
        let metadata_bits = layout.data_start.saturating_sub(first_bit).min(BITS_PER_BLOCK);
        for bit in 0..metadata_bits as usize {
            block[bit / 8] |= 1 << (bit % 8);
        }
        store.write(layout.bitmap_start + index, Usage::Metadata, &block)?;
    }
    for index in 0..layout.inode_blocks {
        let mut block = buffer();
        if index == 0 {
            let root = Inode::new(Kind::Directory);
            let offset = ROOT_INODE as usize * INODE_BYTES;
            root.encode(&mut block[offset..offset + INODE_BYTES]);
        }
        store.write(layout.inode_start + index, Usage::Metadata, if index == 0 { &block } else { &zero })?;
    }
    store.write(0, Usage::Metadata, &layout.encode())?;
    store.sync()?;
    Ok(())
}

/// A mounted file system over a [`BlockStore`].
///
/// Holds the superblock, the free counts and allocation hints in memory, never file data;
/// every change goes straight to the store (a write-back cache may sit below). Inode
/// numbers name files and directories; [`FileSystem::ROOT`] is the root directory.
pub struct FileSystem<S> {
    store: S,
    superblock: Superblock,
    free_blocks: u64,
    free_inodes: u32,
    block_hint: u64,
    inode_hint: u32,
    /// In-core copies of recently used inodes (xv6's inode table), slot `number %
    /// IN_CORE_INODES`: a read or write of a file finds its inode here instead of going
    /// through the store for it every time. Every inode this file system writes goes
    /// through here too (write-through), so a copy is never older than the store —
    /// unless the inode table is written behind its back through [`FileSystem::store_mut`].
    in_core: [Option<(u32, Inode)>; IN_CORE_INODES],
}

/// Slots of the in-core inode table.
const IN_CORE_INODES: usize = 32;

impl<S: BlockStore> FileSystem<S> {
    /// The root directory's inode.
    pub const ROOT: u32 = ROOT_INODE;

    /// Mounts the file system of `store`: validates the superblock (magic, version,
    /// checksum, regions consistent with the block count, the last block readable) and
    /// counts free blocks and inodes from the bitmap and the inode table.
    ///
    /// Errors: [`FsError::Superblock`], [`FsError::Io`].
    pub fn mount(mut store: S) -> Result<FileSystem<S>, FsError> {
        let mut block = buffer();
        store.read(0, Usage::Metadata, &mut block)?;
        let superblock = Superblock::decode(&block).map_err(FsError::Superblock)?;
        if store.read(superblock.blocks - 1, Usage::Metadata, &mut block).is_err() {
            return Err(FsError::Superblock(crate::SuperblockError::StoreTooSmall { blocks: superblock.blocks }));
        }
        let mut free_blocks = 0;
        for index in 0..superblock.bitmap_blocks {
            store.read(superblock.bitmap_start + index, Usage::Metadata, &mut block)?;
            let first = (index * BITS_PER_BLOCK).max(superblock.data_start);
            let end = ((index + 1) * BITS_PER_BLOCK).min(superblock.blocks);
            for number in first..end {
                let bit = (number - index * BITS_PER_BLOCK) as usize;
                if block[bit / 8] & (1 << (bit % 8)) == 0 {
                    free_blocks += 1;
                }
            }
        }
        let mut free_inodes = 0;
        for index in 0..superblock.inode_blocks {
            store.read(superblock.inode_start + index, Usage::Metadata, &mut block)?;
            for slot in 0..INODES_PER_BLOCK as usize {
                let number = index * u64::from(INODES_PER_BLOCK) + slot as u64;
                if number != 0 && Inode::decode(&block[slot * INODE_BYTES..]).is_free() {
                    free_inodes += 1;
                }
            }
        }
        Ok(FileSystem {
            store,
            superblock,
            free_blocks,
            free_inodes,
            block_hint: superblock.data_start,
            inode_hint: ROOT_INODE,
            in_core: [None; IN_CORE_INODES],
        })
    }

    /// The superblock as mounted.
    pub fn superblock(&self) -> &Superblock {
        &self.superblock
    }

    /// The store, for the caller's own use.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Unmounts (nothing to write back: call [`FileSystem::sync`] first for durability) and
    /// returns the store.
    pub fn into_store(self) -> S {
        self.store
    }

    /// Makes everything written so far durable.
    ///
    /// Errors: [`FsError::Io`].
    pub fn sync(&mut self) -> Result<(), FsError> {
        self.store.sync().map_err(FsError::Io)
    }

    /// Free and total blocks and inodes.
    pub fn statfs(&self) -> FsStats {
        FsStats {
            block_bytes: BLOCK_BYTES as u64,
            blocks: self.superblock.blocks,
            data_blocks: self.superblock.blocks - self.superblock.data_start,
            free_blocks: self.free_blocks,
            inodes: self.superblock.inodes,
            free_inodes: self.free_inodes,
        }
    }

    // ----- inodes ------------------------------------------------------------------------

    pub(crate) fn read_inode_raw(&mut self, inode: u32) -> Result<Inode, FsError> {
        if inode == 0 || inode >= self.superblock.inodes {
            return Err(FsError::NoSuchInode(inode));
        }
        let slot = inode as usize % IN_CORE_INODES;
        if let Some((number, value)) = self.in_core[slot]
            && number == inode
        {
            return Ok(value);
        }
        let (block_number, offset) = self.superblock.inode_location(inode);
        let mut bytes = [0u8; INODE_BYTES];
        self.store.read_part(block_number, Usage::Metadata, offset, &mut bytes)?;
        let value = Inode::decode(&bytes);
        self.in_core[slot] = Some((inode, value));
        Ok(value)
    }

    /// Records what the store now holds for `inode` (`None`: unknown, e.g. after a
    /// failed write).
    fn set_in_core(&mut self, inode: u32, value: Option<Inode>) {
        self.in_core[inode as usize % IN_CORE_INODES] = value.map(|value| (inode, value));
    }

    /// A live inode and its kind.
    pub(crate) fn live(&mut self, inode: u32) -> Result<(Inode, Kind), FsError> {
        let raw = self.read_inode_raw(inode)?;
        if raw.is_free() {
            return Err(FsError::NoSuchInode(inode));
        }
        let kind = raw.validate().map_err(|what| FsError::Corrupt { inode, what })?;
        Ok((raw, kind))
    }

    fn write_inode(&mut self, inode: u32, value: &Inode) -> Result<(), FsError> {
        let (block_number, offset) = self.superblock.inode_location(inode);
        let mut block = buffer();
        self.store.read(block_number, Usage::Metadata, &mut block)?;
        value.encode(&mut block[offset..offset + INODE_BYTES]);
        let written = self.store.write(block_number, Usage::Metadata, &block);
        self.set_in_core(inode, written.is_ok().then_some(*value));
        written?;
        Ok(())
    }

    fn alloc_inode(&mut self, kind: Kind) -> Result<u32, FsError> {
        if self.free_inodes == 0 {
            return Err(FsError::NoInodes);
        }
        let count = self.superblock.inodes;
        let mut block = buffer();
        let mut loaded = u64::MAX;
        for step in 0..count {
            let number = ((u64::from(self.inode_hint) + u64::from(step)) % u64::from(count)) as u32;
            if number == 0 {
                continue;
            }
            let (block_number, offset) = self.superblock.inode_location(number);
            if block_number != loaded {
                self.store.read(block_number, Usage::Metadata, &mut block)?;
                loaded = block_number;
            }
            if Inode::decode(&block[offset..offset + INODE_BYTES]).is_free() {
                Inode::new(kind).encode(&mut block[offset..offset + INODE_BYTES]);
                let written = self.store.write(block_number, Usage::Metadata, &block);
                self.set_in_core(number, written.is_ok().then(|| Inode::new(kind)));
                written?;
                self.free_inodes -= 1;
                self.inode_hint = number;
                return Ok(number);
            }
        }
        self.free_inodes = 0;
        Err(FsError::NoInodes)
    }

    fn free_inode(&mut self, inode: u32) -> Result<(), FsError> {
        self.write_inode(inode, &Inode::default())?;
        self.free_inodes = self.free_inodes.saturating_add(1).min(self.superblock.inodes - 1);
        Ok(())
    }

    // ----- blocks ------------------------------------------------------------------------

    fn check_pointer(&self, inode: u32, pointer: u32) -> Result<u64, FsError> {
        let block = u64::from(pointer);
        if self.superblock.in_data_area(block) {
            Ok(block)
        } else {
            Err(FsError::Corrupt { inode, what: Corruption::BlockOutOfRange(block) })
        }
    }

    /// Allocates a data block for `inode`; `zero` writes zeros into it.
    fn alloc_block(&mut self, zero: bool) -> Result<u32, FsError> {
        if self.free_blocks == 0 {
            return Err(FsError::NoSpace);
        }
        let superblock = self.superblock;
        let mut block = buffer();
        let hint_index = self.block_hint.clamp(superblock.data_start, superblock.blocks - 1) / BITS_PER_BLOCK;
        for step in 0..=superblock.bitmap_blocks {
            let index = (hint_index + step) % superblock.bitmap_blocks;
            let first_block = index * BITS_PER_BLOCK;
            let start = first_block.max(superblock.data_start);
            let end = (first_block + BITS_PER_BLOCK).min(superblock.blocks);
            if start >= end {
                continue;
            }
            self.store.read(superblock.bitmap_start + index, Usage::Metadata, &mut block)?;
            let mut number = start;
            while number < end {
                let bit = (number - first_block) as usize;
                if bit.is_multiple_of(8) && number + 8 <= end && block[bit / 8] == 0xff {
                    number += 8;
                    continue;
                }
                if block[bit / 8] & (1 << (bit % 8)) == 0 {
                    block[bit / 8] |= 1 << (bit % 8);
                    self.store.write(superblock.bitmap_start + index, Usage::Metadata, &block)?;
                    self.free_blocks -= 1;
                    self.block_hint = number + 1;
                    if zero {
                        self.store.write(number, Usage::Metadata, &buffer())?;
                    }
                    return Ok(number as u32);
                }
                number += 1;
            }
        }
        self.free_blocks = 0;
        Err(FsError::NoSpace)
    }

    fn free_block(&mut self, inode: u32, pointer: u32) -> Result<(), FsError> {
        let number = self.check_pointer(inode, pointer)?;
        let index = number / BITS_PER_BLOCK;
        let bit = (number % BITS_PER_BLOCK) as usize;
        let mut block = buffer();
        let bitmap_block = self.superblock.bitmap_start + index;
        self.store.read(bitmap_block, Usage::Metadata, &mut block)?;
        if block[bit / 8] & (1 << (bit % 8)) == 0 {
            return Err(FsError::Corrupt { inode, what: Corruption::BlockAlreadyFree(number) });
        }
        block[bit / 8] &= !(1 << (bit % 8));
        self.store.write(bitmap_block, Usage::Metadata, &block)?;
        self.free_blocks += 1;
        Ok(())
    }

    /// Reads pointer `index` of indirect block `table`.
    fn read_pointer(&mut self, table: u64, index: u64) -> Result<u32, FsError> {
        let mut pointer = [0u8; 4];
        self.store.read_part(table, Usage::Metadata, (index * 4) as usize, &mut pointer)?;
        Ok(u32::from_le_bytes(pointer))
    }

    /// The device block of file block `file_block` of `inode`, without allocating.
    pub(crate) fn map(&mut self, inode: u32, value: &Inode, file_block: u64) -> Result<Option<u64>, FsError> {
        let checked = |fs: &Self, pointer: u32| if pointer == 0 { Ok(None) } else { fs.check_pointer(inode, pointer).map(Some) };
        if file_block < SINGLE_FIRST {
            return checked(self, value.direct[file_block as usize]);
        }
        if file_block < DOUBLE_FIRST {
            let Some(table) = checked(self, value.single)? else { return Ok(None) };
            let pointer = self.read_pointer(table, file_block - SINGLE_FIRST)?;
            return checked(self, pointer);
        }
        if file_block < MAX_FILE_BLOCKS {
            let relative = file_block - DOUBLE_FIRST;
            let Some(outer) = checked(self, value.double)? else { return Ok(None) };
            let pointer = self.read_pointer(outer, relative / POINTERS_PER_BLOCK)?;
            let Some(inner) = checked(self, pointer)? else { return Ok(None) };
            let pointer = self.read_pointer(inner, relative % POINTERS_PER_BLOCK)?;
            return checked(self, pointer);
        }
        Ok(None)
    }

    /// Pointer `index` of table `table`, allocating it (zeroed if `zero`) when it is 0.
    /// Returns the block and whether it is new.
    fn ensure_in_table(&mut self, inode: u32, value: &mut Inode, table: u64, index: u64, zero: bool) -> Result<(u64, bool), FsError> {
        let mut block = buffer();
        self.store.read(table, Usage::Metadata, &mut block)?;
        let at = (index * 4) as usize;
        let pointer = get_u32(&block[..], at);
        if pointer != 0 {
            return Ok((self.check_pointer(inode, pointer)?, false));
        }
        let new = self.alloc_block(zero)?;
        value.blocks = value.blocks.saturating_add(1);
        put_u32(&mut block[..], at, new);
        self.store.write(table, Usage::Metadata, &block)?;
        Ok((u64::from(new), true))
    }

    /// A pointer held in the inode itself, allocating it when it is 0.
    fn ensure_in_inode(&mut self, inode: u32, pointer: &mut u32, blocks: &mut u64, zero: bool) -> Result<(u64, bool), FsError> {
        if *pointer != 0 {
            return Ok((self.check_pointer(inode, *pointer)?, false));
        }
        let new = self.alloc_block(zero)?;
        *blocks = blocks.saturating_add(1);
        *pointer = new;
        Ok((u64::from(new), true))
    }

    /// The device block of `file_block`, allocating it and any indirect block on the way.
    /// Returns the block and whether it is new (its contents undefined).
    fn map_alloc(&mut self, inode: u32, value: &mut Inode, file_block: u64) -> Result<(u64, bool), FsError> {
        let mut blocks = value.blocks;
        let result = if file_block < SINGLE_FIRST {
            let mut pointer = value.direct[file_block as usize];
            let result = self.ensure_in_inode(inode, &mut pointer, &mut blocks, false);
            value.direct[file_block as usize] = pointer;
            result
        } else if file_block < DOUBLE_FIRST {
            let mut pointer = value.single;
            let table = self.ensure_in_inode(inode, &mut pointer, &mut blocks, true);
            value.single = pointer;
            value.blocks = blocks;
            let (table, _) = table?;
            return self.ensure_in_table(inode, value, table, file_block - SINGLE_FIRST, false);
        } else if file_block < MAX_FILE_BLOCKS {
            let relative = file_block - DOUBLE_FIRST;
            let mut pointer = value.double;
            let outer = self.ensure_in_inode(inode, &mut pointer, &mut blocks, true);
            value.double = pointer;
            value.blocks = blocks;
            let (outer, _) = outer?;
            let (inner, _) = self.ensure_in_table(inode, value, outer, relative / POINTERS_PER_BLOCK, true)?;
            return self.ensure_in_table(inode, value, inner, relative % POINTERS_PER_BLOCK, false);
        } else {
            Err(FsError::FileTooLarge)
        };
        value.blocks = blocks;
        result
    }

    /// Frees the blocks under `pointer` (a tree of `level` indirections) from file block
    /// `keep` (relative to the tree) on; frees `pointer` itself when `keep` is 0.
    /// Returns whether `pointer` was freed.
    fn free_tree(&mut self, inode: u32, value: &mut Inode, pointer: u32, level: u32, keep: u64) -> Result<bool, FsError> {
        let number = self.check_pointer(inode, pointer)?;
        let span = POINTERS_PER_BLOCK.pow(level);
        if keep >= span {
            return Ok(false);
        }
        if level > 0 {
            let child_span = POINTERS_PER_BLOCK.pow(level - 1);
            let mut block = buffer();
            self.store.read(number, Usage::Metadata, &mut block)?;
            let mut changed = false;
            for index in 0..POINTERS_PER_BLOCK {
                let child = get_u32(&block[..], (index * 4) as usize);
                let child_keep = keep.saturating_sub(index * child_span);
                if child == 0 || child_keep >= child_span {
                    continue;
                }
                if self.free_tree(inode, value, child, level - 1, child_keep)? {
                    put_u32(&mut block[..], (index * 4) as usize, 0);
                    changed = true;
                }
            }
            if keep > 0 && changed {
                self.store.write(number, Usage::Metadata, &block)?;
            }
        }
        if keep == 0 {
            self.free_block(inode, pointer)?;
            value.blocks = value.blocks.saturating_sub(1);
            return Ok(true);
        }
        Ok(false)
    }

    /// Frees every block of `inode` from file block `keep` on.
    fn free_from(&mut self, inode: u32, value: &mut Inode, keep: u64) -> Result<(), FsError> {
        for index in (keep.min(SINGLE_FIRST) as usize)..DIRECT {
            let pointer = value.direct[index];
            if pointer != 0 {
                self.free_block(inode, pointer)?;
                value.direct[index] = 0;
                value.blocks = value.blocks.saturating_sub(1);
            }
        }
        if value.single != 0 && self.free_tree(inode, value, value.single, 1, keep.saturating_sub(SINGLE_FIRST))? {
            value.single = 0;
        }
        if value.double != 0 && self.free_tree(inode, value, value.double, 2, keep.saturating_sub(DOUBLE_FIRST))? {
            value.double = 0;
        }
        Ok(())
    }

    // ----- contents ----------------------------------------------------------------------

    fn usage(inode: u32, kind: Kind, file_block: u64) -> Usage {
        match kind {
            Kind::File => Usage::Data { inode, file_block },
            Kind::Directory => Usage::Metadata,
        }
    }

    fn read_inner(&mut self, inode: u32, value: &Inode, kind: Kind, offset: u64, out: &mut [u8]) -> Result<usize, FsError> {
        if offset >= value.size {
            return Ok(0);
        }
        let length = (value.size - offset).min(out.len() as u64) as usize;
        let mut done = 0;
        while done < length {
            let position = offset + done as u64;
            let file_block = position / BLOCK_BYTES as u64;
            let within = (position % BLOCK_BYTES as u64) as usize;
            let count = (BLOCK_BYTES - within).min(length - done);
            let target = &mut out[done..done + count];
            match self.map(inode, value, file_block)? {
                Some(number) => self.store.read_part(number, Self::usage(inode, kind, file_block), within, target)?,
                None => target.fill(0),
            }
            done += count;
        }
        Ok(length)
    }

    /// Writes `data` at `offset`; the caller stores the inode (also after an error: blocks
    /// may have been allocated). Stops early (returning less) only when space runs out
    /// after something was written.
    fn write_inner(&mut self, inode: u32, value: &mut Inode, kind: Kind, offset: u64, data: &[u8]) -> Result<usize, FsError> {
        let end = offset.checked_add(data.len() as u64).ok_or(FsError::FileTooLarge)?;
        if end > MAX_FILE_BYTES {
            return Err(FsError::FileTooLarge);
        }
        let mut block = buffer();
        let mut done = 0;
        while done < data.len() {
            let position = offset + done as u64;
            let file_block = position / BLOCK_BYTES as u64;
            let within = (position % BLOCK_BYTES as u64) as usize;
            let count = (BLOCK_BYTES - within).min(data.len() - done);
            let (number, new) = match self.map_alloc(inode, value, file_block) {
                Ok(found) => found,
                Err(FsError::NoSpace) if done > 0 => break,
                Err(error) => return Err(error),
            };
            let usage = Self::usage(inode, kind, file_block);
            if count < BLOCK_BYTES {
                if new {
                    block.fill(0);
                } else {
                    self.store.read(number, usage, &mut block)?;
                }
            }
            block[within..within + count].copy_from_slice(&data[done..done + count]);
            self.store.write(number, usage, &block)?;
            done += count;
            value.size = value.size.max(position + count as u64);
        }
        if done > 0 {
            value.changes = value.changes.wrapping_add(1);
        }
        Ok(done)
    }

    /// Reads from file `inode` at `offset` into `out`; returns the bytes read (0 at or past
    /// the end). Holes read as zeros.
    ///
    /// Errors: [`FsError::NoSuchInode`], [`FsError::IsADirectory`], [`FsError::Corrupt`], [`FsError::Io`].
    pub fn read_at(&mut self, inode: u32, offset: u64, out: &mut [u8]) -> Result<usize, FsError> {
        self.read_at_sized(inode, offset, out).map(|(count, _)| count)
    }

    /// [`FileSystem::read_at`], also returning the file's size (the inode is read once —
    /// for a caller that needs both, e.g. a read-ahead rule that must stay inside the file).
    ///
    /// Errors: as [`FileSystem::read_at`].
    pub fn read_at_sized(&mut self, inode: u32, offset: u64, out: &mut [u8]) -> Result<(usize, u64), FsError> {
        let (value, kind) = self.live(inode)?;
        if kind == Kind::Directory {
            return Err(FsError::IsADirectory);
        }
        Ok((self.read_inner(inode, &value, kind, offset, out)?, value.size))
    }

    /// Writes `data` into file `inode` at `offset`, growing it and allocating blocks as
    /// needed (a gap before `offset` stays a hole). Returns the bytes written: all of
    /// them, or fewer if space ran out part way.
    ///
    /// Errors: [`FsError::NoSpace`] (nothing written), [`FsError::FileTooLarge`],
    /// [`FsError::IsADirectory`], [`FsError::NoSuchInode`], [`FsError::Corrupt`], [`FsError::Io`].
    pub fn write_at(&mut self, inode: u32, offset: u64, data: &[u8]) -> Result<usize, FsError> {
        let (mut value, kind) = self.live(inode)?;
        if kind == Kind::Directory {
            return Err(FsError::IsADirectory);
        }
        if data.is_empty() {
            return Ok(0);
        }
        let before = value;
        let result = self.write_inner(inode, &mut value, kind, offset, data);
        if value != before {
            self.write_inode(inode, &value)?;
        }
        result
    }

    /// Sets the size of file `inode`: shrinking frees the blocks past the end and zeroes
    /// the rest of the last block; growing leaves a hole.
    ///
    /// Errors: [`FsError::FileTooLarge`], [`FsError::IsADirectory`], [`FsError::NoSuchInode`],
    /// [`FsError::Corrupt`], [`FsError::Io`].
    pub fn truncate(&mut self, inode: u32, size: u64) -> Result<(), FsError> {
        let (mut value, kind) = self.live(inode)?;
        if kind == Kind::Directory {
            return Err(FsError::IsADirectory);
        }
        if size > MAX_FILE_BYTES {
            return Err(FsError::FileTooLarge);
        }
        let result = self.truncate_inner(inode, &mut value, kind, size);
        self.write_inode(inode, &value)?;
        result
    }

    fn truncate_inner(&mut self, inode: u32, value: &mut Inode, kind: Kind, size: u64) -> Result<(), FsError> {
        if size < value.size {
            let keep = size.div_ceil(BLOCK_BYTES as u64);
            self.free_from(inode, value, keep)?;
            let within = (size % BLOCK_BYTES as u64) as usize;
            if within != 0
                && let Some(number) = self.map(inode, value, keep - 1)?
            {
                let usage = Self::usage(inode, kind, keep - 1);
                let mut block = buffer();
                self.store.read(number, usage, &mut block)?;
                block[within..].fill(0);
                self.store.write(number, usage, &block)?;
            }
        }
        if size != value.size {
            value.size = size;
            value.changes = value.changes.wrapping_add(1);
        }
        Ok(())
    }

    /// Size, kind, blocks and links of `inode`.
    ///
    /// Errors: [`FsError::NoSuchInode`], [`FsError::Corrupt`], [`FsError::Io`].
    pub fn stat(&mut self, inode: u32) -> Result<Stat, FsError> {
        let (value, kind) = self.live(inode)?;
        Ok(Stat { inode, kind, size: value.size, blocks: value.blocks, links: value.links, changes: value.changes })
    }

    /// The device block holding file block `file_block` of `inode`, or `None` for a hole
    /// (or past the largest file); allocates nothing.
    ///
    /// Errors: [`FsError::NoSuchInode`], [`FsError::Corrupt`], [`FsError::Io`].
    pub fn block_of(&mut self, inode: u32, file_block: u64) -> Result<Option<u64>, FsError> {
        let (value, _) = self.live(inode)?;
        self.map(inode, &value, file_block)
    }

    /// How many of file blocks `first, first + 1, …` (at most `most`) lie one after the
    /// other on the disk: 0 if `first` has no block, else 1 + the blocks that directly
    /// follow their predecessor. The default read-ahead's clusters end there (BSD's
    /// clusters are physically contiguous runs; an indirect block allocated between two
    /// data blocks ends one).
    ///
    /// Errors: as [`FileSystem::block_of`].
    pub fn contiguous_blocks(&mut self, inode: u32, first: u64, most: u32) -> Result<u32, FsError> {
        let (value, _) = self.live(inode)?;
        let Some(start) = self.map(inode, &value, first)? else { return Ok(0) };
        let mut count = 1;
        while count < most && self.map(inode, &value, first + u64::from(count))? == Some(start + u64::from(count)) {
            count += 1;
        }
        Ok(count)
    }

    // ----- directories -------------------------------------------------------------------

    fn directory(&mut self, inode: u32) -> Result<Inode, FsError> {
        match self.live(inode)? {
            (value, Kind::Directory) => Ok(value),
            (_, Kind::File) => Err(FsError::NotADirectory),
        }
    }

    /// Calls `visit` with every slot of directory `dir` from `first` on (`None` for an
    /// empty slot) until it returns `Some`. Entries are validated before `visit` sees them.
    fn scan<T>(
        &mut self,
        dir: u32,
        value: &Inode,
        first: u64,
        mut visit: impl FnMut(u64, Option<&RawEntry>) -> Option<T>,
    ) -> Result<Option<T>, FsError> {
        let slots = value.size / ENTRY_BYTES as u64;
        let mut block = buffer();
        let mut slot = first;
        while slot < slots {
            let file_block = slot / ENTRIES_PER_BLOCK as u64;
            let present = match self.map(dir, value, file_block)? {
                Some(number) => {
                    self.store.read(number, Usage::Metadata, &mut block)?;
                    true
                }
                None => false,
            };
            let block_end = ((file_block + 1) * ENTRIES_PER_BLOCK as u64).min(slots);
            while slot < block_end {
                let within = (slot % ENTRIES_PER_BLOCK as u64) as usize * ENTRY_BYTES;
                let entry = if present { RawEntry::decode(&block[within..within + ENTRY_BYTES]) } else { RawEntry::new(0, b"") };
                let found = if entry.inode == 0 {
                    visit(slot, None)
                } else {
                    entry.validate(dir, slot, self.superblock.inodes)?;
                    visit(slot, Some(&entry))
                };
                if found.is_some() {
                    return Ok(found);
                }
                slot += 1;
            }
        }
        Ok(None)
    }

    /// Looks `name` up in directory `dir`: the entry's slot and inode, and the first empty slot.
    fn find(&mut self, dir: u32, value: &Inode, name: &[u8]) -> Result<Found, FsError> {
        let mut empty = None;
        let found = self.scan(dir, value, 0, |slot, entry| match entry {
            None => {
                empty = empty.or(Some(slot));
                None
            }
            Some(entry) if entry.name() == Some(name) => Some((slot, entry.inode)),
            Some(_) => None,
        })?;
        Ok((found, empty))
    }

    /// The inode named `name` in directory `dir`.
    ///
    /// Errors: [`FsError::NotFound`], [`FsError::NotADirectory`], [`FsError::Name`], …
    pub fn lookup_in(&mut self, dir: u32, name: &str) -> Result<u32, FsError> {
        check_name(name.as_bytes()).map_err(FsError::Name)?;
        let value = self.directory(dir)?;
        self.find(dir, &value, name.as_bytes())?.0.map(|(_, inode)| inode).ok_or(FsError::NotFound)
    }

    /// The inode an absolute path names (`/` is the root; empty components are skipped).
    ///
    /// Errors: [`FsError::Path`] (not absolute, more than [`MAX_PATH_DEPTH`] components),
    /// [`FsError::Name`], [`FsError::NotFound`], [`FsError::NotADirectory`], …
    pub fn lookup(&mut self, path: &str) -> Result<u32, FsError> {
        let relative = path.strip_prefix('/').ok_or(FsError::Path(PathError::NotAbsolute))?;
        let components = || relative.split('/').filter(|component| !component.is_empty());
        if components().nth(MAX_PATH_DEPTH).is_some() {
            return Err(FsError::Path(PathError::TooDeep));
        }
        let mut current = Self::ROOT;
        for component in components() {
            current = self.lookup_in(current, component)?;
        }
        Ok(current)
    }

    fn make(&mut self, dir: u32, name: &str, kind: Kind) -> Result<u32, FsError> {
        check_name(name.as_bytes()).map_err(FsError::Name)?;
        let mut value = self.directory(dir)?;
        let (existing, empty) = self.find(dir, &value, name.as_bytes())?;
        if existing.is_some() {
            return Err(FsError::Exists);
        }
        let offset = match empty {
            Some(slot) => slot * ENTRY_BYTES as u64,
            None if value.size + ENTRY_BYTES as u64 > MAX_DIR_BYTES => return Err(FsError::DirectoryFull),
            None => value.size,
        };
        let child = self.alloc_inode(kind)?;
        let before = value;
        let entry = RawEntry::new(child, name.as_bytes()).encode();
        let written = self.write_inner(dir, &mut value, Kind::Directory, offset, &entry);
        if value != before {
            self.write_inode(dir, &value)?;
        }
        match written {
            Ok(count) if count == ENTRY_BYTES => Ok(child),
            other => {
                self.free_inode(child)?;
                Err(other.err().unwrap_or(FsError::NoSpace))
            }
        }
    }

    /// Creates an empty file `name` in directory `dir`; returns its inode.
    ///
    /// Errors: [`FsError::Exists`], [`FsError::NoInodes`], [`FsError::NoSpace`],
    /// [`FsError::DirectoryFull`], [`FsError::Name`], [`FsError::NotADirectory`], …
    pub fn create(&mut self, dir: u32, name: &str) -> Result<u32, FsError> {
        self.make(dir, name, Kind::File)
    }

    /// Creates an empty directory `name` in directory `dir`; returns its inode.
    ///
    /// Errors: as [`FileSystem::create`].
    pub fn mkdir(&mut self, dir: u32, name: &str) -> Result<u32, FsError> {
        self.make(dir, name, Kind::Directory)
    }

    /// Splits an absolute path into its parent directory's inode and its last name.
    fn parent_of<'p>(&mut self, path: &'p str) -> Result<(u32, &'p str), FsError> {
        let trimmed = path.trim_end_matches('/');
        if !path.starts_with('/') {
            return Err(FsError::Path(PathError::NotAbsolute));
        }
        let (parent, name) = trimmed.rsplit_once('/').ok_or(FsError::Path(PathError::NoName))?;
        if name.is_empty() {
            return Err(FsError::Path(PathError::NoName));
        }
        let parent = if parent.is_empty() { Self::ROOT } else { self.lookup(parent)? };
        Ok((parent, name))
    }

    /// [`FileSystem::create`] by absolute path (the parent must exist).
    ///
    /// Errors: as [`FileSystem::create`] and [`FileSystem::lookup`].
    pub fn create_path(&mut self, path: &str) -> Result<u32, FsError> {
        let (parent, name) = self.parent_of(path)?;
        self.create(parent, name)
    }

    /// [`FileSystem::mkdir`] by absolute path (the parent must exist).
    ///
    /// Errors: as [`FileSystem::mkdir`] and [`FileSystem::lookup`].
    pub fn mkdir_path(&mut self, path: &str) -> Result<u32, FsError> {
        let (parent, name) = self.parent_of(path)?;
        self.mkdir(parent, name)
    }

    /// Removes entry `name` from directory `dir`: a file (freed with its blocks when no
    /// other entry names it) or an empty directory.
    ///
    /// Errors: [`FsError::NotFound`], [`FsError::NotEmpty`], [`FsError::NotADirectory`], …
    pub fn unlink(&mut self, dir: u32, name: &str) -> Result<(), FsError> {
        check_name(name.as_bytes()).map_err(FsError::Name)?;
        let mut value = self.directory(dir)?;
        let (slot, child) = self.find(dir, &value, name.as_bytes())?.0.ok_or(FsError::NotFound)?;
        if child == Self::ROOT {
            return Err(FsError::Corrupt { inode: dir, what: Corruption::EntryNamesRoot { slot } });
        }
        let (mut child_value, child_kind) = match self.live(child) {
            Err(FsError::NoSuchInode(_)) => {
                return Err(FsError::Corrupt { inode: dir, what: Corruption::EntryInodeFree { slot, inode: child } });
            }
            other => other?,
        };
        if child_kind == Kind::Directory && self.scan(child, &child_value, 0, |_, entry| entry.map(|_| ()))?.is_some() {
            return Err(FsError::NotEmpty);
        }
        let cleared = self.write_inner(dir, &mut value, Kind::Directory, slot * ENTRY_BYTES as u64, &[0u8; ENTRY_BYTES]);
        self.write_inode(dir, &value)?;
        cleared?;
        child_value.links = child_value.links.saturating_sub(1);
        if child_value.links > 0 {
            return self.write_inode(child, &child_value);
        }
        let freed = self.free_from(child, &mut child_value, 0);
        match freed {
            Ok(()) => self.free_inode(child),
            Err(error) => {
                self.write_inode(child, &child_value)?;
                Err(error)
            }
        }
    }

    /// The entry at or after slot `slot` of directory `dir` and its slot; pass the slot
    /// plus one to get the next. `None` at the end.
    ///
    /// Errors: [`FsError::NotADirectory`], [`FsError::Corrupt`] (an entry names a free or
    /// corrupt inode), …
    pub fn entry_from(&mut self, dir: u32, slot: u64) -> Result<Option<(u64, DirEntry)>, FsError> {
        let value = self.directory(dir)?;
        let Some((slot, raw)) = self.scan(dir, &value, slot, |slot, entry| entry.map(|entry| (slot, *entry)))? else {
            return Ok(None);
        };
        self.entry(dir, slot, &raw).map(|entry| Some((slot, entry)))
    }

    fn entry(&mut self, dir: u32, slot: u64, raw: &RawEntry) -> Result<DirEntry, FsError> {
        let kind = match self.live(raw.inode) {
            Ok((_, kind)) => kind,
            Err(FsError::NoSuchInode(inode)) => return Err(FsError::Corrupt { inode: dir, what: Corruption::EntryInodeFree { slot, inode } }),
            Err(error) => return Err(error),
        };
        Ok(DirEntry { inode: raw.inode, kind, name: raw.name, name_len: raw.name_len })
    }

    /// The `index`-th entry (counting live entries from 0) of directory `dir`, or `None`
    /// past the last. Scans from the start: use [`FileSystem::entry_from`] to list a large
    /// directory.
    ///
    /// Errors: as [`FileSystem::entry_from`].
    pub fn readdir(&mut self, dir: u32, index: u64) -> Result<Option<DirEntry>, FsError> {
        let value = self.directory(dir)?;
        let mut seen = 0u64;
        let found = self.scan(dir, &value, 0, |slot, entry| {
            let entry = entry?;
            if seen == index {
                return Some((slot, *entry));
            }
            seen += 1;
            None
        })?;
        match found {
            Some((slot, raw)) => self.entry(dir, slot, &raw).map(Some),
            None => Ok(None),
        }
    }
}
