//! The checker (fsck, read-only): every inconsistency of an image as a [`Finding`].

use alloc::collections::BTreeSet;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::error::{Corruption, FsError, IoError};
use crate::fs::{FileSystem, buffer};
use crate::layout::{
    BITS_PER_BLOCK, DIRECT, ENTRIES_PER_BLOCK, ENTRY_BYTES, INODE_BYTES, INODES_PER_BLOCK, Inode, Kind, POINTERS_PER_BLOCK, ROOT_INODE, RawEntry,
    get_u32,
};
use crate::{BLOCK_BYTES, BlockStore, NAME_BYTES, Usage};

/// Findings kept in a [`Report`]; more are only counted.
pub const MAX_FINDINGS: usize = 1000;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Wasted space or a harmless oddity: the file system works.
    Warning,
    /// Data or metadata can be lost or misread.
    Error,
}

/// One inconsistency the checker found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The file system cannot be mounted (bad superblock, unreadable store): nothing else was checked.
    Unmountable(FsError),
    /// A block could not be read; what depends on it was not checked.
    Unreadable {
        /// The inode whose block it is (0 for bitmap and inode-table blocks).
        inode: u32,
        /// The store's error.
        error: IoError,
    },
    /// A block of the superblock, bitmap or inode table is free in the bitmap.
    MetadataBlockFree {
        /// The block.
        block: u64,
    },
    /// Inode 0 (reserved) is not zero.
    ReservedInodeUsed,
    /// An inode is corrupt (unknown kind, no links, impossible size) or has a bad directory entry.
    BadInode {
        /// The inode (for an entry: the directory).
        inode: u32,
        /// What is wrong.
        what: Corruption,
    },
    /// A block is referenced a second time (by this inode).
    BlockSharedTwice {
        /// The inode with the second reference.
        inode: u32,
        /// The block.
        block: u64,
    },
    /// The inode's block count differs from the blocks it references.
    BlockCount {
        /// The inode.
        inode: u32,
        /// The count in the inode.
        recorded: u64,
        /// The blocks found.
        counted: u64,
    },
    /// A data block mapped past the end of the file.
    BlockPastEnd {
        /// The inode.
        inode: u32,
        /// The file block.
        file_block: u64,
    },
    /// A block in use by a file is free in the bitmap (it could be handed out again).
    UsedBlockFree {
        /// The block.
        block: u64,
    },
    /// A block marked in use that nothing references (space leaked).
    LeakedBlock {
        /// The block.
        block: u64,
    },
    /// Two entries of a directory have the same name.
    DuplicateName {
        /// The directory.
        dir: u32,
        /// The second entry's slot.
        slot: u64,
    },
    /// A live inode no directory entry names.
    Orphan {
        /// The inode.
        inode: u32,
    },
    /// The link count differs from the entries naming the inode.
    LinkCount {
        /// The inode.
        inode: u32,
        /// The count in the inode.
        recorded: u16,
        /// The entries found (the root counts one for itself).
        counted: u64,
    },
    /// A directory named by entries but not reachable from the root (a cycle).
    Unreachable {
        /// The directory.
        inode: u32,
    },
}

impl Finding {
    /// How bad it is.
    pub fn severity(&self) -> Severity {
        match self {
            Finding::ReservedInodeUsed | Finding::BlockPastEnd { .. } | Finding::LeakedBlock { .. } => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Unmountable(error) => write!(formatter, "cannot mount: {error}"),
            Finding::Unreadable { inode, error } => write!(formatter, "inode {inode}: unreadable block: {error}"),
            Finding::MetadataBlockFree { block } => write!(formatter, "metadata block {block} is free in the bitmap"),
            Finding::ReservedInodeUsed => formatter.write_str("reserved inode 0 is not zero"),
            Finding::BadInode { inode, what } => write!(formatter, "inode {inode}: {what}"),
            Finding::BlockSharedTwice { inode, block } => write!(formatter, "inode {inode}: block {block} is referenced more than once"),
            Finding::BlockCount { inode, recorded, counted } => {
                write!(formatter, "inode {inode}: block count {recorded}, but {counted} blocks referenced")
            }
            Finding::BlockPastEnd { inode, file_block } => write!(formatter, "inode {inode}: file block {file_block} mapped past the end"),
            Finding::UsedBlockFree { block } => write!(formatter, "block {block} is in use but free in the bitmap"),
            Finding::LeakedBlock { block } => write!(formatter, "block {block} is marked in use but unreferenced (leaked)"),
            Finding::DuplicateName { dir, slot } => write!(formatter, "directory {dir}: entry {slot} repeats an earlier name"),
            Finding::Orphan { inode } => write!(formatter, "inode {inode} is in use but no directory names it"),
            Finding::LinkCount { inode, recorded, counted } => {
                write!(formatter, "inode {inode}: link count {recorded}, but {counted} entries name it")
            }
            Finding::Unreachable { inode } => write!(formatter, "directory {inode} is not reachable from the root"),
        }
    }
}

/// What [`check`] found: the findings (at most [`MAX_FINDINGS`]) and a summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The findings, in the order found.
    pub findings: Vec<Finding>,
    /// Findings beyond [`MAX_FINDINGS`], counted only.
    pub omitted: u64,
    /// Errors among all findings (kept and omitted).
    pub errors: u64,
    /// Warnings among all findings.
    pub warnings: u64,
    /// Live regular files.
    pub files: u64,
    /// Live directories.
    pub directories: u64,
    /// Blocks referenced (metadata regions included).
    pub blocks_used: u64,
    /// Total blocks (0 if the superblock was refused).
    pub blocks: u64,
}

impl Report {
    fn add(&mut self, finding: Finding) {
        match finding.severity() {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
        }
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(finding);
        } else {
            self.omitted += 1;
        }
    }

    /// No finding at all.
    pub fn is_clean(&self) -> bool {
        self.errors == 0 && self.warnings == 0
    }

    /// At least one [`Severity::Error`].
    pub fn has_errors(&self) -> bool {
        self.errors > 0
    }
}

impl fmt::Display for Report {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for finding in &self.findings {
            let label = match finding.severity() {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            writeln!(formatter, "{label}: {finding}")?;
        }
        if self.omitted > 0 {
            writeln!(formatter, "... and {} more findings", self.omitted)?;
        }
        write!(
            formatter,
            "{} files, {} directories, {} of {} blocks in use; {} errors, {} warnings",
            self.files, self.directories, self.blocks_used, self.blocks, self.errors, self.warnings
        )
    }
}

/// Checks the file system on `store` without writing: superblock, every inode and block
/// pointer, the bitmap against the references, every directory entry, link counts, and
/// that every directory is reachable from the root.
pub fn check<S: BlockStore + ?Sized>(store: &mut S) -> Report {
    match FileSystem::mount(store) {
        Ok(mut fs) => fs.check(),
        Err(error) => {
            let mut report = Report::default();
            report.add(Finding::Unmountable(error));
            report
        }
    }
}

/// A set of block numbers or inode numbers as bits.
struct Bits(Vec<u64>);

impl Bits {
    fn new(count: u64) -> Bits {
        Bits(vec![0; count.div_ceil(64) as usize])
    }

    fn get(&self, index: u64) -> bool {
        self.0.get((index / 64) as usize).is_some_and(|word| word & (1 << (index % 64)) != 0)
    }

    fn set(&mut self, index: u64) {
        if let Some(word) = self.0.get_mut((index / 64) as usize) {
            *word |= 1 << (index % 64);
        }
    }
}

/// The checker's state while it walks the inodes.
struct Walk {
    referenced: Bits,
    report: Report,
}

/// The state of one inode after the inode pass.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Bad,
    Live(Kind),
}

impl<S: BlockStore> FileSystem<S> {
    /// [`check`] on a mounted file system (read-only).
    pub fn check(&mut self) -> Report {
        let superblock = *self.superblock();
        let mut walk = Walk { referenced: Bits::new(superblock.blocks), report: Report { blocks: superblock.blocks, ..Report::default() } };

        // The bitmap, whole (its size is fixed by the block count the mount validated).
        let mut bitmap = Bits::new(superblock.blocks);
        let mut block = buffer();
        for index in 0..superblock.bitmap_blocks {
            if let Err(error) = self.store_mut().read(superblock.bitmap_start + index, Usage::Metadata, &mut block) {
                walk.report.add(Finding::Unreadable { inode: 0, error });
                return walk.report;
            }
            for bit in 0..BITS_PER_BLOCK.min(superblock.blocks - index * BITS_PER_BLOCK) {
                if block[(bit / 8) as usize] & (1 << (bit % 8)) != 0 {
                    bitmap.set(index * BITS_PER_BLOCK + bit);
                }
            }
        }
        for number in 0..superblock.data_start {
            walk.referenced.set(number);
            if !bitmap.get(number) {
                walk.report.add(Finding::MetadataBlockFree { block: number });
            }
        }

        // Every inode and the blocks it references.
        let inodes = superblock.inodes;
        let mut states = vec![State::Free; inodes as usize];
        let mut links = vec![0u16; inodes as usize];
        for index in 0..superblock.inode_blocks {
            if let Err(error) = self.store_mut().read(superblock.inode_start + index, Usage::Metadata, &mut block) {
                walk.report.add(Finding::Unreadable { inode: 0, error });
                return walk.report;
            }
            for slot in 0..INODES_PER_BLOCK as usize {
                let number = (index * u64::from(INODES_PER_BLOCK)) as u32 + slot as u32;
                let bytes = &block[slot * INODE_BYTES..(slot + 1) * INODE_BYTES];
                if number == 0 {
                    if bytes.iter().any(|byte| *byte != 0) {
                        walk.report.add(Finding::ReservedInodeUsed);
                    }
                    continue;
                }
                let inode = Inode::decode(bytes);
                if inode.is_free() {
                    continue;
                }
                match inode.validate() {
                    Ok(kind) => {
                        states[number as usize] = State::Live(kind);
                        links[number as usize] = inode.links;
                        self.check_blocks(number, &inode, &mut walk);
                    }
                    Err(what) => {
                        states[number as usize] = State::Bad;
                        walk.report.add(Finding::BadInode { inode: number, what });
                    }
                }
            }
        }

        // Every live directory's entries: references and the directory graph.
        let mut references = vec![0u64; inodes as usize];
        references[ROOT_INODE as usize] = 1;
        let mut edges: Vec<(u32, u32)> = Vec::new();
        for dir in 1..inodes {
            if states[dir as usize] != State::Live(Kind::Directory) {
                continue;
            }
            self.check_directory(dir, &states, &mut references, &mut edges, &mut walk.report);
        }

        // Reachability from the root.
        match states[ROOT_INODE as usize] {
            State::Live(Kind::Directory) => {}
            State::Bad => {}
            _ => walk.report.add(Finding::BadInode { inode: ROOT_INODE, what: Corruption::RootNotDirectory }),
        }
        edges.sort_unstable();
        let mut reached = Bits::new(u64::from(inodes));
        let mut queue = vec![ROOT_INODE];
        reached.set(u64::from(ROOT_INODE));
        while let Some(dir) = queue.pop() {
            let first = edges.partition_point(|(parent, _)| *parent < dir);
            for (_, child) in edges[first..].iter().take_while(|(parent, _)| *parent == dir) {
                if !reached.get(u64::from(*child)) {
                    reached.set(u64::from(*child));
                    queue.push(*child);
                }
            }
        }

        // Link counts and orphans.
        for number in 1..inodes {
            let State::Live(kind) = states[number as usize] else { continue };
            match kind {
                Kind::File => walk.report.files += 1,
                Kind::Directory => walk.report.directories += 1,
            }
            let counted = references[number as usize];
            if counted == 0 {
                walk.report.add(Finding::Orphan { inode: number });
            } else if counted != u64::from(links[number as usize]) {
                walk.report.add(Finding::LinkCount { inode: number, recorded: links[number as usize], counted });
            }
            if kind == Kind::Directory && counted > 0 && !reached.get(u64::from(number)) {
                walk.report.add(Finding::Unreachable { inode: number });
            }
        }

        // The bitmap against the references.
        for number in superblock.data_start..superblock.blocks {
            let used = walk.referenced.get(number);
            if used {
                walk.report.blocks_used += 1;
            }
            match (used, bitmap.get(number)) {
                (true, false) => walk.report.add(Finding::UsedBlockFree { block: number }),
                (false, true) => walk.report.add(Finding::LeakedBlock { block: number }),
                _ => {}
            }
        }
        walk.report.blocks_used += superblock.data_start;
        walk.report
    }

    /// Marks the blocks of one inode, reporting bad and shared pointers and the block count.
    fn check_blocks(&mut self, number: u32, inode: &Inode, walk: &mut Walk) {
        let size_blocks = inode.size.div_ceil(BLOCK_BYTES as u64);
        let mut counted = 0u64;
        for (index, pointer) in inode.direct.iter().enumerate() {
            self.check_tree(number, *pointer, 0, index as u64, size_blocks, &mut counted, walk);
        }
        let single_first = DIRECT as u64;
        self.check_tree(number, inode.single, 1, single_first, size_blocks, &mut counted, walk);
        self.check_tree(number, inode.double, 2, single_first + POINTERS_PER_BLOCK, size_blocks, &mut counted, walk);
        if counted != inode.blocks {
            walk.report.add(Finding::BlockCount { inode: number, recorded: inode.blocks, counted });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check_tree(&mut self, number: u32, pointer: u32, level: u32, first: u64, size_blocks: u64, counted: &mut u64, walk: &mut Walk) {
        if pointer == 0 {
            return;
        }
        let block = u64::from(pointer);
        if !self.superblock().in_data_area(block) {
            walk.report.add(Finding::BadInode { inode: number, what: Corruption::BlockOutOfRange(block) });
            return;
        }
        if walk.referenced.get(block) {
            walk.report.add(Finding::BlockSharedTwice { inode: number, block });
            return;
        }
        walk.referenced.set(block);
        *counted += 1;
        if level == 0 {
            if first >= size_blocks {
                walk.report.add(Finding::BlockPastEnd { inode: number, file_block: first });
            }
            return;
        }
        let mut table = buffer();
        if let Err(error) = self.store_mut().read(block, Usage::Metadata, &mut table) {
            walk.report.add(Finding::Unreadable { inode: number, error });
            return;
        }
        let span = POINTERS_PER_BLOCK.pow(level - 1);
        for index in 0..POINTERS_PER_BLOCK {
            let child = get_u32(&table[..], (index * 4) as usize);
            self.check_tree(number, child, level - 1, first + index * span, size_blocks, counted, walk);
        }
    }

    /// Reads one directory's entries: counts references, records child directories,
    /// reports bad entries and repeated names.
    fn check_directory(&mut self, dir: u32, states: &[State], references: &mut [u64], edges: &mut Vec<(u32, u32)>, report: &mut Report) {
        let inode = match self.read_inode_raw(dir) {
            Ok(inode) => inode,
            Err(FsError::Io(error)) => return report.add(Finding::Unreadable { inode: dir, error }),
            Err(_) => return,
        };
        let slots = inode.size / ENTRY_BYTES as u64;
        let mut names: BTreeSet<([u8; NAME_BYTES], u8)> = BTreeSet::new();
        let mut block = buffer();
        for file_block in 0..slots.div_ceil(ENTRIES_PER_BLOCK as u64) {
            match self.map(dir, &inode, file_block) {
                Ok(Some(number)) => {
                    if let Err(error) = self.store_mut().read(number, Usage::Metadata, &mut block) {
                        report.add(Finding::Unreadable { inode: dir, error });
                        continue;
                    }
                }
                Ok(None) => continue,
                // Bad pointers were reported by the block pass.
                Err(FsError::Io(error)) => {
                    report.add(Finding::Unreadable { inode: dir, error });
                    continue;
                }
                Err(_) => continue,
            }
            let first = file_block * ENTRIES_PER_BLOCK as u64;
            for slot in first..(first + ENTRIES_PER_BLOCK as u64).min(slots) {
                let within = (slot - first) as usize * ENTRY_BYTES;
                let entry = RawEntry::decode(&block[within..within + ENTRY_BYTES]);
                if entry.inode == 0 {
                    continue;
                }
                if let Err(FsError::Corrupt { what, .. }) = entry.validate(dir, slot, states.len() as u32) {
                    report.add(Finding::BadInode { inode: dir, what });
                    continue;
                }
                match states[entry.inode as usize] {
                    State::Free => {
                        report.add(Finding::BadInode { inode: dir, what: Corruption::EntryInodeFree { slot, inode: entry.inode } });
                        continue;
                    }
                    State::Live(Kind::Directory) => edges.push((dir, entry.inode)),
                    _ => {}
                }
                references[entry.inode as usize] = references[entry.inode as usize].saturating_add(1);
                if !names.insert((entry.name, entry.name_len)) {
                    report.add(Finding::DuplicateName { dir, slot });
                }
            }
        }
    }
}
