//! The `disk` group: disk-scheduling policies as `disk.Schedule` extensions (Seltzer,
//! Small & Smith '95 §2 name the disk scheduler one of the arbitrators whose policy should
//! be replaceable), measured on the block service's HP 97560 model.
//!
//! The kernel (`kernel/src/bench/disk.rs`) prints one line per measured run:
//!
//! ```text
//! bench disk <policy> <technology> <streams> <requests> <elapsed_ns> <busy_ns>
//!            <mean_response_ns> <p99_response_ns> <seek_cylinders> <decisions>
//!            <decision_instructions>
//! ```
//!
//! (one line, whitespace-separated). `<policy>` is `fifo`, `sstf` or `clook`;
//! `<technology>` is `none` (no `disk.Schedule` binding: the block service's own FIFO, only
//! with `fifo`) or the technology the extension `disksched_<policy>` was built as. Times
//! are the disk model's, in guest time (deterministic under `-icount`). [`tables`] makes
//! one table per stream count, with throughput and decision cost relative to FIFO and to
//! the built-in extension; [`goals`] evaluates the group's two goals. Nothing here fails
//! when the kernel printed no `bench disk` line: the report says "not measured".

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::numbers::{self, count, fixed, optional};

/// What every `bench disk` line starts with.
const PREFIX: &str = "bench disk";

/// The policies, in table order: (word in the line, label).
pub const POLICIES: &[(&str, &str)] = &[("fifo", "FIFO"), ("sstf", "SSTF"), ("clook", "C-LOOK")];

/// The technologies, in table order: (word in the line, label).
pub const TECHNOLOGIES: &[(&str, &str)] =
    &[("none", "none (block service's FIFO)"), ("builtin", "built-in"), ("native", "native (signed .kext)"), ("wasm", "Wasm (wasmi)"), ("user", "user-level (upcall)")];

/// The technology word meaning "no `disk.Schedule` binding".
const NO_BINDING: &str = "none";

/// The rows the report expects, as `policy/technology`: FIFO without a binding (the
/// baseline), and SSTF and C-LOOK as every extension technology.
pub const EXPECTED: &[&str] = &[
    "fifo/none",
    "sstf/builtin",
    "sstf/native",
    "sstf/wasm",
    "sstf/user",
    "clook/builtin",
    "clook/native",
    "clook/wasm",
    "clook/user",
];

/// The C-LOOK goal's minimum: C-LOOK (built in) over FIFO (no binding), modelled throughput.
pub const CLOOK_MIN_TIMES_FIFO: f64 = 1.5;
/// The technology goal's bound, as "one part in": every technology's modelled throughput
/// within 1/100 (1 %) of the built-in extension's of the same policy.
pub const TECHNOLOGY_WITHIN_ONE_IN: f64 = 100.0;

/// One `bench disk` line: one measured run of a policy built as a technology.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskRun {
    /// `fifo`, `sstf` or `clook`.
    pub policy: String,
    /// `none`, `builtin`, `native`, `wasm` or `user`.
    pub technology: String,
    /// Concurrent streams, each with one random 4 KiB read outstanding.
    pub streams: u64,
    /// Reads completed in the run.
    pub requests: u64,
    /// Modelled time from the first submission to the last completion, ns.
    pub elapsed_ns: u64,
    /// Modelled time the disk was busy, ns.
    pub busy_ns: u64,
    /// Mean response time (queueing + service), ns.
    pub mean_response_ns: u64,
    /// 99th-percentile response time, ns.
    pub p99_response_ns: u64,
    /// Total modelled seek distance, cylinders.
    pub seek_cylinders: u64,
    /// `disk.Schedule` raises.
    pub decisions: u64,
    /// Guest instructions spent in those raises (0 for technology `none`).
    pub decision_instructions: u64,
}

impl DiskRun {
    /// `policy/technology`, the run's key in tables and goal lines.
    pub fn key(&self) -> String {
        format!("{}/{}", self.policy, self.technology)
    }

    /// Reads per second of modelled time; `None` when no modelled time passed (the disk
    /// model `none` finishes every request at once).
    pub fn requests_per_second(&self) -> Option<f64> {
        (self.elapsed_ns > 0).then(|| self.requests as f64 / (self.elapsed_ns as f64 / 1e9))
    }

    /// Seek distance per read, cylinders; `None` without reads.
    pub fn seek_per_request(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.seek_cylinders as f64 / self.requests as f64)
    }

    /// Guest instructions per `disk.Schedule` decision; `None` for technology `none` (no
    /// extension decides) and for a run without decisions.
    pub fn instructions_per_decision(&self) -> Option<f64> {
        (self.technology != NO_BINDING && self.decisions > 0).then(|| self.decision_instructions as f64 / self.decisions as f64)
    }
}

/// Whether `line` claims to be a `bench disk` line (whether or not it parses).
pub fn is_disk_line(line: &str) -> bool {
    disk_words(line).is_some()
}

/// What follows `bench disk` on a line that starts with it as two words.
fn disk_words(line: &str) -> Option<&str> {
    line.trim().strip_prefix(PREFIX).filter(|rest| rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_whitespace()))
}

/// Parses `bench disk <policy> <technology>` followed by the nine unsigned integers of
/// [`DiskRun`], in its field order. `None` for any other line, a missing or extra word, a
/// number that is not an unsigned 64-bit integer, or technology `none` with a policy
/// other than `fifo`.
pub fn parse_line(line: &str) -> Option<DiskRun> {
    let mut words = disk_words(line)?.split_ascii_whitespace();
    let policy = words.next()?.to_string();
    let technology = words.next()?.to_string();
    if policy.parse::<u64>().is_ok() || technology.parse::<u64>().is_ok() || (technology == NO_BINDING && policy != "fifo") {
        return None;
    }
    let mut number = || -> Option<u64> { words.next()?.parse().ok() };
    let run = DiskRun {
        policy,
        technology,
        streams: number()?,
        requests: number()?,
        elapsed_ns: number()?,
        busy_ns: number()?,
        mean_response_ns: number()?,
        p99_response_ns: number()?,
        seek_cylinders: number()?,
        decisions: number()?,
        decision_instructions: number()?,
    };
    if words.next().is_some() {
        return None;
    }
    Some(run)
}

/// `numerator / denominator` when both exist and the denominator is positive.
pub fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    match (numerator, denominator) {
        (Some(numerator), Some(denominator)) if denominator > 0.0 => Some(numerator / denominator),
        _ => None,
    }
}

/// The two sides of `a`'s throughput ÷ `b`'s, cross-multiplied from the integers:
/// (requests_a × elapsed_b, requests_b × elapsed_a). Exact while both products stay
/// below 2⁵³, so goals at their bounds are decided exactly. `None` when either run has no
/// modelled time or `b` no reads.
fn throughput_terms(a: &DiskRun, b: &DiskRun) -> Option<(f64, f64)> {
    (a.elapsed_ns > 0 && b.elapsed_ns > 0 && b.requests > 0).then_some((a.requests as f64 * b.elapsed_ns as f64, b.requests as f64 * a.elapsed_ns as f64))
}

/// `a`'s modelled throughput ÷ `b`'s; `None` when either has no modelled time or `b` no
/// reads.
pub fn throughput_ratio(a: &DiskRun, b: &DiskRun) -> Option<f64> {
    throughput_terms(a, b).map(|(numerator, denominator)| numerator / denominator)
}

/// Whether `a`'s throughput is at least `minimum` × `b`'s (exact for whole and half
/// minimums such as 1.5).
pub fn throughput_at_least(a: &DiskRun, b: &DiskRun, minimum: f64) -> bool {
    throughput_terms(a, b).is_some_and(|(numerator, denominator)| numerator >= minimum * denominator)
}

/// Whether `a`'s throughput is within one part in `parts` of `b`'s, either way:
/// |a − b| × parts ≤ b (1 % is `parts` = 100).
pub fn throughput_within(a: &DiskRun, b: &DiskRun, parts: f64) -> bool {
    throughput_terms(a, b).is_some_and(|(numerator, denominator)| (numerator - denominator).abs() * parts <= denominator)
}

/// One row of a disk table: a run as printed and what is derived from it.
#[derive(Clone, Debug, Serialize)]
pub struct DiskRow {
    /// The run.
    #[serde(flatten)]
    pub run: DiskRun,
    /// Reads per second of modelled time.
    pub requests_per_second: Option<f64>,
    /// Throughput ÷ FIFO's without a binding (`fifo/none`), same stream count.
    pub times_fifo: Option<f64>,
    /// Mean response time, ms.
    pub mean_response_ms: f64,
    /// 99th-percentile response time, ms.
    pub p99_response_ms: f64,
    /// Seek distance per read, cylinders.
    pub seek_cylinders_per_request: Option<f64>,
    /// Guest instructions per `disk.Schedule` decision.
    pub instructions_per_decision: Option<f64>,
    /// Instructions per decision ÷ the built-in extension's of the same policy.
    pub times_builtin: Option<f64>,
}

/// The runs of one stream count.
#[derive(Clone, Debug, Serialize)]
pub struct DiskTable {
    /// Concurrent streams.
    pub streams: u64,
    /// The table's title.
    pub title: String,
    /// Rows in policy order, then technology order (unknown words last, as printed).
    pub rows: Vec<DiskRow>,
    /// [`EXPECTED`] rows this stream count lacks.
    pub missing: Vec<String>,
}

/// A table's title.
pub fn title(streams: u64) -> String {
    format!("disk scheduling (Seltzer '95): {streams} streams of random 4 KiB reads over the whole disk, HP 97560 model")
}

/// Position of `word` in `order`, unknown words after every known one.
fn rank(order: &[(&str, &str)], word: &str) -> usize {
    order.iter().position(|(known, _)| *known == word).unwrap_or(order.len())
}

/// The label of `word` in `order`, or the word itself.
fn label<'a>(order: &[(&'a str, &'a str)], word: &'a str) -> &'a str {
    order.iter().find(|(known, _)| *known == word).map_or(word, |(_, label)| label)
}

/// One table per stream count (ascending). Ratios compare runs of the same stream count;
/// when a key was printed twice, the first run is the baseline and both are listed.
pub fn tables(runs: &[DiskRun]) -> Vec<DiskTable> {
    let mut streams: Vec<u64> = runs.iter().map(|run| run.streams).collect();
    streams.sort_unstable();
    streams.dedup();
    streams.into_iter().map(|streams| table(streams, runs)).collect()
}

fn table(streams: u64, runs: &[DiskRun]) -> DiskTable {
    let mut mine: Vec<&DiskRun> = runs.iter().filter(|run| run.streams == streams).collect();
    // Stable: runs of the same key keep their printed order.
    mine.sort_by_key(|run| (rank(POLICIES, &run.policy), rank(TECHNOLOGIES, &run.technology)));
    let find = |policy: &str, technology: &str| mine.iter().copied().find(|run| run.policy == policy && run.technology == technology);
    let fifo = find("fifo", NO_BINDING);
    let rows = mine
        .iter()
        .map(|run| {
            let builtin = find(&run.policy, "builtin").and_then(DiskRun::instructions_per_decision);
            DiskRow {
                run: (*run).clone(),
                requests_per_second: run.requests_per_second(),
                times_fifo: fifo.and_then(|fifo| throughput_ratio(run, fifo)),
                mean_response_ms: run.mean_response_ns as f64 / 1e6,
                p99_response_ms: run.p99_response_ns as f64 / 1e6,
                seek_cylinders_per_request: run.seek_per_request(),
                instructions_per_decision: run.instructions_per_decision(),
                times_builtin: ratio(run.instructions_per_decision(), builtin),
            }
        })
        .collect();
    let present: Vec<String> = mine.iter().map(|run| run.key()).collect();
    let missing = EXPECTED.iter().filter(|key| !present.iter().any(|present| present == *key)).map(|key| key.to_string()).collect();
    DiskTable { streams, title: title(streams), rows, missing }
}

impl DiskTable {
    /// The first row `policy/technology`.
    pub fn row(&self, policy: &str, technology: &str) -> Option<&DiskRow> {
        self.rows.iter().find(|row| row.run.policy == policy && row.run.technology == technology)
    }
}

/// The outcome of one disk goal (results.json's `disk.goals`).
#[derive(Clone, Debug, Serialize)]
pub struct DiskGoal {
    /// What the goal says.
    pub description: String,
    /// The stream count it was evaluated at (the table with the most streams).
    pub streams: Option<u64>,
    /// C-LOOK's goal: C-LOOK ÷ FIFO throughput. The technology goal: the worst
    /// technology's throughput ÷ its built-in's.
    pub ratio: Option<f64>,
    /// The run the ratio belongs to (`policy/technology`).
    pub worst: Option<String>,
    /// Expected rows the goal needed but the run did not print.
    pub missing: Vec<String>,
    /// Whether the goal is met (never with a missing row).
    pub pass: bool,
    /// The goal line as printed.
    pub line: String,
}

/// What a goal line says when the group printed nothing.
const NOT_MEASURED: &str = "not measured (no `bench disk` lines: a kernel without the disk benchmark, or a machine without a disk)";

/// The C-LOOK goal's description.
pub const CLOOK_GOAL: &str = "C-LOOK >= 1.5x FIFO throughput";
/// The technology goal's description.
pub const TECHNOLOGY_GOAL: &str = "every technology within 1% of built-in's modelled throughput";

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FALL SHORT" }
}

/// The two goals, evaluated on the table with the most streams (the deepest queue, where
/// a policy has the most to choose from): C-LOOK built in ≥ [`CLOOK_MIN_TIMES_FIFO`] ×
/// FIFO without a binding; and, for every policy with a built-in run, every other
/// technology's throughput within one part in [`TECHNOLOGY_WITHIN_ONE_IN`] of it (the
/// worst reported; SSTF's and C-LOOK's native, Wasm and user-level runs are required).
pub fn goals(tables: &[DiskTable]) -> Vec<DiskGoal> {
    let Some(table) = tables.iter().max_by_key(|table| table.streams) else {
        return [CLOOK_GOAL, TECHNOLOGY_GOAL]
            .into_iter()
            .map(|description| DiskGoal {
                description: description.into(),
                streams: None,
                ratio: None,
                worst: None,
                missing: Vec::new(),
                pass: false,
                line: format!("FALL SHORT {description}: {NOT_MEASURED}"),
            })
            .collect();
    };
    vec![clook_goal(table), technology_goal(table)]
}

fn clook_goal(table: &DiskTable) -> DiskGoal {
    let streams = table.streams;
    let run = |policy, technology| table.row(policy, technology).map(|row| &row.run);
    let missing: Vec<String> = ["clook/builtin", "fifo/none"].into_iter().filter(|key| table.missing.iter().any(|missing| missing == key)).map(str::to_string).collect();
    let (ratio, pass) = match (run("clook", "builtin"), run("fifo", NO_BINDING)) {
        (Some(clook), Some(fifo)) => (throughput_ratio(clook, fifo), throughput_at_least(clook, fifo, CLOOK_MIN_TIMES_FIFO)),
        _ => (None, false),
    };
    let line = match ratio {
        Some(ratio) => {
            let (shown, bound) = super::report::goal_ratios(ratio, CLOOK_MIN_TIMES_FIFO);
            format!("{} {CLOOK_GOAL}: {shown} at {streams} streams (goal ≥ {bound})", verdict(pass))
        }
        None if !missing.is_empty() => format!("FALL SHORT {CLOOK_GOAL}: not measured ({} at {streams} streams)", missing.join(", ")),
        None => format!("FALL SHORT {CLOOK_GOAL}: not measured (no modelled time at {streams} streams: disk model `none`?)"),
    };
    DiskGoal { description: CLOOK_GOAL.into(), streams: Some(streams), ratio, worst: Some("clook/builtin".into()), missing, pass, line }
}

/// A throughput deviation (`ratio − 1`) as a signed percentage with two decimals, or four
/// when two would print a miss (`within` false) as the bound itself (`-1.0040%`, not
/// `-1.00%`).
pub fn deviation(ratio: f64, within: bool) -> String {
    let percent = (ratio - 1.0) * 100.0;
    let bound = 100.0 / TECHNOLOGY_WITHIN_ONE_IN;
    let decimals = if !within && fixed(percent.abs(), 2) == fixed(bound, 2) { 4 } else { 2 };
    let sign = if percent > 0.0 && fixed(percent, decimals) != fixed(0.0, decimals) { "+" } else { "" };
    format!("{sign}{}%", fixed(percent, decimals))
}

fn technology_goal(table: &DiskTable) -> DiskGoal {
    let streams = table.streams;
    // (key, ratio to built-in, within the bound) of the largest deviation so far.
    let mut worst: Option<(String, f64, bool)> = None;
    let mut compared = 0;
    let mut all_within = true;
    let mut unmeasured = Vec::new();
    for row in table.rows.iter().filter(|row| row.run.technology != NO_BINDING && row.run.technology != "builtin") {
        let key = row.run.key();
        let builtin = table.row(&row.run.policy, "builtin").map(|builtin| &builtin.run);
        let Some((ratio, within)) = builtin.and_then(|builtin| Some((throughput_ratio(&row.run, builtin)?, throughput_within(&row.run, builtin, TECHNOLOGY_WITHIN_ONE_IN)))) else {
            unmeasured.push(key);
            continue;
        };
        compared += 1;
        all_within &= within;
        if worst.as_ref().is_none_or(|(_, worst, _)| (ratio - 1.0).abs() > (worst - 1.0).abs()) {
            worst = Some((key, ratio, within));
        }
    }
    let mut missing: Vec<String> = table.missing.iter().filter(|key| !key.ends_with("/none")).cloned().collect();
    missing.extend(unmeasured);
    let pass = missing.is_empty() && compared > 0 && all_within;
    let bound = format!("goal within ±{}%", numbers::trimmed(100.0 / TECHNOLOGY_WITHIN_ONE_IN));
    let gaps = if missing.is_empty() { String::new() } else { format!("; not measured: {}", missing.join(", ")) };
    let line = match &worst {
        Some((key, ratio, within)) => format!(
            "{} {TECHNOLOGY_GOAL}: worst {key} {} of built-in at {streams} streams ({bound}; {compared} compared{gaps})",
            verdict(pass),
            deviation(*ratio, *within)
        ),
        None => format!("FALL SHORT {TECHNOLOGY_GOAL}: not measured at {streams} streams ({})", missing.join(", ")),
    };
    let (worst, ratio) = worst.map_or((None, None), |(key, ratio, _)| (Some(key), Some(ratio)));
    DiskGoal { description: TECHNOLOGY_GOAL.into(), streams: Some(streams), ratio, worst, missing, pass, line }
}

/// The ratio columns: about three significant digits, `-` when absent.
fn times(value: Option<f64>) -> String {
    optional(value)
}

/// Milliseconds with three decimals.
fn milliseconds(value: f64) -> String {
    fixed(value, 3)
}

/// The terminal tables (one per stream count), or "not measured".
pub fn terminal(text: &mut String, tables: &[DiskTable]) {
    if tables.is_empty() {
        let _ = writeln!(text, "\ndisk scheduling (Seltzer '95)\n  {NOT_MEASURED}");
        return;
    }
    for table in tables {
        let _ = writeln!(text, "\n{}", table.title);
        let _ = writeln!(
            text,
            "  {:<7} {:<10} {:>8} {:>11} {:>7} {:>11} {:>11} {:>12} {:>14} {:>10}",
            "policy", "technology", "requests", "requests/s", "× FIFO", "mean ms", "p99 ms", "seek cyl/req", "instr/decision", "× built-in"
        );
        for row in &table.rows {
            let _ = writeln!(
                text,
                "  {:<7} {:<10} {:>8} {:>11} {:>7} {:>11} {:>11} {:>12} {:>14} {:>10}",
                row.run.policy,
                row.run.technology,
                numbers::grouped(row.run.requests as f64),
                optional(row.requests_per_second),
                times(row.times_fifo),
                milliseconds(row.mean_response_ms),
                milliseconds(row.p99_response_ms),
                optional(row.seek_cylinders_per_request),
                row.instructions_per_decision.map_or_else(|| "-".to_string(), count),
                times(row.times_builtin)
            );
        }
        if !table.missing.is_empty() {
            let _ = writeln!(text, "  not measured: {}", table.missing.join(", "));
        }
    }
}

/// report.md's disk section: what the workload is, the paper's context, the tables.
pub fn markdown(text: &mut String, tables: &[DiskTable]) {
    let _ = writeln!(text, "## Disk scheduling (Seltzer '95)\n");
    let _ = writeln!(
        text,
        "Each run keeps a number of streams busy (in each table's title), each with one random 4 KiB read outstanding anywhere on the disk, and the block service serves them one at a time; whenever the disk falls idle with reads queued it raises `disk.Schedule`, whose answer (FIFO, SSTF or C-LOOK, built in or as the extension `disksched_<policy>` in another technology) picks the next read. Technology `none` is FIFO with no binding: the block service's own queue order. Times are the disk model's (HP 97560, Ruemmler & Wilkes '94, `kernel/services/disk`), in guest time: under `-icount` the runs are deterministic and repeat exactly, and the instructions a decision takes pass guest time too. Throughput = reads ÷ elapsed modelled time; response = queueing + service.\n"
    );
    let _ = writeln!(
        text,
        "Seltzer, Small & Smith, *The Case for Extensible Operating Systems* (Harvard TR-16-95, §2), count the disk scheduler among the file system's arbitrators, each with a tuning interface through which an application replaces its policy decisions (what Small & Seltzer '96 call a graft). The paper measures read-ahead (§4.3) and lock granting (§4.4) but reports no disk-scheduling numbers, so no paper figures stand beside ours; Small & Seltzer '96 has no disk-scheduling experiment either. The goals are ours: C-LOOK ≥ 1.5× FIFO's throughput, and every technology within 1 % of the built-in policy's throughput (a policy's cost must not show in the disk's work).\n"
    );
    if tables.is_empty() {
        let _ = writeln!(text, "Not measured: the kernel printed no `bench disk` lines (a kernel without the disk benchmark, or a machine without a disk).\n");
        return;
    }
    for table in tables {
        let _ = writeln!(text, "### {}\n", table.title);
        let _ = writeln!(
            text,
            "| policy | technology | requests | requests/s (modelled) | × FIFO | mean response (ms) | p99 response (ms) | seek per request (cylinders) | instructions per decision | × built-in |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for row in &table.rows {
            let _ = writeln!(
                text,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                label(POLICIES, &row.run.policy),
                label(TECHNOLOGIES, &row.run.technology),
                numbers::grouped(row.run.requests as f64),
                optional(row.requests_per_second),
                times(row.times_fifo),
                milliseconds(row.mean_response_ms),
                milliseconds(row.p99_response_ms),
                optional(row.seek_cylinders_per_request),
                row.instructions_per_decision.map_or_else(|| "-".to_string(), count),
                times(row.times_builtin)
            );
        }
        if !table.missing.is_empty() {
            let _ = writeln!(text, "\nNot measured: {}.", table.missing.iter().map(|key| format!("`{key}`")).collect::<Vec<_>>().join(", "));
        }
        let _ = writeln!(text);
    }
    let _ = writeln!(
        text,
        "× FIFO: requests/s ÷ FIFO's without a binding, same stream count. Instructions per decision: guest instructions in `disk.Schedule` raises ÷ raises (`-` without a binding). × built-in: instructions per decision ÷ the built-in extension's of the same policy. Goals are evaluated at the largest stream count.\n"
    );
}

/// Largest relative difference, in parts per million, between two runs' modelled times and
/// decision instructions that still counts as the same measurement (1 %; measured: up to
/// 0.25 %).
pub const JITTER_PPM: u64 = 10_000;

/// Whether two runs of the same configuration measured the same thing. Requests, streams,
/// decisions and the modelled seek distance must be equal (the order of service repeats:
/// docs/storage.md); the modelled times and the decisions' instruction counts may differ by
/// [`JITTER_PPM`]: the virtio-blk device completes on the host's time, and when the host
/// has not finished by a request's modelled finish the delivery waits for it, at a guest
/// time that varies between runs; the rotational position then moves every later
/// request's latency a little.
pub fn repeats(first: &DiskRun, second: &DiskRun) -> bool {
    let within = |a: u64, b: u64, ppm: u64| u128::from(a.abs_diff(b)) * 1_000_000 <= u128::from(a.max(b)) * u128::from(ppm);
    let close = |a: u64, b: u64| within(a, b, JITTER_PPM);
    first.key() == second.key()
        && (first.streams, first.requests, first.decisions) == (second.streams, second.requests, second.decisions)
        && first.seek_cylinders == second.seek_cylinders
        && close(first.elapsed_ns, second.elapsed_ns)
        && close(first.busy_ns, second.busy_ns)
        && close(first.mean_response_ns, second.mean_response_ns)
        && close(first.p99_response_ns, second.p99_response_ns)
        && close(first.decision_instructions, second.decision_instructions)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A run of 2,048 reads at 32 streams with 2,016 decisions.
    fn run(policy: &str, technology: &str, elapsed_ns: u64, seek_cylinders: u64, instructions_per_decision: u64) -> DiskRun {
        DiskRun {
            policy: policy.into(),
            technology: technology.into(),
            streams: 32,
            requests: 2048,
            elapsed_ns,
            busy_ns: elapsed_ns - 1_000_000,
            mean_response_ns: 656_250_000,
            p99_response_ns: 1_402_345_678,
            seek_cylinders,
            decisions: 2016,
            decision_instructions: 2016 * instructions_per_decision,
        }
    }

    /// The lines of a full run, printed by the kernel in its own order.
    pub(crate) fn fixture_lines() -> Vec<String> {
        [
            "bench disk clook builtin 32 2048 26000000000 25990000000 406250000 812500000 206848 2016 624960",
            "bench disk fifo none 32 2048 42000000000 41999000000 656250000 1402345678 1343488 2016 0",
            "bench disk sstf builtin 32 2048 29000000000 28999000000 453125000 2100000000 143360 2016 564480",
            "bench disk sstf native 32 2048 29010000000 29009000000 453281250 2100000000 143360 2016 856800",
            "bench disk sstf wasm 32 2048 29140000000 29139000000 455312600 2100000000 143360 2016 12337920",
            "bench disk sstf user 32 2048 29050000000 29049000000 453906250 2100000000 143360 2016 3084480",
            "bench disk clook native 32 2048 26020000000 26019000000 406562700 813000000 206848 2016 917280",
            "bench disk clook wasm 32 2048 26200000000 26199000000 409375000 818750000 206848 2016 12337920",
            "bench disk clook user 32 2048 26060000000 26059000000 407187600 814375000 206848 2016 3084480",
        ]
        .iter()
        .map(|line| line.to_string())
        .collect()
    }

    pub(crate) fn fixture() -> Vec<DiskRun> {
        fixture_lines().iter().map(|line| parse_line(line).expect("fixture line parses")).collect()
    }

    #[test]
    fn parses_a_line() {
        let run = parse_line("  bench disk clook wasm 32 2048 26200000000 26199000000 409375000 818750000 206848 2016 12337920 ").expect("parsed");
        assert_eq!(
            run,
            DiskRun {
                policy: "clook".into(),
                technology: "wasm".into(),
                streams: 32,
                requests: 2048,
                elapsed_ns: 26_200_000_000,
                busy_ns: 26_199_000_000,
                mean_response_ns: 409_375_000,
                p99_response_ns: 818_750_000,
                seek_cylinders: 206_848,
                decisions: 2016,
                decision_instructions: 12_337_920,
            }
        );
        assert_eq!(run.key(), "clook/wasm");
        assert!(is_disk_line("bench disk fifo none"));
        assert!(is_disk_line(" bench disk"));
    }

    #[test]
    fn refuses_malformed_lines() {
        let good = "bench disk sstf native 32 2048 29010000000 29009000000 453281250 2100000000 143360 2016 856800";
        assert!(parse_line(good).is_some());
        for bad in [
            "bench disk sstf native 32 2048 29010000000 29009000000 453281250 2100000000 143360 2016",
            "bench disk sstf native 32 2048 29010000000 29009000000 453281250 2100000000 143360 2016 856800 7",
            "bench disk sstf native 32 2048 29010000000 29009000000 453281250 2.1e9 143360 2016 856800",
            "bench disk sstf native 32 -2048 29010000000 29009000000 453281250 2100000000 143360 2016 856800",
            "bench disk sstf native 32 2048 99999999999999999999 29009000000 453281250 2100000000 143360 2016 856800",
            "bench disk sstf 32 2048 29010000000 29009000000 453281250 2100000000 143360 2016 856800 1",
            "bench disk sstf none 32 2048 29010000000 29009000000 453281250 2100000000 143360 2016 0",
            "bench disksstf native 32 2048 29010000000 29009000000 453281250 2100000000 143360 2016 856800",
            "bench row disk sstf 32 2048",
            "bench disk",
            "",
        ] {
            assert!(parse_line(bad).is_none(), "accepted {bad:?}");
        }
        assert!(!is_disk_line("bench disksstf native 1"));
        assert!(!is_disk_line("bench: disk service up"));
        assert!(!is_disk_line("bench row disk x 1 2"));
    }

    #[test]
    fn throughput_and_ratio_arithmetic() {
        let fifo = run("fifo", "none", 42_000_000_000, 1_343_488, 0);
        assert!((fifo.requests_per_second().expect("timed") - 2048.0 / 42.0).abs() < 1e-9);
        assert_eq!(fifo.seek_per_request(), Some(656.0));
        assert_eq!(fifo.instructions_per_decision(), None, "no binding, no extension decides");
        let wasm = run("clook", "wasm", 26_200_000_000, 206_848, 6120);
        assert_eq!(wasm.instructions_per_decision(), Some(6120.0));
        assert!((ratio(wasm.requests_per_second(), fifo.requests_per_second()).expect("ratio") - 42.0 / 26.2).abs() < 1e-12);
        let untimed = DiskRun { elapsed_ns: 0, ..fifo.clone() };
        assert_eq!(untimed.requests_per_second(), None, "disk model `none`: no throughput");
        assert_eq!(ratio(wasm.requests_per_second(), untimed.requests_per_second()), None);
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        let idle = DiskRun { requests: 0, decisions: 0, ..wasm };
        assert_eq!((idle.seek_per_request(), idle.instructions_per_decision()), (None, None));
    }

    #[test]
    fn tables_order_rows_and_derive_ratios() {
        let tables = tables(&fixture());
        assert_eq!(tables.len(), 1);
        let table = &tables[0];
        assert_eq!(table.streams, 32);
        assert!(table.missing.is_empty(), "{:?}", table.missing);
        let order: Vec<String> = table.rows.iter().map(|row| row.run.key()).collect();
        assert_eq!(order, EXPECTED.iter().map(|key| key.to_string()).collect::<Vec<_>>());
        let clook = table.row("clook", "builtin").expect("row");
        assert!((clook.times_fifo.expect("ratio") - 42.0 / 26.0).abs() < 1e-12);
        assert_eq!(clook.times_builtin, Some(1.0));
        let wasm = table.row("sstf", "wasm").expect("row");
        assert!((wasm.times_builtin.expect("ratio") - 6120.0 / 280.0).abs() < 1e-12);
        assert!((wasm.times_fifo.expect("ratio") - 42.0 / 29.14).abs() < 1e-12);
        let fifo = table.row("fifo", "none").expect("row");
        assert_eq!((fifo.times_fifo, fifo.times_builtin, fifo.instructions_per_decision), (Some(1.0), None, None));
        assert_eq!(fifo.mean_response_ms, 656.25);
        // Another stream count is its own table, with its own baseline.
        let mut runs = fixture();
        runs.push(DiskRun { streams: 4, ..run("clook", "builtin", 40_000_000_000, 1_000_000, 300) });
        let tables = super::tables(&runs);
        assert_eq!(tables.iter().map(|table| table.streams).collect::<Vec<_>>(), vec![4, 32]);
        assert_eq!(tables[0].rows[0].times_fifo, None, "no FIFO run at 4 streams");
        assert_eq!(tables[0].missing.len(), EXPECTED.len() - 1);
    }

    #[test]
    fn goals_pass_on_the_fixture() {
        let goals = goals(&tables(&fixture()));
        assert_eq!(goals.len(), 2);
        assert!(goals[0].pass, "{}", goals[0].line);
        assert_eq!(goals[0].line, "PASS C-LOOK >= 1.5x FIFO throughput: 1.62× at 32 streams (goal ≥ 1.50×)");
        assert!(goals[1].pass, "{}", goals[1].line);
        assert_eq!(goals[1].worst.as_deref(), Some("clook/wasm"), "the largest deviation, not the first");
        assert!((goals[1].ratio.expect("ratio") - 26.0 / 26.2).abs() < 1e-12);
        assert_eq!(goals[1].line, "PASS every technology within 1% of built-in's modelled throughput: worst clook/wasm -0.76% of built-in at 32 streams (goal within ±1%; 6 compared)");
    }

    #[test]
    fn goals_fall_short_when_missed_or_missing() {
        // C-LOOK only 1.4× FIFO; one technology 1.2 % slower than built-in.
        let mut runs = fixture();
        for run in &mut runs {
            match run.key().as_str() {
                "clook/builtin" => run.elapsed_ns = 30_000_000_000,
                "clook/native" => run.elapsed_ns = 30_000_000_000,
                "clook/wasm" => run.elapsed_ns = 30_000_000_000,
                "clook/user" => run.elapsed_ns = 30_000_000_000,
                "sstf/user" => run.elapsed_ns = 29_348_000_000,
                _ => {}
            }
        }
        let goals = super::goals(&super::tables(&runs));
        assert!(!goals[0].pass);
        assert_eq!(goals[0].line, "FALL SHORT C-LOOK >= 1.5x FIFO throughput: 1.40× at 32 streams (goal ≥ 1.50×)");
        assert!(!goals[1].pass);
        assert_eq!(goals[1].worst.as_deref(), Some("sstf/user"));
        assert!(goals[1].line.starts_with("FALL SHORT every technology within 1% of built-in's modelled throughput: worst sstf/user -1.19% of built-in"), "{}", goals[1].line);
        // Exactly at the bounds (1.5× FIFO; 1 % below built-in): both pass, decided
        // exactly although 0.99 − 1 is not −0.01 in floating point.
        let mut runs = fixture();
        for run in &mut runs {
            match run.key().as_str() {
                "fifo/none" => run.elapsed_ns = 39_000_000_000,
                // (1,980 × 29 s) ÷ (2,048 × 28.3203125 s) = 0.99 exactly.
                "sstf/user" => (run.requests, run.elapsed_ns) = (1980, 28_320_312_500),
                _ => {}
            }
        }
        let goals = super::goals(&super::tables(&runs));
        assert_eq!(goals[0].ratio, Some(1.5));
        assert!(goals[0].pass, "{}", goals[0].line);
        assert_eq!(goals[1].worst.as_deref(), Some("sstf/user"));
        assert!(goals[1].pass, "{}", goals[1].line);
        assert!(goals[1].line.contains("worst sstf/user -1.00% of built-in"), "{}", goals[1].line);
        // One read fewer: 1.05 % below, a miss that must not print as -1.00 %.
        let runs: Vec<DiskRun> = runs.into_iter().map(|run| if run.key() == "sstf/user" { DiskRun { requests: 1979, ..run } } else { run }).collect();
        let goals = super::goals(&super::tables(&runs));
        assert!(!goals[1].pass);
        assert!(goals[1].line.contains("worst sstf/user -1.05% of built-in"), "{}", goals[1].line);
        // A missing technology never passes, even when the others are within 1 %.
        let runs: Vec<DiskRun> = fixture().into_iter().filter(|run| run.key() != "sstf/wasm").collect();
        let goals = super::goals(&super::tables(&runs));
        assert!(goals[0].pass);
        assert!(!goals[1].pass);
        assert_eq!(goals[1].missing, vec!["sstf/wasm".to_string()]);
        assert!(goals[1].line.ends_with("(goal within ±1%; 5 compared; not measured: sstf/wasm)"), "{}", goals[1].line);
        // No FIFO baseline.
        let runs: Vec<DiskRun> = fixture().into_iter().filter(|run| run.key() != "fifo/none").collect();
        let goals = super::goals(&super::tables(&runs));
        assert_eq!(goals[0].line, "FALL SHORT C-LOOK >= 1.5x FIFO throughput: not measured (fifo/none at 32 streams)");
        assert!(goals[1].pass, "the technology goal does not need FIFO");
        // No modelled time (disk model `none`).
        let runs: Vec<DiskRun> = fixture().into_iter().map(|run| DiskRun { elapsed_ns: 0, ..run }).collect();
        let goals = super::goals(&super::tables(&runs));
        assert!(!goals[0].pass && !goals[1].pass);
        assert!(goals[0].line.contains("no modelled time"), "{}", goals[0].line);
        assert!(goals[1].line.starts_with("FALL SHORT every technology within 1% of built-in's modelled throughput: not measured at 32 streams (sstf/native"), "{}", goals[1].line);
    }

    #[test]
    fn no_lines_mean_not_measured() {
        let goals = goals(&[]);
        assert_eq!(goals.len(), 2);
        for goal in &goals {
            assert!(!goal.pass);
            assert!(goal.line.starts_with(&format!("FALL SHORT {}: not measured (no `bench disk` lines", goal.description)), "{}", goal.line);
        }
        let mut text = String::new();
        terminal(&mut text, &[]);
        assert!(text.contains("disk scheduling (Seltzer '95)\n  not measured"));
        let mut text = String::new();
        markdown(&mut text, &[]);
        assert!(text.contains("## Disk scheduling (Seltzer '95)"));
        assert!(text.contains("Not measured: the kernel printed no `bench disk` lines"));
    }

    #[test]
    fn deviations_never_hide_a_miss() {
        assert_eq!(deviation(26.0 / 26.2, true), "-0.76%");
        assert_eq!(deviation(1.0042, true), "+0.42%");
        assert_eq!(deviation(1.0, true), "0.00%");
        assert_eq!(deviation(1.00001, true), "0.00%", "no sign on a deviation that prints as zero");
        assert_eq!(deviation(0.98996, false), "-1.0040%");
        assert_eq!(deviation(0.99, true), "-1.00%");
        assert_eq!(deviation(0.985, false), "-1.50%");
    }

    #[test]
    fn renders_the_fixture_table() {
        let tables = tables(&fixture());
        let mut text = String::new();
        terminal(&mut text, &tables);
        let expected = "
disk scheduling (Seltzer '95): 32 streams of random 4 KiB reads over the whole disk, HP 97560 model
  policy  technology requests  requests/s  × FIFO     mean ms      p99 ms seek cyl/req instr/decision × built-in
  fifo    none          2,048        48.8    1.00     656.250   1,402.346          656              -          -
  sstf    builtin       2,048        70.6    1.45     453.125   2,100.000         70.0            280       1.00
  sstf    native        2,048        70.6    1.45     453.281   2,100.000         70.0            425       1.52
  sstf    wasm          2,048        70.3    1.44     455.313   2,100.000         70.0          6,120       21.9
  sstf    user          2,048        70.5    1.45     453.906   2,100.000         70.0          1,530       5.46
  clook   builtin       2,048        78.8    1.62     406.250     812.500          101            310       1.00
  clook   native        2,048        78.7    1.61     406.563     813.000          101            455       1.47
  clook   wasm          2,048        78.2    1.60     409.375     818.750          101          6,120       19.7
  clook   user          2,048        78.6    1.61     407.188     814.375          101          1,530       4.94
";
        assert_eq!(text, expected, "got:\n{text}");
        let mut text = String::new();
        markdown(&mut text, &tables);
        for needle in [
            "### disk scheduling (Seltzer '95): 32 streams of random 4 KiB reads over the whole disk, HP 97560 model",
            "| policy | technology | requests | requests/s (modelled) | × FIFO | mean response (ms) | p99 response (ms) | seek per request (cylinders) | instructions per decision | × built-in |",
            "| FIFO | none (block service's FIFO) | 2,048 | 48.8 | 1.00 | 656.250 | 1,402.346 | 656 | - | - |",
            "| C-LOOK | Wasm (wasmi) | 2,048 | 78.2 | 1.60 | 409.375 | 818.750 | 101 | 6,120 | 19.7 |",
            "reports no disk-scheduling numbers",
            "Small & Seltzer '96 has no disk-scheduling experiment",
        ] {
            assert!(text.contains(needle), "report.md's disk section lacks {needle:?}:\n{text}");
        }
        assert!(!text.contains("Not measured:"), "the fixture is complete");
        // A partial run lists what is missing.
        let runs: Vec<DiskRun> = fixture().into_iter().filter(|run| run.policy != "sstf").collect();
        let mut text = String::new();
        terminal(&mut text, &super::tables(&runs));
        assert!(text.ends_with("  not measured: sstf/builtin, sstf/native, sstf/wasm, sstf/user\n"), "{text}");
    }
}
