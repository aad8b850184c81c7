//! Line editing for console input: what a reader does with each raw byte from the `read`
//! system call (the kernel delivers bytes raw, without echo or editing).
//!
//! [`LineEditor`] is pure (host-tested): it keeps the line being typed and tells the
//! caller what to show for each byte ([`Edit`]). Supported: printable ASCII and UTF-8,
//! backspace and delete (erase one character), Ctrl-U (erase the line), Enter (`\r`,
//! `\n`, or `\r\n` as one). Other control bytes are ignored. A line longer than the
//! editor's capacity keeps its first bytes and reports [`LineError::TooLong`] when it ends.

/// Backspace (Ctrl-H).
pub const BACKSPACE: u8 = 0x08;
/// Delete (what most terminals send for the backspace key).
pub const DELETE: u8 = 0x7f;
/// Ctrl-U: erase the whole line.
pub const ERASE_LINE: u8 = 0x15;

/// What the reader shows for one byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Nothing changes on screen.
    Nothing,
    /// Echo this byte.
    Echo(u8),
    /// Erase this many characters before the cursor.
    Erase(usize),
    /// The line is complete: take it with [`LineEditor::line`], then [`LineEditor::clear`].
    Complete,
}

/// Why a completed line cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineError {
    /// It was longer than the editor's capacity.
    TooLong,
    /// It is not UTF-8.
    NotUtf8,
}

/// The line being typed, at most `N` bytes.
#[derive(Debug)]
pub struct LineEditor<const N: usize> {
    bytes: [u8; N],
    length: usize,
    overflowed: bool,
    after_carriage_return: bool,
}

impl<const N: usize> Default for LineEditor<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> LineEditor<N> {
    /// An empty line.
    pub const fn new() -> Self {
        LineEditor { bytes: [0; N], length: 0, overflowed: false, after_carriage_return: false }
    }

    /// Whether nothing has been typed.
    pub fn is_empty(&self) -> bool {
        self.length == 0 && !self.overflowed
    }

    /// Takes one input byte.
    pub fn feed(&mut self, byte: u8) -> Edit {
        let after_carriage_return = core::mem::replace(&mut self.after_carriage_return, byte == b'\r');
        match byte {
            // The second half of a `\r\n` pair ends nothing.
            b'\n' if after_carriage_return => Edit::Nothing,
            b'\r' | b'\n' => Edit::Complete,
            BACKSPACE | DELETE => {
                if self.length == 0 {
                    return Edit::Nothing;
                }
                // Remove one whole character: its continuation bytes, then its first byte.
                while self.length > 0 && self.bytes[self.length - 1] & 0xc0 == 0x80 {
                    self.length -= 1;
                }
                self.length = self.length.saturating_sub(1);
                Edit::Erase(1)
            }
            ERASE_LINE => {
                let characters = self.line_bytes().iter().filter(|&&byte| byte & 0xc0 != 0x80).count();
                self.length = 0;
                self.overflowed = false;
                if characters == 0 { Edit::Nothing } else { Edit::Erase(characters) }
            }
            0x20..=0x7e | 0x80..=0xff => {
                if self.length < N {
                    self.bytes[self.length] = byte;
                    self.length += 1;
                    Edit::Echo(byte)
                } else {
                    self.overflowed = true;
                    Edit::Nothing
                }
            }
            _ => Edit::Nothing,
        }
    }

    fn line_bytes(&self) -> &[u8] {
        &self.bytes[..self.length]
    }

    /// The completed line.
    pub fn line(&self) -> Result<&str, LineError> {
        if self.overflowed {
            return Err(LineError::TooLong);
        }
        core::str::from_utf8(self.line_bytes()).map_err(|_| LineError::NotUtf8)
    }

    /// Starts a new line.
    pub fn clear(&mut self) {
        self.length = 0;
        self.overflowed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all<const N: usize>(editor: &mut LineEditor<N>, bytes: &[u8]) -> Vec<Edit> {
        bytes.iter().map(|&byte| editor.feed(byte)).collect()
    }

    #[test]
    fn typing_echoes_and_enter_completes() {
        let mut editor = LineEditor::<16>::new();
        assert_eq!(feed_all(&mut editor, b"ps"), [Edit::Echo(b'p'), Edit::Echo(b's')]);
        assert_eq!(editor.feed(b'\r'), Edit::Complete);
        assert_eq!(editor.line(), Ok("ps"));
        editor.clear();
        assert_eq!(editor.feed(b'\n'), Edit::Nothing, "the LF of CR LF is not a second line");
        assert_eq!(editor.feed(b'\n'), Edit::Complete, "a lone LF ends a line");
        assert_eq!(editor.line(), Ok(""));
    }

    #[test]
    fn backspace_delete_and_ctrl_u_edit() {
        let mut editor = LineEditor::<16>::new();
        feed_all(&mut editor, b"ecbo");
        assert_eq!(editor.feed(DELETE), Edit::Erase(1));
        assert_eq!(editor.feed(BACKSPACE), Edit::Erase(1));
        feed_all(&mut editor, b"ho");
        editor.feed(b'\n');
        assert_eq!(editor.line(), Ok("echo"));
        editor.clear();
        assert_eq!(editor.feed(BACKSPACE), Edit::Nothing, "nothing to erase");
        feed_all(&mut editor, "é x".as_bytes());
        assert_eq!(editor.feed(ERASE_LINE), Edit::Erase(3), "three characters, four bytes");
        assert_eq!(editor.feed(ERASE_LINE), Edit::Nothing);
        feed_all(&mut editor, "aé".as_bytes());
        assert_eq!(editor.feed(DELETE), Edit::Erase(1));
        editor.feed(b'\n');
        assert_eq!(editor.line(), Ok("a"), "backspace removes a whole UTF-8 character");
    }

    #[test]
    fn control_bytes_are_ignored_and_long_lines_are_reported() {
        let mut editor = LineEditor::<4>::new();
        assert_eq!(editor.feed(0x03), Edit::Nothing);
        assert_eq!(editor.feed(0x1b), Edit::Nothing);
        feed_all(&mut editor, b"abcdef");
        editor.feed(b'\n');
        assert_eq!(editor.line(), Err(LineError::TooLong));
        editor.clear();
        assert!(editor.is_empty());
        feed_all(&mut editor, &[0xff, b'\n']);
        assert_eq!(editor.line(), Err(LineError::NotUtf8));
    }
}
