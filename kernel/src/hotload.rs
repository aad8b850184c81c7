//! Hot load from the host: `cargo xtask load CRATE` pushes a signed `.kext` into the
//! running kernel over a virtio console, and the kernel answers with one line.
//!
//! The service is one kernel strand, `hotload` (normal priority), that owns the virtio
//! console ([`crate::drivers::virtio_console::HostChannel`]) and polls it: while bytes are
//! arriving it polls again after each [`sched::yield_now`], when the line is quiet it also
//! waits for the next timer tick, so an idle service costs one poll per tick. Requests
//! are carried out in the strand (never in interrupt context), through the same
//! `ext::load_kext_bytes` (native or Wasm, by the container's kind) / `ext::unload` / `ext::list` as the `ext` console command.
//!
//! Protocol (ASCII lines ending in `\n`; a `\r` before it and blank lines are ignored):
//!
//! | request | answer |
//! |---|---|
//! | `LOAD <length>\n` then exactly `<length>` bytes of a `.kext` | `OK loaded <name> <version> (<technology>), <n> binding(s)` |
//! | `UNLOAD <name>\n` | `OK unloaded <name>` |
//! | `LIST\n` | `OK <name>:<state>,…` (`OK` alone when nothing is loaded; state `running`, `degraded` or `killed`) |
//! | `STATS\n` | `OK <json>`: every extension's record, as the `ext_stats` system call returns it |
//! | anything refused | `ERR <specific message>` |
//!
//! Every request gets exactly one answer line. A request line is at most
//! [`REQUEST_LINE_MAX`] bytes and a payload at most [`PAYLOAD_LIMIT`] bytes: a longer
//! `LOAD` is refused before anything is allocated. After any refusal the service drops
//! input until the host has been quiet for [`RESYNC_QUIET_MILLISECONDS`] and answers
//! only then, so whatever followed the bad request (a refused payload, the rest of a
//! binary blob) is never read as requests, and the next request is understood. A request
//! left half-sent for [`STALL_TIMEOUT_SECONDS`] (the host went away) is answered `ERR`
//! and dropped. Every outcome is also printed on the kernel console as `[hotload] …`.
//!
//! The service runs in interactive and script boots only; tests and benchmarks run
//! without the extra strand, so their scheduling and instruction counts are unchanged.
//!
//! Limitations: the console port has no notion of host connections (that needs the
//! multiport feature), hence the quiet-time resynchronisation above; a host that pauses
//! longer than that in the middle of sending garbage gets one `ERR` per burst. The service
//! is polled (no PLIC), and a transfer moves at most one 4 KiB buffer per poll. Answers
//! carry no request id: a host that disconnects before its answer can leave that answer
//! to the next connection (`cargo xtask load` sends one request and waits for its answer).

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::drivers::virtio_console::HostChannel;
use crate::param::TICKS_PER_SECOND;
use crate::sched;

/// Largest `.kext` accepted, in bytes (a loaded extension image is far smaller; the
/// kernel heap is 32 MiB).
pub const PAYLOAD_LIMIT: usize = 4 * 1024 * 1024;
/// Longest request line accepted, in bytes, not counting the `\n`.
pub const REQUEST_LINE_MAX: usize = 256;
/// A request left unfinished this long without a new byte is answered `ERR` and dropped.
pub const STALL_TIMEOUT_SECONDS: u64 = 5;
/// After a refusal, input is dropped until the host has sent nothing for this long; then
/// the refusal is answered. Ten ticks: far above the gaps inside one transfer (the host
/// writes in one go; the strand polls at least every few ticks), and short enough that a
/// person does not notice.
pub const RESYNC_QUIET_MILLISECONDS: u64 = 100;
/// How long `hotload wait` waits when no time is given.
pub const DEFAULT_WAIT_SECONDS: u64 = 30;
/// Longest answer line sent (loader messages are short; a `STATS` document of every
/// loaded extension is a few KiB; this bounds a runaway one).
pub const ANSWER_MAX: usize = 64 * 1024;
/// After bytes arrive, keep polling without waiting for the timer this many ticks: the
/// host usually has more queued, and QEMU refills the receive buffer within microseconds.
const BUSY_POLL_TICKS: u64 = 2;
/// Bytes taken from the device per receive call.
const RECEIVE_CHUNK: usize = 1024;

/// A complete request from the host.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// Load this `.kext`.
    Load(Vec<u8>),
    /// Unload the named extension.
    Unload(String),
    /// List the loaded extensions.
    List,
    /// Every extension's full record as JSON.
    Stats,
}

/// A parsed request line.
#[derive(Debug, PartialEq, Eq)]
pub enum Header {
    /// `LOAD <length>`: a payload of `length` bytes follows.
    Load {
        /// Payload length in bytes, 1 ..= [`PAYLOAD_LIMIT`].
        length: usize,
    },
    /// `UNLOAD <name>`.
    Unload {
        /// Extension name.
        name: String,
    },
    /// `LIST`.
    List,
    /// `STATS`.
    Stats,
}

/// Why a request was refused before it reached the extension loader.
#[derive(Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The request line is longer than [`REQUEST_LINE_MAX`].
    LineTooLong,
    /// The request line is not UTF-8 text.
    NotText,
    /// The first word is not `LOAD`, `UNLOAD` or `LIST`.
    UnknownVerb(String),
    /// A required argument is missing.
    MissingArgument {
        /// The request.
        verb: &'static str,
        /// The missing argument.
        argument: &'static str,
    },
    /// More words than the request takes.
    ExtraArgument {
        /// The request.
        verb: &'static str,
        /// The first extra word.
        word: String,
    },
    /// The `LOAD` length is not a decimal byte count.
    BadLength(String),
    /// `LOAD 0`.
    EmptyPayload,
    /// The `LOAD` length exceeds [`PAYLOAD_LIMIT`] (nothing is allocated).
    TooLarge {
        /// The length asked for.
        length: u64,
    },
    /// The kernel heap cannot hold the payload now.
    OutOfMemory {
        /// The length asked for.
        length: usize,
    },
    /// The host stopped sending in the middle of a request line.
    StalledLine,
    /// The host stopped sending in the middle of a payload.
    StalledPayload {
        /// Payload bytes received.
        received: usize,
        /// Payload bytes announced.
        expected: usize,
    },
    /// [`parse_request`]: the bytes end before the request does.
    Incomplete,
    /// [`parse_request`]: bytes follow the request.
    TrailingBytes(usize),
}

impl fmt::Display for RequestError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::LineTooLong => write!(formatter, "request line longer than {REQUEST_LINE_MAX} bytes"),
            RequestError::NotText => formatter.write_str("request line is not UTF-8 text"),
            RequestError::UnknownVerb(verb) => write!(formatter, "unknown request {verb:?} (expected LOAD, UNLOAD, LIST or STATS)"),
            RequestError::MissingArgument { verb, argument } => write!(formatter, "{verb} needs {argument}"),
            RequestError::ExtraArgument { verb, word } => write!(formatter, "{verb} takes no more arguments (got {word:?})"),
            RequestError::BadLength(text) => write!(formatter, "LOAD length {text:?} is not a decimal byte count"),
            RequestError::EmptyPayload => formatter.write_str("LOAD length is 0; a .kext is never empty"),
            RequestError::TooLarge { length } => write!(formatter, "extension of {length} bytes exceeds the {PAYLOAD_LIMIT}-byte limit"),
            RequestError::OutOfMemory { length } => write!(formatter, "kernel heap cannot hold a {length}-byte extension now"),
            RequestError::StalledLine => write!(formatter, "request line unfinished after {STALL_TIMEOUT_SECONDS} s without data; dropped"),
            RequestError::StalledPayload { received, expected } => {
                write!(formatter, "payload stopped at {received} of {expected} bytes for {STALL_TIMEOUT_SECONDS} s; dropped")
            }
            RequestError::Incomplete => formatter.write_str("request is incomplete"),
            RequestError::TrailingBytes(count) => write!(formatter, "{count} byte(s) follow the request"),
        }
    }
}

/// Parses one request line (without its `\n`; a trailing `\r` is ignored). `Ok(None)` for
/// a blank line.
///
/// Errors: [`RequestError::NotText`], [`UnknownVerb`](RequestError::UnknownVerb),
/// [`MissingArgument`](RequestError::MissingArgument),
/// [`ExtraArgument`](RequestError::ExtraArgument), and for `LOAD` lengths
/// [`BadLength`](RequestError::BadLength), [`EmptyPayload`](RequestError::EmptyPayload),
/// [`TooLarge`](RequestError::TooLarge).
pub fn parse_header(line: &[u8]) -> Result<Option<Header>, RequestError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = core::str::from_utf8(line).map_err(|_| RequestError::NotText)?;
    let mut words = text.split_ascii_whitespace();
    let Some(verb) = words.next() else { return Ok(None) };
    let (verb, header) = match verb {
        "LOAD" => {
            let length = words.next().ok_or(RequestError::MissingArgument { verb: "LOAD", argument: "a length" })?;
            ("LOAD", Header::Load { length: parse_length(length)? })
        }
        "UNLOAD" => {
            let name = words.next().ok_or(RequestError::MissingArgument { verb: "UNLOAD", argument: "an extension name" })?;
            ("UNLOAD", Header::Unload { name: name.to_string() })
        }
        "LIST" => ("LIST", Header::List),
        "STATS" => ("STATS", Header::Stats),
        other => return Err(RequestError::UnknownVerb(other.to_string())),
    };
    match words.next() {
        Some(word) => Err(RequestError::ExtraArgument { verb, word: word.to_string() }),
        None => Ok(Some(header)),
    }
}

fn parse_length(text: &str) -> Result<usize, RequestError> {
    // Digits only: no sign, no `0x`, no `_` (what `u64::from_str` would also accept).
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(RequestError::BadLength(text.to_string()));
    }
    let length: u64 = text.parse().map_err(|_| RequestError::BadLength(text.to_string()))?;
    if length == 0 {
        return Err(RequestError::EmptyPayload);
    }
    if length > PAYLOAD_LIMIT as u64 {
        return Err(RequestError::TooLarge { length });
    }
    Ok(length as usize)
}

/// Where the reader is in the byte stream.
enum ReaderState {
    /// Collecting a request line.
    Line(Vec<u8>),
    /// Collecting a `LOAD` payload (capacity reserved up front).
    Payload { expected: usize, bytes: Vec<u8> },
    /// After a refusal: dropping everything until [`RequestReader::resume`].
    Discarding,
}

/// Turns the byte stream from the host into requests, one byte at a time. Allocates at
/// most [`REQUEST_LINE_MAX`] bytes for a line and, for a `LOAD`, exactly its announced
/// length (at most [`PAYLOAD_LIMIT`]).
///
/// After a refusal the reader cannot know what the host sends next (the payload of a
/// refused `LOAD`, the rest of a binary blob…), so it drops every byte until the caller
/// sees the line go quiet and calls [`resume`](RequestReader::resume); the service answers
/// the refusal only then, so a host that waits for the answer before its next request is
/// always understood, and a burst of garbage earns exactly one `ERR`.
pub struct RequestReader {
    state: ReaderState,
}

impl Default for RequestReader {
    fn default() -> Self {
        RequestReader::new()
    }
}

impl RequestReader {
    /// A reader waiting for a request line.
    pub const fn new() -> RequestReader {
        RequestReader { state: ReaderState::Line(Vec::new()) }
    }

    /// Takes one byte; returns a request, or the reason one was refused, when this byte
    /// completes it (an over-long line is refused as soon as it passes the limit). After
    /// a refusal the reader is [discarding](RequestReader::is_discarding).
    pub fn push(&mut self, byte: u8) -> Option<Result<Request, RequestError>> {
        let outcome = match &mut self.state {
            ReaderState::Line(line) if byte == b'\n' => {
                let line = core::mem::take(line);
                self.finish_line(&line)
            }
            ReaderState::Line(line) if line.len() == REQUEST_LINE_MAX => Some(Err(RequestError::LineTooLong)),
            ReaderState::Line(line) => {
                line.push(byte);
                None
            }
            ReaderState::Payload { expected, bytes } => {
                bytes.push(byte); // within the reserved capacity: never reallocates
                if bytes.len() < *expected {
                    return None;
                }
                let payload = core::mem::take(bytes);
                self.state = ReaderState::Line(Vec::new());
                Some(Ok(Request::Load(payload)))
            }
            ReaderState::Discarding => None,
        };
        if let Some(Err(_)) = &outcome {
            self.state = ReaderState::Discarding;
        }
        outcome
    }

    fn finish_line(&mut self, line: &[u8]) -> Option<Result<Request, RequestError>> {
        match parse_header(line) {
            Ok(None) => None,
            Ok(Some(Header::List)) => Some(Ok(Request::List)),
            Ok(Some(Header::Stats)) => Some(Ok(Request::Stats)),
            Ok(Some(Header::Unload { name })) => Some(Ok(Request::Unload(name))),
            Ok(Some(Header::Load { length })) => {
                let mut bytes = Vec::new();
                if bytes.try_reserve_exact(length).is_err() {
                    return Some(Err(RequestError::OutOfMemory { length }));
                }
                self.state = ReaderState::Payload { expected: length, bytes };
                None
            }
            Err(error) => Some(Err(error)),
        }
    }

    /// Whether the reader is between requests.
    pub fn is_idle(&self) -> bool {
        matches!(&self.state, ReaderState::Line(line) if line.is_empty())
    }

    /// Whether the reader is dropping input after a refusal.
    pub fn is_discarding(&self) -> bool {
        matches!(self.state, ReaderState::Discarding)
    }

    /// Starts reading requests again after a refusal (the line has gone quiet).
    pub fn resume(&mut self) {
        if self.is_discarding() {
            self.state = ReaderState::Line(Vec::new());
        }
    }

    /// Drops a half-received request (the host stopped sending) and returns the error to
    /// answer with; `None` if the reader was idle or discarding (already refused).
    pub fn abandon(&mut self) -> Option<RequestError> {
        let state = core::mem::replace(&mut self.state, ReaderState::Line(Vec::new()));
        match state {
            ReaderState::Line(line) if line.is_empty() => None,
            ReaderState::Line(_) => Some(RequestError::StalledLine),
            ReaderState::Payload { expected, bytes } => Some(RequestError::StalledPayload { received: bytes.len(), expected }),
            ReaderState::Discarding => None,
        }
    }
}

/// Parses `bytes` as exactly one request (blank lines before it are ignored).
///
/// Errors: the first [`RequestError`] met (whatever follows it), else
/// [`RequestError::Incomplete`] if the bytes end first, or
/// [`RequestError::TrailingBytes`] if more bytes follow the request.
pub fn parse_request(bytes: &[u8]) -> Result<Request, RequestError> {
    let mut reader = RequestReader::new();
    for (index, &byte) in bytes.iter().enumerate() {
        if let Some(outcome) = reader.push(byte) {
            let trailing = bytes.len() - index - 1;
            return match outcome {
                Ok(_) if trailing > 0 => Err(RequestError::TrailingBytes(trailing)),
                outcome => outcome,
            };
        }
    }
    Err(RequestError::Incomplete)
}

/// Carries out a request and returns its answer line (without the `\n`).
pub fn execute(request: &Request) -> String {
    match request {
        Request::Load(bytes) => match crate::ext::load_kext_bytes(bytes).map(|extension| crate::ext::loaded_summary(&extension)) {
            Ok(Ok(summary)) => alloc::format!("OK loaded {}", summary.replace('`', "")),
            Ok(Err(why)) => alloc::format!("ERR {why}"),
            Err(error) => alloc::format!("ERR {error}"),
        },
        Request::Unload(name) => match crate::ext::unload(name) {
            Ok(()) => alloc::format!("OK unloaded {name}"),
            Err(error) => alloc::format!("ERR {error}"),
        },
        Request::Stats => alloc::format!("OK {}", crate::ext::introspect::all_json()),
        Request::List => {
            let entries: Vec<String> = crate::ext::list()
                .iter()
                .map(|extension| alloc::format!("{}:{}", extension.name, crate::ext::introspect::report(extension).status.word()))
                .collect();
            if entries.is_empty() { "OK".to_string() } else { alloc::format!("OK {}", entries.join(",")) }
        }
    }
}

/// Makes `text` one protocol line: control characters become spaces and it is cut at
/// [`ANSWER_MAX`] bytes (on a character boundary).
pub fn answer_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len().min(ANSWER_MAX));
    for character in text.chars() {
        if line.len() + character.len_utf8() > ANSWER_MAX {
            break;
        }
        line.push(if character.is_control() { ' ' } else { character });
    }
    line
}

/// What a request was, for the kernel console.
fn describe(request: &Request) -> String {
    match request {
        Request::Load(bytes) => alloc::format!("LOAD ({} bytes)", bytes.len()),
        Request::Unload(name) => alloc::format!("UNLOAD {name}"),
        Request::List => "LIST".to_string(),
        Request::Stats => "STATS".to_string(),
    }
}

/// Base address of the console the service listens on; 0 while it is not running.
static LISTENING_AT: AtomicUsize = AtomicUsize::new(0);
/// Requests answered since boot (including refused ones).
static ANSWERED: AtomicU64 = AtomicU64::new(0);
/// How many answers `hotload wait` has already reported.
static WAITED: AtomicU64 = AtomicU64::new(0);
/// The boot runs a script: a `hotload wait` also counts answers given before it began.
static SCRIPTED: AtomicBool = AtomicBool::new(false);
/// The latest answer, for `hotload wait`.
static LAST_ANSWER: spin::Mutex<Option<String>> = spin::Mutex::new(None);

/// Starts the service if the boot mode allows it and the machine has a virtio console;
/// prints one `[boot] hotload: …` line either way.
pub fn init() {
    match crate::bootargs::parse(crate::devicetree::bootargs()) {
        crate::bootargs::Mode::Test { .. } | crate::bootargs::Mode::Bench => return, // see the module notes
        crate::bootargs::Mode::Script(_) => SCRIPTED.store(true, Ordering::Relaxed),
        crate::bootargs::Mode::Interactive => {}
    }
    let channel = match HostChannel::open() {
        Ok(channel) => channel,
        Err(error) => {
            crate::println!("[boot] hotload: off ({error})");
            return;
        }
    };
    let base = channel.slot().base;
    match sched::spawn("hotload", sched::Priority::NORMAL, move || serve(channel)) {
        Ok(_) => {
            LISTENING_AT.store(base, Ordering::Relaxed);
            crate::println!("[boot] hotload: listening on the virtio console at {base:#x} (`cargo xtask load CRATE`)");
        }
        Err(error) => crate::println!("[boot] hotload: off (cannot start its strand: {error})"),
    }
}

/// Gives the hart to other ready strands, and when none is ready waits for the next
/// interrupt (at most one tick).
fn pause() {
    sched::yield_now();
    if sched::ready_count() == 0 {
        sched::wait_idle();
    }
}

/// The service strand's body: poll, parse, answer, until the device fails.
fn serve(mut channel: HostChannel) {
    let quiet_ticks = (RESYNC_QUIET_MILLISECONDS * TICKS_PER_SECOND).div_ceil(1000);
    let stall_ticks = STALL_TIMEOUT_SECONDS * TICKS_PER_SECOND;
    let mut reader = RequestReader::new();
    let mut refusal: Option<RequestError> = None;
    let mut buffer = [0u8; RECEIVE_CHUNK];
    let mut last_data_tick = crate::time::ticks();
    loop {
        let received = match channel.receive(&mut buffer) {
            Ok(count) => count,
            Err(error) => {
                crate::println!("[hotload] virtio console failed: {error}; hot load is off");
                LISTENING_AT.store(0, Ordering::Relaxed);
                return;
            }
        };
        for &byte in &buffer[..received] {
            match reader.push(byte) {
                Some(Ok(request)) => respond(&mut channel, Ok(request)),
                // Answered once the host is quiet (see `RequestReader`); keep the first.
                Some(Err(error)) => refusal = refusal.or(Some(error)),
                None => {}
            }
        }
        let now = crate::time::ticks();
        if received > 0 {
            last_data_tick = now;
        }
        let quiet = now - last_data_tick;
        if reader.is_discarding() && quiet >= quiet_ticks {
            reader.resume();
            if let Some(error) = refusal.take() {
                respond(&mut channel, Err(error));
            }
        } else if !reader.is_idle()
            && quiet >= stall_ticks
            && let Some(error) = reader.abandon()
        {
            respond(&mut channel, Err(error));
        }
        if quiet < BUSY_POLL_TICKS {
            sched::yield_now();
        } else {
            pause();
        }
    }
}

/// Carries out (or refuses) one request, answers the host, logs it and wakes a waiter.
fn respond(channel: &mut HostChannel, outcome: Result<Request, RequestError>) {
    let (what, answer) = match outcome {
        Ok(request) => (describe(&request), execute(&request)),
        Err(error) => ("bad request".to_string(), alloc::format!("ERR {error}")),
    };
    let answer = answer_line(&answer);
    crate::println!("[hotload] {what}: {answer}");
    let mut line = answer.clone().into_bytes();
    line.push(b'\n');
    if let Err(error) = channel.send(&line) {
        crate::println!("[hotload] could not send the answer: {error}");
    }
    crate::arch::csr::without_interrupts(|| *LAST_ANSWER.lock() = Some(answer));
    ANSWERED.fetch_add(1, Ordering::Release);
}

/// Why `hotload wait` returned without an answer.
#[derive(Debug, PartialEq, Eq)]
pub enum WaitError {
    /// The service is not running (no virtio console, or a test/benchmark boot).
    NotListening,
    /// No request arrived in time.
    TimedOut {
        /// The time waited.
        seconds: u64,
    },
}

impl fmt::Display for WaitError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::NotListening => formatter.write_str("hot load is off (no virtio console; boot with `cargo xtask qemu`)"),
            WaitError::TimedOut { seconds } => write!(formatter, "no request from the host within {seconds} s (run `cargo xtask load CRATE`)"),
        }
    }
}

/// Blocks the calling strand until a request has been answered, or until `seconds`
/// have passed, and returns that answer line (`OK …` or `ERR …`).
///
/// Interactively, only answers given after the wait begins count. In a scripted boot, an
/// answer that no earlier wait reported counts too — the host may push before the
/// script reaches its `hotload wait` line, and that request must not be missed.
pub fn wait_for_request(seconds: u64) -> Result<String, WaitError> {
    if LISTENING_AT.load(Ordering::Relaxed) == 0 {
        return Err(WaitError::NotListening);
    }
    if !SCRIPTED.load(Ordering::Relaxed) {
        WAITED.store(ANSWERED.load(Ordering::Acquire), Ordering::Relaxed);
    }
    let deadline = crate::time::ticks().saturating_add(seconds.saturating_mul(TICKS_PER_SECOND));
    loop {
        let answered = ANSWERED.load(Ordering::Acquire);
        if answered > WAITED.load(Ordering::Relaxed) {
            WAITED.store(answered, Ordering::Relaxed);
            let answer = crate::arch::csr::without_interrupts(|| LAST_ANSWER.lock().clone());
            return Ok(answer.unwrap_or_default());
        }
        if crate::time::ticks() >= deadline {
            return Err(WaitError::TimedOut { seconds });
        }
        pause();
    }
}

/// One line for the `devices` command.
pub fn status_line() -> String {
    match LISTENING_AT.load(Ordering::Relaxed) {
        0 => "hotload: off".to_string(),
        base => alloc::format!("hotload: listening on the virtio console at {base:#x}, {} request(s) answered",
            ANSWERED.load(Ordering::Relaxed)),
    }
}
