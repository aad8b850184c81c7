//! Console input and kernel listings for user programs (bare-metal RISC-V only).
//!
//! [`LineReader`] reads raw console bytes with the `read` system call, edits them with
//! [`LineEditor`] and echoes what the editor says, so a program gets whole lines; in a
//! non-interactive run the kernel feeds the script's lines as input and `read` returns 0
//! at their end ([`ReadLine::End`]). [`with_listing`] fetches a kernel listing (`events`,
//! `processes`, `ext_list`, `last_error`) whatever its length.

use crate::arch::{self, AnonymousRegion, CONSOLE, Error, MAX_COMMAND_LINE};
use crate::line::{Edit, LineEditor, LineError};

/// Bytes taken from the kernel per `read`.
const READ_CHUNK: usize = 256;
/// Listings up to this length are fetched into a stack buffer; longer ones into an
/// anonymous mapping.
const STACK_LISTING: usize = 2048;
/// How often [`with_listing`] retries when the listing grew between two calls.
const LISTING_ATTEMPTS: usize = 3;

/// What [`LineReader::read_line`] got.
#[derive(Debug)]
pub enum ReadLine<'line> {
    /// A complete line (without its line break).
    Line(&'line str),
    /// A line that cannot be used (too long, not UTF-8).
    Bad(LineError),
    /// The input ended (a script is used up).
    End,
    /// The `read` call failed.
    Failed(Error),
}

/// Reads edited, echoed lines from the console.
pub struct LineReader {
    chunk: [u8; READ_CHUNK],
    start: usize,
    end: usize,
    editor: LineEditor<MAX_COMMAND_LINE>,
    ended: bool,
}

impl Default for LineReader {
    fn default() -> Self {
        Self::new()
    }
}

impl LineReader {
    /// A reader with nothing buffered.
    pub const fn new() -> LineReader {
        LineReader { chunk: [0; READ_CHUNK], start: 0, end: 0, editor: LineEditor::new(), ended: false }
    }

    /// Reads the next line, echoing it as it is typed (or fed). A last line without a
    /// line break still counts as a line.
    pub fn read_line(&mut self) -> ReadLine<'_> {
        self.editor.clear();
        let mut echo = Echo::default();
        loop {
            if self.start == self.end {
                echo.flush();
                if self.ended {
                    return ReadLine::End;
                }
                match arch::read(CONSOLE, &mut self.chunk) {
                    Ok(0) => {
                        self.ended = true;
                        if self.editor.is_empty() {
                            return ReadLine::End;
                        }
                        echo.push(b"\n");
                        echo.flush();
                        break;
                    }
                    Ok(count) => {
                        self.start = 0;
                        self.end = count.min(READ_CHUNK);
                    }
                    Err(error) => return ReadLine::Failed(error),
                }
            }
            let byte = self.chunk[self.start];
            self.start += 1;
            match self.editor.feed(byte) {
                Edit::Nothing => {}
                Edit::Echo(byte) => echo.push(&[byte]),
                Edit::Erase(count) => {
                    for _ in 0..count {
                        echo.push(b"\x08 \x08");
                    }
                }
                Edit::Complete => {
                    echo.push(b"\n");
                    echo.flush();
                    break;
                }
            }
        }
        match self.editor.line() {
            Ok(line) => ReadLine::Line(line),
            Err(error) => ReadLine::Bad(error),
        }
    }
}

/// Echo bytes collected and written in one `write`.
struct Echo {
    bytes: [u8; 64],
    length: usize,
}

impl Default for Echo {
    fn default() -> Self {
        Echo { bytes: [0; 64], length: 0 }
    }
}

impl Echo {
    fn push(&mut self, bytes: &[u8]) {
        if self.length + bytes.len() > self.bytes.len() {
            self.flush();
        }
        self.bytes[self.length..self.length + bytes.len()].copy_from_slice(bytes);
        self.length += bytes.len();
    }

    fn flush(&mut self) {
        if self.length > 0 {
            // Echo is best effort, like all console output.
            let _ = arch::write(CONSOLE, &self.bytes[..self.length]);
            self.length = 0;
        }
    }
}

/// Calls `fetch` (a listing call: copy up to the buffer's length, return the full length)
/// with a buffer large enough for the whole listing and passes the text to `use_text`.
///
/// Errors: the call's own; [`Error::NoMemory`] if no mapping can hold the listing or it
/// keeps growing.
pub fn with_listing<T>(fetch: fn(&mut [u8]) -> Result<usize, Error>, use_text: impl FnOnce(&str) -> T) -> Result<T, Error> {
    let mut buffer = [0u8; STACK_LISTING];
    let total = fetch(&mut buffer)?;
    if total <= buffer.len() {
        return Ok(use_text(text_of(&buffer[..total])));
    }
    let mut wanted = total;
    for _ in 0..LISTING_ATTEMPTS {
        // Room for some growth between the two calls.
        let mut region = AnonymousRegion::map(wanted + wanted / 4)?;
        let memory = region.as_mut_slice();
        let total = fetch(memory)?;
        if total <= memory.len() {
            return Ok(use_text(text_of(&memory[..total])));
        }
        wanted = total;
    }
    Err(Error::NoMemory)
}

/// The UTF-8 text of `bytes` (up to the first invalid byte; kernel listings are UTF-8).
fn text_of(bytes: &[u8]) -> &str {
    match core::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => core::str::from_utf8(&bytes[..error.valid_up_to()]).unwrap_or(""),
    }
}
