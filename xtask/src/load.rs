//! `cargo xtask load`: hot load from the host — build an extension and push it into the
//! kernel that `cargo xtask qemu` is running, then print the kernel's answer.
//!
//! The channel is the machine's hot-load virtio console, bound by QEMU to a Unix socket
//! (see `qemu.rs`). The protocol is the kernel's (`kernel/src/hotload.rs`): one request
//! per connection — `LOAD <length>\n` + the `.kext` bytes, `UNLOAD <name>\n` or `LIST\n` —
//! and one answer line, `OK …` or `ERR …`. The same [`exchange`] serves the verb and the
//! hot-load system tests.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::Result;

/// Largest `.kext` the kernel accepts (`hotload::PAYLOAD_LIMIT` in the kernel).
pub const PAYLOAD_LIMIT: usize = 4 * 1024 * 1024;
/// Longest answer line read from the kernel (it sends at most 1 KiB).
const ANSWER_MAX: usize = 64 * 1024;
/// Pause between connection attempts while waiting for QEMU to listen.
const CONNECT_RETRY: Duration = Duration::from_millis(50);

/// `cargo xtask load` arguments.
#[derive(clap::Args)]
pub struct LoadArgs {
    /// The extension crate to build (signed, native; with --wasm its Wasm build) and load,
    /// e.g. `hello`.
    #[arg(value_name = "CRATE", required_unless_present_any = ["unload", "list", "stats"], conflicts_with_all = ["unload", "list", "stats"])]
    crate_name: Option<String>,
    /// Unload the extension NAME instead.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["list", "stats"])]
    unload: Option<String>,
    /// List the loaded extensions instead.
    #[arg(long, conflicts_with = "stats")]
    list: bool,
    /// Print every loaded extension's full record as JSON instead (what `ext show NAME
    /// --json` and the `ext_stats` system call give: state, artifact, signer, load cost,
    /// budget, memory, bindings with guards and counters).
    #[arg(long)]
    stats: bool,
    /// Build and load the Wasm build of CRATE (`ext build --wasm`) instead of the native one.
    #[arg(long, requires = "crate_name", conflicts_with = "user")]
    wasm: bool,
    /// Not possible: a user-level build cannot be hot loaded. The protocol
    /// (kernel/src/hotload.rs) carries signed .kext containers, native or Wasm; a
    /// user-level build is a program, started from the boot bundle (`user = true` in
    /// image.toml, then `ext load CRATE user`). Given, the command says so and fails.
    #[arg(long, requires = "crate_name")]
    user: bool,
    /// The hot-load socket (default: target/spindle/hotload.sock, where `cargo xtask qemu`
    /// binds it).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Seconds to wait for the kernel's answer.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
}

/// One request to the kernel's hot-load service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// Load these `.kext` bytes.
    Load(&'a [u8]),
    /// Unload the named extension.
    Unload(&'a str),
    /// List the loaded extensions.
    List,
    /// Every extension's record as JSON.
    Stats,
}

impl Request<'_> {
    /// The bytes on the wire. Errors if the kernel would refuse the request anyway: an
    /// empty or oversize `.kext`, or an extension name that is empty or contains spaces.
    pub fn encode(&self) -> Result<Vec<u8>> {
        match self {
            Request::Load(bytes) => {
                if bytes.is_empty() || bytes.len() > PAYLOAD_LIMIT {
                    return Err(format!("a .kext of {} bytes cannot be hot-loaded (1 to {PAYLOAD_LIMIT} bytes)", bytes.len()));
                }
                let mut wire = format!("LOAD {}\n", bytes.len()).into_bytes();
                wire.extend_from_slice(bytes);
                Ok(wire)
            }
            Request::Unload(name) => {
                if name.is_empty() || name.chars().any(|character| character.is_whitespace() || character.is_control()) {
                    return Err(format!("{name:?} is not an extension name"));
                }
                Ok(format!("UNLOAD {name}\n").into_bytes())
            }
            Request::List => Ok(b"LIST\n".to_vec()),
            Request::Stats => Ok(b"STATS\n".to_vec()),
        }
    }
}

/// How long [`exchange`] waits.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// For the socket to accept a connection (0: one attempt). Tests that have just
    /// started QEMU wait for it to listen; the verb does not.
    pub connect: Duration,
    /// For the answer line, after the request is sent.
    pub answer: Duration,
}

fn connect(socket: &Path, wait: Duration) -> Result<UnixStream> {
    let deadline = Instant::now() + wait;
    loop {
        match UnixStream::connect(socket) {
            Ok(stream) => return Ok(stream),
            Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {
                if Instant::now() >= deadline {
                    return Err(format!(
                        "no kernel is listening on {} ({error}) — start one with `cargo xtask qemu` first",
                        socket.display()
                    ));
                }
                std::thread::sleep(CONNECT_RETRY);
            }
            Err(error) => return Err(format!("cannot connect to {}: {error}", socket.display())),
        }
    }
}

/// Reads one line (without its `\n`, `\r\n`) of at most [`ANSWER_MAX`] bytes.
fn read_answer(stream: &mut UnixStream, timeout: Duration) -> Result<String> {
    let deadline = Instant::now() + timeout;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(no_answer(timeout));
        }
        stream.set_read_timeout(Some(remaining)).map_err(|error| format!("socket: {error}"))?;
        match stream.read(&mut byte) {
            Ok(0) => return Err("the connection closed before the kernel answered".into()),
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) if line.len() == ANSWER_MAX => return Err(format!("the kernel's answer is longer than {ANSWER_MAX} bytes")),
            Ok(_) => line.push(byte[0]),
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return Err(no_answer(timeout)),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(format!("reading the answer: {error}")),
        }
    }
    let text = String::from_utf8_lossy(&line);
    Ok(text.trim_end_matches('\r').to_string())
}

fn no_answer(timeout: Duration) -> String {
    format!(
        "no answer from the kernel within {} s (hot load runs in `cargo xtask qemu` boots, not in tests or benchmarks)",
        timeout.as_secs()
    )
}

/// Sends one request over `socket` and returns the kernel's answer line (`OK …` or
/// `ERR …`). Errors: nobody listening, the request refused locally, no answer in time.
pub fn exchange(socket: &Path, request: &Request, timeouts: Timeouts) -> Result<String> {
    let wire = request.encode()?;
    let mut stream = connect(socket, timeouts.connect)?;
    stream.set_write_timeout(Some(timeouts.answer)).map_err(|error| format!("socket: {error}"))?;
    stream.write_all(&wire).map_err(|error| format!("sending the request to {}: {error}", socket.display()))?;
    read_answer(&mut stream, timeouts.answer)
}

/// Whether an answer line reports success.
pub fn is_ok(answer: &str) -> bool {
    answer == "OK" || answer.starts_with("OK ")
}

/// Why `load --user` cannot work, and what to do instead.
fn user_level_not_hot_loadable(crate_name: &str) -> String {
    format!(
        "a user-level build cannot be hot loaded: the kernel's hot-load protocol (kernel/src/hotload.rs) carries only signed .kext containers \
         (native or Wasm), and a user-level extension is a program started from the boot bundle. Add `user = true` to `{crate_name}` in image.toml, \
         boot with `cargo xtask qemu`, then `ext load {crate_name} user`; or hot load `cargo xtask load {crate_name}` (native) or `--wasm`"
    )
}

/// Runs `cargo xtask load`: exit 0 for an `OK` answer, 1 for `ERR`.
pub fn run(arguments: LoadArgs) -> Result<ExitCode> {
    if arguments.user {
        return Err(user_level_not_hot_loadable(arguments.crate_name.as_deref().unwrap_or("CRATE")));
    }
    let socket = arguments.socket.clone().unwrap_or_else(crate::qemu::default_hotload_socket);
    let kext;
    let request = match (&arguments.crate_name, &arguments.unload) {
        (Some(crate_name), _) => {
            let path = if arguments.wasm { crate::ext::build_wasm(crate_name)? } else { crate::ext::build_native(crate_name)? };
            kext = std::fs::read(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            Request::Load(&kext)
        }
        (None, Some(name)) => Request::Unload(name),
        (None, None) if arguments.stats => Request::Stats,
        (None, None) => Request::List,
    };
    let timeouts = Timeouts { connect: Duration::ZERO, answer: Duration::from_secs(arguments.timeout) };
    let answer = exchange(&socket, &request, timeouts)?;
    match answer.strip_prefix("OK ").filter(|_| request == Request::Stats) {
        // The JSON document alone, so that `cargo xtask load --stats | jq` works.
        Some(document) => println!("{document}"),
        None => println!("{answer}"),
    }
    Ok(if is_ok(&answer) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn load_user_says_why_it_cannot() {
        let arguments = LoadArgs {
            crate_name: Some("hello".into()),
            unload: None,
            list: false,
            stats: false,
            wasm: false,
            user: true,
            socket: Some(temporary_socket("never-used")),
            timeout: 1,
        };
        let error = run(arguments).unwrap_err();
        assert!(error.starts_with("a user-level build cannot be hot loaded") && error.contains("`ext load hello user`"), "{error}");
    }

    #[test]
    fn encodes_each_request() {
        assert_eq!(Request::Load(b"abc").encode().unwrap(), b"LOAD 3\nabc");
        assert_eq!(Request::Unload("hello").encode().unwrap(), b"UNLOAD hello\n");
        assert_eq!(Request::List.encode().unwrap(), b"LIST\n");
        assert_eq!(Request::Stats.encode().unwrap(), b"STATS\n");
    }

    #[test]
    fn refuses_what_the_kernel_would_refuse() {
        assert!(Request::Load(b"").encode().is_err());
        assert!(Request::Load(&vec![0; PAYLOAD_LIMIT + 1]).encode().unwrap_err().contains("4194304"));
        assert!(Request::Load(&vec![0; PAYLOAD_LIMIT]).encode().is_ok());
        assert!(Request::Unload("").encode().is_err());
        assert!(Request::Unload("two words").encode().is_err());
        assert!(Request::Unload("a\nLIST").encode().is_err());
    }

    #[test]
    fn answers_map_to_success() {
        assert!(is_ok("OK loaded hello 0.1.0 (native), 1 binding(s)"));
        assert!(is_ok("OK"));
        assert!(!is_ok("ERR native extension refused"));
        assert!(!is_ok("OKAY"));
    }

    fn temporary_socket(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("spindle-load-test-{}-{name}.sock", std::process::id()))
    }

    #[test]
    fn no_listener_says_how_to_start_one() {
        let socket = temporary_socket("absent");
        let _ = std::fs::remove_file(&socket);
        let error = exchange(&socket, &Request::List, Timeouts { connect: Duration::ZERO, answer: Duration::from_secs(1) }).unwrap_err();
        assert!(error.contains("start one with `cargo xtask qemu` first"), "{error}");
    }

    /// A stand-in kernel: reads the request, answers `answer`, and returns what it read.
    fn serve_once(listener: UnixListener, expected_length: usize, answer: &'static [u8]) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut received = vec![0; expected_length];
            stream.read_exact(&mut received).unwrap();
            stream.write_all(answer).unwrap();
            received
        })
    }

    #[test]
    fn exchange_sends_the_request_and_reads_one_line() {
        let socket = temporary_socket("exchange");
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).unwrap();
        let server = serve_once(listener, 10, b"OK loaded x 1 (native), 0 binding(s)\r\nignored\n");
        let timeouts = Timeouts { connect: Duration::from_secs(5), answer: Duration::from_secs(5) };
        let answer = exchange(&socket, &Request::Load(b"abc"), timeouts).unwrap();
        assert_eq!(server.join().unwrap(), b"LOAD 3\nabc");
        assert_eq!(answer, "OK loaded x 1 (native), 0 binding(s)");
        let _ = std::fs::remove_file(&socket);
    }

    #[test]
    fn silence_times_out_with_a_clear_error() {
        let socket = temporary_socket("silent");
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).unwrap();
        let timeouts = Timeouts { connect: Duration::from_secs(5), answer: Duration::from_millis(200) };
        let error = exchange(&socket, &Request::List, timeouts).unwrap_err();
        assert!(error.contains("no answer from the kernel"), "{error}");
        drop(listener);
        let _ = std::fs::remove_file(&socket);
    }
}
