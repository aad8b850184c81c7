//! Console output: `print!` and `println!` format into a [`LineBuffer`] on the stack and
//! hand it to the kernel in as few `write` calls as possible (one per line, for lines up
//! to [`LINE_BUFFER_SIZE`] bytes), so lines of different processes do not interleave.

use core::fmt;

/// Bytes formatted before a `write` system call is made.
pub const LINE_BUFFER_SIZE: usize = 256;

/// Collects formatted text and passes it to `sink` in chunks of at most `N` bytes.
pub struct LineBuffer<const N: usize, Sink: FnMut(&[u8])> {
    bytes: [u8; N],
    length: usize,
    sink: Sink,
}

impl<const N: usize, Sink: FnMut(&[u8])> LineBuffer<N, Sink> {
    /// An empty buffer draining into `sink`.
    pub fn new(sink: Sink) -> Self {
        LineBuffer { bytes: [0; N], length: 0, sink }
    }

    /// Passes what is buffered to the sink.
    pub fn flush(&mut self) {
        if self.length > 0 {
            (self.sink)(&self.bytes[..self.length]);
            self.length = 0;
        }
    }
}

impl<const N: usize, Sink: FnMut(&[u8])> fmt::Write for LineBuffer<N, Sink> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            if self.length == N {
                self.flush();
            }
            let take = rest.len().min(N - self.length);
            self.bytes[self.length..self.length + take].copy_from_slice(&rest[..take]);
            self.length += take;
            rest = &rest[take..];
        }
        Ok(())
    }
}

/// Writes formatted text to the console (what `print!` expands to).
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub fn print(arguments: fmt::Arguments<'_>) {
    let mut buffer = LineBuffer::<LINE_BUFFER_SIZE, _>::new(|bytes: &[u8]| {
        // Output is best effort: there is nowhere to report a failed console write.
        let _ = crate::arch::write(crate::arch::CONSOLE, bytes);
    });
    let _ = fmt::Write::write_fmt(&mut buffer, arguments);
    buffer.flush();
}

/// Prints to the console.
#[macro_export]
macro_rules! print {
    ($($argument:tt)*) => { $crate::io::print(format_args!($($argument)*)) };
}

/// Prints a line to the console.
#[macro_export]
macro_rules! println {
    () => { $crate::io::print(format_args!("\n")) };
    ($($argument:tt)*) => { $crate::io::print(format_args!("{}\n", format_args!($($argument)*))) };
}

#[cfg(test)]
mod tests {
    use core::fmt::Write;

    use super::LineBuffer;

    #[test]
    fn short_text_is_one_chunk_and_long_text_is_split() {
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        {
            let mut buffer = LineBuffer::<8, _>::new(|bytes: &[u8]| chunks.push(bytes.to_vec()));
            write!(buffer, "ab{}", 12).unwrap();
            buffer.flush();
            buffer.flush();
            write!(buffer, "0123456789abcdefXY").unwrap();
            buffer.flush();
        }
        assert_eq!(chunks, [b"ab12".to_vec(), b"01234567".to_vec(), b"89abcdef".to_vec(), b"XY".to_vec()]);
    }
}
