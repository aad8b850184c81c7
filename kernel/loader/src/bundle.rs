//! The boot bundle: the extensions packed into a boot image, and which to load at boot.
//!
//! `cargo xtask` builds a bundle of `.kext` files and hands it to QEMU as the initial
//! RAM disk; the kernel finds it through the device tree (`linux,initrd-start/end`),
//! lists its extensions in `ext list`, loads the boot list at boot, and loads the others
//! on `ext load NAME`. Layout (little-endian):
//!
//! ```text
//! "SPBUNDL2"                       8-byte magic
//! u32 entry count, u32 boot-list length, boot list (UTF-8 names separated by '\n')
//! per entry: u32 name length, name (UTF-8), u32 payload length,
//!            zero bytes up to the next multiple of 16 from the bundle's start,
//!            payload (.kext or program bytes)
//! ```
//!
//! The padding puts every payload on a 16-byte boundary (QEMU loads the bundle page-aligned),
//! so a program's segments — at page-aligned offsets in its ELF file — are read from the
//! bundle with aligned word copies (`SPBUNDL1` had no padding: a misaligned copy took about
//! four times as long, 5,182 instructions for a page of a program's image).
//!
//! The parser checks every length against the buffer and never panics; payloads are
//! verified later by [`crate::open`] like any other `.kext`.

use alloc::vec::Vec;
use core::fmt;

/// The bundle's magic bytes.
pub const BUNDLE_MAGIC: &[u8; 8] = b"SPBUNDL2";
/// Every payload starts at a multiple of this many bytes from the bundle's start.
pub const PAYLOAD_ALIGNMENT: usize = 16;
/// Most entries a bundle may hold.
pub const MAX_ENTRIES: usize = 256;
/// Longest entry name.
pub const MAX_NAME: usize = 64;

/// Why a bundle was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BundleError {
    /// The buffer ended inside the named part.
    Truncated {
        /// Which part.
        what: &'static str,
    },
    /// The magic bytes are wrong.
    BadMagic,
    /// More than [`MAX_ENTRIES`] entries.
    TooManyEntries(usize),
    /// A name is empty, too long, or not UTF-8.
    BadName,
    /// The boot list is not UTF-8.
    BadBootList,
    /// Two entries have the same name.
    DuplicateName,
    /// The boot list names an extension the bundle lacks.
    UnknownBootEntry,
    /// Bytes follow the last entry.
    TrailingBytes,
    /// The padding before a payload is not zero.
    BadPadding,
}

impl fmt::Display for BundleError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BundleError::Truncated { what } => write!(formatter, "bundle truncated in {what}"),
            BundleError::BadMagic => formatter.write_str("not a Spindle boot bundle (bad magic)"),
            BundleError::TooManyEntries(count) => write!(formatter, "{count} entries (at most {MAX_ENTRIES})"),
            BundleError::BadName => formatter.write_str("an entry name is empty, longer than 64 bytes or not UTF-8"),
            BundleError::BadBootList => formatter.write_str("the boot list is not UTF-8"),
            BundleError::DuplicateName => formatter.write_str("two entries have the same name"),
            BundleError::UnknownBootEntry => formatter.write_str("the boot list names an extension the bundle lacks"),
            BundleError::TrailingBytes => formatter.write_str("bytes after the last entry"),
            BundleError::BadPadding => formatter.write_str("the padding before a payload is not zero"),
        }
    }
}

impl core::error::Error for BundleError {}

/// One bundled extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundleEntry<'a> {
    /// Extension name.
    pub name: &'a str,
    /// The `.kext` bytes.
    pub payload: &'a [u8],
}

/// A parsed bundle borrowing its buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle<'a> {
    /// Entries in file order.
    pub entries: Vec<BundleEntry<'a>>,
    /// Names to load at boot, in order.
    pub boot: Vec<&'a str>,
}

impl<'a> Bundle<'a> {
    /// The entry called `name`.
    pub fn entry(&self, name: &str) -> Option<&BundleEntry<'a>> {
        self.entries.iter().find(|entry| entry.name == name)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, length: usize, what: &'static str) -> Result<&'a [u8], BundleError> {
        let end = self.position.checked_add(length).ok_or(BundleError::Truncated { what })?;
        let slice = self.bytes.get(self.position..end).ok_or(BundleError::Truncated { what })?;
        self.position = end;
        Ok(slice)
    }

    fn u32(&mut self, what: &'static str) -> Result<usize, BundleError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize)
    }
}

/// Parses a bundle.
pub fn parse(bytes: &[u8]) -> Result<Bundle<'_>, BundleError> {
    let mut reader = Reader { bytes, position: 0 };
    if reader.take(8, "magic")? != BUNDLE_MAGIC {
        return Err(BundleError::BadMagic);
    }
    let count = reader.u32("entry count")?;
    if count > MAX_ENTRIES {
        return Err(BundleError::TooManyEntries(count));
    }
    let boot_length = reader.u32("boot list length")?;
    let boot_text = core::str::from_utf8(reader.take(boot_length, "boot list")?).map_err(|_| BundleError::BadBootList)?;
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let name_length = reader.u32("entry name length")?;
        if name_length == 0 || name_length > MAX_NAME {
            return Err(BundleError::BadName);
        }
        let name = core::str::from_utf8(reader.take(name_length, "entry name")?).map_err(|_| BundleError::BadName)?;
        let payload_length = reader.u32("entry payload length")?;
        if reader.take(padding(reader.position), "padding")?.iter().any(|&byte| byte != 0) {
            return Err(BundleError::BadPadding);
        }
        let payload = reader.take(payload_length, "entry payload")?;
        if entries.iter().any(|entry: &BundleEntry<'_>| entry.name == name) {
            return Err(BundleError::DuplicateName);
        }
        entries.push(BundleEntry { name, payload });
    }
    if reader.position != bytes.len() {
        return Err(BundleError::TrailingBytes);
    }
    let boot: Vec<&str> = boot_text.split('\n').filter(|name| !name.is_empty()).collect();
    if boot.iter().any(|name| !entries.iter().any(|entry| entry.name == *name)) {
        return Err(BundleError::UnknownBootEntry);
    }
    Ok(Bundle { entries, boot })
}

/// Zero bytes after `position` up to the next multiple of [`PAYLOAD_ALIGNMENT`].
fn padding(position: usize) -> usize {
    position.next_multiple_of(PAYLOAD_ALIGNMENT) - position
}

/// Builds a bundle (the trusted builder's side; also used by tests).
pub fn build(entries: &[(&str, &[u8])], boot: &[&str]) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(BUNDLE_MAGIC);
    bytes.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    let boot_text = boot.join("\n");
    bytes.extend_from_slice(&(boot_text.len() as u32).to_le_bytes());
    bytes.extend_from_slice(boot_text.as_bytes());
    for (name, payload) in entries {
        bytes.extend_from_slice(&(name.len() as u32).to_le_bytes());
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.resize(bytes.len() + padding(bytes.len()), 0);
        bytes.extend_from_slice(payload);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes = build(&[("hello", b"kext-1"), ("faulty", b"kext-22")], &["hello"]);
        let bundle = parse(&bytes).unwrap();
        assert_eq!(bundle.entries.len(), 2);
        assert_eq!(bundle.entry("faulty").unwrap().payload, b"kext-22");
        assert_eq!(bundle.boot, ["hello"]);
    }

    #[test]
    fn payloads_start_aligned_and_padding_must_be_zero() {
        let bytes = build(&[("a", b"x"), ("bcd", b"yz"), ("hello", b"kext-1")], &[]);
        let bundle = parse(&bytes).unwrap();
        for entry in &bundle.entries {
            let offset = entry.payload.as_ptr() as usize - bytes.as_ptr() as usize;
            assert_eq!(offset % PAYLOAD_ALIGNMENT, 0, "{} at {offset}", entry.name);
        }
        // The first entry's padding: after the header (8 + 4 + 4), "a"'s length and name,
        // and its payload length.
        let padding_at = 8 + 4 + 4 + 4 + 1 + 4;
        let mut bad = bytes.clone();
        bad[padding_at] = 1;
        assert_eq!(parse(&bad), Err(BundleError::BadPadding));
    }

    #[test]
    fn every_truncation_is_refused_without_panicking() {
        let bytes = build(&[("hello", b"kext-1"), ("faulty", b"kext-22")], &["hello"]);
        for length in 0..bytes.len() {
            assert!(parse(&bytes[..length]).is_err(), "prefix of {length} bytes parsed");
        }
    }

    #[test]
    fn specific_errors() {
        assert_eq!(parse(b"NOTABUNDLE000000"), Err(BundleError::BadMagic));
        let mut bytes = build(&[("a", b"x")], &[]);
        bytes.push(0);
        assert_eq!(parse(&bytes), Err(BundleError::TrailingBytes));
        assert_eq!(parse(&build(&[("a", b"x"), ("a", b"y")], &[])), Err(BundleError::DuplicateName));
        assert_eq!(parse(&build(&[("a", b"x")], &["b"])), Err(BundleError::UnknownBootEntry));
        assert_eq!(parse(&build(&[("", b"x")], &[])), Err(BundleError::BadName));
    }
}
