//! Running the kernel under QEMU: interactive, to the terminal, or captured, always
//! with a timeout when nobody is at the keyboard.
//!
//! Every machine also gets a virtio console (`virtio-serial-device` + `virtconsole`, port 0)
//! whose character device is a Unix socket on the host: the hot-load channel that
//! `cargo xtask load` talks to (kernel side: `kernel/src/hotload.rs`). `cargo xtask qemu`
//! binds it to the well-known [`default_hotload_socket`]; every other machine (tests,
//! benchmarks) gets a socket of its own, so parallel runs never take each other's.
//!
//! Every machine also gets a disk: a virtio-blk device (`virtio-blk-device`) on a raw
//! image file under `target/spindle/`, created sparse (`set_len`, no data written).
//! `cargo xtask qemu` keeps [`default_disk_image`] between runs (so what the kernel writes
//! persists) unless told to start fresh; every other machine gets a scratch image of its
//! own, removed when QEMU exits ([`Disk`]). The kernel finds the virtio console and the
//! disk by device type, whichever virtio-mmio slots QEMU gives them.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::Result;
use crate::setup::{OPENSBI_FIRMWARE, QEMU};

/// How the guest clock runs (see `kernel/src/time.rs`, `ClockMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// `-icount shift=0,sleep=on`: one guest nanosecond per instruction, idle time slept
    /// in real time — exact budgets in an interactive machine (`cargo xtask qemu`).
    ExactInteractive,
    /// `-icount shift=0,align=off,sleep=off`: exact and repeatable, idle time skipped
    /// (tests and benchmarks).
    ExactDeterministic,
    /// No `-icount`: guest time is host time (`cargo xtask qemu --host-clock`, and the
    /// tests of that mode).
    Host,
}

impl Clock {
    /// QEMU arguments for this clock.
    pub const fn arguments(self) -> &'static [&'static str] {
        match self {
            Clock::ExactInteractive => &["-icount", "shift=0,sleep=on"],
            Clock::ExactDeterministic => &["-icount", "shift=0,align=off,sleep=off"],
            Clock::Host => &[],
        }
    }
}

/// Guest RAM by default (MiB).
pub const DEFAULT_MEMORY_MIB: u32 = 256;

/// Longest Unix socket path the kernel accepts (`sun_path` is 108 bytes with its NUL).
const SOCKET_PATH_MAX: usize = 107;

/// Where `path` would be, or a file called `file_name` in the system's temporary
/// directory when `path` is too long to be a Unix socket address.
fn socket_path(path: PathBuf, file_name: &str) -> PathBuf {
    if path.as_os_str().len() <= SOCKET_PATH_MAX { path } else { std::env::temp_dir().join(file_name) }
}

/// The hot-load socket of the machine `cargo xtask qemu` runs (and `cargo xtask load`
/// talks to by default): `target/spindle/hotload.sock`.
pub fn default_hotload_socket() -> PathBuf {
    let path = crate::kernel_build::workspace_root().join("target").join("spindle").join("hotload.sock");
    socket_path(path, "spindle-hotload.sock")
}

/// A socket path no other machine of any xtask process uses.
fn unique_hotload_socket() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!("hotload-{}-{}.sock", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let path = crate::kernel_build::workspace_root().join("target").join("spindle").join("run").join(&name);
    socket_path(path, &format!("spindle-{name}"))
}

/// Size of a disk image unless told otherwise: 2 GiB (sparse, so it costs no host space
/// until written) — larger than the whole modelled HP 97560 (1.28 GiB), so the disk model's
/// every cylinder is on the device, and than the block path's 1 GiB logical disk.
pub const DEFAULT_DISK_BYTES: u64 = 2 << 30;
/// Disk sizes must be whole sectors (the virtio-blk unit).
const DISK_SECTOR_BYTES: u64 = 512;

/// The disk image `cargo xtask qemu` keeps between runs: `target/spindle/disk.img`.
pub fn default_disk_image() -> PathBuf {
    crate::kernel_build::workspace_root().join("target").join("spindle").join("disk.img")
}

/// A disk image path no other machine of any xtask process uses.
fn unique_disk_image() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!("disk-{}-{}.img", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    crate::kernel_build::workspace_root().join("target").join("spindle").join("run").join(name)
}

/// Parses a disk size: a number of bytes with an optional binary suffix `K`, `M`, `G` or
/// `T` (`KiB`…, `KB`… and lower case accepted too), e.g. `256M`, `2G`, `1048576`. The
/// size must be a non-zero whole number of 512-byte sectors.
pub fn parse_disk_size(text: &str) -> Result<u64> {
    let trimmed = text.trim();
    let digits_end = trimmed.find(|character: char| !character.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    let explain = |why: &str| format!("bad disk size {text:?}: {why} (e.g. 256M, 2G, 1048576)");
    if digits.is_empty() {
        return Err(explain("it must start with a number"));
    }
    let number: u64 = digits.parse().map_err(|_| explain("the number is too large"))?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(explain("the unit must be K, M, G or T")),
    };
    let bytes = number.checked_mul(1 << shift).ok_or_else(|| explain("too large"))?;
    if bytes == 0 {
        return Err(explain("it must not be zero"));
    }
    if bytes % DISK_SECTOR_BYTES != 0 {
        return Err(explain("it must be a multiple of 512 bytes"));
    }
    Ok(bytes)
}

/// The disk a machine gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disk {
    /// A fresh sparse image of this many bytes at a path of the machine's own, removed
    /// when QEMU exits (tests, benchmarks).
    Scratch {
        /// The image file.
        path: PathBuf,
        /// Its size in bytes.
        bytes: u64,
    },
    /// An image kept after QEMU exits (`cargo xtask qemu`, persistence tests): created
    /// sparse when missing (or when `fresh`), resized to `bytes` when given.
    Kept {
        /// The image file.
        path: PathBuf,
        /// Its size in bytes; `None` keeps an existing image's size (new ones get
        /// [`DEFAULT_DISK_BYTES`]).
        bytes: Option<u64>,
        /// Start from an empty image even if one exists.
        fresh: bool,
    },
    /// No disk (to check that the kernel boots without one).
    None,
}

impl Disk {
    fn path(&self) -> Option<&Path> {
        match self {
            Disk::Scratch { path, .. } | Disk::Kept { path, .. } => Some(path),
            Disk::None => None,
        }
    }

    /// Creates or resizes the image before QEMU starts; returns a line to show the user
    /// when an existing image changed size.
    fn prepare(&self) -> Result<Option<String>> {
        let Some(path) = self.path() else { return Ok(None) };
        if let Some(directory) = path.parent() {
            std::fs::create_dir_all(directory).map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
        }
        let cannot = |error: std::io::Error| format!("cannot prepare the disk image {}: {error}", path.display());
        match self {
            Disk::Scratch { bytes, .. } => {
                let file = std::fs::File::create(path).map_err(cannot)?;
                file.set_len(*bytes).map_err(cannot)?;
                Ok(None)
            }
            Disk::Kept { bytes, fresh, .. } => {
                let existing = if *fresh { None } else { std::fs::metadata(path).ok().map(|metadata| metadata.len()) };
                let wanted = bytes.or(existing).unwrap_or(DEFAULT_DISK_BYTES);
                let file = std::fs::OpenOptions::new().create(true).write(true).truncate(*fresh).open(path).map_err(cannot)?;
                file.set_len(wanted).map_err(cannot)?;
                Ok(existing.filter(|&old| old != wanted).map(|old| {
                    format!("disk image {} resized from {} to {} bytes", path.display(), old, wanted)
                }))
            }
            Disk::None => Ok(None),
        }
    }

    fn clean_up(&self) {
        if let Disk::Scratch { path, .. } = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// QEMU's option syntax separates with commas; a comma inside a value is written twice.
pub fn escape_option_value(value: &Path) -> String {
    value.display().to_string().replace(',', ",,")
}

/// How a QEMU run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// QEMU exited with this status (the kernel's, via the sifive_test device).
    Status(i32),
    /// The host timeout fired and QEMU was killed.
    TimedOut,
    /// QEMU was killed (SIGKILL) as soon as it printed the cue line ([`Machine::run_killed_at`]).
    KilledAtCue,
}

/// A QEMU `virt` machine configuration.
pub struct Machine {
    kernel: PathBuf,
    /// Number of harts.
    pub smp: u32,
    /// RAM in MiB.
    pub memory_mib: u32,
    append: Vec<String>,
    extra: Vec<String>,
    initrd: Option<PathBuf>,
    hotload_socket: PathBuf,
    disk: Disk,
    /// The tree its disk's file system gets (an image's `bin/` and `ext/`), if any.
    fs_root: Option<PathBuf>,
}

impl Machine {
    /// A one-hart machine booting `kernel`.
    pub fn new(kernel: &Path) -> Machine {
        Machine {
            kernel: kernel.to_path_buf(),
            smp: 1,
            memory_mib: DEFAULT_MEMORY_MIB,
            append: Vec::new(),
            extra: Vec::new(),
            initrd: None,
            hotload_socket: unique_hotload_socket(),
            disk: Disk::Scratch { path: unique_disk_image(), bytes: DEFAULT_DISK_BYTES },
            fs_root: None,
        }
    }

    /// A machine booting an image: the kernel with its boot bundle as initial RAM disk.
    pub fn for_image(image: &crate::kernel_build::Image) -> Machine {
        let mut machine = Machine::new(&image.kernel);
        machine.initrd = Some(image.bundle.clone());
        machine.fs_root = Some(image.fs_root.clone());
        machine
    }

    /// Uses `path` as the initial RAM disk (the boot bundle) instead of the image's.
    pub fn set_initrd(&mut self, path: &Path) -> &mut Machine {
        self.initrd = Some(path.to_path_buf());
        self
    }

    /// Adds a word to the kernel command line.
    pub fn append(&mut self, word: &str) -> &mut Machine {
        self.append.push(word.to_string());
        self
    }

    /// Binds the hot-load virtio console to the Unix socket `path` (QEMU listens there;
    /// a stale file at `path` is replaced).
    pub fn set_hotload_socket(&mut self, path: &Path) -> &mut Machine {
        self.hotload_socket = path.to_path_buf();
        self
    }

    /// The Unix socket the hot-load virtio console is bound to.
    pub fn hotload_socket(&self) -> &Path {
        &self.hotload_socket
    }

    /// Gives the machine `disk` instead of its own scratch image.
    pub fn set_disk(&mut self, disk: Disk) -> &mut Machine {
        self.disk = disk;
        self
    }

    /// Adds raw QEMU arguments.
    pub fn extra(&mut self, arguments: &[&str]) -> &mut Machine {
        self.extra.extend(arguments.iter().map(|argument| argument.to_string()));
        self
    }

    fn command(&self, interactive: bool) -> Command {
        let mut command = Command::new(QEMU);
        command.args(["-machine", "virt", "-cpu", "rv64"]);
        command.args(["-smp", &self.smp.to_string(), "-m", &format!("{}M", self.memory_mib)]);
        command.args(["-bios", OPENSBI_FIRMWARE]);
        command.arg("-kernel").arg(&self.kernel);
        if let Some(initrd) = &self.initrd {
            command.arg("-initrd").arg(initrd);
        }
        // A failing sifive_test write must make QEMU exit with the kernel's code.
        command.args(["-action", "panic=exit-failure", "-no-reboot"]);
        if interactive {
            command.arg("-nographic");
        } else {
            command.args(["-display", "none", "-serial", "stdio", "-monitor", "none"]);
        }
        if !self.append.is_empty() {
            command.arg("-append").arg(self.append.join(" "));
        }
        // The hot-load channel: port 0 of a virtio-serial device (the console port, which
        // needs no multiport negotiation), on a socket QEMU listens on without waiting.
        let chardev = format!("socket,id=hotload,path={},server=on,wait=off", escape_option_value(&self.hotload_socket));
        command.args(["-chardev", &chardev, "-device", "virtio-serial-device", "-device", "virtconsole,chardev=hotload"]);
        // The disk: a raw image behind a virtio-blk device on the virtio-mmio bus.
        if let Some(path) = self.disk.path() {
            let drive = format!("file={},if=none,format=raw,id=disk", escape_option_value(path));
            command.args(["-drive", &drive, "-device", "virtio-blk-device,drive=disk"]);
        }
        command.args(&self.extra);
        command
    }

    /// Makes the socket's directory and the disk image before QEMU starts.
    fn prepare(&self) -> Result<()> {
        if let Some(directory) = self.hotload_socket.parent() {
            std::fs::create_dir_all(directory).map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
        }
        if let Some(note) = self.disk.prepare()? {
            eprintln!("xtask: {note}");
        }
        if let (Some(path), Some(root)) = (self.disk.path(), &self.fs_root) {
            // A fresh scratch disk gets a new file system; a kept one keeps its own (its
            // bin/ and ext/ refreshed from this build), or gets one if it has none.
            if let Some(note) = crate::fs::provide(path, root, matches!(self.disk, Disk::Scratch { .. }))? {
                eprintln!("xtask: {note}");
            }
        }
        Ok(())
    }

    /// Removes the socket QEMU leaves behind when it exits, and a scratch disk image.
    fn clean_up(&self) {
        let _ = std::fs::remove_file(&self.hotload_socket);
        self.disk.clean_up();
    }

    /// Runs with the terminal attached (Ctrl-A X quits).
    pub fn run_interactive(&self) -> Result<ExitStatus> {
        self.prepare()?;
        let status = self.command(true).status().map_err(|error| format!("cannot start {QEMU}: {error}"));
        self.clean_up();
        status
    }

    /// Runs with output to the terminal and no input, stopping it after `timeout`.
    pub fn run_to_terminal(&self, timeout: Duration) -> Result<Exit> {
        self.prepare()?;
        let mut command = self.command(false);
        command.stdin(Stdio::null());
        let mut child = command.spawn().map_err(|error| format!("cannot start {QEMU}: {error}"))?;
        let deadline = Instant::now() + timeout;
        let exit = loop {
            if let Some(status) = child.try_wait().map_err(|error| error.to_string())? {
                break Exit::Status(status.code().unwrap_or(-1));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break Exit::TimedOut;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.clean_up();
        Ok(exit)
    }

    /// Runs with output captured (and echoed to the terminal when `echo`), stopping it
    /// after `timeout`. Returns how it ended and every line it printed.
    pub fn run_captured(&self, timeout: Duration, echo: bool) -> Result<(Exit, Vec<String>)> {
        self.run_capturing(timeout, echo, None)
    }

    /// [`Machine::run_captured`] that kills QEMU (SIGKILL: no shutdown, nothing flushed by
    /// the guest) as soon as it prints a line equal to `cue` (leading and trailing spaces
    /// aside): how the durability tests pull the plug right after an `fsync` returned.
    pub fn run_killed_at(&self, timeout: Duration, echo: bool, cue: &str) -> Result<(Exit, Vec<String>)> {
        self.run_capturing(timeout, echo, Some(cue))
    }

    fn run_capturing(&self, timeout: Duration, echo: bool, cue: Option<&str>) -> Result<(Exit, Vec<String>)> {
        self.prepare()?;
        let mut command = self.command(false);
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|error| format!("cannot start {QEMU}: {error}"))?;
        let (sender, receiver) = mpsc::channel::<String>();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let stdout_sender = sender.clone();
        let readers = [
            std::thread::spawn(move || forward_lines(stdout, stdout_sender)),
            std::thread::spawn(move || forward_lines(stderr, sender)),
        ];
        let deadline = Instant::now() + timeout;
        let mut lines = Vec::new();
        let mut killed = false;
        let exit = loop {
            while let Ok(line) = receiver.try_recv() {
                if echo {
                    println!("    | {line}");
                    let _ = std::io::stdout().flush();
                }
                let cued = cue.is_some_and(|cue| line.trim() == cue);
                lines.push(line);
                if cued {
                    let _ = child.kill();
                    let _ = child.wait();
                    killed = true;
                }
            }
            if killed {
                break Exit::KilledAtCue;
            }
            if let Some(status) = child.try_wait().map_err(|error| error.to_string())? {
                break Exit::Status(status.code().unwrap_or(-1));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break Exit::TimedOut;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        for reader in readers {
            let _ = reader.join();
        }
        for line in receiver.try_iter() {
            if echo {
                println!("    | {line}");
            }
            lines.push(line);
        }
        self.clean_up();
        Ok((exit, lines))
    }
}

fn forward_lines(stream: impl std::io::Read, sender: mpsc::Sender<String>) {
    for line in BufReader::new(stream).split(b'\n') {
        let Ok(line) = line else { break };
        let text = String::from_utf8_lossy(&line).trim_end_matches('\r').to_string();
        if sender.send(text).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_disk_size;

    #[test]
    fn parses_disk_sizes() {
        assert_eq!(parse_disk_size("256M"), Ok(256 << 20));
        assert_eq!(parse_disk_size("2G"), Ok(2 << 30));
        assert_eq!(parse_disk_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_disk_size("512k"), Ok(512 << 10));
        assert_eq!(parse_disk_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_disk_size("1T"), Ok(1 << 40));
    }

    #[test]
    fn refuses_bad_disk_sizes() {
        for bad in ["", "M", "0", "0G", "12X", "1.5G", "-1G", "1000", "99999999999999999999G", "16777216T"] {
            let error = parse_disk_size(bad).expect_err(bad);
            assert!(error.contains("bad disk size"), "{bad}: {error}");
        }
    }
}
