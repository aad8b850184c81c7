//! Host tests: round trips, files of every size class, directories, running out of space
//! and inodes, the checker against injected corruption, and a deterministic fuzz test.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::layout::{INODE_BYTES, Inode, RawEntry, Superblock};
use crate::{
    BLOCK_BYTES, BlockStore, Corruption, ENTRY_BYTES, Finding, FileSystem, FormatOptions, FsError, Kind, MAX_FILE_BYTES, MemoryStore, NameError,
    PathError, SuperblockError, Usage, check, format,
};

type Fs = FileSystem<MemoryStore>;
const ROOT: u32 = Fs::ROOT;
const DOUBLE_FIRST: u64 = 12 + 1024;

fn fresh(blocks: u64, inodes: u32) -> Fs {
    let mut store = MemoryStore::new(blocks as usize);
    format(&mut store, FormatOptions { blocks, inodes }).unwrap();
    FileSystem::mount(store).unwrap()
}

#[track_caller]
fn assert_clean(fs: &mut Fs) {
    let report = fs.check();
    assert!(report.is_clean(), "{report}");
}

fn pattern(seed: u64, length: usize) -> Vec<u8> {
    let mut state = seed | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn read_all(fs: &mut Fs, inode: u32) -> Vec<u8> {
    let size = fs.stat(inode).unwrap().size as usize;
    let mut out = vec![0u8; size];
    assert_eq!(fs.read_at(inode, 0, &mut out), Ok(size));
    out
}

fn names(fs: &mut Fs, dir: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut index = 0;
    while let Some(entry) = fs.readdir(dir, index).unwrap() {
        out.push(String::from(entry.name_str().unwrap()));
        index += 1;
    }
    out
}

#[test]
fn format_and_mount_round_trip() {
    let mut fs = fresh(1000, 100);
    let stats = fs.statfs();
    let superblock = *fs.superblock();
    assert_eq!(superblock.inodes, 128, "rounded up to whole inode-table blocks");
    assert_eq!((superblock.bitmap_start, superblock.bitmap_blocks, superblock.inode_start, superblock.inode_blocks), (1, 1, 2, 4));
    assert_eq!(superblock.data_start, 6);
    assert_eq!(stats.free_blocks, 994);
    assert_eq!(stats.free_inodes, 126);
    let root = fs.stat(ROOT).unwrap();
    assert_eq!((root.kind, root.size, root.links, root.blocks), (Kind::Directory, 0, 1, 0));
    assert_eq!(fs.store_mut().syncs, 1);
    fs.sync().unwrap();
    assert_eq!(fs.store_mut().syncs, 2);
    assert_clean(&mut fs);
    let file = fs.create(ROOT, "kept").unwrap();
    fs.write_at(file, 0, b"across a remount").unwrap();
    let store = fs.into_store();
    let mut fs = FileSystem::mount(store).unwrap();
    assert_eq!(fs.statfs().free_inodes, 125);
    assert_eq!(fs.statfs().free_blocks, 992, "the root's entry block and the file's block");
    let kept = fs.lookup("/kept").unwrap();
    assert_eq!(read_all(&mut fs, kept), b"across a remount");
}

#[test]
fn format_refuses_impossible_sizes() {
    let mut store = MemoryStore::new(8);
    let refuse = |store: &mut MemoryStore, blocks, inodes| format(store, FormatOptions { blocks, inodes }).unwrap_err();
    assert!(matches!(refuse(&mut store, 3, 32), FsError::Options(crate::OptionsError::TooFewBlocks { needed: 4, .. })));
    assert!(matches!(refuse(&mut store, 1 << 33, 32), FsError::Options(crate::OptionsError::TooManyBlocks { .. })));
    assert!(matches!(refuse(&mut store, 8, 1), FsError::Options(crate::OptionsError::TooFewInodes { .. })));
    assert!(matches!(refuse(&mut store, 100, u32::MAX), FsError::Options(crate::OptionsError::TooManyInodes { .. })));
    assert_eq!(format(&mut store, FormatOptions { blocks: 9, inodes: 32 }), Err(FsError::Io(crate::IoError::OutOfRange { block: 8 })));
}

#[test]
fn mount_validates_the_superblock() {
    assert!(matches!(FileSystem::mount(MemoryStore::new(16)), Err(FsError::Superblock(SuperblockError::BadMagic))));
    let mut store = MemoryStore::new(64);
    format(&mut store, FormatOptions { blocks: 64, inodes: 32 }).unwrap();
    let mut bad = store.clone();
    bad.bytes_mut()[8] = 2;
    assert!(matches!(FileSystem::mount(bad), Err(FsError::Superblock(SuperblockError::UnsupportedVersion(2)))));
    let mut bad = store.clone();
    bad.bytes_mut()[1000] = 1;
    let error = FileSystem::mount(bad).err().unwrap();
    assert!(matches!(error, FsError::Superblock(SuperblockError::BadChecksum { .. })), "{error}");
    // A consistent checksum over inconsistent geometry.
    let mut bad = store.clone();
    let mut superblock = Superblock::decode(bad.bytes()[..BLOCK_BYTES].try_into().unwrap()).unwrap();
    superblock.data_start += 1;
    bad.bytes_mut()[..BLOCK_BYTES].copy_from_slice(&superblock.encode());
    let error = FileSystem::mount(bad).err().unwrap();
    assert_eq!(format!("{error}"), "bad superblock: superblock field data_start is 4, expected 3");
    // A file system larger than its store.
    let mut small = MemoryStore::new(32);
    small.bytes_mut().copy_from_slice(&store.bytes()[..32 * BLOCK_BYTES]);
    assert!(matches!(FileSystem::mount(small), Err(FsError::Superblock(SuperblockError::StoreTooSmall { blocks: 64 }))));
}

#[test]
fn small_files_round_trip_and_free_their_blocks() {
    let mut fs = fresh(256, 64);
    let file = fs.create(ROOT, "hello.txt").unwrap();
    let free = fs.statfs().free_blocks;
    assert_eq!(fs.write_at(file, 0, b"hello, world"), Ok(12));
    assert_eq!(fs.write_at(file, 7, b"disk"), Ok(4));
    let mut buffer = [0u8; 64];
    assert_eq!(fs.read_at(file, 0, &mut buffer), Ok(12));
    assert_eq!(&buffer[..12], b"hello, diskd");
    assert_eq!(fs.read_at(file, 12, &mut buffer), Ok(0));
    assert_eq!(fs.read_at(file, 5, &mut buffer[..3]), Ok(3));
    let stat = fs.stat(file).unwrap();
    assert_eq!((stat.kind, stat.size, stat.blocks, stat.links), (Kind::File, 12, 1, 1));
    assert!(stat.changes >= 2);
    assert!(fs.block_of(file, 0).unwrap().is_some());
    assert_eq!(fs.block_of(file, 1), Ok(None));
    assert_clean(&mut fs);
    // A write spanning a block boundary.
    let data = pattern(1, 5000);
    assert_eq!(fs.write_at(file, 4000, &data), Ok(5000));
    assert_eq!(fs.stat(file).unwrap().blocks, 3);
    let mut back = vec![0u8; 5000];
    assert_eq!(fs.read_at(file, 4000, &mut back), Ok(5000));
    assert_eq!(back, data);
    assert_clean(&mut fs);
    fs.unlink(ROOT, "hello.txt").unwrap();
    assert_eq!(fs.lookup("/hello.txt"), Err(FsError::NotFound));
    assert_eq!(fs.stat(file), Err(FsError::NoSuchInode(file)));
    assert_eq!(fs.statfs().free_blocks, free);
    assert_eq!(fs.statfs().free_inodes, 62);
    assert_clean(&mut fs);
}

#[test]
fn large_files_reach_the_double_indirect_block() {
    let mut fs = fresh(1200, 32);
    let file = fs.create(ROOT, "large").unwrap();
    let free = fs.statfs().free_blocks;
    let blocks = DOUBLE_FIRST as usize + 5;
    let data = pattern(7, blocks * BLOCK_BYTES - 123);
    for (index, chunk) in data.chunks(48 * 1024 + 17).enumerate() {
        let offset = (index * (48 * 1024 + 17)) as u64;
        assert_eq!(fs.write_at(file, offset, chunk), Ok(chunk.len()));
    }
    let stat = fs.stat(file).unwrap();
    assert_eq!(stat.size, data.len() as u64);
    // Data blocks, the single indirect, the double indirect and one block under it.
    assert_eq!(stat.blocks, blocks as u64 + 3);
    assert_eq!(read_all(&mut fs, file), data);
    assert!(fs.block_of(file, DOUBLE_FIRST + 4).unwrap().is_some());
    assert_eq!(fs.block_of(file, DOUBLE_FIRST + 5), Ok(None));
    assert_clean(&mut fs);
    // Shrink into the single-indirect range: the double-indirect tree goes.
    fs.truncate(file, 20 * BLOCK_BYTES as u64 + 5).unwrap();
    assert_eq!(fs.stat(file).unwrap().blocks, 21 + 1);
    assert_eq!(read_all(&mut fs, file), data[..20 * BLOCK_BYTES + 5]);
    assert_clean(&mut fs);
    // Grow again: the old tail reads as zeros.
    fs.truncate(file, 21 * BLOCK_BYTES as u64).unwrap();
    let tail = read_all(&mut fs, file);
    assert!(tail[20 * BLOCK_BYTES + 5..].iter().all(|byte| *byte == 0));
    assert_clean(&mut fs);
    fs.unlink(ROOT, "large").unwrap();
    assert_eq!(fs.statfs().free_blocks, free);
    assert_clean(&mut fs);
}

#[test]
fn contiguous_blocks_end_where_the_layout_breaks() {
    let mut fs = fresh(400, 16);
    let file = fs.create(ROOT, "stream").unwrap();
    let data = pattern(3, 60 * BLOCK_BYTES);
    assert_eq!(fs.write_at(file, 0, &data), Ok(data.len()));
    // Written in one go, the data blocks follow each other except where the single
    // indirect block was allocated: between file blocks 11 and 12.
    let device = |fs: &mut Fs, block| fs.block_of(file, block).unwrap().unwrap();
    assert_eq!(device(&mut fs, 12), device(&mut fs, 11) + 2);
    assert_eq!(fs.contiguous_blocks(file, 0, 16), Ok(12));
    assert_eq!(fs.contiguous_blocks(file, 2, 16), Ok(10));
    assert_eq!(fs.contiguous_blocks(file, 12, 16), Ok(16));
    assert_eq!(fs.contiguous_blocks(file, 12, 5), Ok(5));
    assert_eq!(fs.contiguous_blocks(file, 55, 16), Ok(5), "the file ends after block 59");
    assert_eq!(fs.contiguous_blocks(file, 60, 16), Ok(0), "no block");
    assert!(fs.contiguous_blocks(99, 0, 16).is_err(), "no such inode");
}

#[test]
fn sparse_files_read_holes_as_zeros() {
    let mut fs = fresh(128, 32);
    let file = fs.create(ROOT, "sparse").unwrap();
    let far = (DOUBLE_FIRST + 5000) * BLOCK_BYTES as u64 + 100;
    assert_eq!(fs.write_at(file, far, b"far away"), Ok(8));
    assert_eq!(fs.write_at(file, 3 * BLOCK_BYTES as u64, b"near"), Ok(4));
    let stat = fs.stat(file).unwrap();
    assert_eq!(stat.size, far + 8);
    assert_eq!(stat.blocks, 4, "two data blocks, the double indirect and one table under it");
    let mut buffer = vec![0xAAu8; 3 * BLOCK_BYTES];
    assert_eq!(fs.read_at(file, 0, &mut buffer), Ok(buffer.len()));
    assert!(buffer.iter().all(|byte| *byte == 0));
    let mut buffer = [0u8; 12];
    assert_eq!(fs.read_at(file, far - 4, &mut buffer), Ok(12));
    assert_eq!(&buffer, b"\0\0\0\0far away");
    assert_eq!(fs.block_of(file, 100), Ok(None));
    assert_clean(&mut fs);
    fs.truncate(file, 3 * BLOCK_BYTES as u64 + 2).unwrap();
    assert_eq!(fs.stat(file).unwrap().blocks, 1);
    let mut buffer = [0u8; 8];
    assert_eq!(fs.read_at(file, 3 * BLOCK_BYTES as u64, &mut buffer), Ok(2));
    assert_eq!(&buffer[..2], b"ne");
    assert_clean(&mut fs);
    assert_eq!(fs.write_at(file, MAX_FILE_BYTES - 1, b"xy"), Err(FsError::FileTooLarge));
    assert_eq!(fs.write_at(file, MAX_FILE_BYTES - 1, b"x"), Ok(1));
    assert_eq!(fs.truncate(file, MAX_FILE_BYTES + 1), Err(FsError::FileTooLarge));
    assert_clean(&mut fs);
}

#[test]
fn directories_nest_list_and_refuse_removal_when_not_empty() {
    let mut fs = fresh(256, 256);
    let usr = fs.mkdir(ROOT, "usr").unwrap();
    let bin = fs.mkdir_path("/usr/bin").unwrap();
    let tool = fs.create_path("/usr/bin/tool").unwrap();
    fs.write_at(tool, 0, b"#!").unwrap();
    assert_eq!(fs.lookup("/"), Ok(ROOT));
    assert_eq!(fs.lookup("/usr"), Ok(usr));
    assert_eq!(fs.lookup("//usr///bin/"), Ok(bin));
    assert_eq!(fs.lookup("/usr/bin/tool"), Ok(tool));
    assert_eq!(fs.lookup("usr"), Err(FsError::Path(PathError::NotAbsolute)));
    assert_eq!(fs.lookup("/usr/bin/tool/x"), Err(FsError::NotADirectory));
    assert_eq!(fs.lookup("/usr/../usr"), Err(FsError::Name(NameError::Dots)));
    assert_eq!(fs.lookup(&"/a".repeat(65)), Err(FsError::Path(PathError::TooDeep)));
    assert_eq!(fs.mkdir(ROOT, "usr"), Err(FsError::Exists));
    assert_eq!(fs.create(tool, "x"), Err(FsError::NotADirectory));
    assert_eq!(fs.create(ROOT, ""), Err(FsError::Name(NameError::Empty)));
    assert_eq!(fs.create(ROOT, "a/b"), Err(FsError::Name(NameError::BadByte)));
    assert_eq!(fs.create(ROOT, &"n".repeat(60)), Err(FsError::Name(NameError::TooLong { bytes: 60 })));
    assert!(fs.create(ROOT, &"n".repeat(59)).is_ok());
    assert_eq!(fs.mkdir_path("/"), Err(FsError::Path(PathError::NoName)));
    assert_eq!(fs.write_at(usr, 0, b"x"), Err(FsError::IsADirectory));
    assert_eq!(fs.read_at(usr, 0, &mut [0u8; 4]), Err(FsError::IsADirectory));
    assert_eq!(fs.readdir(tool, 0), Err(FsError::NotADirectory));
    assert_eq!(fs.unlink(ROOT, "usr"), Err(FsError::NotEmpty));
    assert_eq!(fs.unlink(usr, "bin"), Err(FsError::NotEmpty));
    assert_eq!(fs.unlink(usr, "nothing"), Err(FsError::NotFound));
    assert_clean(&mut fs);
    // Enough entries for several directory blocks; listing keeps creation order.
    let many = fs.mkdir(ROOT, "many").unwrap();
    for index in 0..150 {
        fs.create(many, &format!("file-{index}")).unwrap();
    }
    assert_eq!(fs.stat(many).unwrap().size, 150 * ENTRY_BYTES as u64);
    let listed = names(&mut fs, many);
    assert_eq!(listed.len(), 150);
    assert_eq!(listed[149], "file-149");
    assert_clean(&mut fs);
    // Removing entries leaves free slots that are reused.
    for index in (0..150).step_by(2) {
        fs.unlink(many, &format!("file-{index}")).unwrap();
    }
    assert_eq!(names(&mut fs, many).len(), 75);
    fs.create(many, "again").unwrap();
    assert_eq!(names(&mut fs, many)[0], "again");
    assert_eq!(fs.stat(many).unwrap().size, 150 * ENTRY_BYTES as u64);
    let mut slot = 0;
    let mut count = 0;
    while let Some((found, entry)) = fs.entry_from(many, slot).unwrap() {
        assert_eq!(entry.kind, Kind::File);
        slot = found + 1;
        count += 1;
    }
    assert_eq!(count, 76);
    assert_clean(&mut fs);
    // Emptied directories can go.
    fs.unlink(bin, "tool").unwrap();
    fs.unlink(usr, "bin").unwrap();
    fs.unlink(ROOT, "usr").unwrap();
    assert_eq!(names(&mut fs, ROOT), ["n".repeat(59), String::from("many")]);
    assert_clean(&mut fs);
}

#[test]
fn running_out_of_space_leaves_a_clean_image() {
    let mut fs = fresh(48, 32);
    let file = fs.create(ROOT, "fill").unwrap();
    let free = fs.statfs().free_blocks;
    let data = pattern(3, 64 * BLOCK_BYTES);
    // Short write: everything that fits (the single indirect block takes one).
    let written = fs.write_at(file, 0, &data).unwrap();
    assert_eq!(written as u64, (free - 1) * BLOCK_BYTES as u64);
    assert_eq!(fs.statfs().free_blocks, 0);
    assert_eq!(fs.write_at(file, written as u64, b"more"), Err(FsError::NoSpace));
    assert_eq!(read_all(&mut fs, file), data[..written]);
    assert_clean(&mut fs);
    // A new directory needs no block, but an entry in it does.
    let dir = fs.mkdir(ROOT, "dir").unwrap();
    let inodes = fs.statfs().free_inodes;
    assert_eq!(fs.create(dir, "x"), Err(FsError::NoSpace));
    assert_eq!(fs.statfs().free_inodes, inodes, "the inode taken for it is returned");
    assert_clean(&mut fs);
    fs.truncate(file, 0).unwrap();
    assert_eq!(fs.statfs().free_blocks, free);
    fs.create(dir, "x").unwrap();
    assert_clean(&mut fs);
}

#[test]
fn running_out_of_inodes_leaves_a_clean_image() {
    let mut fs = fresh(64, 32);
    let mut created = 0;
    let error = loop {
        match fs.create(ROOT, &format!("f{created}")) {
            Ok(_) => created += 1,
            Err(error) => break error,
        }
    };
    assert_eq!(error, FsError::NoInodes);
    assert_eq!(created, 30, "32 inodes less the reserved 0 and the root");
    assert_eq!(fs.mkdir(ROOT, "d"), Err(FsError::NoInodes));
    assert_clean(&mut fs);
    fs.unlink(ROOT, "f7").unwrap();
    fs.mkdir(ROOT, "d").unwrap();
    assert_clean(&mut fs);
}

// ----- corruption --------------------------------------------------------------------

/// A small populated image: /dir/file (2 blocks), /other (1 block), /dir/sub (empty).
struct Sample {
    store: MemoryStore,
    superblock: Superblock,
    dir: u32,
    file: u32,
    other: u32,
    sub: u32,
}

fn sample() -> Sample {
    let mut fs = fresh(64, 32);
    let dir = fs.mkdir(ROOT, "dir").unwrap();
    let file = fs.create(dir, "file").unwrap();
    fs.write_at(file, 0, &pattern(9, 2 * BLOCK_BYTES)).unwrap();
    let other = fs.create(ROOT, "other").unwrap();
    fs.write_at(other, 0, b"other").unwrap();
    let sub = fs.mkdir(dir, "sub").unwrap();
    assert_clean(&mut fs);
    let superblock = *fs.superblock();
    Sample { store: fs.into_store(), superblock, dir, file, other, sub }
}

impl Sample {
    fn inode(&self, number: u32) -> Inode {
        let (block, offset) = self.superblock.inode_location(number);
        let at = block as usize * BLOCK_BYTES + offset;
        Inode::decode(&self.store.bytes()[at..at + INODE_BYTES])
    }

    fn set_inode(&mut self, number: u32, inode: &Inode) {
        let (block, offset) = self.superblock.inode_location(number);
        let at = block as usize * BLOCK_BYTES + offset;
        inode.encode(&mut self.store.bytes_mut()[at..at + INODE_BYTES]);
    }

    fn edit_inode(&mut self, number: u32, edit: impl FnOnce(&mut Inode)) {
        let mut inode = self.inode(number);
        edit(&mut inode);
        self.set_inode(number, &inode);
    }

    fn flip_bitmap(&mut self, block: u64) {
        let at = self.superblock.bitmap_start as usize * BLOCK_BYTES + (block / 8) as usize;
        self.store.bytes_mut()[at] ^= 1 << (block % 8);
    }

    /// Byte offset of entry `slot` of directory `dir` (in its first block).
    fn entry_at(&self, dir: u32, slot: usize) -> usize {
        self.inode(dir).direct[0] as usize * BLOCK_BYTES + slot * ENTRY_BYTES
    }

    fn set_entry(&mut self, dir: u32, slot: usize, entry: RawEntry) {
        let at = self.entry_at(dir, slot);
        self.store.bytes_mut()[at..at + ENTRY_BYTES].copy_from_slice(&entry.encode());
    }

    fn report(&mut self) -> crate::Report {
        check(&mut self.store)
    }
}

#[track_caller]
fn assert_finds(store: &mut MemoryStore, wanted: Finding) {
    let report = check(store);
    assert!(report.findings.contains(&wanted), "wanted {wanted:?} in\n{report}");
    assert!(report.has_errors() || wanted.severity() == crate::Severity::Warning, "{report}");
}

#[test]
fn the_checker_detects_each_kind_of_corruption() {
    // Superblock.
    let mut s = sample();
    s.store.bytes_mut()[0] = b'X';
    assert_finds(&mut s.store, Finding::Unmountable(FsError::Superblock(SuperblockError::BadMagic)));

    // A pointer outside the data area: the checker and the file operations both say so.
    let mut s = sample();
    s.edit_inode(s.file, |inode| inode.direct[1] = 9_999_999);
    let what = Corruption::BlockOutOfRange(9_999_999);
    assert_finds(&mut s.store, Finding::BadInode { inode: s.file, what });
    let file = s.file;
    let mut fs = FileSystem::mount(s.store.clone()).unwrap();
    let error = fs.read_at(file, 0, &mut [0u8; 2 * BLOCK_BYTES]).unwrap_err();
    assert_eq!(error, FsError::Corrupt { inode: file, what });
    assert_eq!(format!("{error}"), format!("inode {file} is corrupt: block pointer 9999999 outside the data area"));
    assert!(fs.unlink(s.dir, "file").is_err());

    // A block shared by two files.
    let mut s = sample();
    let shared = s.inode(s.file).direct[0];
    s.edit_inode(s.other, |inode| inode.direct[0] = shared);
    assert_finds(&mut s.store, Finding::BlockSharedTwice { inode: s.other, block: u64::from(shared) });

    // The bitmap: a leaked block, a used block marked free, a metadata block marked free.
    let mut s = sample();
    s.flip_bitmap(60);
    assert_finds(&mut s.store, Finding::LeakedBlock { block: 60 });
    assert!(!s.report().has_errors());
    let mut s = sample();
    let used = u64::from(s.inode(s.other).direct[0]);
    s.flip_bitmap(used);
    assert_finds(&mut s.store, Finding::UsedBlockFree { block: used });
    let mut s = sample();
    s.flip_bitmap(2);
    assert_finds(&mut s.store, Finding::MetadataBlockFree { block: 2 });

    // Inodes: unknown kind, wrong block count, wrong link count, no links.
    let mut s = sample();
    s.edit_inode(s.other, |inode| inode.kind_code = 7);
    assert_finds(&mut s.store, Finding::BadInode { inode: s.other, what: Corruption::BadKind(7) });
    let mut s = sample();
    s.edit_inode(s.file, |inode| inode.blocks = 5);
    assert_finds(&mut s.store, Finding::BlockCount { inode: s.file, recorded: 5, counted: 2 });
    let mut s = sample();
    s.edit_inode(s.file, |inode| inode.links = 3);
    assert_finds(&mut s.store, Finding::LinkCount { inode: s.file, recorded: 3, counted: 1 });
    let mut s = sample();
    s.edit_inode(s.sub, |inode| inode.links = 0);
    assert_finds(&mut s.store, Finding::BadInode { inode: s.sub, what: Corruption::NoLinks });
    let mut s = sample();
    s.edit_inode(s.dir, |inode| inode.size = 100);
    assert_finds(&mut s.store, Finding::BadInode { inode: s.dir, what: Corruption::BadDirectorySize(100) });
    let mut s = sample();
    s.edit_inode(s.other, |inode| inode.size = MAX_FILE_BYTES + 1);
    assert_finds(&mut s.store, Finding::BadInode { inode: s.other, what: Corruption::SizeTooLarge(MAX_FILE_BYTES + 1) });
    let mut s = sample();
    s.edit_inode(s.other, |inode| inode.size = 0);
    assert_finds(&mut s.store, Finding::BlockPastEnd { inode: s.other, file_block: 0 });
    let mut s = sample();
    s.store.bytes_mut()[s.superblock.inode_start as usize * BLOCK_BYTES + 3] = 1;
    assert_finds(&mut s.store, Finding::ReservedInodeUsed);

    // Directory entries: a free inode, out of range, a bad name, a repeated name.
    let mut s = sample();
    s.set_entry(ROOT, 1, RawEntry::new(20, b"ghost"));
    assert_finds(&mut s.store, Finding::BadInode { inode: ROOT, what: Corruption::EntryInodeFree { slot: 1, inode: 20 } });
    let file = s.file;
    let mut fs = FileSystem::mount(s.store.clone()).unwrap();
    assert!(matches!(fs.readdir(ROOT, 1), Err(FsError::Corrupt { inode: ROOT, .. })));
    assert_eq!(fs.lookup("/dir/file"), Ok(file));
    let mut s = sample();
    s.set_entry(ROOT, 1, RawEntry::new(500, b"far"));
    assert_finds(&mut s.store, Finding::BadInode { inode: ROOT, what: Corruption::EntryInodeOutOfRange { slot: 1, inode: 500 } });
    let mut s = sample();
    let at = s.entry_at(ROOT, 1) + 5;
    s.store.bytes_mut()[at] = b'/';
    assert_finds(&mut s.store, Finding::BadInode { inode: ROOT, what: Corruption::BadEntryName { slot: 1 } });
    let mut s = sample();
    s.set_entry(ROOT, 1, RawEntry::new(s.other, b"dir"));
    assert_finds(&mut s.store, Finding::DuplicateName { dir: ROOT, slot: 1 });

    // An entry removed behind the file system's back: an orphan.
    let mut s = sample();
    s.set_entry(ROOT, 1, RawEntry::new(0, b""));
    assert_finds(&mut s.store, Finding::Orphan { inode: s.other });

    // A cycle: /dir leaves the root and is named from its own child.
    let mut s = sample();
    let dir = s.dir;
    s.set_entry(ROOT, 0, RawEntry::new(0, b""));
    let sub = s.sub;
    s.edit_inode(sub, |inode| inode.size = ENTRY_BYTES as u64);
    s.flip_bitmap(63);
    s.edit_inode(sub, |inode| {
        inode.direct[0] = 63;
        inode.blocks = 1;
    });
    s.set_entry(sub, 0, RawEntry::new(dir, b"loop"));
    assert_finds(&mut s.store, Finding::Unreachable { inode: dir });
    assert_finds(&mut s.store, Finding::Unreachable { inode: sub });
    // The cycle is cut off from the root.
    let mut fs = FileSystem::mount(s.store.clone()).unwrap();
    assert_eq!(fs.lookup("/dir/sub/loop/sub/loop"), Err(FsError::NotFound));
}

#[test]
fn reports_print_their_findings() {
    let mut s = sample();
    s.flip_bitmap(60);
    let used = u64::from(s.inode(s.other).direct[0]);
    s.flip_bitmap(used);
    let text = format!("{}", s.report());
    assert!(text.contains("warning: block 60 is marked in use but unreferenced (leaked)"), "{text}");
    assert!(text.contains(&format!("error: block {used} is in use but free in the bitmap")), "{text}");
    assert!(text.ends_with("1 errors, 1 warnings"), "{text}");
}

// ----- fuzzing -----------------------------------------------------------------------

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// The fuzz image: nested directories (one over two blocks), small, large and sparse files.
fn fuzz_image() -> (MemoryStore, Vec<u64>) {
    let mut fs = fresh(256, 128);
    let a = fs.mkdir(ROOT, "a").unwrap();
    let b = fs.mkdir(a, "b").unwrap();
    let c = fs.mkdir(ROOT, "c").unwrap();
    let small = fs.create(a, "small").unwrap();
    fs.write_at(small, 0, b"small file").unwrap();
    let medium = fs.create(b, "medium").unwrap();
    fs.write_at(medium, 0, &pattern(5, 3 * BLOCK_BYTES + 7)).unwrap();
    let big = fs.create(ROOT, "big").unwrap();
    fs.write_at(big, 0, &pattern(6, 40 * BLOCK_BYTES)).unwrap();
    let sparse = fs.create(c, "sparse").unwrap();
    fs.write_at(sparse, (DOUBLE_FIRST + 2000) * BLOCK_BYTES as u64, b"sparse").unwrap();
    for index in 0..70 {
        fs.create(c, &format!("entry-{index}")).unwrap();
    }
    assert_clean(&mut fs);
    // Blocks worth aiming at: directory blocks and indirect blocks.
    let mut targets = Vec::new();
    for dir in [ROOT, a, b, c] {
        for file_block in 0..2 {
            targets.extend(fs.block_of(dir, file_block).unwrap());
        }
    }
    let superblock = *fs.superblock();
    for inode in [big, sparse] {
        let (block, offset) = superblock.inode_location(inode);
        let mut raw = [0u8; BLOCK_BYTES];
        fs.store_mut().read(block, Usage::Metadata, &mut raw).unwrap();
        let inode = Inode::decode(&raw[offset..]);
        targets.extend([inode.single, inode.double].iter().filter(|pointer| **pointer != 0).map(|pointer| u64::from(*pointer)));
    }
    (fs.into_store(), targets)
}

/// Reads every file of the tree (each up to a bound) and lists every directory; errors
/// are fine, panics and hangs are not.
fn walk<S: BlockStore>(fs: &mut FileSystem<S>, dir: u32, depth: u32, visited: &mut Vec<u32>) {
    if depth > 8 || visited.contains(&dir) {
        return;
    }
    visited.push(dir);
    let mut slot = 0;
    let mut buffer = vec![0u8; 3 * BLOCK_BYTES];
    for _ in 0..200 {
        let Ok(Some((found, entry))) = fs.entry_from(dir, slot) else { break };
        slot = found + 1;
        match entry.kind {
            Kind::Directory => walk(fs, entry.inode, depth + 1, visited),
            Kind::File => {
                let _ = fs.stat(entry.inode);
                for offset in [0, 40 * BLOCK_BYTES as u64] {
                    let _ = fs.read_at(entry.inode, offset, &mut buffer);
                }
                if let Ok(stat) = fs.stat(entry.inode) {
                    let _ = fs.read_at(entry.inode, stat.size.saturating_sub(10), &mut buffer);
                    let _ = fs.block_of(entry.inode, stat.size / BLOCK_BYTES as u64);
                }
            }
        }
    }
    let _ = fs.readdir(dir, 3);
}

/// Changes on the corrupted image: each may fail, none may panic.
fn mutate<S: BlockStore>(fs: &mut FileSystem<S>, random: &mut XorShift) {
    let _ = fs.create_path("/a/new");
    if let Ok(inode) = fs.lookup("/a/new") {
        let _ = fs.write_at(inode, random.below(100_000), &pattern(random.next(), 9000));
        let _ = fs.truncate(inode, random.below(20_000));
    }
    let _ = fs.mkdir_path("/c/newdir");
    for path in ["/big", "/a/small", "/c/sparse", "/a/b/medium"] {
        if let Ok(inode) = fs.lookup(path) {
            let _ = fs.write_at(inode, random.below(200_000), b"overwrite");
            let _ = fs.truncate(inode, random.below(100_000));
        }
    }
    for (dir, name) in [("/", "big"), ("/c", "sparse"), ("/a/b", "medium"), ("/a", "b"), ("/c", "entry-3")] {
        if let Ok(dir) = fs.lookup(dir) {
            let _ = fs.unlink(dir, name);
        }
    }
}

#[test]
fn fuzzed_images_never_panic_or_hang() {
    let (image, targets) = fuzz_image();
    let superblock = Superblock::decode(image.bytes()[..BLOCK_BYTES].try_into().unwrap()).unwrap();
    let mut detected = 0;
    let mut mounted = 0;
    let iterations = 6000;
    for seed in [0x5EED_0001u64, 0xDEAD_BEEF, 0x1234_5678_9ABC] {
        let mut random = XorShift(seed);
        for iteration in 0..iterations / 3 {
            let mut store = image.clone();
            let region = random.below(5);
            let (first_block, blocks) = match region {
                0 => (0, 1),
                1 => (superblock.inode_start, superblock.inode_blocks),
                2 => (superblock.bitmap_start, superblock.bitmap_blocks),
                _ => (targets[random.below(targets.len() as u64) as usize], 1),
            };
            for _ in 0..1 + random.below(4) {
                let block = first_block + random.below(blocks);
                let within = if region == 0 { random.below(80) as usize } else { random.below(BLOCK_BYTES as u64) as usize };
                let at = block as usize * BLOCK_BYTES + within;
                if random.below(2) == 0 {
                    store.bytes_mut()[at] ^= 1 + random.below(255) as u8;
                } else {
                    let aligned = at & !3;
                    let value = match random.below(3) {
                        0 => random.next() as u32,
                        1 => random.below(300) as u32,
                        _ => u32::MAX - random.below(3) as u32,
                    };
                    store.bytes_mut()[aligned..aligned + 4].copy_from_slice(&value.to_le_bytes());
                }
            }
            if region == 0 && random.below(2) == 0 {
                // Fix the checksum, so geometry checks are what refuses (or accepts) it.
                let mut block = [0u8; BLOCK_BYTES];
                block.copy_from_slice(&store.bytes()[..BLOCK_BYTES]);
                let checksum = crate::layout::superblock_checksum(&block);
                store.bytes_mut()[72..76].copy_from_slice(&checksum.to_le_bytes());
            }
            if !check(&mut store).is_clean() {
                detected += 1;
            }
            let Ok(mut fs) = FileSystem::mount(&mut store) else { continue };
            mounted += 1;
            let _ = fs.lookup("/a/b/medium");
            let _ = fs.lookup("/c/entry-69");
            walk(&mut fs, ROOT, 0, &mut Vec::new());
            if iteration % 2 == 0 {
                mutate(&mut fs, &mut random);
                let _ = fs.check();
            }
        }
    }
    assert!(mounted > iterations / 3, "most corruptions leave a mountable image ({mounted})");
    assert!(detected > iterations / 3, "the checker notices many of them ({detected})");
}

#[test]
fn partial_block_reads_copy_the_part_and_refuse_parts_outside_the_block() {
    let mut store = MemoryStore::new(4);
    store.bytes_mut()[BLOCK_BYTES + 100..BLOCK_BYTES + 104].copy_from_slice(&[1, 2, 3, 4]);
    let mut part = [0u8; 4];
    store.read_part(1, Usage::Metadata, 100, &mut part).unwrap();
    assert_eq!(part, [1, 2, 3, 4]);
    let mut tail = [9u8; 8];
    assert_eq!(store.read_part(1, Usage::Metadata, BLOCK_BYTES - 4, &mut tail), Err(crate::IoError::OutOfRange { block: 1 }));
    assert_eq!(store.read_part(9, Usage::Metadata, 0, &mut part), Err(crate::IoError::OutOfRange { block: 9 }));
    assert_eq!(store.read_part(1, Usage::Metadata, usize::MAX, &mut part), Err(crate::IoError::OutOfRange { block: 1 }));
}

#[test]
fn in_core_inodes_write_through_to_the_store() {
    let mut fs = fresh(256, 64);
    // More files than in-core slots, so slots are shared and replaced.
    let files: Vec<u32> = (0..40).map(|index| fs.create(ROOT, &format!("f{index}")).unwrap()).collect();
    for (index, &file) in files.iter().enumerate() {
        fs.write_at(file, 0, &pattern(index as u64, 100 + index)).unwrap();
    }
    for (index, &file) in files.iter().enumerate().step_by(3) {
        fs.write_at(file, 100 + index as u64, b"more").unwrap();
    }
    let sizes: Vec<u64> = files.iter().map(|&file| fs.stat(file).unwrap().size).collect();
    let mut again = FileSystem::mount(fs.into_store()).unwrap();
    let stored: Vec<u64> = files.iter().map(|&file| again.stat(file).unwrap().size).collect();
    assert_eq!(sizes, stored, "what the in-core inodes said is what the store holds");
    for (index, &size) in sizes.iter().enumerate() {
        assert_eq!(size, 100 + index as u64 + if index % 3 == 0 { 4 } else { 0 });
    }
    assert_clean(&mut again);
}
