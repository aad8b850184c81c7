//! The kernel command line (`/chosen/bootargs`, set by `qemu -append`).
//!
//! Recognised words (everything else is ignored, so firmware additions do no harm):
//!
//! | word | meaning |
//! |---|---|
//! | `spindle.mode=test` | run the in-kernel tests and exit with their status |
//! | `spindle.mode=bench` | run the in-kernel benchmarks and exit |
//! | `spindle.test.from=N` | start at test index N (the host resumes after a crash) |
//! | `spindle.test.only=NAME` | run only the regular tests whose names contain NAME, or the harness test called NAME |
//! | `spindle.test.watchdog=S` | fail a test after S seconds (default `param::TEST_WATCHDOG_SECONDS`) |
//! | `spindle.script=L1,L2,…` | run these console lines in order, then exit; each line is percent-encoded |
//! | `spindle.shell=kernel` | skip the user shell (`spsh`): the kernel console runs the script, or interactively |
//! | `spindle.clock=exact\|host` | how budgets are enforced (`crate::time::ClockMode`); default: measured at boot |
//! | `spindle.disk.model=hp97560\|none` | the disk service's timing model (`services::disk`; default `hp97560`) |
//! | `spindle.bench.io=off` | the benchmarks skip the disk groups `disk` and `blockio` (xtask's variant builds) |
//! | `spindle.bench.groups=A,B,…` | the benchmarks run only these groups (`cargo xtask bench --groups`) |

/// What the kernel does after booting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode<'a> {
    /// The interactive console.
    Interactive,
    /// Run console lines from the command line, then exit.
    Script(&'a str),
    /// Run the in-kernel benchmarks.
    Bench,
    /// Run the in-kernel tests.
    Test {
        /// First test index to run.
        from: usize,
        /// Only the tests matching this, if given (see `ktest::run`).
        only: Option<&'a str>,
        /// Watchdog limit in seconds, if given.
        watchdog_seconds: Option<u64>,
    },
}

/// Parses the command line into a [`Mode`].
pub fn parse(command_line: &str) -> Mode<'_> {
    let mut test = false;
    let mut bench = false;
    let mut from = 0;
    let mut only = None;
    let mut script = None;
    let mut watchdog_seconds = None;
    for word in command_line.split_ascii_whitespace() {
        if let Some(value) = word.strip_prefix("spindle.mode=") {
            test = value == "test";
            bench = value == "bench";
        } else if let Some(value) = word.strip_prefix("spindle.test.from=") {
            from = value.parse().unwrap_or(0);
        } else if let Some(value) = word.strip_prefix("spindle.test.only=") {
            only = Some(value);
        } else if let Some(value) = word.strip_prefix("spindle.test.watchdog=") {
            watchdog_seconds = value.parse().ok();
        } else if let Some(value) = word.strip_prefix("spindle.script=") {
            script = Some(value);
        }
    }
    if bench {
        Mode::Bench
    } else if test {
        Mode::Test { from, only, watchdog_seconds }
    } else if let Some(lines) = script {
        Mode::Script(lines)
    } else {
        Mode::Interactive
    }
}

/// Whether the command line asks for the raw kernel console instead of the user shell
/// (`spindle.shell=kernel`).
pub fn kernel_console_requested(command_line: &str) -> bool {
    command_line.split_ascii_whitespace().any(|word| word == "spindle.shell=kernel")
}

/// The value of the first `KEY=VALUE` word whose key is `key` (`spindle.clock`, say).
pub fn value<'a>(command_line: &'a str, key: &str) -> Option<&'a str> {
    command_line.split_ascii_whitespace().find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
}

/// Why a percent-encoded script line could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A `%` not followed by two hex digits.
    BadEscape,
    /// The decoded line does not fit the buffer.
    TooLong,
    /// The decoded bytes are not UTF-8.
    NotUtf8,
}

/// Decodes one percent-encoded line into `buffer`, returning the text.
pub fn decode_line<'b>(encoded: &str, buffer: &'b mut [u8]) -> Result<&'b str, DecodeError> {
    let bytes = encoded.as_bytes();
    let mut length = 0;
    let mut index = 0;
    while index < bytes.len() {
        let byte = if bytes[index] == b'%' {
            let high = bytes.get(index + 1).and_then(|&digit| (digit as char).to_digit(16));
            let low = bytes.get(index + 2).and_then(|&digit| (digit as char).to_digit(16));
            index += 3;
            match (high, low) {
                (Some(high), Some(low)) => (high * 16 + low) as u8,
                _ => return Err(DecodeError::BadEscape),
            }
        } else {
            index += 1;
            bytes[index - 1]
        };
        *buffer.get_mut(length).ok_or(DecodeError::TooLong)? = byte;
        length += 1;
    }
    core::str::from_utf8(&buffer[..length]).map_err(|_| DecodeError::NotUtf8)
}
