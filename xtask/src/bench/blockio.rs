//! The `blockio` group: Small & Seltzer '96's stream and black-box grafts on the real
//! block path, over the disk service's HP 97560 model (the grafts' own groups,
//! `graft-md5` and `graft-logdisk`, measure only the bookkeeping).
//!
//! The kernel (`kernel/src/bench/blockio.rs`) prints three kinds of lines, each one line,
//! whitespace-separated, every field after the words an unsigned integer:
//!
//! ```text
//! bench blockio read <bytes> <elapsed_ns> <busy_ns> <device_requests>
//! bench blockio md5 <technology> <bytes> <elapsed_ns> <busy_ns> <instructions>
//! bench blockio write <placement> <technology> <writes> <device_writes> <elapsed_ns>
//!                     <busy_ns> <seek_cylinders>
//! ```
//!
//! `read` is 1 MiB read from the disk through `block.ReadFilter` with nothing bound (the
//! denominator of the paper's "MD5/disk" line, Table 5's third line); `md5` the same read
//! with the `md5` graft bound as `<technology>` (`builtin`, `native`, `wasm`, `user`; the
//! digest was checked in the kernel); `write` the 262,144 skewed 4 KiB writes of §5.6,
//! `<placement>` `in-place` (technology `none`: nothing bound to `block.Write`) or `logdisk`
//! (the graft as `<technology>`), read back by content in the kernel. Times are guest time
//! under `-icount`; `<busy_ns>` and `<seek_cylinders>` are the disk model's.
//!
//! [`md5_table`] and [`write_table`] make the two tables, [`goals`] the group's goal
//! (the logical disk needs ≥ [`LOGDISK_MIN_TIMES_LESS`]× less modelled disk time than
//! writing in place). Nothing here fails when the kernel printed no `bench blockio` line:
//! the report says "not measured".

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::disk::JITTER_PPM;
use super::numbers::{self, fixed, optional};
use super::paper;

/// What every `bench blockio` line starts with.
const PREFIX: &str = "bench blockio";

/// The technology word meaning "nothing bound".
const NO_BINDING: &str = "none";
/// The placement word of writes with nothing bound to `block.Write`.
const IN_PLACE: &str = "in-place";
/// The placement word of writes placed by the `logdisk` graft.
const LOGDISK: &str = "logdisk";

/// The technologies, in table order: (word in the line, label).
pub const TECHNOLOGIES: &[(&str, &str)] =
    &[("none", "nothing bound"), ("builtin", "built-in"), ("native", "native (signed .kext)"), ("wasm", "Wasm (wasmi)"), ("user", "user-level (upcall)")];

/// The placements, in table order: (word in the line, label).
pub const PLACEMENTS: &[(&str, &str)] = &[("in-place", "in place"), ("logdisk", "logical disk")];

/// The MD5 table's expected rows: the read alone, then MD5 as every technology.
pub const EXPECTED_MD5: &[&str] = &["read", "md5/builtin", "md5/native", "md5/wasm", "md5/user"];

/// The write table's expected rows, as `placement/technology`.
pub const EXPECTED_WRITES: &[&str] = &["in-place/none", "logdisk/builtin", "logdisk/native", "logdisk/wasm", "logdisk/user"];

/// The goal's minimum: in-place modelled disk busy time ÷ the logical disk's.
pub const LOGDISK_MIN_TIMES_LESS: f64 = 5.0;

/// The goal's description.
pub const LOGDISK_GOAL: &str = "logical disk >= 5x less modelled disk time than in place";

/// A `bench blockio read` line: 1 MiB read through the block path with nothing bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRun {
    /// Bytes read.
    pub bytes: u64,
    /// Guest time the read took, ns.
    pub elapsed_ns: u64,
    /// The disk model's busy time during the read, ns.
    pub busy_ns: u64,
    /// Device requests the read became.
    pub device_requests: u64,
}

/// A `bench blockio md5` line: the same read with the `md5` graft bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Md5Run {
    /// `builtin`, `native`, `wasm` or `user`.
    pub technology: String,
    /// Bytes read and fingerprinted.
    pub bytes: u64,
    /// Guest time the read took, ns.
    pub elapsed_ns: u64,
    /// The disk model's busy time during the read, ns.
    pub busy_ns: u64,
    /// Guest instructions retired during the read: block path, filter and digest, and the
    /// idle loop's polling while the device works (under `-icount` one instruction is one
    /// nanosecond, so this follows the read time; the graft's own cost is `graft-md5`'s row).
    pub instructions: u64,
}

/// A `bench blockio write` line: one run of the logical-disk workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteRun {
    /// `in-place` or `logdisk`.
    pub placement: String,
    /// `none` (in place) or the `logdisk` graft's technology.
    pub technology: String,
    /// 4 KiB writes made.
    pub writes: u64,
    /// Device write requests they became.
    pub device_writes: u64,
    /// Guest time the run took, ns.
    pub elapsed_ns: u64,
    /// The disk model's busy time, ns.
    pub busy_ns: u64,
    /// The disk model's total seek distance, cylinders.
    pub seek_cylinders: u64,
}

impl Md5Run {
    /// `md5/technology`, the run's key in tables.
    pub fn key(&self) -> String {
        format!("md5/{}", self.technology)
    }
}

impl WriteRun {
    /// `placement/technology`, the run's key in tables and goal lines.
    pub fn key(&self) -> String {
        format!("{}/{}", self.placement, self.technology)
    }
}

/// One parsed `bench blockio` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockioLine {
    /// `bench blockio read …`.
    Read(ReadRun),
    /// `bench blockio md5 …`.
    Md5(Md5Run),
    /// `bench blockio write …`.
    Write(WriteRun),
}

/// Every `bench blockio` run of one kernel run, by kind, each in output order
/// (results.json's `blockio.runs`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockioRuns {
    /// `read` lines.
    pub read: Vec<ReadRun>,
    /// `md5` lines.
    pub md5: Vec<Md5Run>,
    /// `write` lines.
    pub write: Vec<WriteRun>,
}

impl BlockioRuns {
    /// The runs of every line of `lines` that parses.
    pub fn from_lines<I>(lines: I) -> BlockioRuns
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut runs = BlockioRuns::default();
        for line in lines.into_iter().filter_map(|line| parse_line(line.as_ref())) {
            match line {
                BlockioLine::Read(run) => runs.read.push(run),
                BlockioLine::Md5(run) => runs.md5.push(run),
                BlockioLine::Write(run) => runs.write.push(run),
            }
        }
        runs
    }

    /// Whether the kernel printed no `bench blockio` line that parses.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.md5.is_empty() && self.write.is_empty()
    }
}

/// Whether `line` claims to be a `bench blockio` line (whether or not it parses).
pub fn is_blockio_line(line: &str) -> bool {
    blockio_words(line).is_some()
}

/// What follows `bench blockio` on a line that starts with it as two words.
fn blockio_words(line: &str) -> Option<&str> {
    line.trim().strip_prefix(PREFIX).filter(|rest| rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_whitespace()))
}

/// A word that is not a number (a technology or placement).
fn word<'a>(words: &mut impl Iterator<Item = &'a str>) -> Option<String> {
    words.next().filter(|word| word.parse::<u64>().is_err()).map(str::to_string)
}

/// Parses a `bench blockio read|md5|write` line (module documentation). `None` for any
/// other line, a missing or extra word, a number that is not an unsigned 64-bit integer,
/// an `md5` line of technology `none`, an `in-place` write with a technology, or a write
/// of technology `none` placed other than `in-place`.
pub fn parse_line(line: &str) -> Option<BlockioLine> {
    let mut words = blockio_words(line)?.split_ascii_whitespace();
    let kind = words.next()?;
    let parsed = match kind {
        "read" => {
            let mut number = || -> Option<u64> { words.next()?.parse().ok() };
            BlockioLine::Read(ReadRun { bytes: number()?, elapsed_ns: number()?, busy_ns: number()?, device_requests: number()? })
        }
        "md5" => {
            let technology = word(&mut words).filter(|technology| technology != NO_BINDING)?;
            let mut number = || -> Option<u64> { words.next()?.parse().ok() };
            BlockioLine::Md5(Md5Run { technology, bytes: number()?, elapsed_ns: number()?, busy_ns: number()?, instructions: number()? })
        }
        "write" => {
            let placement = word(&mut words)?;
            let technology = word(&mut words)?;
            if (placement == IN_PLACE) != (technology == NO_BINDING) {
                return None;
            }
            let mut number = || -> Option<u64> { words.next()?.parse().ok() };
            BlockioLine::Write(WriteRun {
                placement,
                technology,
                writes: number()?,
                device_writes: number()?,
                elapsed_ns: number()?,
                busy_ns: number()?,
                seek_cylinders: number()?,
            })
        }
        _ => return None,
    };
    if words.next().is_some() {
        return None;
    }
    Some(parsed)
}

/// Whether two values measured the same thing within [`JITTER_PPM`] (the disk group's
/// tolerance: the device completes on the host's time, which moves the modelled times a
/// little between runs; see [`super::disk::repeats`]).
fn close(a: u64, b: u64) -> bool {
    u128::from(a.abs_diff(b)) * 1_000_000 <= u128::from(a.max(b)) * u128::from(JITTER_PPM)
}

/// Whether two `read` runs measured the same thing: bytes and device requests equal,
/// modelled times within [`JITTER_PPM`].
pub fn read_repeats(first: &ReadRun, second: &ReadRun) -> bool {
    (first.bytes, first.device_requests) == (second.bytes, second.device_requests) && close(first.elapsed_ns, second.elapsed_ns) && close(first.busy_ns, second.busy_ns)
}

/// Whether two `md5` runs measured the same thing: technology and bytes equal, modelled
/// times and instructions within [`JITTER_PPM`] (as the disk group compares its decision
/// instructions: waiting for the device runs a varying number of idle instructions).
pub fn md5_repeats(first: &Md5Run, second: &Md5Run) -> bool {
    (&first.technology, first.bytes) == (&second.technology, second.bytes)
        && close(first.elapsed_ns, second.elapsed_ns)
        && close(first.busy_ns, second.busy_ns)
        && close(first.instructions, second.instructions)
}

/// Whether two `write` runs measured the same thing: placement, technology and writes
/// equal; device writes, modelled times and seek distance within [`JITTER_PPM`].
pub fn write_repeats(first: &WriteRun, second: &WriteRun) -> bool {
    first.key() == second.key()
        && first.writes == second.writes
        && close(first.device_writes, second.device_writes)
        && close(first.elapsed_ns, second.elapsed_ns)
        && close(first.busy_ns, second.busy_ns)
        && close(first.seek_cylinders, second.seek_cylinders)
}

/// What differs between two kernel runs' `bench blockio` runs, one line each: runs of each
/// kind compared in output order ([`read_repeats`], [`md5_repeats`], [`write_repeats`]),
/// and a different number of lines of a kind. Empty when they match.
pub fn differences(first: &BlockioRuns, second: &BlockioRuns) -> Vec<String> {
    let mut found = Vec::new();
    for (a, b) in first.read.iter().zip(&second.read) {
        if !read_repeats(a, b) {
            found.push(format!("blockio read: {a:?} vs {b:?}"));
        }
    }
    for (a, b) in first.md5.iter().zip(&second.md5) {
        if !md5_repeats(a, b) {
            found.push(format!("blockio {}: {a:?} vs {b:?}", a.key()));
        }
    }
    for (a, b) in first.write.iter().zip(&second.write) {
        if !write_repeats(a, b) {
            found.push(format!("blockio write {}: {a:?} vs {b:?}", a.key()));
        }
    }
    for (what, a, b) in [
        ("blockio read lines", first.read.len(), second.read.len()),
        ("blockio md5 lines", first.md5.len(), second.md5.len()),
        ("blockio write lines", first.write.len(), second.write.len()),
    ] {
        if a != b {
            found.push(format!("{what}: {a} vs {b}"));
        }
    }
    found
}

/// Position of `word` in `order`, unknown words after every known one.
fn rank(order: &[(&str, &str)], word: &str) -> usize {
    order.iter().position(|(known, _)| *known == word).unwrap_or(order.len())
}

/// The label of `word` in `order`, or the word itself.
fn label<'a>(order: &[(&'a str, &'a str)], word: &'a str) -> &'a str {
    order.iter().find(|(known, _)| *known == word).map_or(word, |(_, label)| label)
}

/// The paper's technology column set beside a Spindle technology: built-in ↔ C (the
/// paper's unprotected graft compiled into the kernel), native ↔ Modula-3 (safe,
/// compiled), Wasm ↔ Java (interpreted). The read alone and user-level have none.
pub fn paper_column(technology: &str) -> Option<&'static str> {
    match technology {
        "builtin" => Some("C"),
        "native" => Some("Modula-3"),
        "wasm" => Some("Java"),
        _ => None,
    }
}

/// One platform's value of the paper's "MD5/disk" line.
#[derive(Clone, Debug, Serialize)]
pub struct PaperValue {
    /// Platform as the paper names it.
    pub platform: &'static str,
    /// The value as transcribed in [`paper::TABLE_5`] (`None`: "N.A.").
    pub value: Option<&'static str>,
}

/// The paper's "MD5/disk" line (Table 5, third line) in `column`, per platform.
pub fn paper_values(column: &str) -> Vec<PaperValue> {
    let Some(index) = paper::TECHNOLOGIES.iter().position(|known| *known == column) else {
        return Vec::new();
    };
    paper::TABLE_5.platforms.iter().map(|platform| PaperValue { platform: platform.name, value: platform.derived[index] }).collect()
}

/// One row of the MD5 table: the read alone (technology `none`) or MD5 in a technology.
#[derive(Clone, Debug, Serialize)]
pub struct Md5Row {
    /// `read` or `md5/technology`.
    pub key: String,
    /// `none` for the read alone, else the `md5` graft's technology.
    pub technology: String,
    /// Bytes read.
    pub bytes: u64,
    /// Guest time of the read, ns.
    pub elapsed_ns: u64,
    /// The disk model's busy time, ns.
    pub busy_ns: u64,
    /// Device requests (printed for the read alone only).
    pub device_requests: Option<u64>,
    /// Guest instructions of the read with MD5 (not printed for the read alone).
    pub instructions: Option<u64>,
    /// `elapsed_ns` in ms.
    pub elapsed_ms: f64,
    /// `busy_ns` in ms.
    pub busy_ms: f64,
    /// (this elapsed − the read alone's) ÷ the read alone's, same bytes; `None` for the
    /// read alone itself and without a read-alone run.
    pub md5_over_read: Option<f64>,
    /// The paper's column set beside this row ([`paper_column`]).
    pub paper_column: Option<&'static str>,
    /// That column's "MD5/disk" values.
    pub paper: Vec<PaperValue>,
}

/// The MD5 table (results.json's `blockio.md5`).
#[derive(Clone, Debug, Serialize)]
pub struct Md5Table {
    /// The table's title.
    pub title: &'static str,
    /// The read alone first (every `read` line, in printed order; the first is the
    /// baseline), then the MD5 runs in technology order.
    pub rows: Vec<Md5Row>,
    /// [`EXPECTED_MD5`] rows not printed.
    pub missing: Vec<String>,
}

/// The MD5 table's title.
pub const MD5_TITLE: &str = "Block grafts on the disk model — MD5 on real reads (1 MiB through block.ReadFilter, HP 97560 model)";

/// The write table's title.
pub const WRITE_TITLE: &str = "Logical disk on the model (262,144 skewed 4 KiB writes, Small & Seltzer §5.6; HP 97560 model)";

/// `(elapsed − baseline) ÷ baseline` when the baseline read the same bytes in a positive
/// time.
fn over_read(elapsed_ns: u64, bytes: u64, read: Option<&ReadRun>) -> Option<f64> {
    let read = read.filter(|read| read.bytes == bytes && read.elapsed_ns > 0)?;
    Some((i128::from(elapsed_ns) - i128::from(read.elapsed_ns)) as f64 / read.elapsed_ns as f64)
}

/// The MD5 table of `runs`.
pub fn md5_table(runs: &BlockioRuns) -> Md5Table {
    let baseline = runs.read.first();
    let mut rows: Vec<Md5Row> = runs
        .read
        .iter()
        .map(|read| Md5Row {
            key: "read".into(),
            technology: NO_BINDING.into(),
            bytes: read.bytes,
            elapsed_ns: read.elapsed_ns,
            busy_ns: read.busy_ns,
            device_requests: Some(read.device_requests),
            instructions: None,
            elapsed_ms: read.elapsed_ns as f64 / 1e6,
            busy_ms: read.busy_ns as f64 / 1e6,
            md5_over_read: None,
            paper_column: None,
            paper: Vec::new(),
        })
        .collect();
    let mut md5: Vec<&Md5Run> = runs.md5.iter().collect();
    // Stable: runs of the same technology keep their printed order.
    md5.sort_by_key(|run| rank(TECHNOLOGIES, &run.technology));
    rows.extend(md5.into_iter().map(|run| {
        let column = paper_column(&run.technology);
        Md5Row {
            key: run.key(),
            technology: run.technology.clone(),
            bytes: run.bytes,
            elapsed_ns: run.elapsed_ns,
            busy_ns: run.busy_ns,
            device_requests: None,
            instructions: Some(run.instructions),
            elapsed_ms: run.elapsed_ns as f64 / 1e6,
            busy_ms: run.busy_ns as f64 / 1e6,
            md5_over_read: over_read(run.elapsed_ns, run.bytes, baseline),
            paper_column: column,
            paper: column.map(paper_values).unwrap_or_default(),
        }
    }));
    let mut table = Md5Table { title: MD5_TITLE, rows, missing: Vec::new() };
    table.missing = EXPECTED_MD5.iter().filter(|key| table.row(key).is_none()).map(|key| key.to_string()).collect();
    table
}

impl Md5Table {
    /// The first row with key `key` (`read`, `md5/<technology>`).
    pub fn row(&self, key: &str) -> Option<&Md5Row> {
        self.rows.iter().find(|row| row.key == key)
    }
}

/// One row of the write table.
#[derive(Clone, Debug, Serialize)]
pub struct WriteRow {
    /// The run as printed.
    #[serde(flatten)]
    pub run: WriteRun,
    /// `busy_ns` in seconds.
    pub busy_s: f64,
    /// The in-place run's busy time ÷ this run's; `None` without an in-place run or
    /// without modelled time.
    pub times_in_place: Option<f64>,
}

/// The write table (results.json's `blockio.logdisk`).
#[derive(Clone, Debug, Serialize)]
pub struct WriteTable {
    /// The table's title.
    pub title: &'static str,
    /// Rows in placement order, then technology order (unknown words last, as printed).
    pub rows: Vec<WriteRow>,
    /// [`EXPECTED_WRITES`] rows not printed.
    pub missing: Vec<String>,
}

/// `in_place`'s busy time ÷ `run`'s, when both have modelled time.
fn times_less(run: &WriteRun, in_place: &WriteRun) -> Option<f64> {
    (run.busy_ns > 0 && in_place.busy_ns > 0).then(|| in_place.busy_ns as f64 / run.busy_ns as f64)
}

/// The write table of `runs`; when `in-place/none` was printed twice, the first run is the
/// baseline and both are listed.
pub fn write_table(runs: &BlockioRuns) -> WriteTable {
    let mut mine: Vec<&WriteRun> = runs.write.iter().collect();
    mine.sort_by_key(|run| (rank(PLACEMENTS, &run.placement), rank(TECHNOLOGIES, &run.technology)));
    let in_place = runs.write.iter().find(|run| run.placement == IN_PLACE);
    let rows: Vec<WriteRow> = mine
        .into_iter()
        .map(|run| WriteRow { run: run.clone(), busy_s: run.busy_ns as f64 / 1e9, times_in_place: in_place.and_then(|in_place| times_less(run, in_place)) })
        .collect();
    let missing = EXPECTED_WRITES.iter().filter(|key| !rows.iter().any(|row| row.run.key() == **key)).map(|key| key.to_string()).collect();
    WriteTable { title: WRITE_TITLE, rows, missing }
}

/// The outcome of the group's goal (results.json's `blockio.goals`).
#[derive(Clone, Debug, Serialize)]
pub struct BlockioGoal {
    /// What the goal says.
    pub description: String,
    /// The worst (smallest) in-place busy ÷ logical-disk busy among the technologies
    /// compared.
    pub ratio: Option<f64>,
    /// The run the ratio belongs to (`logdisk/technology`).
    pub worst: Option<String>,
    /// Expected rows the run did not print (a missing technology is listed, not failed;
    /// a missing in-place run fails).
    pub missing: Vec<String>,
    /// Whether the goal is met by every logical-disk run present (at least one).
    pub pass: bool,
    /// The goal line as printed.
    pub line: String,
}

/// What a goal line and an empty table say when the group printed nothing.
const NOT_MEASURED: &str = "not measured (no `bench blockio` lines: a kernel without the blockio benchmark, or a machine without a disk)";

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FALL SHORT" }
}

/// Whether `in_place`'s busy time is at least `minimum` × `run`'s, decided exactly from
/// the integers (`minimum` a whole number or half). `None` when the runs are not
/// comparable: different write counts, or no modelled time (disk model `none`).
fn at_least_times_less(run: &WriteRun, in_place: &WriteRun, minimum: f64) -> Option<bool> {
    if run.writes != in_place.writes || run.busy_ns == 0 || in_place.busy_ns == 0 {
        return None;
    }
    let twice_minimum = (minimum * 2.0).round() as u128;
    Some(u128::from(in_place.busy_ns) * 2 >= twice_minimum * u128::from(run.busy_ns))
}

/// The group's goal, from the write table: every logical-disk run present needs ≥
/// [`LOGDISK_MIN_TIMES_LESS`]× less modelled disk busy time than the (first) in-place run
/// of the same number of writes; the line names the worst. Technologies not printed are
/// listed; a missing in-place run, no logical-disk run, or a run that cannot be compared
/// (other write count, no modelled time) falls short.
pub fn goals(runs: &BlockioRuns, table: &WriteTable) -> Vec<BlockioGoal> {
    let description = LOGDISK_GOAL.to_string();
    if runs.is_empty() {
        let line = format!("FALL SHORT {description}: {NOT_MEASURED}");
        return vec![BlockioGoal { description, ratio: None, worst: None, missing: Vec::new(), pass: false, line }];
    }
    let missing = table.missing.clone();
    let in_place = table.rows.iter().map(|row| &row.run).find(|run| run.placement == IN_PLACE);
    let logdisk: Vec<&WriteRun> = table.rows.iter().map(|row| &row.run).filter(|run| run.placement == LOGDISK).collect();
    let Some(in_place) = in_place.filter(|_| !logdisk.is_empty()) else {
        let line = format!("FALL SHORT {description}: not measured ({})", missing.join(", "));
        return vec![BlockioGoal { description, ratio: None, worst: None, missing, pass: false, line }];
    };
    // (key, ratio) of the smallest ratio so far.
    let mut worst: Option<(String, f64)> = None;
    let mut all_met = true;
    let mut incomparable = Vec::new();
    for run in &logdisk {
        match (at_least_times_less(run, in_place, LOGDISK_MIN_TIMES_LESS), times_less(run, in_place)) {
            (Some(met), Some(ratio)) => {
                all_met &= met;
                if worst.as_ref().is_none_or(|(_, worst)| ratio < *worst) {
                    worst = Some((run.key(), ratio));
                }
            }
            _ => incomparable.push(run.key()),
        }
    }
    let pass = all_met && incomparable.is_empty() && worst.is_some();
    let compared = logdisk.len() - incomparable.len();
    let mut notes = String::new();
    if !incomparable.is_empty() {
        let _ = write!(notes, "; not comparable (other write count or no modelled time): {}", incomparable.join(", "));
    }
    if !missing.is_empty() {
        let _ = write!(notes, "; not measured: {}", missing.join(", "));
    }
    let line = match &worst {
        Some((key, ratio)) => {
            let (shown, bound) = super::report::goal_ratios(*ratio, LOGDISK_MIN_TIMES_LESS);
            format!("{} {description}: worst {key} {shown} less (goal ≥ {bound}; {compared} compared{notes})", verdict(pass))
        }
        None => format!("FALL SHORT {description}: no run compared{notes}"),
    };
    let (worst, ratio) = worst.map_or((None, None), |(key, ratio)| (Some(key), Some(ratio)));
    vec![BlockioGoal { description, ratio, worst, missing, pass, line }]
}

/// Milliseconds with three decimals.
fn milliseconds(value: f64) -> String {
    fixed(value, 3)
}

/// An optional integer, grouped; `-` when absent.
fn integer(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_string(), |value| numbers::grouped(value as f64))
}

/// The extra-time ratio as a signed value with three significant digits.
fn extra(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |value| if value > 0.0 { format!("+{}", numbers::significant(value)) } else { numbers::significant(value) })
}

/// The paper's values in platform order, `N.A.` where the paper has none.
fn paper_cells(row: &Md5Row) -> Vec<&'static str> {
    row.paper.iter().map(|value| value.value.unwrap_or("N.A.")).collect()
}

/// The platforms' names in [`paper::TABLE_5`]'s order.
fn platforms() -> Vec<&'static str> {
    paper::TABLE_5.platforms.iter().map(|platform| platform.name).collect()
}

/// The terminal tables, or "not measured".
pub fn terminal(text: &mut String, md5: &Md5Table, writes: &WriteTable) {
    if md5.rows.is_empty() && writes.rows.is_empty() {
        let _ = writeln!(text, "\nblock grafts on the disk model (group blockio)\n  {NOT_MEASURED}");
        return;
    }
    let _ = writeln!(text, "\n{}", md5.title);
    let paper_header = format!("paper MD5/disk ({})", platforms().join(" "));
    let _ = writeln!(text, "  {:<5} {:<10} {:>11} {:>11} {:>14} {:>11}  {}", "run", "technology", "read ms", "busy ms", "guest instr*", "MD5 ÷ read", paper_header);
    for row in &md5.rows {
        let run = if row.key == "read" { "read" } else { "md5" };
        let paper = match row.paper_column {
            Some(column) => format!("{column}: {}", paper_cells(row).join(" ")),
            None => "-".to_string(),
        };
        let _ = writeln!(
            text,
            "  {:<5} {:<10} {:>11} {:>11} {:>14} {:>11}  {paper}",
            run,
            row.technology,
            milliseconds(row.elapsed_ms),
            milliseconds(row.busy_ms),
            integer(row.instructions),
            extra(row.md5_over_read)
        );
    }
    if !md5.missing.is_empty() {
        let _ = writeln!(text, "  not measured: {}", md5.missing.join(", "));
    }
    let _ = writeln!(text, "  * guest instructions retired during the read, the idle loop's polling for the device included (the graft's own cost: graft-md5)");
    let _ = writeln!(text, "\n{}", writes.title);
    let _ = writeln!(text, "  {:<9} {:<10} {:>9} {:>13} {:>13} {:>13} {:>10}", "placement", "technology", "writes", "device writes", "busy s", "seek cyl", "× in-place");
    for row in &writes.rows {
        let _ = writeln!(
            text,
            "  {:<9} {:<10} {:>9} {:>13} {:>13} {:>13} {:>10}",
            row.run.placement,
            row.run.technology,
            numbers::grouped(row.run.writes as f64),
            numbers::grouped(row.run.device_writes as f64),
            fixed(row.busy_s, 3),
            numbers::grouped(row.run.seek_cylinders as f64),
            optional(row.times_in_place)
        );
    }
    if !writes.missing.is_empty() {
        let _ = writeln!(text, "  not measured: {}", writes.missing.join(", "));
    }
}

/// report.md's blockio section: what the runs are, the paper's context, the two tables.
pub fn markdown(text: &mut String, md5: &Md5Table, writes: &WriteTable) {
    let _ = writeln!(text, "## Block grafts on the disk model (group `blockio`)\n");
    let _ = writeln!(
        text,
        "The MD5 and logical-disk grafts on the real block path: virtio-blk behind the disk service's HP 97560 model (Ruemmler & Wilkes '94, `kernel/services/disk`), in guest time under `-icount` (the runs repeat to within 1 %). The `graft-md5` and `graft-logdisk` tables above count the grafts' instructions alone; here the disk's modelled time is in the numbers.\n"
    );
    if md5.rows.is_empty() && writes.rows.is_empty() {
        let _ = writeln!(text, "Not measured: the kernel printed no `bench blockio` lines (a kernel without the blockio benchmark, or a machine without a disk).\n");
        return;
    }
    let _ = writeln!(text, "### {}\n", md5.title);
    let _ = writeln!(
        text,
        "1 MiB is written to the disk, then read back through `block.ReadFilter` (64 KiB per device request, each 4 KiB block filtered as it arrives): once with nothing bound, then with the `md5` graft bound in each technology (its digest checked against the kernel's own). Read time = guest time of the whole read; disk busy = the model's busy time during it. **MD5 ÷ disk read** = (read time with MD5 − read time alone) ÷ read time alone: the time the filter adds, relative to reading the same bytes. Small & Seltzer's \"MD5/disk\" line (Table 5, third line) divides the time to fingerprint 1 MB by the time to read 1 MB (Table 4), measured apart; ours is measured on the read itself. The device requests go out one after another, each filtered before the next is issued, so the extra time is the fingerprinting plus whatever the disk's rotation adds or saves when the next request arrives later. Below 1, fingerprinting costs less than the read it rides on (the paper: it keeps up with the disk). The paper's values are beside the nearest technology: built-in ↔ C (unprotected, compiled into the kernel), native ↔ Modula-3 (safe, compiled), Wasm ↔ Java (interpreted); the read alone and user-level have none.\n"
    );
    let _ = writeln!(text, "| run | technology | read time (ms) | disk busy (ms) | device requests | guest instructions (incl. idle polling) | MD5 ÷ disk read | paper MD5/disk ({}) |\n|---|---|---:|---:|---:|---:|---:|---|", platforms().join(", "));
    for row in &md5.rows {
        let run = if row.key == "read" { "read alone" } else { "read + MD5" };
        let paper = match row.paper_column {
            Some(column) => format!("{column}: {}", paper_cells(row).join(" / ")),
            None => "-".to_string(),
        };
        let _ = writeln!(
            text,
            "| {run} | {} | {} | {} | {} | {} | {} | {paper} |",
            label(TECHNOLOGIES, &row.technology),
            milliseconds(row.elapsed_ms),
            milliseconds(row.busy_ms),
            integer(row.device_requests),
            integer(row.instructions),
            extra(row.md5_over_read)
        );
    }
    if !md5.missing.is_empty() {
        let _ = writeln!(text, "\nNot measured: {}.", md5.missing.iter().map(|key| format!("`{key}`")).collect::<Vec<_>>().join(", "));
    }
    let _ = writeln!(text, "\n### {}\n", writes.title);
    let _ = writeln!(
        text,
        "The 262,144 skewed 4 KiB writes of §5.6, each block stamped with its logical block and version, written through `block.Write` and then synced: in place (nothing bound: each block to its own address) and through the `logdisk` graft in each technology (blocks placed into whole segments); every block is then read back by content in the kernel. Device writes = write requests after gathering runs of consecutive blocks; disk busy = the model's busy time; × in-place = in-place busy ÷ this run's busy (how many times less disk time). The paper (Table 6) measures only the graft's bookkeeping and argues from a seek time that batching pays; here the disk model does the arithmetic. Goal: ≥ 5× less modelled disk time than in place, for every technology measured.\n"
    );
    let _ = writeln!(text, "| placement | technology | writes | device writes | disk busy (s) | seek (cylinders) | × in-place |\n|---|---|---:|---:|---:|---:|---:|");
    for row in &writes.rows {
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} | {} |",
            label(PLACEMENTS, &row.run.placement),
            label(TECHNOLOGIES, &row.run.technology),
            numbers::grouped(row.run.writes as f64),
            numbers::grouped(row.run.device_writes as f64),
            fixed(row.busy_s, 3),
            numbers::grouped(row.run.seek_cylinders as f64),
            optional(row.times_in_place)
        );
    }
    if !writes.missing.is_empty() {
        let _ = writeln!(text, "\nNot measured: {}.", writes.missing.iter().map(|key| format!("`{key}`")).collect::<Vec<_>>().join(", "));
    }
    let _ = writeln!(text);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The lines of a full run, in the kernel's order.
    pub(crate) fn fixture_lines() -> Vec<String> {
        [
            "bench blockio read 1048576 420000000 400000000 16",
            "bench blockio md5 builtin 1048576 441000000 400000000 21500000",
            "bench blockio md5 native 1048576 441500000 400000000 22000000",
            "bench blockio md5 wasm 1048576 825000000 400000000 405000000",
            "bench blockio md5 user 1048576 444000000 400000000 24000000",
            "bench blockio write in-place none 262144 250000 3940000000000 3932160000000 150000000",
            "bench blockio write logdisk builtin 262144 16384 520000000000 500000000000 2000000",
            "bench blockio write logdisk native 262144 16384 521000000000 500000000000 2000000",
            "bench blockio write logdisk wasm 262144 16384 560000000000 500100000000 2000000",
            "bench blockio write logdisk user 262144 16384 530000000000 500000000000 2000000",
        ]
        .iter()
        .map(|line| line.to_string())
        .collect()
    }

    pub(crate) fn fixture() -> BlockioRuns {
        let lines = fixture_lines();
        assert!(lines.iter().all(|line| parse_line(line).is_some()), "every fixture line parses");
        BlockioRuns::from_lines(&lines)
    }

    /// The fixture with each write run's busy time replaced by `busy(key)` when it gives one.
    fn with_busy(busy: impl Fn(&str) -> Option<u64>) -> BlockioRuns {
        let mut runs = fixture();
        for run in &mut runs.write {
            if let Some(busy_ns) = busy(&run.key()) {
                run.busy_ns = busy_ns;
            }
        }
        runs
    }

    fn goal_of(runs: &BlockioRuns) -> BlockioGoal {
        let mut goals = goals(runs, &write_table(runs));
        assert_eq!(goals.len(), 1);
        goals.remove(0)
    }

    #[test]
    fn parses_each_kind_of_line() {
        assert_eq!(
            parse_line("  bench blockio read 1048576 420000000 400000000 16 "),
            Some(BlockioLine::Read(ReadRun { bytes: 1_048_576, elapsed_ns: 420_000_000, busy_ns: 400_000_000, device_requests: 16 }))
        );
        assert_eq!(
            parse_line("bench blockio md5 wasm 1048576 825000000 400000000 405000000"),
            Some(BlockioLine::Md5(Md5Run { technology: "wasm".into(), bytes: 1_048_576, elapsed_ns: 825_000_000, busy_ns: 400_000_000, instructions: 405_000_000 }))
        );
        let Some(BlockioLine::Write(write)) = parse_line("bench blockio write logdisk user 262144 16384 530000000000 500000000000 2000000") else {
            panic!("a write line");
        };
        assert_eq!(
            write,
            WriteRun {
                placement: "logdisk".into(),
                technology: "user".into(),
                writes: 262_144,
                device_writes: 16_384,
                elapsed_ns: 530_000_000_000,
                busy_ns: 500_000_000_000,
                seek_cylinders: 2_000_000,
            }
        );
        assert_eq!(write.key(), "logdisk/user");
        assert!(matches!(parse_line("bench blockio write in-place none 262144 250000 3940000000000 3932160000000 150000000"), Some(BlockioLine::Write(_))));
        assert!(is_blockio_line("bench blockio"));
        assert!(is_blockio_line(" bench blockio read x"));
        let runs = fixture();
        assert_eq!((runs.read.len(), runs.md5.len(), runs.write.len()), (1, 4, 5));
        assert!(!runs.is_empty() && BlockioRuns::default().is_empty());
    }

    #[test]
    fn refuses_malformed_lines() {
        for bad in [
            "bench blockio read 1048576 420000000 400000000",
            "bench blockio read 1048576 420000000 400000000 16 1",
            "bench blockio read 1048576 4.2e8 400000000 16",
            "bench blockio read 1048576 -420000000 400000000 16",
            "bench blockio read 99999999999999999999 420000000 400000000 16",
            "bench blockio md5 1048576 441000000 400000000 21500000",
            "bench blockio md5 none 1048576 441000000 400000000 21500000",
            "bench blockio md5 builtin 1048576 441000000 400000000",
            "bench blockio md5 builtin 1048576 441000000 400000000 21500000 7",
            "bench blockio write in-place builtin 262144 250000 3940000000000 3932160000000 150000000",
            "bench blockio write logdisk none 262144 16384 520000000000 500000000000 2000000",
            "bench blockio write logdisk 262144 16384 520000000000 500000000000 2000000 1",
            "bench blockio write logdisk builtin 262144 16384 520000000000 500000000000",
            "bench blockio write logdisk builtin 262144 16384 520000000000 500000000000 2000000 0",
            "bench blockio seek 1 2 3",
            "bench blockioread 1048576 420000000 400000000 16",
            "bench FAILED blockio md5: digest differs",
            "bench blockio",
            "",
        ] {
            assert!(parse_line(bad).is_none(), "accepted {bad:?}");
        }
        assert!(!is_blockio_line("bench blockioread 1 2 3 4"));
        assert!(!is_blockio_line("bench FAILED blockio md5: digest differs"));
        assert!(!is_blockio_line("bench: blockio group skipped: the machine has no disk"));
        assert!(!is_blockio_line("bench disk fifo none 1"));
        // Malformed lines are left out of the runs.
        let mut lines = fixture_lines();
        lines.insert(2, "bench blockio md5 builtin 1048576 x 400000000 21500000".into());
        lines.push("bench blockio write logdisk none 1 2 3 4 5".into());
        assert_eq!(BlockioRuns::from_lines(&lines), fixture());
    }

    #[test]
    fn md5_table_derives_the_extra_time() {
        let table = md5_table(&fixture());
        assert!(table.missing.is_empty(), "{:?}", table.missing);
        assert_eq!(table.rows.iter().map(|row| row.key.as_str()).collect::<Vec<_>>(), EXPECTED_MD5);
        let read = table.row("read").expect("read alone");
        assert_eq!((read.md5_over_read, read.device_requests, read.instructions, read.paper_column), (None, Some(16), None, None));
        assert_eq!(read.elapsed_ms, 420.0);
        let builtin = table.row("md5/builtin").expect("row");
        assert!((builtin.md5_over_read.expect("ratio") - 21.0 / 420.0).abs() < 1e-12);
        assert_eq!(builtin.paper_column, Some("C"));
        let wasm = table.row("md5/wasm").expect("row");
        assert!((wasm.md5_over_read.expect("ratio") - 405.0 / 420.0).abs() < 1e-12);
        // The paper's values come from the transcription of Table 5 (Java column).
        let values: Vec<(&str, Option<&str>)> = wasm.paper.iter().map(|value| (value.platform, value.value)).collect();
        assert_eq!(values, vec![("Alpha", None), ("HP-UX", Some("43")), ("Linux", Some("38")), ("Solaris", Some("32"))]);
        let native = table.row("md5/native").expect("row");
        assert_eq!(native.paper.iter().map(|value| value.value).collect::<Vec<_>>(), vec![Some("0.9"), Some("0.64"), Some("0.64"), Some("0.92")]);
        let user = table.row("md5/user").expect("row");
        assert!(user.paper_column.is_none() && user.paper.is_empty(), "the paper has no user-level column");
        // A faster read with MD5 (jitter) is a negative extra; another length, none; no
        // read alone, none.
        let mut runs = fixture();
        runs.md5[0].elapsed_ns = 410_000_000;
        runs.md5[1].bytes = 4096;
        let table = md5_table(&runs);
        assert!((table.row("md5/builtin").and_then(|row| row.md5_over_read).expect("ratio") + 10.0 / 420.0).abs() < 1e-12);
        assert_eq!(table.row("md5/native").and_then(|row| row.md5_over_read), None);
        runs.read.clear();
        let table = md5_table(&runs);
        assert_eq!(table.missing, vec!["read".to_string()]);
        assert!(table.rows.iter().all(|row| row.md5_over_read.is_none()));
    }

    #[test]
    fn write_table_orders_rows_and_derives_ratios() {
        let mut runs = fixture();
        runs.write.rotate_left(2);
        let table = write_table(&runs);
        assert!(table.missing.is_empty());
        assert_eq!(table.rows.iter().map(|row| row.run.key()).collect::<Vec<_>>(), EXPECTED_WRITES);
        assert_eq!(table.rows[0].times_in_place, Some(1.0));
        assert!((table.rows[1].times_in_place.expect("ratio") - 3_932.16 / 500.0).abs() < 1e-12);
        assert_eq!(table.rows[0].busy_s, 3_932.16);
        let runs = BlockioRuns { write: fixture().write.into_iter().filter(|run| run.placement != "in-place").collect(), ..fixture() };
        let table = write_table(&runs);
        assert_eq!(table.missing, vec!["in-place/none".to_string()]);
        assert!(table.rows.iter().all(|row| row.times_in_place.is_none()));
    }

    #[test]
    fn goal_passes_on_the_fixture() {
        let goal = goal_of(&fixture());
        assert!(goal.pass, "{}", goal.line);
        assert_eq!(goal.worst.as_deref(), Some("logdisk/wasm"), "the smallest ratio, not the first");
        assert!((goal.ratio.expect("ratio") - 3_932.16 / 500.1).abs() < 1e-12);
        assert_eq!(goal.line, "PASS logical disk >= 5x less modelled disk time than in place: worst logdisk/wasm 7.86× less (goal ≥ 5.00×; 4 compared)");
    }

    #[test]
    fn goal_falls_short_when_missed_or_missing() {
        // One technology only 4× less.
        let goal = goal_of(&with_busy(|key| (key == "logdisk/user").then_some(983_040_000_000)));
        assert!(!goal.pass);
        assert_eq!(goal.worst.as_deref(), Some("logdisk/user"));
        assert_eq!(goal.line, "FALL SHORT logical disk >= 5x less modelled disk time than in place: worst logdisk/user 4.00× less (goal ≥ 5.00×; 4 compared)");
        // Exactly 5× passes; one ns more misses and does not print as 5.00×.
        let goal = goal_of(&with_busy(|key| (key == "logdisk/user").then_some(786_432_000_000)));
        assert!(goal.pass, "{}", goal.line);
        assert_eq!(goal.ratio, Some(5.0));
        let goal = goal_of(&with_busy(|key| (key == "logdisk/user").then_some(786_432_000_001)));
        assert!(!goal.pass);
        assert!(goal.line.contains("worst logdisk/user 5.0000× less (goal ≥ 5.0000×"), "{}", goal.line);
        // A missing technology is listed; the others still decide.
        let runs = BlockioRuns { write: fixture().write.into_iter().filter(|run| run.technology != "wasm").collect(), ..fixture() };
        let goal = goal_of(&runs);
        assert!(goal.pass, "{}", goal.line);
        assert_eq!(goal.missing, vec!["logdisk/wasm".to_string()]);
        assert!(goal.line.ends_with("(goal ≥ 5.00×; 3 compared; not measured: logdisk/wasm)"), "{}", goal.line);
        // No in-place run: nothing to compare with.
        let runs = BlockioRuns { write: fixture().write.into_iter().filter(|run| run.placement != "in-place").collect(), ..fixture() };
        let goal = goal_of(&runs);
        assert!(!goal.pass);
        assert_eq!(goal.line, "FALL SHORT logical disk >= 5x less modelled disk time than in place: not measured (in-place/none)");
        // No logical-disk run.
        let runs = BlockioRuns { write: fixture().write.into_iter().filter(|run| run.placement == "in-place").collect(), ..fixture() };
        let goal = goal_of(&runs);
        assert!(!goal.pass && goal.line.starts_with("FALL SHORT logical disk >= 5x less modelled disk time than in place: not measured (logdisk/builtin"), "{}", goal.line);
        // MD5 lines only: the write runs are not measured.
        let goal = goal_of(&BlockioRuns { write: Vec::new(), ..fixture() });
        assert!(!goal.pass && goal.line.contains("not measured (in-place/none, logdisk/builtin"), "{}", goal.line);
        // Another write count is not comparable.
        let mut runs = fixture();
        runs.write[2].writes = 4096;
        let goal = goal_of(&runs);
        assert!(!goal.pass);
        assert!(goal.line.contains("3 compared; not comparable (other write count or no modelled time): logdisk/native)"), "{}", goal.line);
        // No modelled time (disk model `none`): nothing compared.
        let goal = goal_of(&with_busy(|_| Some(0)));
        assert!(!goal.pass);
        assert!(goal.line.starts_with("FALL SHORT logical disk >= 5x less modelled disk time than in place: no run compared; not comparable"), "{}", goal.line);
    }

    #[test]
    fn no_lines_mean_not_measured() {
        let runs = BlockioRuns::default();
        let goal = goal_of(&runs);
        assert!(!goal.pass);
        assert!(goal.line.starts_with("FALL SHORT logical disk >= 5x less modelled disk time than in place: not measured (no `bench blockio` lines"), "{}", goal.line);
        let (md5, writes) = (md5_table(&runs), write_table(&runs));
        assert_eq!(md5.missing.len(), EXPECTED_MD5.len());
        let mut text = String::new();
        terminal(&mut text, &md5, &writes);
        assert_eq!(text, format!("\nblock grafts on the disk model (group blockio)\n  {NOT_MEASURED}\n"));
        let mut text = String::new();
        markdown(&mut text, &md5, &writes);
        assert!(text.starts_with("## Block grafts on the disk model (group `blockio`)\n"));
        assert!(text.contains("Not measured: the kernel printed no `bench blockio` lines"));
        assert!(!text.contains("###"), "no empty tables");
    }

    #[test]
    fn repeats_within_the_jitter_only() {
        let first = fixture();
        assert!(differences(&first, &first.clone()).is_empty());
        // Modelled times, busy time, seeks, device writes and instructions may move by 1 %.
        let mut second = first.clone();
        second.read[0].elapsed_ns += first.read[0].elapsed_ns / 100;
        second.md5[2].instructions -= first.md5[2].instructions / 200;
        second.md5[2].busy_ns += 1;
        second.write[1].busy_ns += first.write[1].busy_ns / 100;
        second.write[1].seek_cylinders += 1000;
        second.write[1].device_writes += 100;
        assert!(differences(&first, &second).is_empty(), "{:?}", differences(&first, &second));
        // Beyond 1 %: each kind is named.
        let mut second = first.clone();
        second.read[0].busy_ns += first.read[0].busy_ns / 50;
        second.md5[3].instructions += first.md5[3].instructions / 50;
        second.write[4].seek_cylinders += first.write[4].seek_cylinders / 50;
        let found = differences(&first, &second);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("blockio read: "), "{found:?}");
        assert!(found[1].starts_with("blockio md5/user: "), "{found:?}");
        assert!(found[2].starts_with("blockio write logdisk/user: "), "{found:?}");
        // Counts that follow from the workload must be equal.
        for change in [
            (|runs: &mut BlockioRuns| runs.read[0].device_requests += 1) as fn(&mut BlockioRuns),
            |runs| runs.read[0].bytes -= 1,
            |runs| runs.md5[0].bytes += 1,
            |runs| runs.md5[0].technology = "native".into(),
            |runs| runs.write[0].writes -= 1,
            |runs| runs.write[1].technology = "native".into(),
        ] {
            let mut second = first.clone();
            change(&mut second);
            assert_eq!(differences(&first, &second).len(), 1, "{second:?}");
        }
        // A line fewer.
        let mut second = first.clone();
        second.md5.pop();
        assert_eq!(differences(&first, &second), vec!["blockio md5 lines: 4 vs 3".to_string()]);
        // The tolerance is relative to the larger value, and zero equals only zero.
        assert!(close(0, 0) && !close(0, 1) && close(100, 101) && !close(100, 102));
    }

    #[test]
    fn renders_the_fixture_tables() {
        let runs = fixture();
        let (md5, writes) = (md5_table(&runs), write_table(&runs));
        let mut text = String::new();
        terminal(&mut text, &md5, &writes);
        let expected = "
Block grafts on the disk model — MD5 on real reads (1 MiB through block.ReadFilter, HP 97560 model)
  run   technology     read ms     busy ms   guest instr*  MD5 ÷ read  paper MD5/disk (Alpha HP-UX Linux Solaris)
  read  none           420.000     400.000              -           -  -
  md5   builtin        441.000     400.000     21,500,000      +0.050  C: 0.67 0.43 0.33 0.46
  md5   native         441.500     400.000     22,000,000      +0.051  Modula-3: 0.9 0.64 0.64 0.92
  md5   wasm           825.000     400.000    405,000,000       +0.96  Java: N.A. 43 38 32
  md5   user           444.000     400.000     24,000,000      +0.057  -
  * guest instructions retired during the read, the idle loop's polling for the device included (the graft's own cost: graft-md5)

Logical disk on the model (262,144 skewed 4 KiB writes, Small & Seltzer §5.6; HP 97560 model)
  placement technology    writes device writes        busy s      seek cyl × in-place
  in-place  none         262,144       250,000     3,932.160   150,000,000       1.00
  logdisk   builtin      262,144        16,384       500.000     2,000,000       7.86
  logdisk   native       262,144        16,384       500.000     2,000,000       7.86
  logdisk   wasm         262,144        16,384       500.100     2,000,000       7.86
  logdisk   user         262,144        16,384       500.000     2,000,000       7.86
";
        assert_eq!(text, expected, "got:\n{text}");
        let mut text = String::new();
        markdown(&mut text, &md5, &writes);
        for needle in [
            "### Block grafts on the disk model — MD5 on real reads",
            "| run | technology | read time (ms) | disk busy (ms) | device requests | guest instructions (incl. idle polling) | MD5 ÷ disk read | paper MD5/disk (Alpha, HP-UX, Linux, Solaris) |",
            "| read alone | nothing bound | 420.000 | 400.000 | 16 | - | - | - |",
            "| read + MD5 | Wasm (wasmi) | 825.000 | 400.000 | - | 405,000,000 | +0.96 | Java: N.A. / 43 / 38 / 32 |",
            "### Logical disk on the model",
            "| placement | technology | writes | device writes | disk busy (s) | seek (cylinders) | × in-place |",
            "| in place | nothing bound | 262,144 | 250,000 | 3,932.160 | 150,000,000 | 1.00 |",
            "| logical disk | user-level (upcall) | 262,144 | 16,384 | 500.000 | 2,000,000 | 7.86 |",
            "(Table 5, third line)",
        ] {
            assert!(text.contains(needle), "report.md's blockio section lacks {needle:?}:\n{text}");
        }
        assert!(!text.contains("Not measured"), "the fixture is complete");
        // A partial run lists what is missing.
        let runs = BlockioRuns { md5: fixture().md5.into_iter().filter(|run| run.technology != "wasm").collect(), ..fixture() };
        let mut text = String::new();
        terminal(&mut text, &md5_table(&runs), &write_table(&runs));
        assert!(text.contains("  md5   user  ") && text.contains("\n  not measured: md5/wasm\n"), "{text}");
    }
}
