//! The extension manifest: a small line-based `key = value` text, parsed strictly.
//!
//! Format (documented with examples in `docs/kext-format.md`):
//!
//! ```text
//! # Lines starting with '#' and blank lines are ignored.
//! name = hotlist_evict
//! version = 1.0.0
//! entry = spindle_extension_init
//! events = mm.Reclaim, mm.Allocate
//! domains = mm, console
//! budget_us = 500
//! memory_bytes = 1_048_576
//! ```
//!
//! Every key is required and appears exactly once; lists may be empty (`events =`).
//! Keys and values are trimmed of ASCII spaces and tabs; there is no quoting and no
//! escaping, so what a value may contain is fixed by its key (see [`Manifest`]).
//! [`Manifest::to_text`] writes the canonical form, which parses back to the same value.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

pub use spindle_abi::extension::MAX_BUDGET_MICROSECONDS;

/// Longest extension name, in bytes.
pub const MAX_NAME_LEN: usize = 32;
/// Longest version string, in bytes.
pub const MAX_VERSION_LEN: usize = 32;
/// Longest entry-symbol name, in bytes (room for a name plus a signature fingerprint).
pub const MAX_SYMBOL_LEN: usize = 128;
/// Longest event or domain name, in bytes.
pub const MAX_LIST_ITEM_LEN: usize = 64;
/// Most events or domains one manifest may list.
pub const MAX_LIST_ITEMS: usize = 64;

/// The keys of a manifest, in canonical order.
pub const KEYS: [&str; 7] = [
    "name",
    "version",
    "entry",
    "events",
    "domains",
    "budget_us",
    "memory_bytes",
];

/// What an extension declares about itself; checked by the loader before anything runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// `name`: 1..=[`MAX_NAME_LEN`] bytes of `a-z 0-9 _ -`, starting with a letter.
    pub name: String,
    /// `version`: 1..=[`MAX_VERSION_LEN`] bytes of `A-Z a-z 0-9 . + -` (e.g. `1.2.0`).
    pub version: String,
    /// `entry`: the exported symbol the kernel calls to initialise the extension
    /// (a C identifier, at most [`MAX_SYMBOL_LEN`] bytes).
    pub entry: String,
    /// `events`: the events the extension binds handlers to (e.g. `mm.Reclaim`),
    /// comma-separated, no duplicates.
    pub events: Vec<String>,
    /// `domains`: the domains it imports symbols from, comma-separated, no duplicates.
    pub domains: Vec<String>,
    /// `budget_us`: the time budget per handler invocation, in microseconds, 1 ..=
    /// [`MAX_BUDGET_MICROSECONDS`] (one second).
    pub budget_microseconds: u64,
    /// `memory_bytes`: the extension arena's quota, in bytes (> 0).
    pub memory_quota_bytes: u64,
}

/// Why a manifest was refused. Line numbers are 1-based.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManifestError {
    /// The manifest bytes are not UTF-8.
    NotUtf8,
    /// A line that is neither blank, a comment, nor `key = value`.
    MissingEquals {
        /// The offending line.
        line: usize,
    },
    /// A key this format does not define.
    UnknownKey {
        /// The line it is on.
        line: usize,
        /// The key as written.
        key: String,
    },
    /// A key given twice.
    DuplicateKey {
        /// The line of the second occurrence.
        line: usize,
        /// The key.
        key: &'static str,
    },
    /// A required key is absent.
    MissingKey {
        /// The key.
        key: &'static str,
    },
    /// `name` is longer than [`MAX_NAME_LEN`].
    NameTooLong {
        /// Its length in bytes.
        length: usize,
        /// [`MAX_NAME_LEN`].
        max: usize,
    },
    /// A value is empty, too long, or has a character its key does not allow.
    BadValue {
        /// The line it is on.
        line: usize,
        /// The key.
        key: &'static str,
    },
    /// A number is not decimal digits (with optional `_` separators), or exceeds `u64`.
    BadNumber {
        /// The line it is on.
        line: usize,
        /// The key.
        key: &'static str,
    },
    /// A number that must be positive is zero.
    Zero {
        /// The line it is on.
        line: usize,
        /// The key.
        key: &'static str,
    },
    /// `budget_us` is above [`MAX_BUDGET_MICROSECONDS`] (one second per handler call).
    BudgetAboveLimit {
        /// The line it is on.
        line: usize,
        /// The budget declared, in microseconds.
        budget_microseconds: u64,
        /// [`MAX_BUDGET_MICROSECONDS`].
        limit_microseconds: u64,
    },
    /// A list names the same item twice.
    DuplicateItem {
        /// The line it is on.
        line: usize,
        /// The key.
        key: &'static str,
        /// The repeated item.
        item: String,
    },
    /// A list has more than [`MAX_LIST_ITEMS`] items.
    TooManyItems {
        /// The line it is on.
        line: usize,
        /// The key.
        key: &'static str,
    },
}

impl fmt::Display for ManifestError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestError::NotUtf8 => write!(formatter, "manifest is not UTF-8"),
            ManifestError::MissingEquals { line } => {
                write!(formatter, "manifest line {line}: expected `key = value`")
            }
            ManifestError::UnknownKey { line, key } => {
                write!(formatter, "manifest line {line}: unknown key `{key}`")
            }
            ManifestError::DuplicateKey { line, key } => {
                write!(formatter, "manifest line {line}: key `{key}` given twice")
            }
            ManifestError::MissingKey { key } => {
                write!(formatter, "manifest: required key `{key}` is missing")
            }
            ManifestError::NameTooLong { length, max } => {
                write!(
                    formatter,
                    "manifest: name is {length} bytes, at most {max} allowed"
                )
            }
            ManifestError::BadValue { line, key } => {
                write!(formatter, "manifest line {line}: invalid value for `{key}`")
            }
            ManifestError::BadNumber { line, key } => {
                write!(
                    formatter,
                    "manifest line {line}: `{key}` is not a decimal u64"
                )
            }
            ManifestError::Zero { line, key } => {
                write!(
                    formatter,
                    "manifest line {line}: `{key}` must be greater than zero"
                )
            }
            ManifestError::BudgetAboveLimit {
                line,
                budget_microseconds,
                limit_microseconds,
            } => {
                write!(
                    formatter,
                    "manifest line {line}: `budget_us` is {budget_microseconds} us, above the limit of {limit_microseconds} us (MAX_BUDGET_MICROSECONDS: one second per handler call)"
                )
            }
            ManifestError::DuplicateItem { line, key, item } => {
                write!(
                    formatter,
                    "manifest line {line}: `{key}` lists `{item}` twice"
                )
            }
            ManifestError::TooManyItems { line, key } => {
                write!(
                    formatter,
                    "manifest line {line}: `{key}` has more than {MAX_LIST_ITEMS} items"
                )
            }
        }
    }
}

impl core::error::Error for ManifestError {}

impl Manifest {
    /// Parses manifest bytes (as found in a `.kext`).
    ///
    /// Errors: [`ManifestError::NotUtf8`], then whatever [`Manifest::parse`] returns.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let text = core::str::from_utf8(bytes).map_err(|_| ManifestError::NotUtf8)?;
        Manifest::parse(text)
    }

    /// Parses manifest text.
    ///
    /// Errors, checked line by line in order: [`ManifestError::MissingEquals`],
    /// [`ManifestError::UnknownKey`], [`ManifestError::DuplicateKey`], then the value
    /// checks ([`ManifestError::NameTooLong`], [`ManifestError::BadValue`],
    /// [`ManifestError::BadNumber`], [`ManifestError::Zero`],
    /// [`ManifestError::DuplicateItem`], [`ManifestError::TooManyItems`]); after the last
    /// line, [`ManifestError::MissingKey`] for the first absent key in [`KEYS`] order.
    pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let mut fields = PartialManifest::default();
        for (index, raw_line) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw_line.trim_matches(is_blank);
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let (raw_key, raw_value) = content
                .split_once('=')
                .ok_or(ManifestError::MissingEquals { line })?;
            let key_text = raw_key.trim_matches(is_blank);
            let value = raw_value.trim_matches(is_blank);
            if key_text.is_empty() {
                return Err(ManifestError::MissingEquals { line });
            }
            let key = KEYS
                .iter()
                .copied()
                .find(|known| *known == key_text)
                .ok_or_else(|| ManifestError::UnknownKey {
                    line,
                    key: key_text.to_string(),
                })?;
            fields.set(key, value, line)?;
        }
        fields.finish()
    }

    /// Writes the canonical text form: every key once, in [`KEYS`] order, lists joined
    /// with `", "`. Parsing the result gives back `self` when `self` is valid.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        let lines: [(&str, String); 7] = [
            ("name", self.name.clone()),
            ("version", self.version.clone()),
            ("entry", self.entry.clone()),
            ("events", self.events.join(", ")),
            ("domains", self.domains.join(", ")),
            ("budget_us", self.budget_microseconds.to_string()),
            ("memory_bytes", self.memory_quota_bytes.to_string()),
        ];
        for (key, value) in lines {
            text.push_str(key);
            text.push_str(" = ");
            text.push_str(&value);
            text.push('\n');
        }
        text
    }
}

/// Spaces and tabs, the only whitespace the format trims.
fn is_blank(character: char) -> bool {
    character == ' ' || character == '\t'
}

/// The fields seen so far while parsing.
#[derive(Default)]
struct PartialManifest {
    name: Option<String>,
    version: Option<String>,
    entry: Option<String>,
    events: Option<Vec<String>>,
    domains: Option<Vec<String>>,
    budget_microseconds: Option<u64>,
    memory_quota_bytes: Option<u64>,
}

impl PartialManifest {
    /// Validates and records one `key = value`.
    fn set(&mut self, key: &'static str, value: &str, line: usize) -> Result<(), ManifestError> {
        let already_set = match key {
            "name" => self.name.is_some(),
            "version" => self.version.is_some(),
            "entry" => self.entry.is_some(),
            "events" => self.events.is_some(),
            "domains" => self.domains.is_some(),
            "budget_us" => self.budget_microseconds.is_some(),
            _ => self.memory_quota_bytes.is_some(),
        };
        if already_set {
            return Err(ManifestError::DuplicateKey { line, key });
        }
        match key {
            "name" => {
                if value.len() > MAX_NAME_LEN {
                    return Err(ManifestError::NameTooLong {
                        length: value.len(),
                        max: MAX_NAME_LEN,
                    });
                }
                if !is_extension_name(value) {
                    return Err(ManifestError::BadValue { line, key });
                }
                self.name = Some(value.to_string());
            }
            "version" => {
                let allowed =
                    |byte: u8| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'+' | b'-');
                if value.is_empty() || value.len() > MAX_VERSION_LEN || !value.bytes().all(allowed)
                {
                    return Err(ManifestError::BadValue { line, key });
                }
                self.version = Some(value.to_string());
            }
            "entry" => {
                if !is_symbol_name(value) {
                    return Err(ManifestError::BadValue { line, key });
                }
                self.entry = Some(value.to_string());
            }
            "events" => self.events = Some(parse_list(value, line, key)?),
            "domains" => self.domains = Some(parse_list(value, line, key)?),
            "budget_us" => {
                let budget = parse_positive(value, line, key)?;
                if budget > MAX_BUDGET_MICROSECONDS {
                    return Err(ManifestError::BudgetAboveLimit {
                        line,
                        budget_microseconds: budget,
                        limit_microseconds: MAX_BUDGET_MICROSECONDS,
                    });
                }
                self.budget_microseconds = Some(budget);
            }
            _ => self.memory_quota_bytes = Some(parse_positive(value, line, key)?),
        }
        Ok(())
    }

    /// Checks that every key was given and builds the manifest.
    fn finish(self) -> Result<Manifest, ManifestError> {
        Ok(Manifest {
            name: self.name.ok_or(ManifestError::MissingKey { key: "name" })?,
            version: self
                .version
                .ok_or(ManifestError::MissingKey { key: "version" })?,
            entry: self
                .entry
                .ok_or(ManifestError::MissingKey { key: "entry" })?,
            events: self
                .events
                .ok_or(ManifestError::MissingKey { key: "events" })?,
            domains: self
                .domains
                .ok_or(ManifestError::MissingKey { key: "domains" })?,
            budget_microseconds: self
                .budget_microseconds
                .ok_or(ManifestError::MissingKey { key: "budget_us" })?,
            memory_quota_bytes: self.memory_quota_bytes.ok_or(ManifestError::MissingKey {
                key: "memory_bytes",
            })?,
        })
    }
}

/// `a-z 0-9 _ -`, starting with a lowercase letter, 1..=[`MAX_NAME_LEN`] bytes.
fn is_extension_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_NAME_LEN
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || matches!(byte, b'_' | b'-')
        })
}

/// A C identifier of at most [`MAX_SYMBOL_LEN`] bytes.
fn is_symbol_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_SYMBOL_LEN
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|byte| byte.is_ascii_alphanumeric() || *byte == b'_')
}

/// An event or domain name: a letter or `_`, then `A-Z a-z 0-9 _ . : -`, at most
/// [`MAX_LIST_ITEM_LEN`] bytes (e.g. `mm.Reclaim`, `console`).
fn is_list_item(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_LIST_ITEM_LEN
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b':' | b'-'))
}

/// A comma-separated list; an empty value is an empty list.
fn parse_list(value: &str, line: usize, key: &'static str) -> Result<Vec<String>, ManifestError> {
    let mut items: Vec<String> = Vec::new();
    if value.is_empty() {
        return Ok(items);
    }
    for raw_item in value.split(',') {
        let item = raw_item.trim_matches(is_blank);
        if !is_list_item(item) {
            return Err(ManifestError::BadValue { line, key });
        }
        if items.iter().any(|seen| seen == item) {
            return Err(ManifestError::DuplicateItem {
                line,
                key,
                item: item.to_string(),
            });
        }
        if items.len() == MAX_LIST_ITEMS {
            return Err(ManifestError::TooManyItems { line, key });
        }
        items.push(item.to_string());
    }
    Ok(items)
}

/// A positive decimal `u64`; `_` may separate digits (`1_048_576`).
fn parse_positive(value: &str, line: usize, key: &'static str) -> Result<u64, ManifestError> {
    let bad_number = ManifestError::BadNumber { line, key };
    let bytes = value.as_bytes();
    if bytes.is_empty() || !bytes[0].is_ascii_digit() || bytes[bytes.len() - 1] == b'_' {
        return Err(bad_number);
    }
    let mut number: u64 = 0;
    for byte in bytes {
        match byte {
            b'_' => continue,
            b'0'..=b'9' => {
                number = number
                    .checked_mul(10)
                    .and_then(|tens| tens.checked_add(u64::from(byte - b'0')))
                    .ok_or_else(|| bad_number.clone())?;
            }
            _ => return Err(bad_number),
        }
    }
    if number == 0 {
        return Err(ManifestError::Zero { line, key });
    }
    Ok(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
# hot-list eviction policy
name = hotlist_evict
version = 1.0.0
entry = spindle_extension_init
events = mm.Reclaim, mm.Allocate
domains = mm,console
budget_us = 500
memory_bytes = 1_048_576
";

    fn replace_line(key: &str, line: &str) -> String {
        GOOD.lines()
            .map(|original| {
                if original.starts_with(key) {
                    line
                } else {
                    original
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn parses_a_good_manifest() {
        let manifest = Manifest::parse(GOOD).unwrap();
        assert_eq!(manifest.name, "hotlist_evict");
        assert_eq!(manifest.version, "1.0.0");
        assert_eq!(manifest.entry, "spindle_extension_init");
        assert_eq!(manifest.events, ["mm.Reclaim", "mm.Allocate"]);
        assert_eq!(manifest.domains, ["mm", "console"]);
        assert_eq!(manifest.budget_microseconds, 500);
        assert_eq!(manifest.memory_quota_bytes, 1_048_576);
    }

    #[test]
    fn canonical_text_round_trips() {
        let manifest = Manifest::parse(GOOD).unwrap();
        assert_eq!(Manifest::parse(&manifest.to_text()).unwrap(), manifest);
    }

    #[test]
    fn empty_lists_are_allowed() {
        let text = replace_line("events", "events =");
        assert!(Manifest::parse(&text).unwrap().events.is_empty());
    }

    #[test]
    fn tolerates_tabs_blank_lines_and_crlf() {
        let text = GOOD.replace(" = ", "\t=\t").replace('\n', "\r\n\r\n");
        // `lines()` strips a trailing `\r`.
        assert_eq!(
            Manifest::parse(&text).unwrap(),
            Manifest::parse(GOOD).unwrap()
        );
    }

    #[test]
    fn unknown_key() {
        let text = format!("{GOOD}colour = blue\n");
        assert_eq!(
            Manifest::parse(&text),
            Err(ManifestError::UnknownKey {
                line: 9,
                key: "colour".into()
            })
        );
    }

    #[test]
    fn duplicate_key() {
        let text = format!("{GOOD}budget_us = 7\n");
        assert_eq!(
            Manifest::parse(&text),
            Err(ManifestError::DuplicateKey {
                line: 9,
                key: "budget_us"
            })
        );
    }

    #[test]
    fn missing_key() {
        let text = replace_line("entry", "# no entry");
        assert_eq!(
            Manifest::parse(&text),
            Err(ManifestError::MissingKey { key: "entry" })
        );
        assert_eq!(
            Manifest::parse(""),
            Err(ManifestError::MissingKey { key: "name" })
        );
    }

    #[test]
    fn line_without_equals() {
        let text = replace_line("version", "version 1.0");
        assert_eq!(
            Manifest::parse(&text),
            Err(ManifestError::MissingEquals { line: 3 })
        );
        assert_eq!(
            Manifest::parse(" = x"),
            Err(ManifestError::MissingEquals { line: 1 })
        );
    }

    #[test]
    fn bad_numbers() {
        for bad in [
            "budget_us = -1",
            "budget_us = 0x10",
            "budget_us = 1e3",
            "budget_us = _1",
            "budget_us = 1_",
            "budget_us =",
            "budget_us = 18446744073709551616",
        ] {
            let text = replace_line("budget_us", bad);
            assert_eq!(
                Manifest::parse(&text),
                Err(ManifestError::BadNumber {
                    line: 7,
                    key: "budget_us"
                }),
                "{bad}"
            );
        }
        let text = replace_line("budget_us", "budget_us = 18446744073709551615");
        assert_eq!(
            Manifest::parse(&text),
            Err(ManifestError::BudgetAboveLimit {
                line: 7,
                budget_microseconds: u64::MAX,
                limit_microseconds: MAX_BUDGET_MICROSECONDS
            })
        );
        let text = replace_line("memory_bytes", "memory_bytes = 18446744073709551615");
        assert_eq!(Manifest::parse(&text).unwrap().memory_quota_bytes, u64::MAX);
        let text = replace_line("memory_bytes", "memory_bytes = 0_0");
        assert_eq!(
            Manifest::parse(&text),
            Err(ManifestError::Zero {
                line: 8,
                key: "memory_bytes"
            })
        );
    }

    #[test]
    fn budgets_must_be_one_microsecond_to_one_second() {
        assert_eq!(MAX_BUDGET_MICROSECONDS, 1_000_000);
        let at_limit = replace_line("budget_us", "budget_us = 1_000_000");
        assert_eq!(
            Manifest::parse(&at_limit).unwrap().budget_microseconds,
            1_000_000
        );
        assert_eq!(
            Manifest::parse(&replace_line("budget_us", "budget_us = 1"))
                .unwrap()
                .budget_microseconds,
            1
        );
        let above = replace_line("budget_us", "budget_us = 1_000_001");
        let error = Manifest::parse(&above).unwrap_err();
        assert_eq!(
            error,
            ManifestError::BudgetAboveLimit {
                line: 7,
                budget_microseconds: 1_000_001,
                limit_microseconds: 1_000_000
            }
        );
        let message = error.to_string();
        assert!(
            message.contains("1000001")
                && message.contains("1000000")
                && message.contains("MAX_BUDGET_MICROSECONDS"),
            "{message}"
        );
        assert_eq!(
            Manifest::parse(&replace_line("budget_us", "budget_us = 0")),
            Err(ManifestError::Zero {
                line: 7,
                key: "budget_us"
            })
        );
    }

    #[test]
    fn over_long_and_bad_names() {
        let long = format!("name = {}", "a".repeat(MAX_NAME_LEN + 1));
        assert_eq!(
            Manifest::parse(&replace_line("name", &long)),
            Err(ManifestError::NameTooLong {
                length: MAX_NAME_LEN + 1,
                max: MAX_NAME_LEN
            })
        );
        let longest = format!("name = {}", "a".repeat(MAX_NAME_LEN));
        assert!(Manifest::parse(&replace_line("name", &longest)).is_ok());
        for bad in [
            "name =",
            "name = 9lives",
            "name = Upper",
            "name = a b",
            "name = caf\u{e9}",
        ] {
            assert_eq!(
                Manifest::parse(&replace_line("name", bad)),
                Err(ManifestError::BadValue {
                    line: 2,
                    key: "name"
                }),
                "{bad}"
            );
        }
    }

    #[test]
    fn bad_symbols_versions_and_list_items() {
        let cases = [
            ("entry", "entry = 1init", 4),
            ("entry", "entry = init-fn", 4),
            ("version", "version = 1.0 beta", 3),
            ("version", "version =", 3),
            ("events", "events = mm.Reclaim,", 5),
            ("events", "events = mm Reclaim", 5),
            ("domains", "domains = .mm", 6),
        ];
        for (key, line_text, line) in cases {
            let error = Manifest::parse(&replace_line(key, line_text)).unwrap_err();
            assert!(
                matches!(error, ManifestError::BadValue { line: found, .. } if found == line),
                "{line_text}: {error:?}"
            );
        }
    }

    #[test]
    fn duplicate_and_too_many_items() {
        let text = replace_line("domains", "domains = mm, console, mm");
        assert_eq!(
            Manifest::parse(&text),
            Err(ManifestError::DuplicateItem {
                line: 6,
                key: "domains",
                item: "mm".into()
            })
        );
        let many: Vec<String> = (0..=MAX_LIST_ITEMS)
            .map(|index| format!("e{index}"))
            .collect();
        let text = replace_line("events", &format!("events = {}", many.join(",")));
        assert_eq!(
            Manifest::parse(&text),
            Err(ManifestError::TooManyItems {
                line: 5,
                key: "events"
            })
        );
    }

    #[test]
    fn not_utf8() {
        assert_eq!(
            Manifest::parse_bytes(b"name = \xff"),
            Err(ManifestError::NotUtf8)
        );
    }

    #[test]
    fn errors_display_their_context() {
        let error = ManifestError::UnknownKey {
            line: 3,
            key: "colour".into(),
        };
        assert_eq!(error.to_string(), "manifest line 3: unknown key `colour`");
    }
}
