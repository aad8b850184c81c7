//! `cargo xtask bench`: boots the kernel under QEMU with `-icount shift=0,align=off,sleep=off`,
//! where `rdinstret` is an exact, repeatable instruction count, and reports instructions
//! per operation. Everything runs twice; a count that differs between the runs fails
//! the benchmark. Goals are checked as ratios of rows measured in the same run and
//! printed as `PASS` / `FALL SHORT` lines (they are not tests).
//!
//! The kernel prints two kinds of lines (`kernel/src/bench/`): `bench row <group> <name>
//! <iterations> <instructions ×1000>` and, for rows that trap or switch address space,
//! `bench hw <group> <name> <traps ×1000> <satp writes ×1000> <sfence.vma ×1000>` (per
//! operation; a row without one caused none), and, for the disk-scheduling group, `bench
//! disk <policy> <technology> <streams> <requests> <elapsed_ns> <busy_ns>
//! <mean_response_ns> <p99_response_ns> <seek_cylinders> <decisions>
//! <decision_instructions>` ([`disk`]), and, for the block grafts on the disk model, `bench
//! blockio read|md5|write …` ([`blockio`]), and, for the per-file policies group, `bench
//! policies <experiment> …` ([`policies`]). A `bench FAILED …` line fails the run.
//! [`report`] turns them into the terminal tables,
//! `target/bench/results.json`, `target/bench/report.md` and the SVG charts of [`charts`];
//! [`model`] holds the cycle and disk models with their sources, [`grafts`] the per-graft
//! contract, [`paper`] Small & Seltzer's tables.

pub mod blockio;
pub mod charts;
pub mod disk;
pub mod grafts;
pub mod model;
pub mod numbers;
pub mod paper;
pub mod policies;
pub mod report;
pub mod spin;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::kernel_build::Image;
use crate::qemu::{Exit, Machine};
use blockio::BlockioRuns;
use disk::DiskRun;
use model::HardwareCounts;

/// QEMU flags that make instruction counts exact: one instruction per virtual ns.
pub const ICOUNT: &[&str] = crate::qemu::Clock::ExactDeterministic.arguments();
/// Host timeout for one benchmark boot.
const BENCH_TIMEOUT: Duration = Duration::from_secs(600);
/// How the rows are measured (printed in the report and results.json).
pub const METHOD: &str = "rdinstret around a loop of N operations with interrupts off, minus the same loop with an empty body; QEMU -icount makes counts exact; run twice and compared";

/// One measured row.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Row {
    /// Group (table) the row belongs to.
    pub group: String,
    /// Row name.
    pub name: String,
    /// Repetitions measured.
    pub iterations: u64,
    /// Instructions per operation (empty-loop baseline subtracted).
    pub instructions: f64,
}

/// Hardware events of one row, per operation (a `bench hw` line).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct HardwareLine {
    /// Group of the row.
    pub group: String,
    /// Row name.
    pub name: String,
    /// The counts, per operation.
    pub counts: HardwareCounts,
}

/// Parses `bench row <group> <name> <iterations> <milli-instructions>`.
pub fn parse_row(line: &str) -> Option<Row> {
    let mut words = line.trim().strip_prefix("bench row ")?.split_ascii_whitespace();
    let group = words.next()?.to_string();
    let name = words.next()?.to_string();
    let iterations = words.next()?.parse().ok()?;
    let milli: u64 = words.next()?.parse().ok()?;
    if words.next().is_some() {
        return None;
    }
    Some(Row { group, name, iterations, instructions: milli as f64 / 1000.0 })
}

/// Parses `bench hw <group> <name> <traps ×1000> <satp writes ×1000> <sfence.vma ×1000>`
/// (all per operation).
pub fn parse_hardware(line: &str) -> Option<HardwareLine> {
    let mut words = line.trim().strip_prefix("bench hw ")?.split_ascii_whitespace();
    let group = words.next()?.to_string();
    let name = words.next()?.to_string();
    let mut milli = || -> Option<f64> { words.next()?.parse::<u64>().ok().map(|value| value as f64 / 1000.0) };
    let counts = HardwareCounts { traps: milli()?, satp_writes: milli()?, sfences: milli()? };
    if words.next().is_some() {
        return None;
    }
    Some(HardwareLine { group, name, counts })
}

/// Everything one benchmark kernel printed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurements {
    /// `bench row` lines.
    pub rows: Vec<Row>,
    /// `bench hw` lines.
    pub hardware: Vec<HardwareLine>,
    /// `bench disk` lines.
    pub disk: Vec<DiskRun>,
    /// Lines that start `bench disk` but do not parse (trimmed), in output order.
    pub malformed: Vec<String>,
    /// `bench blockio` lines.
    pub blockio: BlockioRuns,
    /// Lines that start `bench blockio` but do not parse (trimmed), in output order.
    pub malformed_blockio: Vec<String>,
    /// `bench policies` lines.
    pub policies: Vec<policies::PolicyRun>,
    /// Lines that start `bench policies` but do not parse (trimmed), in output order.
    pub malformed_policies: Vec<String>,
}

/// Collects the rows, hardware lines, disk runs and blockio runs of a kernel's output, and
/// the `bench disk` and `bench blockio` lines that do not parse.
pub fn parse_output<S: AsRef<str>>(lines: &[S]) -> Measurements {
    let lines = || lines.iter().map(AsRef::as_ref);
    Measurements {
        rows: lines().filter_map(parse_row).collect(),
        hardware: lines().filter_map(parse_hardware).collect(),
        disk: lines().filter_map(disk::parse_line).collect(),
        malformed: lines().filter(|line| disk::is_disk_line(line) && disk::parse_line(line).is_none()).map(|line| line.trim().to_string()).collect(),
        blockio: BlockioRuns::from_lines(lines()),
        malformed_blockio: lines().filter(|line| blockio::is_blockio_line(line) && blockio::parse_line(line).is_none()).map(|line| line.trim().to_string()).collect(),
        policies: lines().filter_map(policies::parse_line).collect(),
        malformed_policies: lines().filter(|line| policies::is_policies_line(line) && policies::parse_line(line).is_none()).map(|line| line.trim().to_string()).collect(),
    }
}

/// What differs between two runs' measurements, one line each: rows, hardware lines, disk
/// runs and blockio runs ([`blockio::differences`]) compared in output order, and a
/// different number of any of them (or of malformed disk or blockio lines). Empty when the
/// runs match.
pub fn differences(first: &Measurements, second: &Measurements) -> Vec<String> {
    let mut found = Vec::new();
    for (a, b) in first.rows.iter().zip(&second.rows) {
        if a != b && !user_row_jitter(a, b) {
            found.push(format!("{}/{}: {} vs {}", a.group, a.name, a.instructions, b.instructions));
        }
    }
    for (a, b) in first.hardware.iter().zip(&second.hardware) {
        if a != b {
            found.push(format!("hw {}/{}: {:?} vs {:?}", a.group, a.name, a.counts, b.counts));
        }
    }
    for (a, b) in first.disk.iter().zip(&second.disk) {
        if !disk::repeats(a, b) {
            found.push(format!("disk {} at {} streams: {a:?} vs {b:?}", a.key(), a.streams));
        }
    }
    found.extend(blockio::differences(&first.blockio, &second.blockio));
    found.extend(policies::differences(&first.policies, &second.policies));
    for (what, a, b) in [
        ("rows", first.rows.len(), second.rows.len()),
        ("hw lines", first.hardware.len(), second.hardware.len()),
        ("disk lines", first.disk.len(), second.disk.len()),
        ("malformed disk lines", first.malformed.len(), second.malformed.len()),
        ("malformed blockio lines", first.malformed_blockio.len(), second.malformed_blockio.len()),
        ("malformed policies lines", first.malformed_policies.len(), second.malformed_policies.len()),
    ] {
        if a != b {
            found.push(format!("{what}: {a} vs {b}"));
        }
    }
    found
}

/// Most a user-level row (`…-user`) may differ between the two runs, parts per million.
/// Such a row's user mode runs with interrupts on; between boots its count has been seen to
/// move by up to about 8 ppm (`graft-logdisk/write-user`: 1,252.088–1,252.096), although
/// each graft row now starts right after a tick (cause not found; every other row repeats
/// exactly). The first run's value is reported.
pub const USER_ROW_JITTER_PPM: f64 = 20.0;

/// Whether rows `a` and `b` are the same user-level row within [`USER_ROW_JITTER_PPM`].
fn user_row_jitter(a: &Row, b: &Row) -> bool {
    let same = a.group == b.group && a.name == b.name && a.iterations == b.iterations && a.name.ends_with("-user");
    same && (a.instructions - b.instructions).abs() * 1e6 <= a.instructions.abs().max(b.instructions.abs()) * USER_ROW_JITTER_PPM
}

/// The `bench FAILED …` lines of a kernel's output (trimmed), in output order: a graft
/// that answered wrongly, a disk run that lost a request, a blockio run whose data did not
/// read back. Any one fails the benchmark, whatever the exit status.
pub fn failures<S: AsRef<str>>(lines: &[S]) -> Vec<String> {
    lines.iter().map(|line| line.as_ref().trim()).filter(|line| line.strip_prefix("bench FAILED").is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', ':']))).map(str::to_string).collect()
}

/// `run_once` on a variant build: only the [`VARIANT_GROUPS`] are kept, so the disk groups
/// (minutes of modelled I/O, no Wasm in their numbers that the variant changes) are not run.
const VARIANT_BOOT_ARGUMENT: &str = "spindle.bench.io=off";

fn run_once(kernel: &Image, variant: bool) -> Result<Measurements> {
    run_groups(kernel, variant, None)
}

/// One benchmark boot of `kernel`, only `groups` (comma-separated) when given.
fn run_groups(kernel: &Image, variant: bool, groups: Option<&str>) -> Result<Measurements> {
    let mut machine = Machine::for_image(kernel);
    machine.append("spindle.mode=bench").extra(ICOUNT);
    if variant {
        machine.append(VARIANT_BOOT_ARGUMENT);
    }
    let groups_argument = groups.map(|groups| format!("spindle.bench.groups={groups}"));
    if let Some(argument) = &groups_argument {
        machine.append(argument);
    }
    let (exit, lines) = machine.run_captured(BENCH_TIMEOUT, false)?;
    if groups.is_some() {
        // A partial run shows the kernel's own notes too (`bench: …`).
        for line in lines.iter().filter(|line| line.trim_start().starts_with("bench: ")) {
            println!("  | {}", line.trim());
        }
    }
    let failed = failures(&lines);
    if exit != Exit::Status(0) || !lines.iter().any(|line| line.trim() == "bench end") || !failed.is_empty() {
        for line in lines.iter().rev().take(30).rev() {
            println!("    | {line}");
        }
        for line in &failed {
            println!("  failed: {line}");
        }
        return Err(match failed.first() {
            Some(first) => format!("the benchmark kernel reported {} failure(s), the first: {first} ({exit:?})", failed.len()),
            None => format!("the benchmark kernel did not finish cleanly ({exit:?})"),
        });
    }
    let measured = parse_output(&lines);
    for line in &measured.malformed {
        println!("  ignored (not `bench disk <policy> <technology>` and nine unsigned integers): {line}");
    }
    for line in &measured.malformed_blockio {
        println!("  ignored (not `bench blockio read` and four unsigned integers, `md5 <technology>` and four, or `write <placement> <technology>` and five): {line}");
    }
    for line in &measured.malformed_policies {
        println!("  ignored (not `bench policies <experiment> <policy> <technology>` and the experiment's unsigned integers): {line}");
    }
    Ok(measured)
}

/// Runs `kernel`'s benchmarks twice and checks that the counts match (a `label`: a
/// variant build, whose disk groups are skipped). Any row or other line that differs fails
/// the benchmark; a disk run that did not repeat (its order of service followed the host's
/// speed: docs/storage.md) is returned to be reported as a goal missed, with the first
/// run's numbers kept, so the rest of the report is still written.
fn run_twice(kernel: &Image, label: &str) -> Result<(Measurements, Vec<String>)> {
    let variant = !label.is_empty();
    println!("== benchmark run 1 of 2{label}");
    let first = run_once(kernel, variant)?;
    println!("== benchmark run 2 of 2{label}");
    let second = run_once(kernel, variant)?;
    let (disk, other): (Vec<String>, Vec<String>) = differences(&first, &second).into_iter().partition(|difference| difference.starts_with("disk "));
    for difference in &disk {
        println!("  not repeated (reported as a goal missed): {difference}");
    }
    if !other.is_empty() {
        for difference in other {
            println!("  differs: {difference}");
        }
        return Err("instruction counts differ between two identical runs: the measurement is not deterministic".into());
    }
    Ok((first, disk))
}

/// The groups whose rows are also measured on a kernel variant (the Wasm interpreter's
/// cost depends on the build).
pub const VARIANT_GROUPS: &[&str] = &["extension-cost", "graft-hotlist", "graft-md5", "graft-logdisk"];

/// One kernel build the benchmark ran, as the report describes it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct BuildInfo {
    /// `default` or `+<variant>`.
    pub label: String,
    /// Target triple.
    pub target: String,
    /// Extra `RUSTFLAGS` (empty for the default build).
    pub rustflags: String,
    /// The target features rustc enables for this build (`rustc --print cfg`).
    pub target_features: Vec<String>,
}

/// The `target_feature` values of `rustc --print cfg` output.
pub fn parse_target_features(cfg: &str) -> Vec<String> {
    cfg.lines().filter_map(|line| line.trim().strip_prefix("target_feature=\"")?.strip_suffix('"').map(str::to_string)).collect()
}

/// Asks rustc (the workspace's toolchain) which target features a kernel build with
/// `rustflags` enables.
fn build_info(label: &str, rustflags: &str) -> BuildInfo {
    let mut command = std::process::Command::new("rustc");
    command.current_dir(crate::kernel_build::workspace_root()).args(["--print", "cfg", "--target", crate::kernel_build::KERNEL_TARGET]);
    command.args(rustflags.split_ascii_whitespace());
    let target_features = match command.output() {
        Ok(output) if output.status.success() => parse_target_features(&String::from_utf8_lossy(&output.stdout)),
        _ => Vec::new(),
    };
    BuildInfo { label: label.into(), target: crate::kernel_build::KERNEL_TARGET.into(), rustflags: rustflags.into(), target_features }
}

/// Everything the report is made from: the rows and hardware lines of every build (the
/// variant's [`VARIANT_GROUPS`] relabelled `GROUP [+label]`), the default build's disk
/// and blockio runs, and the builds.
#[derive(Clone, Debug, Default)]
pub struct ResultsSet {
    /// Rows, in the order measured.
    pub rows: Vec<Row>,
    /// Hardware lines.
    pub hardware: Vec<HardwareLine>,
    /// `bench disk` runs of the default build (empty: not measured).
    pub disk: Vec<DiskRun>,
    /// `bench blockio` runs of the default build (empty: not measured).
    pub blockio: BlockioRuns,
    /// `bench policies` runs of the default build (empty: not measured).
    pub policies: Vec<policies::PolicyRun>,
    /// The builds measured (default first).
    pub builds: Vec<BuildInfo>,
    /// The variant's label (without `+`), if one was measured.
    pub variant: Option<String>,
    /// Disk runs that did not repeat between the two identical runs (reported as a goal
    /// missed, not fatal: see [`run_twice`]).
    pub unrepeatable: Vec<String>,
}

impl ResultsSet {
    /// Adds a variant build's measurements: its [`VARIANT_GROUPS`] rows, relabelled. Its
    /// disk and blockio runs are left out (those groups are reported from the default
    /// build; the variant's runs were still checked for determinism).
    pub fn add_variant(&mut self, label: &str, measured: Measurements) {
        let relabel = |group: &str| format!("{group} [+{label}]");
        self.rows.extend(
            measured.rows.into_iter().filter(|row| VARIANT_GROUPS.contains(&row.group.as_str())).map(|row| Row { group: relabel(&row.group), ..row }),
        );
        self.hardware.extend(
            measured
                .hardware
                .into_iter()
                .filter(|line| VARIANT_GROUPS.contains(&line.group.as_str()))
                .map(|line| HardwareLine { group: relabel(&line.group), ..line }),
        );
        self.variant = Some(label.into());
    }
}

/// Runs the benchmarks twice, checks determinism, prints and writes the results; with a
/// `variant` (label, RUSTFLAGS, image), also its [`VARIANT_GROUPS`] rows, in groups
/// labelled `GROUP [+label]`.
pub fn run(kernel: &Image, variant: Option<(&str, &str, &Image)>) -> Result<bool> {
    let (measured, mut unrepeatable) = run_twice(kernel, "")?;
    let mut set = ResultsSet {
        rows: measured.rows,
        hardware: measured.hardware,
        disk: measured.disk,
        blockio: measured.blockio,
        policies: measured.policies,
        builds: vec![build_info("default", "")],
        variant: None,
        unrepeatable: Vec::new(),
    };
    if let Some((label, rustflags, image)) = variant {
        let (rows, variant_unrepeatable) = run_twice(image, &format!(" (kernel built with +{label})"))?;
        unrepeatable.extend(variant_unrepeatable);
        set.unrepeatable = unrepeatable.clone();
        set.add_variant(label, rows);
        set.builds.push(build_info(&format!("+{label}"), rustflags));
    }
    set.unrepeatable = unrepeatable;
    let directory = crate::kernel_build::workspace_root().join("target").join("bench");
    let written = report::write_all(&set, &directory)?;
    print!("{}", written.terminal);
    println!("\nwrote {}/results.json, report.md and {} chart(s)", directory.display(), written.charts.len());
    Ok(true)
}

/// `bench --groups A,B`: one boot of each build running only those groups (the kernel's
/// `spindle.bench.groups`), its rows printed (with their `bench hw` counts); nothing is compared, checked against goals
/// or written (a quick look while working on a few rows; the full run stays the record).
/// `builds` are (label, image), the default build labelled `default`.
pub fn run_only(groups: &str, builds: &[(&str, &Image)]) -> Result<()> {
    for &(label, image) in builds {
        println!("== benchmark groups {groups} ({label} build), one run");
        let measured = run_groups(image, label != "default", Some(groups))?;
        for row in &measured.rows {
            let hardware = measured.hardware.iter().find(|line| line.group == row.group && line.name == row.name);
            let events = hardware.map_or_else(String::new, |line| {
                format!("  traps {:.3}, satp {:.3}, sfence.vma {:.3}", line.counts.traps, line.counts.satp_writes, line.counts.sfences)
            });
            println!("  {:<16} {:<44} {:>14.3}{events}", row.group, row.name, row.instructions);
        }
        for run in &measured.policies {
            println!("  policies {:<10} {:<12} {:<8} {:?}", run.experiment, run.policy, run.technology, run.values);
        }
    }
    Ok(())
}

/// `bench --report-only`: re-renders report.md and the charts from the results.json of
/// an earlier run (left unchanged) and prints the tables; builds and runs nothing.
pub fn report_only() -> Result<()> {
    let directory = crate::kernel_build::workspace_root().join("target").join("bench");
    let written = report::rewrite_from_saved(&directory)?;
    print!("{}", written.terminal);
    println!("\nwrote {}/report.md and {} chart(s) from results.json", directory.display(), written.charts.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows() {
        let row = parse_row("bench row calls indirect-call 10000 10500").expect("row");
        assert_eq!(row.group, "calls");
        assert_eq!(row.name, "indirect-call");
        assert_eq!(row.iterations, 10000);
        assert!((row.instructions - 10.5).abs() < 1e-9);
        assert!(parse_row("bench begin").is_none());
        assert!(parse_row("bench row a b x 1").is_none());
        assert!(parse_row("bench row a b 1").is_none());
        assert!(parse_row("bench row a b 1 2 3").is_none());
    }

    #[test]
    fn parses_hardware_lines() {
        let line = parse_hardware("  bench hw graft-hotlist reclaim-user 1000 2000 500 ").expect("hw line");
        assert_eq!(line.group, "graft-hotlist");
        assert_eq!(line.name, "reclaim-user");
        assert_eq!(line.counts, HardwareCounts { traps: 1.0, satp_writes: 2.0, sfences: 0.5 });
        assert!(parse_hardware("bench hw g n 1 2").is_none(), "three counts required");
        assert!(parse_hardware("bench hw g n 1 2 3 4").is_none());
        assert!(parse_hardware("bench hw g n 1 -2 3").is_none(), "counts are unsigned");
        assert!(parse_hardware("bench row g n 1 2").is_none());
        assert!(parse_row("bench hw g n 1 2 3").is_none());
    }

    #[test]
    fn parses_output_and_relabels_variant_groups() {
        let lines = ["bench begin", "bench row graft-md5 md5-wasm 16 5000", "bench hw graft-md5 md5-wasm 0 0 0", "bench row calls direct-call 10000 11000", "bench end"];
        let measured = parse_output(&lines);
        assert_eq!(measured.rows.len(), 2);
        assert_eq!(measured.hardware.len(), 1);
        let mut set = ResultsSet::default();
        set.add_variant("unaligned-scalar-mem", measured);
        assert_eq!(set.rows.len(), 1, "only variant groups are kept");
        assert_eq!(set.rows[0].group, "graft-md5 [+unaligned-scalar-mem]");
        assert_eq!(set.hardware[0].group, "graft-md5 [+unaligned-scalar-mem]");
    }

    #[test]
    fn parses_disk_lines_and_keeps_them_from_the_default_build_only() {
        let lines = [
            "bench begin",
            "bench disk fifo none 32 2048 42000000000 41999000000 656250000 1402345678 1343488 2016 0",
            "bench: disk service up",
            "bench disk clook wasm 32 2048 x 26199000000 409375000 818750000 206848 2016 12337920",
            "bench disk clook builtin 32 2048 26000000000 25990000000 406250000 812500000 206848 2016 624960",
            "bench end",
        ];
        let measured = parse_output(&lines);
        assert_eq!(measured.disk.iter().map(DiskRun::key).collect::<Vec<_>>(), vec!["fifo/none", "clook/builtin"]);
        assert_eq!(measured.malformed, vec!["bench disk clook wasm 32 2048 x 26199000000 409375000 818750000 206848 2016 12337920".to_string()]);
        assert!(measured.rows.is_empty() && measured.hardware.is_empty(), "disk lines are not rows");
        let mut set = ResultsSet::default();
        set.add_variant("unaligned-scalar-mem", measured);
        assert!(set.disk.is_empty(), "the variant's disk runs are not reported");
    }

    #[test]
    fn differences_name_what_moved() {
        let lines = [
            "bench row calls direct-call 10000 11000",
            "bench disk clook builtin 32 2048 26000000000 25990000000 406250000 812500000 206848 2016 624960",
            "bench disk clook wasm 32 2048 26200000000 26199000000 409375000 818750000 206848 2016 12337920",
        ];
        let first = parse_output(&lines);
        assert!(differences(&first, &first.clone()).is_empty());
        // A user-level row may move by a few ppm; any other row not at all.
        let rows = |name: &str, instructions: f64| Measurements { rows: vec![Row { group: "graft-logdisk".into(), name: name.into(), iterations: 4096, instructions }], ..first.clone() };
        assert!(differences(&rows("write-user", 1252.089), &rows("write-user", 1252.098)).is_empty(), "7 ppm on a user row");
        assert_eq!(differences(&rows("write-user", 1252.089), &rows("write-user", 1252.189)).len(), 1, "80 ppm on a user row");
        assert_eq!(differences(&rows("write-native", 485.0), &rows("write-native", 485.001)).len(), 1, "any change on another row");
        let mut second = first.clone();
        // Modelled times and decision instructions may jitter with the host's device
        // completions (see disk::repeats); the decisions, requests and seek distance (the
        // order of service) may not.
        second.disk[1].decision_instructions += 1;
        second.disk[1].elapsed_ns += second.disk[1].elapsed_ns / 200;
        assert!(differences(&first, &second).is_empty(), "jitter within the tolerance");
        second.disk[1].seek_cylinders += 1;
        let found = differences(&first, &second);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("disk clook/wasm at 32 streams: "), "{found:?}");
        second.disk.pop();
        assert!(differences(&first, &second).contains(&"disk lines: 2 vs 1".to_string()));
        let mut third = first.clone();
        third.malformed.push("bench disk ?".into());
        assert_eq!(differences(&first, &third), vec!["malformed disk lines: 0 vs 1".to_string()]);
    }

    #[test]
    fn parses_blockio_lines_and_keeps_them_from_the_default_build_only() {
        let lines = [
            "bench begin",
            "bench blockio read 1048576 420000000 400000000 16",
            "bench blockio md5 wasm 1048576 x 400000000 405000000",
            "bench blockio md5 builtin 1048576 441000000 400000000 21500000",
            "bench disk fifo none 32 2048 42000000000 41999000000 656250000 1402345678 1343488 2016 0",
            "bench blockio write logdisk builtin 262144 16384 520000000000 500000000000 2000000",
            "bench: blockio group skipped: the machine has no disk",
            "bench end",
        ];
        let measured = parse_output(&lines);
        assert_eq!((measured.blockio.read.len(), measured.blockio.md5.len(), measured.blockio.write.len()), (1, 1, 1));
        assert_eq!(measured.malformed_blockio, vec!["bench blockio md5 wasm 1048576 x 400000000 405000000".to_string()]);
        assert!(measured.malformed.is_empty(), "a blockio line is not a malformed disk line");
        assert_eq!(measured.disk.len(), 1);
        assert!(measured.rows.is_empty() && measured.hardware.is_empty());
        let mut set = ResultsSet::default();
        set.add_variant("unaligned-scalar-mem", measured.clone());
        assert!(set.blockio.is_empty(), "the variant's blockio runs are not reported");
        // Between two runs: jitter within 1 % passes, more fails, a line fewer fails.
        let mut second = measured.clone();
        second.blockio.md5[0].instructions += 100;
        assert!(differences(&measured, &second).is_empty());
        second.blockio.write[0].busy_ns += 10_000_000_000;
        assert_eq!(differences(&measured, &second).len(), 1);
        let mut third = measured.clone();
        third.blockio.read.clear();
        third.malformed_blockio.clear();
        assert_eq!(differences(&measured, &third), vec!["blockio read lines: 1 vs 0".to_string(), "malformed blockio lines: 1 vs 0".to_string()]);
    }

    #[test]
    fn failed_lines_are_found() {
        let lines = [
            "bench begin",
            "bench blockio read 1048576 420000000 400000000 16",
            " bench FAILED blockio write logdisk wasm: logical block 7: expected version 3 of it, found data stamped block 7 version 2",
            "bench FAILED disk sstf user: request 12 completed twice",
            "bench FAILED: a graft answered wrongly",
            "bench FAILEDX not one",
            "bench row calls direct-call 10000 11000",
        ];
        assert_eq!(
            failures(&lines),
            vec![
                "bench FAILED blockio write logdisk wasm: logical block 7: expected version 3 of it, found data stamped block 7 version 2".to_string(),
                "bench FAILED disk sstf user: request 12 completed twice".to_string(),
                "bench FAILED: a graft answered wrongly".to_string(),
            ]
        );
        assert!(failures(&["bench begin", "bench end"]).is_empty());
        let measured = parse_output(&lines);
        assert!(measured.malformed_blockio.is_empty() && measured.malformed.is_empty(), "a failure is not a malformed line");
    }

    #[test]
    fn parses_target_features() {
        let cfg = "debug_assertions\npanic=\"abort\"\ntarget_feature=\"a\"\ntarget_feature=\"unaligned-scalar-mem\"\ntarget_arch=\"riscv64\"\n";
        assert_eq!(parse_target_features(cfg), vec!["a", "unaligned-scalar-mem"]);
    }
}
