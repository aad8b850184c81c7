//! The extension-cost grafts of Small & Seltzer '96 as the report sees them: which rows
//! each graft group must have (the contract with `kernel/src/bench/`), how rows are
//! labelled, and the per-row ratios, modelled cycles and break-even points.
//!
//! Every group whose name starts with `graft-` is a graft table. Row names are
//! `<operation>-<technology>` (e.g. `md5-wasm`) plus the group's reference rows (a page
//! fault, a bare dispatch, a 4 KiB copy), which get no ratios. Ratios compare rows of
//! the same kernel build; the variant build's group is `GROUP [+label]`. A contract row
//! that is absent is listed as "not measured yet", never guessed.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Row;
use super::model::{self, BreakEvenRule, CycleModel, DiskModel, HardwareCounts};

/// The technologies a graft is measured as: (row-name suffix, label), in table order.
pub const TECHNOLOGIES: &[(&str, &str)] = &[
    ("builtin", "built-in"),
    ("native", "native (signed .kext)"),
    ("wasm", "Wasm (wasmi)"),
    ("c-reference", "C reference through the dispatcher (bounded binding)"),
    ("direct", "the graft called directly (no dispatcher)"),
    ("user", "user-level (upcall)"),
];

/// What the report knows about one graft.
#[derive(Debug)]
pub struct GraftSpec {
    /// Benchmark group (`graft-…`).
    pub group: &'static str,
    /// Operation prefix of the row names (`reclaim`, `md5`, `write`).
    pub operation: &'static str,
    /// Human title.
    pub title: &'static str,
    /// What one operation is.
    pub unit: &'static str,
    /// Where the paper describes it.
    pub paper: &'static str,
    /// How its break-even is computed.
    pub rule: BreakEvenRule,
    /// The break-even definition, in words, for the tables.
    pub break_even_definition: &'static str,
    /// Rows of the group that are references, not grafts (no ratios).
    pub reference_rows: &'static [&'static str],
    /// Row names the kernel printed before the contract's name: (printed, contract).
    pub aliases: &'static [(&'static str, &'static str)],
}

/// The three grafts.
pub const GRAFTS: &[GraftSpec] = &[
    GraftSpec {
        group: "graft-hotlist",
        operation: "reclaim",
        title: "Prioritization graft: VM page eviction with a 64-entry hot list",
        unit: "instructions per mm.Reclaim",
        paper: "Small & Seltzer '96 §3.1, §5.4, Table 2",
        rule: BreakEvenRule::PageFault { row: "page-fault-caught" },
        break_even_definition: "page-fault cost (row page-fault-caught, modelled cycles) ÷ graft cost (modelled cycles): graft runs one saved eviction pays for. The fault measured is a kernel load from an unmapped page under a recovery point (no frame allocation, no I/O): a lower bound, so the break-even is one too",
        reference_rows: &["page-fault-caught", "dispatch-1-bounded-binding"],
        aliases: &[("graft-direct-call", "reclaim-direct")],
    },
    GraftSpec {
        group: "graft-md5",
        operation: "md5",
        title: "Stream graft: MD5 fingerprint of 1 MiB",
        unit: "instructions per 1 MiB",
        paper: "Small & Seltzer '96 §3.2, §5.5, Table 5",
        rule: BreakEvenRule::DiskRead { bytes: model::MD5_BYTES },
        break_even_definition: "time to read 1 MiB from the disk model ÷ modelled MD5 time: > 1 means the graft keeps up with the disk (the paper's MD5/disk is the inverse)",
        reference_rows: &["read-4k-copy"],
        aliases: &[],
    },
    GraftSpec {
        group: "graft-logdisk",
        operation: "write",
        title: "Black-box graft: logical disk, 262,144 writes to a 1 GiB disk",
        unit: "instructions per write",
        paper: "Small & Seltzer '96 §3.3, §5.6, Table 6",
        rule: BreakEvenRule::SavedPositioning,
        break_even_definition: "positioning time a batched write saves (disk model: seek + average rotational delay) ÷ modelled per-write overhead: writes one saved seek pays for",
        reference_rows: &["dispatch-1-bounded-binding"],
        aliases: &[],
    },
];

/// The spec of `group` (a variant group `GROUP [+label]` maps to GROUP's spec).
pub fn spec_for(group: &str) -> Option<&'static GraftSpec> {
    let base = base_group(group);
    GRAFTS.iter().find(|spec| spec.group == base)
}

/// `GROUP` of `GROUP [+label]`, or the group itself.
pub fn base_group(group: &str) -> &str {
    group.split(" [+").next().unwrap_or(group)
}

/// The variant label of `GROUP [+label]` (`+label`), if any.
pub fn build_of(group: &str) -> Option<&str> {
    group.split_once(" [").map(|(_, rest)| rest.trim_end_matches(']'))
}

impl GraftSpec {
    /// The contract name of `name` (resolving aliases).
    pub fn contract_name<'a>(&self, name: &'a str) -> &'a str {
        self.aliases.iter().find(|(printed, _)| *printed == name).map_or(name, |(_, contract)| contract)
    }

    /// Whether `name` is a graft row (gets ratios and a break-even).
    pub fn is_graft(&self, name: &str) -> bool {
        !self.reference_rows.contains(&name) && !name.starts_with("dispatch-")
    }

    /// The rows the contract expects in the default build.
    pub fn expected_rows(&self) -> Vec<String> {
        let mut rows: Vec<String> = TECHNOLOGIES.iter().map(|(suffix, _)| format!("{}-{suffix}", self.operation)).collect();
        rows.extend(self.reference_rows.iter().map(|name| name.to_string()));
        rows
    }

    /// Human label of row `name` measured in `build` (`None` = the default build).
    pub fn label(&self, name: &str, build: Option<&str>) -> String {
        let contract = self.contract_name(name);
        let technology = contract.strip_prefix(self.operation).and_then(|rest| rest.strip_prefix('-'));
        let mut label = match technology.and_then(|suffix| TECHNOLOGIES.iter().find(|(known, _)| *known == suffix)) {
            Some((_, label)) => label.to_string(),
            None => match contract {
                "page-fault-caught" => "page fault taken and recovered in the kernel".into(),
                "dispatch-1-bounded-binding" => "dispatch alone (one bounded binding)".into(),
                "c-reference-direct-call" => "C reference called directly".into(),
                "read-4k-copy" => "reading 1 MiB into the extension in 4 KiB copies".into(),
                other => other.to_string(),
            },
        };
        match build {
            Some(build) => label.push_str(&format!(" [{build}]")),
            None if technology == Some("wasm") => label.push_str(", default build"),
            None => {}
        }
        label
    }
}

/// One row of a graft table, with everything derived from it.
#[derive(Clone, Debug, Serialize)]
pub struct GraftRow {
    /// Group as measured (`GROUP` or `GROUP [+label]`).
    pub group: String,
    /// Row name as printed by the kernel.
    pub name: String,
    /// Human label.
    pub label: String,
    /// `default` or the variant label (`+unaligned-scalar-mem`).
    pub build: String,
    /// Whether the row is a graft (has ratios) or a reference row.
    pub graft: bool,
    /// Repetitions measured.
    pub iterations: u64,
    /// Instructions per operation.
    pub instructions: f64,
    /// Traps, `satp` writes and `sfence.vma` per operation (0 when the kernel printed none).
    pub hardware: HardwareCounts,
    /// Modelled cycles per operation (cycle model of the report).
    pub modelled_cycles: f64,
    /// Modelled time per operation, seconds.
    pub modelled_seconds: f64,
    /// Instructions ÷ the built-in row's instructions (same build).
    pub times_builtin: Option<f64>,
    /// Instructions ÷ the C reference row's instructions (same build).
    pub times_c: Option<f64>,
    /// Break-even (see the table's definition), from modelled cycles.
    pub break_even: Option<f64>,
}

/// One graft's table: its rows in every build, and the contract rows not measured yet.
#[derive(Clone, Debug, Serialize)]
pub struct GraftTable {
    /// Benchmark group.
    pub group: String,
    /// Human title.
    pub title: String,
    /// What one operation is.
    pub unit: String,
    /// The paper's section and table.
    pub paper: String,
    /// Break-even definition.
    pub break_even_definition: String,
    /// Rows of the default build, then of each variant build.
    pub rows: Vec<GraftRow>,
    /// Contract rows missing from the default build.
    pub missing: Vec<String>,
}

impl GraftTable {
    /// The row `contract_name` of `build` (`"default"` or a variant label).
    pub fn row(&self, contract_name: &str, build: &str) -> Option<&GraftRow> {
        let spec = spec_for(&self.group)?;
        self.rows.iter().find(|row| row.build == build && spec.contract_name(&row.name) == contract_name)
    }
}

/// Builds every graft table from the measured rows (`hardware` keyed `group/name`).
pub fn tables(rows: &[Row], hardware: &BTreeMap<String, HardwareCounts>, cycles: &CycleModel, disk: &DiskModel) -> Vec<GraftTable> {
    GRAFTS.iter().map(|spec| table(spec, rows, hardware, cycles, disk)).collect()
}

fn table(spec: &GraftSpec, rows: &[Row], hardware: &BTreeMap<String, HardwareCounts>, cycles: &CycleModel, disk: &DiskModel) -> GraftTable {
    let mine: Vec<&Row> = rows.iter().filter(|row| base_group(&row.group) == spec.group).collect();
    let instructions_of = |group: &str, contract: &str| {
        mine.iter().find(|row| row.group == group && spec.contract_name(&row.name) == contract).map(|row| row.instructions).filter(|value| *value > 0.0)
    };
    let key = |row: &Row| format!("{}/{}", row.group, row.name);
    let cycles_of = |row: &Row| cycles.cycles(row.instructions, hardware.get(&key(row)).copied().unwrap_or_default());
    let mut out = Vec::new();
    for row in &mine {
        let build = build_of(&row.group);
        let graft = spec.is_graft(&row.name);
        // Ratios within the same build; a variant without its own baseline uses the default's.
        let baseline = |suffix: &str| {
            let contract = format!("{}-{suffix}", spec.operation);
            instructions_of(&row.group, &contract).or_else(|| instructions_of(spec.group, &contract))
        };
        let modelled_cycles = cycles_of(row);
        let reference = match spec.rule {
            BreakEvenRule::PageFault { row: fault } => mine.iter().find(|other| other.group == row.group && other.name == fault).map(|other| cycles_of(other)),
            _ => None,
        };
        out.push(GraftRow {
            group: row.group.clone(),
            name: row.name.clone(),
            label: spec.label(&row.name, build),
            build: build.unwrap_or("default").to_string(),
            graft,
            iterations: row.iterations,
            instructions: row.instructions,
            hardware: hardware.get(&key(row)).copied().unwrap_or_default(),
            modelled_cycles,
            modelled_seconds: cycles.seconds(modelled_cycles),
            times_builtin: graft.then(|| baseline("builtin").map(|base| row.instructions / base)).flatten(),
            times_c: graft.then(|| baseline("c-reference").map(|base| row.instructions / base)).flatten(),
            break_even: graft.then(|| model::break_even(spec.rule, modelled_cycles, reference, cycles, disk)).flatten(),
        });
    }
    let present: Vec<&str> = mine.iter().filter(|row| row.group == spec.group).map(|row| spec.contract_name(&row.name)).collect();
    let missing = spec.expected_rows().into_iter().filter(|name| !present.contains(&name.as_str())).collect();
    GraftTable {
        group: spec.group.into(),
        title: spec.title.into(),
        unit: spec.unit.into(),
        paper: spec.paper.into(),
        break_even_definition: spec.break_even_definition.into(),
        rows: out,
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::model::{CYCLE_MODEL, DISK_MODEL};

    fn row(group: &str, name: &str, instructions: f64) -> Row {
        Row { group: group.into(), name: name.into(), iterations: 4096, instructions }
    }

    #[test]
    fn groups_and_builds() {
        assert_eq!(base_group("graft-md5 [+unaligned-scalar-mem]"), "graft-md5");
        assert_eq!(build_of("graft-md5 [+unaligned-scalar-mem]"), Some("+unaligned-scalar-mem"));
        assert_eq!(build_of("graft-md5"), None);
        assert!(spec_for("graft-logdisk [+x]").is_some());
        assert!(spec_for("dispatch").is_none());
    }

    #[test]
    fn labels_follow_the_contract_and_aliases() {
        let hotlist = &GRAFTS[0];
        assert_eq!(hotlist.contract_name("graft-direct-call"), "reclaim-direct");
        assert_eq!(hotlist.label("reclaim-wasm", None), "Wasm (wasmi), default build");
        assert_eq!(hotlist.label("reclaim-wasm", Some("+unaligned-scalar-mem")), "Wasm (wasmi) [+unaligned-scalar-mem]");
        assert_eq!(hotlist.label("graft-direct-call", None), "the graft called directly (no dispatcher)");
        assert!(!hotlist.is_graft("page-fault-caught"));
        assert!(!GRAFTS[2].is_graft("dispatch-1-bounded-binding"));
        assert!(GRAFTS[1].is_graft("md5-user"));
    }

    #[test]
    fn ratios_break_even_and_missing_rows() {
        let rows = vec![
            row("graft-hotlist", "reclaim-builtin", 1000.0),
            row("graft-hotlist", "reclaim-native", 1100.0),
            row("graft-hotlist", "reclaim-c-reference", 500.0),
            row("graft-hotlist", "page-fault-caught", 250.0),
            row("graft-hotlist [+u]", "reclaim-builtin", 1000.0),
            row("graft-hotlist [+u]", "reclaim-wasm", 8000.0),
            row("graft-logdisk", "write-builtin", 2000.0),
        ];
        let mut hardware = BTreeMap::new();
        hardware.insert("graft-hotlist/page-fault-caught".to_string(), HardwareCounts { traps: 1.0, ..Default::default() });
        let tables = tables(&rows, &hardware, &CYCLE_MODEL, &DISK_MODEL);
        let hotlist = &tables[0];
        let native = hotlist.row("reclaim-native", "default").expect("native row");
        assert!((native.times_builtin.expect("ratio") - 1.1).abs() < 1e-12);
        assert!((native.times_c.expect("ratio") - 2.2).abs() < 1e-12);
        // Break-even from modelled cycles: the fault row carries one trap.
        let fault_cycles = 250.0 * model::CYCLES_PER_INSTRUCTION + model::TRAP_CYCLES;
        let expected = fault_cycles / (1100.0 * model::CYCLES_PER_INSTRUCTION);
        assert!((native.break_even.expect("break-even") - expected).abs() < 1e-12);
        let fault = hotlist.row("page-fault-caught", "default").expect("fault row");
        assert!(fault.times_builtin.is_none() && fault.break_even.is_none());
        let wasm = hotlist.row("reclaim-wasm", "+u").expect("variant wasm");
        assert!((wasm.times_builtin.expect("ratio") - 8.0).abs() < 1e-12);
        // The variant has no C row of its own: the default build's is used.
        assert!((wasm.times_c.expect("ratio") - 16.0).abs() < 1e-12);
        assert!(wasm.break_even.is_none(), "no page-fault row in the variant group");
        assert!(hotlist.missing.contains(&"reclaim-wasm".to_string()));
        assert!(hotlist.missing.contains(&"reclaim-user".to_string()));
        assert!(!hotlist.missing.contains(&"reclaim-native".to_string()));
        // MD5 absent entirely: every contract row missing, no rows.
        assert!(tables[1].rows.is_empty());
        assert_eq!(tables[1].missing.len(), TECHNOLOGIES.len() + 1);
        // Logical disk: built-in alone has ratio 1 and a positioning break-even.
        let write = tables[2].row("write-builtin", "default").expect("write row");
        assert_eq!(write.times_builtin, Some(1.0));
        assert_eq!(write.times_c, None);
        let seconds = 2000.0 * model::CYCLES_PER_INSTRUCTION / model::CLOCK_HZ;
        assert!((write.break_even.expect("break-even") - DISK_MODEL.positioning_seconds() / seconds).abs() < 1e-9);
    }
}
