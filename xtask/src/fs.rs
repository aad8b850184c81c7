//! `cargo xtask fs`: the host side of Spindle's file system (kernel/services/fs,
//! docs/file-system.md) — make one in a disk image from a host directory, check it, and
//! look inside (what the kernel wrote).
//!
//! The file system lives at a byte offset in the image (by default 1 GiB, where the kernel
//! looks for it); [`FileStore`] is its block store over the image file.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use spindle_service_fs::{BLOCK_BYTES, BlockStore, FileSystem, FormatOptions, IoError, Kind, Report, Usage};

use crate::Result;

/// Where the kernel looks for the file system in its disk image: 1 GiB in.
pub const DEFAULT_OFFSET: u64 = 1 << 30;

/// `cargo xtask fs` subcommands.
#[derive(clap::Subcommand)]
pub enum FsCommand {
    /// Make a file system in a disk image, optionally filled from a host directory.
    ///
    /// Creates the image (sparse) or extends it when it is shorter than OFFSET + SIZE,
    /// formats a file system of SIZE bytes at byte OFFSET, and copies the tree under DIR
    /// into it (regular files and directories; symlinks and special files are refused).
    /// The result is checked before the command succeeds.
    Mkfs {
        /// The disk image file.
        #[arg(long, value_name = "PATH")]
        image: PathBuf,
        /// Byte offset of the file system in the image (a multiple of 4096).
        #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_OFFSET)]
        offset: u64,
        /// Size of the file system: bytes with an optional unit K, M, G or T (a multiple of 4096).
        #[arg(long, value_name = "SIZE", value_parser = crate::qemu::parse_disk_size, default_value = "256M")]
        size: u64,
        /// Number of inodes (files and directories); default one per 64 KiB (the kernel reads
        /// the whole inode table when it mounts).
        #[arg(long)]
        inodes: Option<u32>,
        /// A host directory whose contents become the file system's root.
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
    },
    /// Check a file system (read-only) and print the report; exits non-zero on errors.
    Fsck {
        /// The disk image file.
        #[arg(long, value_name = "PATH")]
        image: PathBuf,
        /// Byte offset of the file system in the image.
        #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_OFFSET)]
        offset: u64,
    },
    /// List a directory of the file system (kind, size, inode, name), or stat a file.
    Ls {
        /// The disk image file.
        #[arg(long, value_name = "PATH")]
        image: PathBuf,
        /// Byte offset of the file system in the image.
        #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_OFFSET)]
        offset: u64,
        /// Absolute path inside the file system.
        #[arg(default_value = "/")]
        path: String,
    },
    /// Write a file of the file system to standard output.
    Cat {
        /// The disk image file.
        #[arg(long, value_name = "PATH")]
        image: PathBuf,
        /// Byte offset of the file system in the image.
        #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_OFFSET)]
        offset: u64,
        /// Absolute path inside the file system.
        path: String,
    },
}

/// Runs one `cargo xtask fs` subcommand.
pub fn run(command: FsCommand) -> Result<ExitCode> {
    match command {
        FsCommand::Mkfs { image, offset, size, inodes, from } => {
            make(&image, offset, size, inodes, from.as_deref())?;
            let report = check_image(&image, offset)?;
            println!("{}: file system at byte {offset}, {size} bytes: {report}", image.display());
            Ok(ExitCode::SUCCESS)
        }
        FsCommand::Fsck { image, offset } => {
            let report = check_image(&image, offset)?;
            println!("{report}");
            Ok(if report.has_errors() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        FsCommand::Ls { image, offset, path } => {
            let mut fs = mount(&image, offset)?;
            for line in list(&mut fs, &path)? {
                println!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
        FsCommand::Cat { image, offset, path } => {
            let mut fs = mount(&image, offset)?;
            let mut output = std::io::stdout().lock();
            read_file(&mut fs, &path, &mut output)?;
            output.flush().map_err(|error| format!("cannot write to standard output: {error}"))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A file system's blocks in an image file, from a byte offset on.
pub struct FileStore {
    file: File,
    offset: u64,
    blocks: u64,
}

impl FileStore {
    /// Opens `image` (read-write if `writable`); the store covers whole blocks from `offset`
    /// to the end of the file.
    pub fn open(image: &Path, offset: u64, writable: bool) -> Result<FileStore> {
        if !offset.is_multiple_of(BLOCK_BYTES as u64) {
            return Err(format!("offset {offset} is not a multiple of {BLOCK_BYTES}"));
        }
        let file = OpenOptions::new().read(true).write(writable).open(image).map_err(|error| format!("cannot open {}: {error}", image.display()))?;
        let length = file.metadata().map_err(|error| format!("cannot stat {}: {error}", image.display()))?.len();
        if length <= offset {
            return Err(format!("{} is {length} bytes: nothing at offset {offset}", image.display()));
        }
        Ok(FileStore { file, offset, blocks: (length - offset) / BLOCK_BYTES as u64 })
    }

    fn position(&self, block: u64) -> std::result::Result<u64, IoError> {
        if block >= self.blocks {
            return Err(IoError::OutOfRange { block });
        }
        Ok(self.offset + block * BLOCK_BYTES as u64)
    }
}

fn device_error(block: u64, error: &std::io::Error) -> IoError {
    IoError::Device { block, code: error.raw_os_error().unwrap_or(-1) }
}

impl BlockStore for FileStore {
    fn read(&mut self, block: u64, _usage: Usage, buf: &mut [u8; BLOCK_BYTES]) -> std::result::Result<(), IoError> {
        let position = self.position(block)?;
        self.file.read_exact_at(buf, position).map_err(|error| device_error(block, &error))
    }

    fn write(&mut self, block: u64, _usage: Usage, buf: &[u8; BLOCK_BYTES]) -> std::result::Result<(), IoError> {
        let position = self.position(block)?;
        self.file.write_all_at(buf, position).map_err(|error| device_error(block, &error))
    }

    fn sync(&mut self) -> std::result::Result<(), IoError> {
        self.file.sync_all().map_err(|error| device_error(0, &error))
    }
}

/// Size of the file system xtask gives a machine's disk: 256 MiB at [`DEFAULT_OFFSET`] (or
/// less if the disk ends sooner).
pub const MACHINE_FS_BYTES: u64 = 256 << 20;
/// Smallest file system worth making on a small disk: below this the machine gets none.
const SMALLEST_FS_BYTES: u64 = 16 << 20;

/// Gives the disk image `image` a file system at [`DEFAULT_OFFSET`] with the tree `root`:
/// `fresh` (a scratch disk) or an image without a valid file system there gets a new one
/// of [`MACHINE_FS_BYTES`]; an existing one keeps its files, with `root`'s files written
/// over (so `bin/` and `ext/` follow the build). A disk too small for one gets none.
/// Returns a line for the user when something notable happened.
pub fn provide(image: &Path, root: &Path, fresh: bool) -> Result<Option<String>> {
    let length = std::fs::metadata(image).map_err(|error| format!("cannot stat {}: {error}", image.display()))?.len();
    let room = length.saturating_sub(DEFAULT_OFFSET) / BLOCK_BYTES as u64 * BLOCK_BYTES as u64;
    if room < SMALLEST_FS_BYTES {
        return Ok((!fresh).then(|| format!("{} has no room for a file system at {} MiB (the kernel will have none)", image.display(), DEFAULT_OFFSET >> 20)));
    }
    let size = room.min(MACHINE_FS_BYTES);
    if !fresh && let Ok(mut fs) = mount_writable(image, DEFAULT_OFFSET) {
        copy_tree(&mut fs, root, FileSystem::<FileStore>::ROOT, "", true)?;
        fs.sync().map_err(|error| format!("cannot sync {}: {error}", image.display()))?;
        return Ok(None);
    }
    make(image, DEFAULT_OFFSET, size, None, Some(root))?;
    Ok((!fresh).then(|| format!("made a {} MiB file system at {} MiB of {} (bin/, ext/)", size >> 20, DEFAULT_OFFSET >> 20, image.display())))
}

/// Formats a file system of `size` bytes at byte `offset` of `image` (creating or
/// extending the image, sparse) and copies the tree under `from` into it.
#[cfg_attr(not(test), expect(dead_code, reason = "the host tool's entry for building an image in one call (tests use it)"))]
pub fn build_image(image: &Path, offset: u64, size: u64, from: &Path) -> Result<()> {
    make(image, offset, size, None, Some(from))
}

/// Runs the checker on the file system at byte `offset` of `image`.
pub fn check_image(image: &Path, offset: u64) -> Result<Report> {
    let mut store = FileStore::open(image, offset, false)?;
    Ok(spindle_service_fs::check(&mut store))
}

fn make(image: &Path, offset: u64, size: u64, inodes: Option<u32>, from: Option<&Path>) -> Result<()> {
    if !size.is_multiple_of(BLOCK_BYTES as u64) {
        return Err(format!("file-system size {size} is not a multiple of {BLOCK_BYTES}"));
    }
    if !offset.is_multiple_of(BLOCK_BYTES as u64) {
        return Err(format!("offset {offset} is not a multiple of {BLOCK_BYTES}"));
    }
    if let Some(from) = from
        && !from.is_dir()
    {
        return Err(format!("{} is not a directory", from.display()));
    }
    let end = offset.checked_add(size).ok_or("offset + size overflows")?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(image)
        .map_err(|error| format!("cannot open {}: {error}", image.display()))?;
    let length = file.metadata().map_err(|error| format!("cannot stat {}: {error}", image.display()))?.len();
    if length < end {
        file.set_len(end).map_err(|error| format!("cannot extend {} to {end} bytes: {error}", image.display()))?;
    }
    let blocks = size / BLOCK_BYTES as u64;
    let inodes = inodes.unwrap_or(spindle_service_fs::default_inodes(blocks));
    let mut store = FileStore { file, offset, blocks };
    spindle_service_fs::format(&mut store, FormatOptions { blocks, inodes }).map_err(|error| format!("cannot format {}: {error}", image.display()))?;
    let mut fs = FileSystem::mount(store).map_err(|error| format!("cannot mount the new file system: {error}"))?;
    if let Some(from) = from {
        copy_tree(&mut fs, from, FileSystem::<FileStore>::ROOT, "", false)?;
    }
    fs.sync().map_err(|error| format!("cannot sync {}: {error}", image.display()))?;
    let report = fs.check();
    if !report.is_clean() {
        return Err(format!("the new file system does not check clean:\n{report}"));
    }
    Ok(())
}

/// Copies the directory `host` into directory inode `dir` (whose path is `inside`); with
/// `replace`, existing directories are entered and existing files overwritten.
fn copy_tree(fs: &mut FileSystem<FileStore>, host: &Path, dir: u32, inside: &str, replace: bool) -> Result<()> {
    let entries = std::fs::read_dir(host).map_err(|error| format!("cannot read {}: {error}", host.display()))?;
    let mut entries: Vec<_> = entries.collect::<std::io::Result<_>>().map_err(|error| format!("cannot read {}: {error}", host.display()))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_str().ok_or_else(|| format!("{}: the name is not UTF-8", path.display()))?;
        let target = format!("{inside}/{name}");
        let kind = std::fs::symlink_metadata(&path).map_err(|error| format!("cannot stat {}: {error}", path.display()))?.file_type();
        let fail = |error: spindle_service_fs::FsError| format!("{target} (from {}): {error}", path.display());
        let existing = if replace { fs.lookup_in(dir, name).ok() } else { None };
        if kind.is_dir() {
            let child = match existing {
                Some(child) => child,
                None => fs.mkdir(dir, name).map_err(fail)?,
            };
            copy_tree(fs, &path, child, &target, replace)?;
        } else if kind.is_file() {
            let child = match existing {
                Some(child) => {
                    fs.truncate(child, 0).map_err(fail)?;
                    child
                }
                None => fs.create(dir, name).map_err(fail)?,
            };
            let contents = std::fs::read(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            let mut done = 0;
            for chunk in contents.chunks(1 << 20) {
                let written = fs.write_at(child, done as u64, chunk).map_err(fail)?;
                if written < chunk.len() {
                    return Err(fail(spindle_service_fs::FsError::NoSpace));
                }
                done += written;
            }
        } else {
            return Err(format!("{}: symlinks and special files cannot be copied into the file system", path.display()));
        }
    }
    Ok(())
}

/// The contents of file `path` of the file system at byte `offset` of `image`.
pub fn read_image_file(image: &Path, offset: u64, path: &str) -> Result<Vec<u8>> {
    let mut fs = mount(image, offset)?;
    let mut bytes = Vec::new();
    read_file(&mut fs, path, &mut bytes)?;
    Ok(bytes)
}

fn mount_writable(image: &Path, offset: u64) -> Result<FileSystem<FileStore>> {
    let store = FileStore::open(image, offset, true)?;
    FileSystem::mount(store).map_err(|error| format!("{} at byte {offset}: {error}", image.display()))
}

fn mount(image: &Path, offset: u64) -> Result<FileSystem<FileStore>> {
    let store = FileStore::open(image, offset, false)?;
    FileSystem::mount(store).map_err(|error| format!("{} at byte {offset}: {error}", image.display()))
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::File => "file",
        Kind::Directory => "dir",
    }
}

/// `ls`: one line per entry of a directory (kind, size, inode, name), or the file's own line.
fn list(fs: &mut FileSystem<FileStore>, path: &str) -> Result<Vec<String>> {
    let fail = |error: spindle_service_fs::FsError| format!("{path}: {error}");
    let inode = fs.lookup(path).map_err(fail)?;
    let stat = fs.stat(inode).map_err(fail)?;
    if stat.kind == Kind::File {
        return Ok(vec![format!("{:<4} {:>12} {:>8} {path}", kind_name(stat.kind), stat.size, inode)]);
    }
    let mut lines = Vec::new();
    let mut slot = 0;
    while let Some((found, entry)) = fs.entry_from(inode, slot).map_err(fail)? {
        let size = fs.stat(entry.inode).map_err(fail)?.size;
        let name = String::from_utf8_lossy(entry.name());
        lines.push(format!("{:<4} {:>12} {:>8} {name}", kind_name(entry.kind), size, entry.inode));
        slot = found + 1;
    }
    Ok(lines)
}

/// `cat`: the whole contents of a file, in chunks of 1 MiB, into `output`.
fn read_file(fs: &mut FileSystem<FileStore>, path: &str, output: &mut impl std::io::Write) -> Result<()> {
    let fail = |error: spindle_service_fs::FsError| format!("{path}: {error}");
    let inode = fs.lookup(path).map_err(fail)?;
    let size = fs.stat(inode).map_err(fail)?.size;
    let mut chunk = vec![0u8; 1 << 20];
    let mut done = 0u64;
    while done < size {
        let read = fs.read_at(inode, done, &mut chunk).map_err(fail)?;
        if read == 0 {
            break;
        }
        output.write_all(&chunk[..read]).map_err(|error| format!("cannot write {path}: {error}"))?;
        done += read as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::{build_image, check_image, list, mount};

    fn read_file(fs: &mut spindle_service_fs::FileSystem<super::FileStore>, path: &str) -> Result<Vec<u8>, String> {
        let mut contents = Vec::new();
        super::read_file(fs, path, &mut contents)?;
        Ok(contents)
    }

    fn scratch(name: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("spindle-fs-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    #[test]
    fn builds_checks_and_reads_back_an_image() {
        let root = scratch("build");
        let tree = root.join("tree");
        std::fs::create_dir_all(tree.join("etc/deep")).unwrap();
        std::fs::write(tree.join("etc/motd"), b"welcome\n").unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|index| (index % 251) as u8).collect();
        std::fs::write(tree.join("etc/deep/big"), &big).unwrap();
        std::fs::write(tree.join("empty"), b"").unwrap();
        let image = root.join("disk.img");
        build_image(&image, 8192, 4 << 20, &tree).unwrap();
        assert_eq!(std::fs::metadata(&image).unwrap().len(), 8192 + (4 << 20));
        let report = check_image(&image, 8192).unwrap();
        assert!(report.is_clean(), "{report}");
        let mut fs = mount(&image, 8192).unwrap();
        let lines = list(&mut fs, "/").unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("file") && lines[0].ends_with(" empty"), "{lines:?}");
        assert!(lines[1].starts_with("dir") && lines[1].ends_with(" etc"), "{lines:?}");
        assert_eq!(read_file(&mut fs, "/etc/motd").unwrap(), b"welcome\n");
        assert_eq!(read_file(&mut fs, "/etc/deep/big").unwrap(), big);
        assert!(read_file(&mut fs, "/nothing").unwrap_err().contains("no such file"));
        // Corrupt one byte of the inode table's root inode: fsck notices.
        let mut bytes = std::fs::read(&image).unwrap();
        let superblock = spindle_service_fs::Superblock::decode(bytes[8192..8192 + 4096].try_into().unwrap()).unwrap();
        let root_inode = 8192 + superblock.inode_start as usize * 4096 + 128;
        bytes[root_inode] = 9;
        std::fs::write(&image, &bytes).unwrap();
        assert!(check_image(&image, 8192).unwrap().has_errors());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn refuses_symlinks() {
        let root = scratch("symlink");
        let tree = root.join("tree");
        std::fs::create_dir_all(&tree).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", tree.join("link")).unwrap();
        let error = build_image(&root.join("disk.img"), 0, 1 << 20, &tree).unwrap_err();
        assert!(error.contains("symlinks and special files"), "{error}");
        let _ = std::fs::remove_dir_all(&root);
    }
}
