//! SPIN (Bershad et al., SOSP '95) Table 4, "Virtual memory operation overheads in
//! microseconds", transcribed for the report's side-by-side comparison with the `vm`
//! group. The paper measured DEC OSF/1, Mach and SPIN on a DEC Alpha 3000/400 (133 MHz);
//! "n/a" cells (neither OSF/1 nor Mach can query a page's state) are `None`.
//!
//! The stored text copy of the paper lost the table's digits; the values below were read
//! from the table of the paper's PostScript (the authors' `sosp.dvi`), and SPIN's fault
//! time matches the 29 µs the SPIN project quotes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Row;
use super::model::{CycleModel, HardwareCounts};
use super::numbers;

/// One operation of Table 4.
pub struct SpinRow {
    /// The paper's name.
    pub operation: &'static str,
    /// What it measures (the paper's definitions, after Appel & Li).
    pub meaning: &'static str,
    /// The `vm` group's row (without a technology suffix) that measures the same thing.
    pub row: &'static str,
    /// Whether our row is measured per technology (`ROW-builtin`, `ROW-native`, …).
    pub per_technology: bool,
    /// DEC OSF/1, Mach, SPIN, µs.
    pub paper: [Option<u32>; 3],
}

/// Table 4's rows, in the paper's order.
pub const TABLE_4: [SpinRow; 8] = [
    SpinRow {
        operation: "Dirty",
        meaning: "query whether a page was written",
        row: "dirty",
        per_technology: false,
        paper: [None, None, Some(2)],
    },
    SpinRow {
        operation: "Fault",
        meaning: "fault on a page and resolve it",
        row: "fault",
        per_technology: false,
        paper: [Some(329), Some(415), Some(29)],
    },
    SpinRow {
        operation: "Trap",
        meaning: "protection fault delivered to a handler that unprotects",
        row: "trap",
        per_technology: true,
        paper: [Some(260), Some(185), Some(7)],
    },
    SpinRow {
        operation: "Prot1",
        meaning: "protect one page",
        row: "prot1",
        per_technology: false,
        paper: [Some(45), Some(106), Some(16)],
    },
    SpinRow {
        operation: "Prot100",
        meaning: "protect 100 pages",
        row: "prot100",
        per_technology: false,
        paper: [Some(1041), Some(1792), Some(213)],
    },
    SpinRow {
        operation: "Unprot100",
        meaning: "unprotect 100 pages",
        row: "unprot100",
        per_technology: false,
        paper: [Some(1016), Some(302), Some(214)],
    },
    SpinRow {
        operation: "Appel1",
        meaning: "protection fault; the handler unprotects the page and protects another",
        row: "appel1",
        per_technology: true,
        paper: [Some(382), Some(819), Some(39)],
    },
    SpinRow {
        operation: "Appel2",
        meaning: "protect 100 pages, fault on each and resolve it (per page)",
        row: "appel2",
        per_technology: true,
        paper: [Some(351), Some(608), Some(29)],
    },
];

/// The technology columns of our per-technology rows: row suffix and heading.
const TECHNOLOGIES: [(&str, &str); 4] = [
    ("builtin", "built in"),
    ("native", "native"),
    ("wasm", "Wasm"),
    ("user", "user-level upcall"),
];

/// Writes the section: Table 4 beside the `vm` group's rows (instructions and modelled
/// µs: `cycles` over the instructions and the row's traps, `satp` writes and `sfence.vma`
/// from `hardware`, keyed `group/name`), or a note that the group was not measured.
pub fn markdown(
    text: &mut String,
    rows: &[Row],
    hardware: &BTreeMap<String, HardwareCounts>,
    cycles: &CycleModel,
) {
    let _ = writeln!(
        text,
        "## SPIN SOSP '95 Table 4 (virtual memory operations), side by side\n"
    );
    let _ = writeln!(
        text,
        "The paper's times are µs on a 133 MHz DEC Alpha 3000/400 (OSF/1, Mach, SPIN with an in-kernel extension). Ours are the `vm` group's rows: instructions per operation from a user program (`vmtest`), the kernel's work included, and the modelled time (see the cost model above). Per-technology rows name the handler: built in, an in-kernel extension (native, Wasm) or a user-level handler reached by upcall. SPIN's Dirty excludes the 4 µs system call; ours is the system call.\n"
    );
    let vm: Vec<&Row> = rows.iter().filter(|row| row.group == "vm").collect();
    if vm.is_empty() {
        let _ = writeln!(text, "The `vm` group was not measured in this run.\n");
        return;
    }
    let _ = writeln!(
        text,
        "| operation | ours: handler | instructions | modelled µs | DEC OSF/1 µs | Mach µs | SPIN µs |"
    );
    let _ = writeln!(text, "|---|---|---:|---:|---:|---:|---:|");
    let cell =
        |value: Option<u32>| value.map_or_else(|| "n/a".to_string(), |value| value.to_string());
    for spin in &TABLE_4 {
        let paper = format!(
            "{} | {} | {}",
            cell(spin.paper[0]),
            cell(spin.paper[1]),
            cell(spin.paper[2])
        );
        let names: Vec<(String, &str)> = if spin.per_technology {
            TECHNOLOGIES
                .iter()
                .map(|(suffix, heading)| (format!("{}-{suffix}", spin.row), *heading))
                .collect()
        } else {
            vec![(spin.row.to_string(), "kernel")]
        };
        for (index, (name, heading)) in names.iter().enumerate() {
            let operation = if index == 0 {
                format!("{} ({})", spin.operation, spin.meaning)
            } else {
                String::new()
            };
            let paper = if index == 0 {
                paper.clone()
            } else {
                " |  | ".to_string()
            };
            match vm.iter().find(|row| &row.name == name) {
                Some(row) => {
                    let counts = hardware
                        .get(&format!("vm/{name}"))
                        .copied()
                        .unwrap_or_default();
                    let seconds = cycles.seconds(cycles.cycles(row.instructions, counts));
                    let _ = writeln!(
                        text,
                        "| {operation} | {heading} | {} | {:.1} | {paper} |",
                        numbers::count(row.instructions),
                        seconds * 1e6
                    );
                }
                None => {
                    let _ = writeln!(
                        text,
                        "| {operation} | {heading} | not measured | – | {paper} |"
                    );
                }
            }
        }
    }
    let _ = writeln!(text);
    // The appel1 ratio in both units: the modelled time prices the upcall's
    // extra traps, which instructions leave out (only when both rows have their counts).
    let find = |name: &str| vm.iter().find(|row| row.name == name);
    if let (Some(native), Some(user)) = (find("appel1-native"), find("appel1-user")) {
        let instructions = numbers::ratio(native.instructions / user.instructions);
        let counts = |row: &Row| hardware.get(&format!("vm/{}", row.name)).copied();
        let modelled = match (counts(native), counts(user)) {
            (Some(native_counts), Some(user_counts)) => format!(
                ", {} in modelled time ({} ÷ {} traps per operation)",
                numbers::ratio(cycles.cycles(native.instructions, native_counts) / cycles.cycles(user.instructions, user_counts)),
                numbers::trimmed(native_counts.traps),
                numbers::trimmed(user_counts.traps)
            ),
            _ => String::new(),
        };
        let _ = writeln!(text, "Appel1, in-kernel (native) ÷ user-level upcall: {instructions} in instructions{modelled}.\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::model::CYCLE_MODEL;

    fn row(name: &str, instructions: f64) -> Row {
        Row {
            group: "vm".into(),
            name: name.into(),
            iterations: 100,
            instructions,
        }
    }

    #[test]
    fn our_rows_sit_beside_the_papers() {
        let rows = vec![
            row("prot100", 48_732.0),
            row("trap-native", 2_797.0),
            row("trap-user", 3_680.0),
            Row {
                group: "calls".into(),
                ..row("fault", 1.0)
            },
        ];
        let mut hardware = BTreeMap::new();
        hardware.insert(
            "vm/trap-user".to_string(),
            HardwareCounts {
                traps: 2.0,
                satp_writes: 2.0,
                sfences: 0.0,
            },
        );
        let mut text = String::new();
        markdown(&mut text, &rows, &hardware, &CYCLE_MODEL);
        let prot100 =
            CYCLE_MODEL.seconds(CYCLE_MODEL.cycles(48_732.0, HardwareCounts::default())) * 1e6;
        assert!(text.contains(&format!("| Prot100 (protect 100 pages) | kernel | 48,732 | {prot100:.1} | 1041 | 1792 | 213 |")), "{text}");
        let upcall =
            CYCLE_MODEL.seconds(CYCLE_MODEL.cycles(3_680.0, hardware["vm/trap-user"])) * 1e6;
        assert!(
            text.contains(&format!(
                "|  | user-level upcall | 3,680 | {upcall:.1} |  |  |  |"
            )),
            "{text}"
        );
        assert!(text.contains("| Dirty (query whether a page was written) | kernel | not measured | – | n/a | n/a | 2 |"), "{text}");
        assert!(
            text.contains("| Fault (fault on a page and resolve it) | kernel | not measured |"),
            "another group's row is not ours: {text}"
        );
        assert!(!text.contains("Appel1, in-kernel"), "no appel1 rows, no ratio: {text}");
        let mut empty = String::new();
        markdown(&mut empty, &rows[3..], &hardware, &CYCLE_MODEL);
        assert!(empty.contains("The `vm` group was not measured in this run."));
    }

    #[test]
    fn appel1_is_compared_in_instructions_and_modelled_time() {
        let rows = vec![row("appel1-native", 1_000.0), row("appel1-user", 4_000.0)];
        let one_trap = HardwareCounts { traps: 1.0, satp_writes: 0.0, sfences: 0.0 };
        let four_traps = HardwareCounts { traps: 4.0, satp_writes: 2.0, sfences: 2.0 };
        let hardware: BTreeMap<String, HardwareCounts> =
            [("vm/appel1-native".to_string(), one_trap), ("vm/appel1-user".to_string(), four_traps)].into_iter().collect();
        let mut text = String::new();
        markdown(&mut text, &rows, &hardware, &CYCLE_MODEL);
        let modelled = CYCLE_MODEL.cycles(1_000.0, one_trap) / CYCLE_MODEL.cycles(4_000.0, four_traps);
        let line = format!(
            "Appel1, in-kernel (native) ÷ user-level upcall: 0.25× in instructions, {} in modelled time (1 ÷ 4 traps per operation).",
            numbers::ratio(modelled)
        );
        assert!(text.contains(&line), "{line} not in {text}");
        // Without the rows' counts there is no modelled ratio to state.
        let mut bare = String::new();
        markdown(&mut bare, &rows, &BTreeMap::new(), &CYCLE_MODEL);
        assert!(bare.contains("Appel1, in-kernel (native) ÷ user-level upcall: 0.25× in instructions.\n"), "{bare}");
    }
}
