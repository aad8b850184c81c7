//! Running the kernel under QEMU: interactive, to the terminal, or captured, always
//! with a timeout when nobody is at the keyboard.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::Result;
use crate::setup::{OPENSBI_FIRMWARE, QEMU};

/// Guest RAM by default (MiB).
pub const DEFAULT_MEMORY_MIB: u32 = 256;

/// How a QEMU run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// QEMU exited with this status (the kernel's, via the sifive_test device).
    Status(i32),
    /// The host timeout fired and QEMU was killed.
    TimedOut,
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
}

impl Machine {
    /// A one-hart machine booting `kernel`.
    pub fn new(kernel: &Path) -> Machine {
        Machine { kernel: kernel.to_path_buf(), smp: 1, memory_mib: DEFAULT_MEMORY_MIB, append: Vec::new(), extra: Vec::new(), initrd: None }
    }

    /// A machine booting an image: the kernel with its boot bundle as initial RAM disk.
    pub fn for_image(image: &crate::kernel_build::Image) -> Machine {
        let mut machine = Machine::new(&image.kernel);
        machine.initrd = Some(image.bundle.clone());
        machine
    }

    /// Adds a word to the kernel command line.
    pub fn append(&mut self, word: &str) -> &mut Machine {
        self.append.push(word.to_string());
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
        command.args(&self.extra);
        command
    }

    /// Runs with the terminal attached (Ctrl-A X quits).
    pub fn run_interactive(&self) -> Result<ExitStatus> {
        self.command(true).status().map_err(|error| format!("cannot start {QEMU}: {error}"))
    }

    /// Runs with output to the terminal and no input, stopping it after `timeout`.
    pub fn run_to_terminal(&self, timeout: Duration) -> Result<Exit> {
        let mut command = self.command(false);
        command.stdin(Stdio::null());
        let mut child = command.spawn().map_err(|error| format!("cannot start {QEMU}: {error}"))?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().map_err(|error| error.to_string())? {
                return Ok(Exit::Status(status.code().unwrap_or(-1)));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Exit::TimedOut);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs with output captured (and echoed to the terminal when `echo`), stopping it
    /// after `timeout`. Returns how it ended and every line it printed.
    pub fn run_captured(&self, timeout: Duration, echo: bool) -> Result<(Exit, Vec<String>)> {
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
        let exit = loop {
            while let Ok(line) = receiver.try_recv() {
                if echo {
                    println!("    | {line}");
                    let _ = std::io::stdout().flush();
                }
                lines.push(line);
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
