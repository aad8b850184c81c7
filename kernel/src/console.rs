//! The kernel console on the NS16550A UART: formatted output and line input.
//!
//! Output is polled (the UART's transmit FIFO drains at QEMU speed). Input is polled
//! too: the interactive console waits with `wfi` between polls and the timer tick wakes
//! it, so keystrokes are seen within one tick. A PLIC-driven UART comes later.
//!
//! User programs read console input through [`read_input`] (the `read` system call):
//! the UART's bytes, raw; or, in script mode, the script's lines set by
//! [`set_script_input`], then end of input.

use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::arch::csr;
use crate::memlayout::{DEFAULT_UART_BASE, SMALL_DEVICE_WINDOW};
use crate::mmio::MmioRegion;

const RECEIVE_BUFFER: usize = 0;
const TRANSMIT_HOLDING: usize = 0;
const INTERRUPT_ENABLE: usize = 1;
const FIFO_CONTROL: usize = 2;
const LINE_CONTROL: usize = 3;
const LINE_STATUS: usize = 5;
const LINE_STATUS_DATA_READY: u8 = 1 << 0;
const LINE_STATUS_TRANSMIT_EMPTY: u8 = 1 << 5;
const LINE_CONTROL_8N1: u8 = 0b11;
/// Enable the FIFOs and clear the transmit FIFO only: input typed (or piped) while the
/// kernel was booting stays in the receive FIFO and is read by the console.
const FIFO_ENABLE_AND_CLEAR: u8 = 0b101;

static UART_BASE: AtomicUsize = AtomicUsize::new(DEFAULT_UART_BASE);
static CONSOLE_LOCK: spin::Mutex<()> = spin::Mutex::new(());

fn uart() -> MmioRegion {
    // SAFETY: UART_BASE holds either the QEMU virt default or the address of the
    // ns16550a node from the device tree; both are mapped device memory (identity
    // before paging, and mapped by `mm::kernel_space` after).
    unsafe { MmioRegion::new(UART_BASE.load(Ordering::Relaxed), SMALL_DEVICE_WINDOW) }
}

/// Switches the console to the UART at `base` (from the device tree) and initialises it.
pub fn init(base: usize) {
    UART_BASE.store(base, Ordering::Relaxed);
    let uart = uart();
    uart.write_u8(INTERRUPT_ENABLE, 0);
    uart.write_u8(LINE_CONTROL, LINE_CONTROL_8N1);
    uart.write_u8(FIFO_CONTROL, FIFO_ENABLE_AND_CLEAR);
}

/// Physical address of the console UART.
pub fn uart_base() -> usize {
    UART_BASE.load(Ordering::Relaxed)
}

fn write_byte(uart: &MmioRegion, byte: u8) {
    while uart.read_u8(LINE_STATUS) & LINE_STATUS_TRANSMIT_EMPTY == 0 {
        core::hint::spin_loop();
    }
    uart.write_u8(TRANSMIT_HOLDING, byte);
}

fn write_bytes(bytes: &[u8]) {
    let uart = uart();
    for &byte in bytes {
        if byte == b'\n' {
            write_byte(&uart, b'\r');
        }
        write_byte(&uart, byte);
    }
}

/// Reads one byte if the UART has one.
pub fn try_read_byte() -> Option<u8> {
    let uart = uart();
    (uart.read_u8(LINE_STATUS) & LINE_STATUS_DATA_READY != 0).then(|| uart.read_u8(RECEIVE_BUFFER))
}

struct Writer;

impl fmt::Write for Writer {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        write_bytes(text.as_bytes());
        Ok(())
    }
}

/// Prints formatted text with the console lock held and interrupts off.
pub fn print_fmt(arguments: fmt::Arguments<'_>) {
    csr::without_interrupts(|| {
        let _guard = CONSOLE_LOCK.lock();
        let _ = fmt::Write::write_fmt(&mut Writer, arguments);
    });
}

/// Prints without taking the console lock: for panic and fatal-fault paths, where the
/// lock may be held by the code that failed.
pub fn print_fmt_unlocked(arguments: fmt::Arguments<'_>) {
    let _ = fmt::Write::write_fmt(&mut Writer, arguments);
}

/// A `fmt::Write` sink for the console that does not lock (see [`print_fmt_unlocked`]).
pub fn unlocked_writer() -> impl fmt::Write {
    Writer
}

/// Prints to the kernel console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::console::print_fmt(format_args!($($arg)*)) };
}

/// Prints a line to the kernel console.
#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => { $crate::console::print_fmt(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Outcome of reading a console line.
pub enum LineInput {
    /// A complete line of this many bytes is in the buffer.
    Line(usize),
    /// The line was longer than the buffer; the excess was discarded.
    TooLong,
}

/// Reads a line with echo and basic editing (backspace/delete), waiting with `wfi`.
pub fn read_line(buffer: &mut [u8]) -> LineInput {
    const BACKSPACE: u8 = 0x08;
    const DELETE: u8 = 0x7f;
    let mut length = 0;
    let mut overflowed = false;
    loop {
        let Some(byte) = try_read_byte() else {
            crate::sched::wait_idle();
            continue;
        };
        match byte {
            b'\r' | b'\n' => {
                print_fmt(format_args!("\n"));
                return if overflowed { LineInput::TooLong } else { LineInput::Line(length) };
            }
            BACKSPACE | DELETE => {
                if length > 0 {
                    length -= 1;
                    print_fmt(format_args!("\x08 \x08"));
                }
            }
            0x20..=0x7e => {
                if length < buffer.len() {
                    buffer[length] = byte;
                    length += 1;
                    print_fmt(format_args!("{}", byte as char));
                } else {
                    overflowed = true;
                }
            }
            _ => {}
        }
    }
}

/// The non-interactive input of user programs: a script's bytes and how far they are read.
struct ScriptInput {
    bytes: Vec<u8>,
    position: usize,
}

/// Set in script mode: user programs read this instead of the UART.
static SCRIPT_INPUT: spin::Mutex<Option<ScriptInput>> = spin::Mutex::new(None);

/// Makes `text` the console input of user programs (script mode): [`read_input`] returns
/// its bytes, then [`Input::Ended`]. Replaces any earlier script.
pub fn set_script_input(text: &str) {
    csr::without_interrupts(|| *SCRIPT_INPUT.lock() = Some(ScriptInput { bytes: text.as_bytes().to_vec(), position: 0 }));
}

/// Returns user programs' console input to the UART.
pub fn clear_script_input() {
    csr::without_interrupts(|| *SCRIPT_INPUT.lock() = None);
}

/// What [`read_input`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// This many bytes were copied into the buffer.
    Bytes(usize),
    /// The script is used up (never for the UART).
    Ended,
    /// Nothing is available yet (the UART has no byte waiting).
    NotYet,
}

/// Reads console input for a user program without blocking: script bytes in script
/// mode, else whatever the UART has received (raw: no echo, no editing), at most
/// `buffer.len()` bytes.
pub fn read_input(buffer: &mut [u8]) -> Input {
    let scripted = csr::without_interrupts(|| {
        let mut input = SCRIPT_INPUT.lock();
        let script = input.as_mut()?;
        let rest = &script.bytes[script.position..];
        if rest.is_empty() {
            return Some(Input::Ended);
        }
        let count = rest.len().min(buffer.len());
        buffer[..count].copy_from_slice(&rest[..count]);
        script.position += count;
        Some(Input::Bytes(count))
    });
    if let Some(input) = scripted {
        return input;
    }
    let mut count = 0;
    while count < buffer.len() {
        let Some(byte) = try_read_byte() else { break };
        buffer[count] = byte;
        count += 1;
    }
    if count == 0 { Input::NotYet } else { Input::Bytes(count) }
}

/// Longest text one `spindle_console_write` call may print.
pub const CONSOLE_WRITE_MAX: usize = 4096;

/// Domain `console` of the kernel functions (`spindle_abi::host`).
impl spindle_abi::host::domains::Console for crate::ext::glue::KernelFunctions {
    /// Prints `text` (invalid UTF-8 shown replaced); a text longer than
    /// [`CONSOLE_WRITE_MAX`] prints a warning instead.
    fn console_write(&self, text: &[u8]) {
        if text.len() > CONSOLE_WRITE_MAX {
            crate::println!("[ext] console_write refused: {} bytes is longer than the {CONSOLE_WRITE_MAX}-byte limit", text.len());
        } else {
            crate::print!("{}", alloc::string::String::from_utf8_lossy(text));
        }
    }
}
