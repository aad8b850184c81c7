//! What the kernel can say about a loaded extension: one record per extension
//! ([`ExtensionReport`]), built from the registry and the dispatcher's snapshots, and
//! rendered three ways — `ext list` (a line each), `ext show NAME` (everything), and JSON
//! (`ext show NAME --json`, `ext list --json`, the `ext_stats` system call and the
//! hot-load `STATS` request that `cargo xtask load --stats` sends). Every view is made
//! from the same record, so they cannot disagree.
//!
//! The state of an extension is derived, not stored twice: `killed` if containment killed
//! it, `degraded` if it is running but the dispatcher's circuit breaker has disabled one of
//! its bindings, `running` otherwise.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use spindle_dispatch::{BindingSnapshot, BudgetSpan, GuardKind};

use super::{ExtensionState, LoadedExtension, Technology};

/// Where an extension's code came from and what its manifest asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The manifest's budget per handler call, in microseconds of guest time.
    pub budget_microseconds: u64,
    /// The manifest's memory quota in bytes.
    pub memory_quota_bytes: u64,
    /// The kernel-function domains it imports.
    pub domains: Vec<String>,
    /// The artifact it was loaded from; `None` for a built-in extension (linked into the
    /// kernel).
    pub artifact: Option<Artifact>,
}

impl Provenance {
    /// The provenance of a manifest's artifact.
    pub fn of_manifest(manifest: &spindle_loader::Manifest, artifact: Option<Artifact>) -> Provenance {
        Provenance {
            budget_microseconds: manifest.budget_microseconds,
            memory_quota_bytes: manifest.memory_quota_bytes,
            domains: manifest.domains.clone(),
            artifact,
        }
    }
}

/// A loaded artifact's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// Its size in bytes.
    pub bytes: usize,
    /// Its SHA-256, or the bytes to compute it from when asked.
    digest: ArtifactDigest,
    /// Who signed it.
    pub signer: Signer,
}

/// An artifact's SHA-256: computed at load for bytes that go away (a hot load), or on
/// demand from the boot bundle, which stays mapped (hashing costs ≈ 70 instructions a
/// byte, so a load does not pay it for a report nobody may ask for).
#[derive(Clone, Debug, PartialEq, Eq)]
enum ArtifactDigest {
    Known([u8; 32]),
    Later(&'static [u8]),
}

impl Artifact {
    /// The identity of `bytes` (hashed now), signed as `signer` says.
    pub fn of(bytes: &[u8], signer: Signer) -> Artifact {
        Artifact { bytes: bytes.len(), digest: ArtifactDigest::Known(spindle_loader::artifact_digest(bytes)), signer }
    }

    /// The identity of `bytes` that stay mapped for good (the boot bundle's), hashed
    /// when first reported.
    pub fn of_static(bytes: &'static [u8], signer: Signer) -> Artifact {
        Artifact { bytes: bytes.len(), digest: ArtifactDigest::Later(bytes), signer }
    }

    /// SHA-256 of the whole file (what `sha256sum` prints on the host).
    pub fn sha256(&self) -> [u8; 32] {
        match self.digest {
            ArtifactDigest::Known(digest) => digest,
            ArtifactDigest::Later(bytes) => spindle_loader::artifact_digest(bytes),
        }
    }
}

/// Who vouched for an artifact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signer {
    /// Signed with the builder key whose verifying key is this (the kernel checked it).
    Builder([u8; 32]),
    /// Not signed (a Wasm module, which the sandbox contains).
    Unsigned,
    /// A user program from the boot bundle (runs in its own address space).
    BootBundleProgram,
}

/// When and at what cost an extension was loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadRecord {
    /// Guest time since boot when the load finished, in microseconds.
    pub at_micros: u64,
    /// Guest time the load took, in microseconds.
    pub took_micros: u64,
    /// What the counter of the clock mode counted during the load (instructions when exact).
    pub counted: u64,
}

/// An extension's state as every view reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Every binding installed and enabled.
    Running,
    /// Running, but the circuit breaker disabled a binding (its events get the default).
    Degraded {
        /// The disabled binding's handler.
        handler: String,
        /// Why it was disabled.
        reason: String,
    },
    /// Killed by containment: bindings removed.
    Killed(String),
}

impl Status {
    /// The one word for the state (`running`, `degraded`, `killed`).
    pub fn word(&self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Degraded { .. } => "degraded",
            Status::Killed(_) => "killed",
        }
    }

    /// The state with its reason, as `ext list` prints it.
    pub fn describe(&self) -> String {
        match self {
            Status::Running => String::from("running"),
            Status::Degraded { handler, reason } => alloc::format!("DEGRADED: {handler} disabled: {reason}"),
            Status::Killed(reason) => alloc::format!("KILLED: {reason}"),
        }
    }
}

/// One binding of an extension, installed or (after a kill or replace) as it was when
/// it was removed.
#[derive(Clone, Debug)]
pub struct BindingReport {
    /// The event's name.
    pub event: &'static str,
    /// The binding as the dispatcher saw it.
    pub snapshot: BindingSnapshot,
    /// Whether the binding is still installed.
    pub installed: bool,
}

/// Everything about one extension.
#[derive(Clone, Debug)]
pub struct ExtensionReport {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its technology.
    pub technology: Technology,
    /// Its state.
    pub status: Status,
    /// Manifest and artifact.
    pub provenance: Provenance,
    /// Load time and cost (absent for boot-time built-ins installed before timing).
    pub load: Option<LoadRecord>,
    /// Memory in use and its limit, where the technology has one.
    pub memory: Option<super::arena::ArenaUsage>,
    /// Its bindings.
    pub bindings: Vec<BindingReport>,
}

/// Counters summed over an extension's bindings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Handler calls.
    pub calls: u64,
    /// Guard rejections.
    pub rejected: u64,
    /// Counter units spent in handlers (instructions when exact).
    pub counted: u64,
    /// Faults (including rejected results).
    pub faults: u64,
    /// Budget overruns.
    pub overruns: u64,
}

impl ExtensionReport {
    /// Its counters summed over every binding it has had.
    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for binding in &self.bindings {
            let counters = &binding.snapshot.counters;
            totals.calls += counters.invocations;
            totals.rejected += counters.guard_rejections;
            totals.counted += counters.instructions;
            totals.faults += counters.faults;
            totals.overruns += counters.overruns;
        }
        totals
    }
}

/// The binding snapshots of `extension`'s installed bindings, with their events' names.
fn installed_bindings(extension: &LoadedExtension) -> Vec<BindingReport> {
    let ids = extension.bindings.lock().clone();
    if ids.is_empty() {
        return Vec::new();
    }
    // Only the events the extension is bound to: this also runs on the kill path, inside
    // the raise that faulted, where a snapshot of every event would cost time it lacks.
    let mut events: Vec<spindle_abi::event::EventId> = ids.iter().map(|id| id.event).collect();
    events.sort_unstable();
    events.dedup();
    let mut found = Vec::new();
    for event in events.into_iter().filter_map(|event| crate::events::dispatcher().snapshot_event(event).ok()) {
        for binding in event.bindings.iter().filter(|binding| ids.contains(&binding.id)) {
            found.push(BindingReport { event: event.name, snapshot: binding.clone(), installed: true });
        }
    }
    found
}

/// Snapshots of `extension`'s installed bindings, kept when they are removed (a kill, an
/// unload or a replacement) so that `ext show` still has its counters.
pub(super) fn keep_final_snapshots(extension: &LoadedExtension) {
    let mut reports = installed_bindings(extension);
    for report in &mut reports {
        report.installed = false;
    }
    extension.removed_bindings.lock().extend(reports);
}

/// The report of `extension`.
pub fn report(extension: &LoadedExtension) -> ExtensionReport {
    let mut bindings = installed_bindings(extension);
    bindings.extend(extension.removed_bindings.lock().iter().cloned());
    let status = match &*extension.state.lock() {
        ExtensionState::Killed(reason) => Status::Killed(reason.clone()),
        ExtensionState::Running => bindings
            .iter()
            .find_map(|binding| {
                let disabled = binding.snapshot.disabled.as_ref()?;
                Some(Status::Degraded {
                    handler: binding.snapshot.handler.name.clone(),
                    reason: alloc::format!("after {} faults: {}", disabled.consecutive_faults, disabled.fault),
                })
            })
            .unwrap_or(Status::Running),
    };
    ExtensionReport {
        name: extension.name.clone(),
        version: extension.version.clone(),
        technology: extension.technology,
        status,
        provenance: extension.provenance.clone(),
        load: extension.load_record.get().copied(),
        memory: extension.memory_usage(),
        bindings,
    }
}

/// Reports of every loaded (or killed) extension.
pub fn reports() -> Vec<ExtensionReport> {
    super::list().iter().map(|extension| report(extension)).collect()
}

/// The unit the clock mode's counter counts (`instructions` or `host-ticks`).
fn counter_unit() -> &'static str {
    crate::time::clock_mode().counter_unit()
}

/// The memory column of `ext list`.
fn memory_text(report: &ExtensionReport) -> String {
    match (report.technology, report.memory) {
        (_, Some(usage)) => alloc::format!("{}/{} bytes", usage.used_bytes, usage.quota_bytes),
        (Technology::BuiltIn, None) => String::from("kernel heap"),
        (Technology::UserLevel, None) => String::from("own address space"),
        (_, None) => String::from("released"),
    }
}

/// One `ext list` line: name, version, technology, bindings, totals, memory, state.
pub fn list_line(report: &ExtensionReport) -> String {
    let totals = report.totals();
    let installed = report.bindings.iter().filter(|binding| binding.installed).count();
    alloc::format!(
        "{:<16} {:<8} {:<10} {installed} binding(s) calls={} {}={} faults={} overruns={}  memory {}  {}",
        report.name,
        report.version,
        alloc::format!("{}", report.technology),
        totals.calls,
        counter_unit(),
        totals.counted,
        totals.faults,
        totals.overruns,
        memory_text(report),
        report.status.describe()
    )
}

fn hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

fn signer_text(signer: Signer) -> String {
    match signer {
        Signer::Builder(key) => alloc::format!("builder key {}…", &hex(&key)[..16]),
        Signer::Unsigned => String::from("unsigned (Wasm: contained by the sandbox)"),
        Signer::BootBundleProgram => String::from("boot-bundle program (own address space)"),
    }
}

/// Everything `ext show NAME` prints.
pub fn show_text(report: &ExtensionReport) -> String {
    let mut text = String::new();
    let provenance = &report.provenance;
    let _ = writeln!(text, "{} {} ({})", report.name, report.version, report.technology);
    let _ = writeln!(text, "  state:     {}", report.status.describe());
    match &provenance.artifact {
        Some(artifact) => {
            let _ = writeln!(text, "  artifact:  {} bytes, sha256 {}", artifact.bytes, hex(&artifact.sha256()));
            let _ = writeln!(text, "  signer:    {}", signer_text(artifact.signer));
        }
        None => {
            let _ = writeln!(text, "  artifact:  linked into the kernel (built-in)");
        }
    }
    match report.load {
        Some(load) => {
            let _ = writeln!(
                text,
                "  loaded:    at {} us after boot, took {} us ({} {})",
                load.at_micros,
                load.took_micros,
                load.counted,
                counter_unit()
            );
        }
        None => {
            let _ = writeln!(text, "  loaded:    at boot (not timed)");
        }
    }
    let clock = crate::time::clock_mode();
    let _ = writeln!(text, "  budget:    {} us per call (manifest); clock {}: {}", provenance.budget_microseconds, clock.name(), clock.budget_meaning());
    let _ = writeln!(text, "  memory:    {} (quota {} bytes)", memory_text(report), provenance.memory_quota_bytes);
    let _ = writeln!(text, "  domains:   {}", if provenance.domains.is_empty() { String::from("(none)") } else { provenance.domains.join(", ") });
    let totals = report.totals();
    let _ = writeln!(
        text,
        "  totals:    calls={} rejected={} {}={} faults={} overruns={}",
        totals.calls,
        totals.rejected,
        counter_unit(),
        totals.counted,
        totals.faults,
        totals.overruns
    );
    let _ = writeln!(text, "  bindings:");
    for binding in &report.bindings {
        let snapshot = &binding.snapshot;
        let counters = &snapshot.counters;
        let _ = write!(
            text,
            "    {} {} {}{} calls={} rejected={} {}={} faults={} overruns={}",
            snapshot.id,
            binding.event,
            snapshot.handler.name,
            if binding.installed { "" } else { " (removed)" },
            counters.invocations,
            counters.guard_rejections,
            counter_unit(),
            counters.instructions,
            counters.faults,
            counters.overruns
        );
        let _ = write!(text, " mode={}", snapshot.mode);
        if let spindle_dispatch::Mode::Bounded { budget } = snapshot.mode
            && budget < crate::time::budget_from_micros(provenance.budget_microseconds)
        {
            let _ = write!(text, " (capped by the event's owner; manifest {} us)", provenance.budget_microseconds);
        }
        if let Some(disabled) = &snapshot.disabled {
            let _ = write!(text, " DISABLED after {} faults: {}", disabled.consecutive_faults, disabled.fault);
        }
        let _ = writeln!(text);
        for guard in &snapshot.guards {
            let _ = writeln!(text, "        when {} [{}]{}", guard.text, guard_kind(guard.kind), if guard.imposed { " (imposed)" } else { "" });
        }
        if let Some(fault) = &snapshot.last_fault {
            let _ = writeln!(text, "        last fault: {fault}");
        }
    }
    if let Status::Killed(reason) = &report.status {
        let _ = writeln!(text, "  last fault: {reason}");
    }
    text
}

fn guard_kind(kind: GuardKind) -> &'static str {
    match kind {
        GuardKind::Indexed => "indexed",
        GuardKind::Declarative => "declarative",
        GuardKind::Predicate => "predicate",
    }
}

/// `text` as a JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            character if (character as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", character as u32);
            }
            character => out.push(character),
        }
    }
    out.push('"');
    out
}

/// A budget mode as JSON: `null` (unbounded) or the budget in nanoseconds of guest time.
fn json_budget(mode: spindle_dispatch::Mode) -> String {
    match mode {
        spindle_dispatch::Mode::Bounded { budget } => alloc::format!("{budget}"),
        _ => String::from("null"),
    }
}

/// One extension's record as a JSON object (the same fields `ext show` prints; budgets of
/// bindings in nanoseconds of guest time, counters in `counter_unit`).
pub fn to_json(report: &ExtensionReport) -> String {
    let provenance = &report.provenance;
    let mut text = String::new();
    let _ = write!(
        text,
        "{{\"name\":{},\"version\":{},\"technology\":{},\"state\":{},\"reason\":{}",
        json_string(&report.name),
        json_string(&report.version),
        json_string(&alloc::format!("{}", report.technology)),
        json_string(report.status.word()),
        match &report.status {
            Status::Running => String::from("null"),
            other => json_string(&other.describe()),
        }
    );
    let _ = write!(
        text,
        ",\"budget_us\":{},\"memory_quota_bytes\":{},\"domains\":[{}]",
        provenance.budget_microseconds,
        provenance.memory_quota_bytes,
        provenance.domains.iter().map(|domain| json_string(domain)).collect::<Vec<_>>().join(",")
    );
    match &provenance.artifact {
        Some(artifact) => {
            let signer = match artifact.signer {
                Signer::Builder(key) => json_string(&hex(&key)),
                Signer::Unsigned => String::from("null"),
                Signer::BootBundleProgram => json_string("boot-bundle"),
            };
            let _ = write!(text, ",\"artifact\":{{\"bytes\":{},\"sha256\":\"{}\",\"signer\":{signer}}}", artifact.bytes, hex(&artifact.sha256()));
        }
        None => text.push_str(",\"artifact\":null"),
    }
    match report.load {
        Some(load) => {
            let _ = write!(text, ",\"load\":{{\"at_us\":{},\"took_us\":{},\"counted\":{}}}", load.at_micros, load.took_micros, load.counted);
        }
        None => text.push_str(",\"load\":null"),
    }
    match report.memory {
        Some(usage) => {
            let _ = write!(text, ",\"memory\":{{\"used_bytes\":{},\"limit_bytes\":{}}}", usage.used_bytes, usage.quota_bytes);
        }
        None => text.push_str(",\"memory\":null"),
    }
    let totals = report.totals();
    let _ = write!(
        text,
        ",\"counter_unit\":{},\"totals\":{{\"calls\":{},\"rejected\":{},\"counted\":{},\"faults\":{},\"overruns\":{}}},\"bindings\":[",
        json_string(counter_unit()),
        totals.calls,
        totals.rejected,
        totals.counted,
        totals.faults,
        totals.overruns
    );
    for (index, binding) in report.bindings.iter().enumerate() {
        let snapshot = &binding.snapshot;
        let counters = &snapshot.counters;
        if index > 0 {
            text.push(',');
        }
        let guards: Vec<String> = snapshot.guards.iter().map(|guard| json_string(&guard.text)).collect();
        let _ = write!(
            text,
            "{{\"id\":{},\"event\":{},\"handler\":{},\"installed\":{},\"budget_ns\":{},\"requested_budget_ns\":{},\"guards\":[{}],\"calls\":{},\"rejected\":{},\"counted\":{},\"faults\":{},\"overruns\":{},\"disabled\":{},\"last_fault\":{}}}",
            json_string(&alloc::format!("{}", snapshot.id)),
            json_string(binding.event),
            json_string(&snapshot.handler.name),
            binding.installed,
            json_budget(snapshot.mode),
            json_budget(snapshot.requested_mode),
            guards.join(","),
            counters.invocations,
            counters.guard_rejections,
            counters.instructions,
            counters.faults,
            counters.overruns,
            snapshot.disabled.is_some(),
            match &snapshot.last_fault {
                Some(fault) => json_string(&alloc::format!("{fault}")),
                None => String::from("null"),
            }
        );
    }
    text.push_str("]}");
    text
}

/// Every extension's record as one JSON document: `{"clock":…,"extensions":[…]}`.
pub fn all_json() -> String {
    let records: Vec<String> = reports().iter().map(to_json).collect();
    alloc::format!("{{\"clock\":{},\"extensions\":[{}]}}", json_string(crate::time::clock_mode().name()), records.join(","))
}

/// A note for the load message when the event's owner capped a binding's budget below
/// the manifest's (empty when nothing was capped).
pub fn caps_note(report: &ExtensionReport) -> String {
    let mut note = String::new();
    let asked = crate::time::budget_from_micros(report.provenance.budget_microseconds);
    for binding in report.bindings.iter().filter(|binding| binding.installed) {
        if let spindle_dispatch::Mode::Bounded { budget } = binding.snapshot.mode
            && budget < asked
        {
            let _ = write!(note, "; {} budget capped to {} by the event's owner (manifest {})", binding.event, BudgetSpan(budget), BudgetSpan(asked));
        }
    }
    note
}
