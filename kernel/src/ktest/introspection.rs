//! Tests of what the kernel says about extensions: every view (console `ext list`, the
//! `ext_list` system call, the hot-load `LIST` answer, JSON, the load answer) reports the
//! same state; `ext show` reports provenance, load cost, budgets and per-binding counters;
//! a killed extension's command says so; a budget an event's owner caps is reported.

use super::{KernelTest, TestResult};
use super::text;
use crate::ensure;
use crate::ext::{self, introspect};

/// The introspection tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "introspect::every_view_agrees_after_a_kill", run: every_view_agrees_after_a_kill },
    KernelTest { name: "introspect::show_reports_provenance_and_counters", run: show_reports_provenance_and_counters },
    KernelTest { name: "introspect::killed_extensions_command_says_so", run: killed_extensions_command_says_so },
    KernelTest { name: "introspect::capped_budget_is_reported_at_load", run: capped_budget_is_reported_at_load },
    KernelTest { name: "introspect::budgets_follow_the_clock_mode", run: budgets_follow_the_clock_mode },
    KernelTest { name: "introspect::disabled_binding_is_degraded_in_every_view", run: disabled_binding_is_degraded_in_every_view },
];

/// Loads `name` as `preference`, runs `check` on it, and unloads it whatever `check` said.
fn with_loaded(name: &str, preference: ext::Preference, check: impl FnOnce(&ext::LoadedExtension) -> TestResult) -> TestResult {
    let extension = ext::load(name, preference).map_err(text)?;
    let outcome = check(&extension);
    drop(extension);
    let unloaded = ext::unload(name);
    outcome?;
    unloaded.map_err(text)
}

fn every_view_agrees_after_a_kill() -> TestResult {
    with_loaded("faulty", ext::Preference::BuiltIn, |extension| {
        ensure!(ext::loaded_summary(extension).is_ok(), "a running extension's load summary is an error");
        let answer = crate::events::probe::raise(faulty::KEY_PANIC, 0);
        ensure!(answer == 0, "the panicking probe answered {answer}, not the default");
        let report = introspect::report(extension);
        ensure!(matches!(report.status, introspect::Status::Killed(_)), "status after a panic: {:?}", report.status);
        let line = introspect::list_line(&report);
        ensure!(line.contains("KILLED: faulty.panic_out_of_bounds panicked"), "ext list line: {line}");
        let listing = crate::syscall::shell_calls::extension_listing();
        ensure!(
            listing.lines().any(|row| row.starts_with("faulty\t") && row.contains("\tKILLED: faulty.panic_out_of_bounds panicked")),
            "ext_list: {listing}"
        );
        let host = crate::hotload::execute(&crate::hotload::Request::List);
        ensure!(host.contains("faulty:killed"), "hot-load LIST: {host}");
        let json = introspect::to_json(&report);
        ensure!(json.contains("\"state\":\"killed\"") && json.contains("faulty.panic_out_of_bounds panicked"), "JSON: {json}");
        let summary = ext::loaded_summary(extension);
        ensure!(summary.as_ref().is_err_and(|why| why.contains("not serving")), "load summary of a killed extension: {summary:?}");
        // The binding that faulted keeps its counters after it was removed.
        let panicked = report
            .bindings
            .iter()
            .find(|binding| binding.snapshot.handler.name == "faulty.panic_out_of_bounds")
            .ok_or("no record of faulty.panic_out_of_bounds")?;
        ensure!(!panicked.installed, "the panicking binding is still installed");
        ensure!(
            panicked.snapshot.counters.invocations == 1 && panicked.snapshot.counters.faults == 1,
            "the panicking binding's counters: {:?}",
            panicked.snapshot.counters
        );
        ensure!(report.totals().faults == 1, "totals: {:?}", report.totals());
        Ok(())
    })
}

fn show_reports_provenance_and_counters() -> TestResult {
    with_loaded("faulty", ext::Preference::Default, |extension| {
        let answer = crate::events::probe::raise(faulty::KEY_ANSWER, 21);
        ensure!(answer == 42, "probe 1 21 answered {answer}");
        let report = introspect::report(extension);
        let shown = introspect::show_text(&report);
        let bytes = ext::bundle::payload("faulty").ok_or("faulty is not in the boot bundle")?;
        let digest = spindle_loader::artifact_digest(bytes);
        let first_bytes = alloc::format!("{:02x}{:02x}{:02x}{:02x}", digest[0], digest[1], digest[2], digest[3]);
        for expected in [
            "faulty 0.1.0 (native)",
            "state:     running",
            &alloc::format!("artifact:  {} bytes, sha256 {first_bytes}", bytes.len()),
            "signer:    builder key ",
            "loaded:    at ",
            "budget:    10000 us per call (manifest)",
            "memory:    ",
            "domains:   console, clock",
            "faulty#0 calls=1",
            "when key == 1 [indexed]",
        ] {
            ensure!(shown.contains(expected), "`ext show` lacks {expected:?}:\n{shown}");
        }
        ensure!(report.bindings.len() == 9, "{} bindings reported", report.bindings.len());
        ensure!(report.load.is_some_and(|load| load.counted > 0), "no load cost recorded: {:?}", report.load);
        let json = introspect::to_json(&report);
        ensure!(json.starts_with("{\"name\":\"faulty\"") && json.ends_with("]}"), "JSON: {json}");
        ensure!(json.contains("\"technology\":\"native\"") && json.contains("\"budget_us\":10000"), "JSON: {json}");
        let opens = json.matches('{').count();
        ensure!(opens == json.matches('}').count(), "unbalanced JSON: {json}");
        Ok(())
    })
}

fn killed_extensions_command_says_so() -> TestResult {
    with_loaded("hello", ext::Preference::BuiltIn, |extension| {
        ensure!(crate::shell::run_line("hello").is_ok(), "`hello` failed while the extension runs");
        ext::kill(extension, spindle_dispatch::HandlerFault::Panicked, "hello#0");
        let error = crate::shell::run_line("hello").err().ok_or("`hello` succeeded after its extension was killed")?;
        let message = text(&error);
        ensure!(message.contains("command of extension `hello`, which is not serving: KILLED"), "message: {message}");
        let unknown = crate::shell::run_line("no-such-command").err().map(|error| text(&error)).unwrap_or_default();
        ensure!(unknown.contains("unknown command"), "an unknown command says {unknown:?}");
        Ok(())
    })
}

fn capped_budget_is_reported_at_load() -> TestResult {
    // heartbeat asks 1,000 us per call; clock.Tick caps handlers at 100 us, console.Line at
    // 50 ms: the load summary names the one cap below the manifest's budget.
    with_loaded("heartbeat", ext::Preference::BuiltIn, |extension| {
        let summary = ext::loaded_summary(extension)?;
        ensure!(summary.starts_with("`heartbeat` 0.1.0 (built-in), 2 binding(s)"), "summary: {summary}");
        ensure!(
            summary.contains("; clock.Tick budget capped to 100 us by the event's owner (manifest 1000 us)"),
            "the clock's cap is not reported: {summary}"
        );
        ensure!(!summary.contains("console.Line budget capped"), "an uncapped binding reported as capped: {summary}");
        let shown = introspect::show_text(&introspect::report(extension));
        ensure!(shown.contains("mode=bounded(100 us) (capped by the event's owner; manifest 1000 us)"), "`ext show`:\n{shown}");
        Ok(())
    })
}

fn budgets_follow_the_clock_mode() -> TestResult {
    use crate::time::{ClockMode, budget_timebase_ticks};
    ensure!(crate::time::clock_mode() == ClockMode::Exact, "the test suite runs under -icount but the kernel measured {:?}", crate::time::clock_mode());
    // Exact: 100 us at 10 MHz is 1,000 timebase ticks, one per 100 instructions.
    ensure!(budget_timebase_ticks(100_000, ClockMode::Exact, 10_000_000) == 1_000, "exact 100 us");
    ensure!(budget_timebase_ticks(1, ClockMode::Exact, 10_000_000) == 1, "at least one tick");
    // Host: 20 x the budget, at least 250 ms.
    ensure!(budget_timebase_ticks(100_000, ClockMode::Host, 10_000_000) == 2_500_000, "host 100 us → 250 ms floor");
    ensure!(budget_timebase_ticks(20_000_000, ClockMode::Host, 10_000_000) == 4_000_000, "host 20 ms → 400 ms");
    ensure!(budget_timebase_ticks(u64::MAX, ClockMode::Host, 10_000_000) > 0, "no overflow");
    Ok(())
}

/// A running extension whose binding the dispatcher's circuit breaker disabled (after
/// repeated answers its primary module rejected) is `degraded`, not `running`, in every
/// view. The hot list's kernel mirror and the extension's own list are made to disagree:
/// the extension then volunteers a frame the kernel knows is hot, which is rejected.
fn disabled_binding_is_degraded_in_every_view() -> TestResult {
    use crate::services::frames::{self, LRU_BASE_FRAME};
    use spindle_abi::event::{HotListEntry, MM_HOT_LIST_SET};
    let outcome = with_loaded("hotlist", ext::Preference::BuiltIn, |extension| {
        frames::set_hot(0, LRU_BASE_FRAME);
        frames::set_hot(1, LRU_BASE_FRAME + 1);
        // Empty slot 1 in the extension only (the mirror keeps LRU_BASE_FRAME + 1 hot).
        let table = crate::events::dispatcher().table(&MM_HOT_LIST_SET).map_err(text)?;
        crate::events::raise(&table, &HotListEntry { slot: 1, frame: 0 });
        let rejected_before = frames::rejections();
        for _ in 0..spindle_dispatch::DEFAULT_BREAKER_THRESHOLD + 1 {
            let frame = frames::reclaim(LRU_BASE_FRAME);
            ensure!(frame == LRU_BASE_FRAME, "a rejected answer was used: {frame:#x}");
        }
        ensure!(frames::rejections() > rejected_before, "no answer was rejected");
        let report = introspect::report(extension);
        ensure!(matches!(report.status, introspect::Status::Degraded { .. }), "status: {:?}", report.status);
        let line = introspect::list_line(&report);
        ensure!(line.contains("DEGRADED: hotlist.") && line.contains("disabled: after 3 faults"), "ext list line: {line}");
        let listing = crate::syscall::shell_calls::extension_listing();
        ensure!(listing.lines().any(|row| row.starts_with("hotlist\t") && row.contains("\tDEGRADED: ")), "ext_list: {listing}");
        let host = crate::hotload::execute(&crate::hotload::Request::List);
        ensure!(host.contains("hotlist:degraded"), "hot-load LIST: {host}");
        ensure!(introspect::to_json(&report).contains("\"state\":\"degraded\""), "JSON state");
        ensure!(ext::loaded_summary(extension).is_err_and(|why| why.contains("DEGRADED")), "the load summary of a degraded extension is not an error");
        Ok(())
    });
    frames::clear_hot();
    outcome
}
