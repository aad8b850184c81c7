//! `cargo xtask bench`: boots the kernel under QEMU with `-icount shift=0,align=off,sleep=off`,
//! where `rdinstret` is an exact, repeatable instruction count, and reports instructions
//! per operation. Everything runs twice; a count that differs between the runs fails
//! the benchmark. Goals are checked as ratios of rows measured in the same run and
//! printed as `PASS` / `FALL SHORT` lines (they are not tests).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use crate::kernel_build::Image;
use std::time::Duration;

use serde::Serialize;

use crate::Result;
use crate::qemu::{Exit, Machine};

/// QEMU flags that make instruction counts exact: one instruction per virtual ns.
const ICOUNT: &[&str] = &["-icount", "shift=0,align=off,sleep=off"];
/// Host timeout for one benchmark boot.
const BENCH_TIMEOUT: Duration = Duration::from_secs(600);

/// One measured row.
#[derive(Clone, Debug, Serialize, PartialEq)]
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

/// A goal: `numerator / denominator <= max_ratio`.
struct Goal {
    description: &'static str,
    numerator: &'static str,
    denominator: &'static str,
    max_ratio: f64,
}

/// Goals from the issues (dispatcher: SPIN's "an event costs about a procedure call").
const GOALS: &[Goal] = &[
    Goal { description: "1-binding raise <= 2x an indirect call", numerator: "dispatch/raise-1-binding", denominator: "calls/indirect-call", max_ratio: 2.0 },
    Goal { description: "64 declarative guards <= 2x one guard", numerator: "dispatch/raise-64-declarative-one-true", denominator: "dispatch/raise-1-declarative-true", max_ratio: 2.0 },
];

#[derive(Serialize)]
struct GoalResult {
    description: String,
    ratio: Option<f64>,
    max_ratio: f64,
    pass: bool,
}

#[derive(Serialize)]
struct Results {
    method: &'static str,
    qemu_flags: Vec<String>,
    rows: Vec<Row>,
    goals: Vec<GoalResult>,
}

/// Parses `bench row <group> <name> <iterations> <milli-instructions>`.
pub fn parse_row(line: &str) -> Option<Row> {
    let mut words = line.trim().strip_prefix("bench row ")?.split_ascii_whitespace();
    let group = words.next()?.to_string();
    let name = words.next()?.to_string();
    let iterations = words.next()?.parse().ok()?;
    let milli: u64 = words.next()?.parse().ok()?;
    Some(Row { group, name, iterations, instructions: milli as f64 / 1000.0 })
}

fn run_once(kernel: &Image) -> Result<Vec<Row>> {
    let mut machine = Machine::for_image(kernel);
    machine.append("spindle.mode=bench").extra(ICOUNT);
    let (exit, lines) = machine.run_captured(BENCH_TIMEOUT, false)?;
    if exit != Exit::Status(0) || !lines.iter().any(|line| line.trim() == "bench end") {
        for line in lines.iter().rev().take(30).rev() {
            println!("    | {line}");
        }
        return Err(format!("the benchmark kernel did not finish cleanly ({exit:?})"));
    }
    Ok(lines.iter().filter_map(|line| parse_row(line)).collect())
}

/// Runs `kernel`'s benchmarks twice and checks that the counts match.
fn run_twice(kernel: &Image, label: &str) -> Result<Vec<Row>> {
    println!("== benchmark run 1 of 2{label}");
    let first = run_once(kernel)?;
    println!("== benchmark run 2 of 2{label}");
    let second = run_once(kernel)?;
    if first != second {
        for (a, b) in first.iter().zip(&second) {
            if a != b {
                println!("  differs: {}/{}: {} vs {}", a.group, a.name, a.instructions, b.instructions);
            }
        }
        return Err("instruction counts differ between two identical runs: the measurement is not deterministic".into());
    }
    Ok(first)
}

/// The group whose rows are also measured on a kernel variant (the Wasm interpreter's
/// cost depends on the build).
const VARIANT_GROUP: &str = "extension-cost";

/// Runs the benchmarks twice, checks determinism, prints and writes the results; with a
/// `variant` (label, image), also its [`VARIANT_GROUP`] rows, in a group labelled
/// `extension-cost [label]`.
pub fn run(kernel: &Image, variant: Option<(&str, &Image)>) -> Result<bool> {
    let mut first = run_twice(kernel, "")?;
    if let Some((label, image)) = variant {
        let rows = run_twice(image, &format!(" (kernel built with +{label})"))?;
        first.extend(rows.into_iter().filter(|row| row.group == VARIANT_GROUP).map(|row| Row { group: format!("{VARIANT_GROUP} [+{label}]"), ..row }));
    }
    let by_key: BTreeMap<String, f64> = first.iter().map(|row| (format!("{}/{}", row.group, row.name), row.instructions)).collect();
    let mut text = String::new();
    let mut current_group = "";
    for row in &first {
        if row.group != current_group {
            current_group = &row.group;
            let _ = writeln!(text, "\n{current_group}\n  {:<44} {:>14} {:>10}", "operation", "instructions", "iterations");
        }
        let _ = writeln!(text, "  {:<44} {:>14.3} {:>10}", row.name, row.instructions, row.iterations);
    }
    let mut goals = Vec::new();
    let _ = writeln!(text, "\ngoals (ratios within this run; instruction counts, not cycles)");
    for goal in GOALS {
        let ratio = match (by_key.get(goal.numerator), by_key.get(goal.denominator)) {
            (Some(&numerator), Some(&denominator)) if denominator > 0.0 => Some(numerator / denominator),
            _ => None,
        };
        let pass = ratio.is_some_and(|ratio| ratio <= goal.max_ratio);
        let verdict = match ratio {
            Some(ratio) => format!("{} {}: {:.2}x (goal <= {:.2}x)", if pass { "PASS" } else { "FALL SHORT" }, goal.description, ratio, goal.max_ratio),
            None => format!("FALL SHORT {}: not measured yet ({} / {})", goal.description, goal.numerator, goal.denominator),
        };
        let _ = writeln!(text, "{verdict}");
        goals.push(GoalResult { description: goal.description.into(), ratio, max_ratio: goal.max_ratio, pass });
    }
    print!("{text}");
    let directory = crate::kernel_build::workspace_root().join("target").join("bench");
    std::fs::create_dir_all(&directory).map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
    let results = Results {
        method: "rdinstret around a loop of N operations with interrupts off, minus the same loop with an empty body; QEMU -icount makes counts exact; run twice and compared",
        qemu_flags: ICOUNT.iter().map(|flag| flag.to_string()).collect(),
        rows: first,
        goals,
    };
    let json = serde_json::to_string_pretty(&results).map_err(|error| error.to_string())?;
    std::fs::write(directory.join("results.json"), json).map_err(|error| error.to_string())?;
    let report = format!("# Spindle benchmark results\n\nMethod: {}.\n\n```text{}```\n", results.method, text);
    std::fs::write(directory.join("report.md"), report).map_err(|error| error.to_string())?;
    println!("\nwrote {}/results.json and report.md", directory.display());
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::parse_row;

    #[test]
    fn parses_rows() {
        let row = parse_row("bench row calls indirect-call 10000 10500").expect("row");
        assert_eq!(row.group, "calls");
        assert_eq!(row.name, "indirect-call");
        assert_eq!(row.iterations, 10000);
        assert!((row.instructions - 10.5).abs() < 1e-9);
        assert!(parse_row("bench begin").is_none());
        assert!(parse_row("bench row a b x 1").is_none());
    }
}
