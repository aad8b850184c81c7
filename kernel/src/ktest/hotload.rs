//! Tests of hot load from the host: the request parser (every refusal is specific, the
//! stream gets back in step after one), the answers a request gets from the extension
//! loader, and that the machine has the virtio console the service listens on.

use alloc::vec::Vec;

use super::{KernelTest, TestResult};
use crate::ensure;
use crate::hotload::{self, Header, PAYLOAD_LIMIT, REQUEST_LINE_MAX, Request, RequestError, RequestReader, parse_header, parse_request};

/// The hot-load tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "hotload::parses_each_request", run: parses_each_request },
    KernelTest { name: "hotload::bad_lines_are_refused_specifically", run: bad_lines_are_refused_specifically },
    KernelTest { name: "hotload::oversize_load_is_refused_and_skipped", run: oversize_load_is_refused_and_skipped },
    KernelTest { name: "hotload::stream_stays_in_step", run: stream_stays_in_step },
    KernelTest { name: "hotload::requests_answer_one_line", run: requests_answer_one_line },
    KernelTest { name: "hotload::virtio_console_is_present", run: virtio_console_is_present },
];

fn parses_each_request() -> TestResult {
    ensure!(parse_request(b"LIST\n") == Ok(Request::List), "LIST");
    ensure!(parse_request(b"LIST\r\n") == Ok(Request::List), "LIST with CR LF");
    ensure!(parse_request(b"\n\r\n  UNLOAD hello\n") == Ok(Request::Unload("hello".into())), "UNLOAD after blank lines");
    // The payload is raw bytes: newlines and anything else inside it are data.
    ensure!(parse_request(b"LOAD 5\na\nb\xff\n") == Ok(Request::Load(b"a\nb\xff\n".to_vec())), "LOAD with binary payload");
    ensure!(parse_header(b"LOAD 4194304") == Ok(Some(Header::Load { length: PAYLOAD_LIMIT })), "LOAD at the limit");
    ensure!(parse_header(b"   ") == Ok(None), "blank line");
    Ok(())
}

fn bad_lines_are_refused_specifically() -> TestResult {
    let cases: &[(&[u8], RequestError)] = &[
        (b"FETCH hello", RequestError::UnknownVerb("FETCH".into())),
        (b"load 5", RequestError::UnknownVerb("load".into())),
        (b"LOAD", RequestError::MissingArgument { verb: "LOAD", argument: "a length" }),
        (b"UNLOAD", RequestError::MissingArgument { verb: "UNLOAD", argument: "an extension name" }),
        (b"LOAD abc", RequestError::BadLength("abc".into())),
        (b"LOAD -1", RequestError::BadLength("-1".into())),
        (b"LOAD +5", RequestError::BadLength("+5".into())),
        (b"LOAD 0x10", RequestError::BadLength("0x10".into())),
        (b"LOAD 99999999999999999999999", RequestError::BadLength("99999999999999999999999".into())),
        (b"LOAD 0", RequestError::EmptyPayload),
        (b"LOAD 4194305", RequestError::TooLarge { length: PAYLOAD_LIMIT as u64 + 1 }),
        (b"LOAD 5 6", RequestError::ExtraArgument { verb: "LOAD", word: "6".into() }),
        (b"LIST all", RequestError::ExtraArgument { verb: "LIST", word: "all".into() }),
        (b"UNLOAD a b", RequestError::ExtraArgument { verb: "UNLOAD", word: "b".into() }),
        (b"\xff\xfe", RequestError::NotText),
    ];
    for (line, expected) in cases {
        let got = parse_header(line);
        ensure!(got.as_ref() == Err(expected), "{:?}: expected {expected:?}, got {got:?}", core::str::from_utf8(line));
        ensure!(!alloc::format!("{expected}").is_empty(), "empty message for {expected:?}");
    }
    ensure!(parse_request(b"LOAD 10\nabc") == Err(RequestError::Incomplete), "a short payload is incomplete");
    ensure!(parse_request(b"LIST\nLIST\n") == Err(RequestError::TrailingBytes(5)), "trailing bytes");
    ensure!(parse_request(b"NOPE\nLIST\n") == Err(RequestError::UnknownVerb("NOPE".into())), "the first error wins");
    let too_large = alloc::format!("{}", RequestError::TooLarge { length: 5_000_000 });
    ensure!(too_large.contains("5000000") && too_large.contains("4194304"), "oversize message {too_large:?}");
    Ok(())
}

/// Feeds `bytes` to `reader` and collects every outcome.
fn feed(reader: &mut RequestReader, bytes: &[u8]) -> Vec<Result<Request, RequestError>> {
    bytes.iter().filter_map(|&byte| reader.push(byte)).collect()
}

fn oversize_load_is_refused_and_skipped() -> TestResult {
    let heap_before = crate::mm::heap::stats().allocated_bytes;
    let mut reader = RequestReader::new();
    let length = PAYLOAD_LIMIT + 1;
    let outcomes = feed(&mut reader, alloc::format!("LOAD {length}\n").as_bytes());
    ensure!(outcomes == [Err(RequestError::TooLarge { length: length as u64 })], "refused at once: {outcomes:?}");
    // Nothing was allocated for the payload; its bytes (newlines included) are dropped
    // until the line goes quiet and the service resumes the reader.
    let heap_during = crate::mm::heap::stats().allocated_bytes;
    ensure!(heap_during < heap_before + REQUEST_LINE_MAX * 4, "heap grew from {heap_before} to {heap_during}");
    let mut stray = 0;
    for index in 0..length {
        if reader.push(if index % 7 == 0 { b'\n' } else { b'L' }).is_some() {
            stray += 1;
        }
    }
    ensure!(stray == 0, "{stray} outcome(s) from inside the refused payload");
    ensure!(reader.is_discarding(), "reader stopped discarding by itself");
    ensure!(reader.abandon().is_none(), "an already refused request was refused again");
    ensure!(feed(&mut reader, b"LIST\n") == [Ok(Request::List)], "LIST after abandoning the discard");
    feed(&mut reader, b"LOAD 99999999\n");
    reader.resume();
    let outcomes = feed(&mut reader, b"LIST\n");
    ensure!(outcomes == [Ok(Request::List)], "next request after resume: {outcomes:?}");
    Ok(())
}

fn stream_stays_in_step() -> TestResult {
    let mut reader = RequestReader::new();
    let outcomes = feed(&mut reader, b"LOAD 3\nxyzUNLOAD hello\r\n\nLIST\n");
    let expected = [Ok(Request::Load(b"xyz".to_vec())), Ok(Request::Unload("hello".into())), Ok(Request::List)];
    ensure!(outcomes == expected, "back-to-back requests: {outcomes:?}");
    // One refusal per burst: after the first error everything is dropped until `resume`.
    let outcomes = feed(&mut reader, b"NOPE\nLIST\nFETCH\n");
    ensure!(outcomes == [Err(RequestError::UnknownVerb("NOPE".into()))], "garbage burst: {outcomes:?}");
    reader.resume();
    ensure!(reader.is_idle(), "reader not idle after resume");
    let mut long_line = Vec::new();
    long_line.extend(core::iter::repeat_n(b'A', REQUEST_LINE_MAX + 50));
    long_line.push(b'\n');
    ensure!(feed(&mut reader, &long_line) == [Err(RequestError::LineTooLong)], "over-long line");
    reader.resume();
    ensure!(feed(&mut reader, b"LIST\n") == [Ok(Request::List)], "LIST after an over-long line");
    // A stalled request is dropped with a specific error; the next request parses.
    feed(&mut reader, b"LOAD 10\nabc");
    ensure!(!reader.is_idle() && !reader.is_discarding(), "reader idle in the middle of a payload");
    let abandoned = reader.abandon();
    ensure!(abandoned == Some(RequestError::StalledPayload { received: 3, expected: 10 }), "abandon: {abandoned:?}");
    feed(&mut reader, b"LI");
    ensure!(reader.abandon() == Some(RequestError::StalledLine), "a half line is a stalled line");
    ensure!(reader.abandon().is_none(), "nothing to abandon when idle");
    ensure!(feed(&mut reader, b"LIST\n") == [Ok(Request::List)], "LIST after abandon");
    Ok(())
}

fn requests_answer_one_line() -> TestResult {
    let bytes = crate::ext::bundle::payload("hello").ok_or("`hello` is not in the boot bundle (run through `cargo xtask test`)")?;
    let frames_before = crate::mm::frame::stats();
    let loaded = hotload::execute(&Request::Load(bytes.to_vec()));
    let listed = hotload::execute(&Request::List);
    let again = hotload::execute(&Request::Load(bytes.to_vec()));
    let unloaded = hotload::execute(&Request::Unload("hello".into()));
    let unload_again = hotload::execute(&Request::Unload("hello".into()));
    let mut corrupted = bytes.to_vec();
    let last = corrupted.len() - 1;
    corrupted[last] ^= 0x01;
    let refused = hotload::execute(&Request::Load(corrupted));
    ensure!(loaded.starts_with("OK loaded hello ") && loaded.contains("(native), 1 binding(s)"), "load answer {loaded:?}");
    ensure!(listed.starts_with("OK ") && listed.contains("hello:running"), "list answer {listed:?}");
    ensure!(again.starts_with("ERR ") && again.contains("already loaded"), "second load answer {again:?}");
    ensure!(unloaded == "OK unloaded hello", "unload answer {unloaded:?}");
    ensure!(unload_again.starts_with("ERR ") && unload_again.contains("not loaded"), "second unload answer {unload_again:?}");
    ensure!(refused.starts_with("ERR ") && refused.contains("signature"), "corrupted load answer {refused:?}");
    ensure!(crate::mm::frame::stats() == frames_before, "frames leaked: {:?} -> {:?}", frames_before, crate::mm::frame::stats());
    ensure!(hotload::answer_line("a\nb\rc") == "a b c", "answers are one line");
    Ok(())
}

fn virtio_console_is_present() -> TestResult {
    const CONSOLE_DEVICE_ID: u32 = 3;
    let slots: Vec<_> = crate::drivers::virtio::slots().collect();
    ensure!(!slots.is_empty(), "no virtio-mmio slot carries the virtio magic");
    ensure!(slots.iter().any(|slot| slot.device_id == CONSOLE_DEVICE_ID),
        "no virtio console among the slots {slots:?} (xtask gives every machine one)");
    Ok(())
}
