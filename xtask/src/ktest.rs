//! In-kernel tests under QEMU, harness self-tests and console system tests.
//!
//! The kernel prints `ktest begin/run/pass/fail/end` lines (see `kernel/src/ktest`).
//! A run that ends early — panic, fatal fault, watchdog, host timeout — fails the test
//! that was running, and the kernel is booted again from the next test, so one crash
//! never hides the results of the tests after it.

use crate::kernel_build::Image;
use std::time::Duration;

use crate::Result;
use crate::qemu::{Exit, Machine};

/// Host timeout for one boot running the test suite (a hung kernel fails, never passes).
const SUITE_TIMEOUT: Duration = Duration::from_secs(180);
/// Host timeout for one harness self-test or system test.
const SHORT_TIMEOUT: Duration = Duration::from_secs(30);
/// Host timeout for the self-test that hangs with interrupts off (only the host can stop it).
const HANG_TIMEOUT: Duration = Duration::from_secs(8);
/// Guest watchdog used for the harness's own hang test, in seconds.
const HARNESS_WATCHDOG_SECONDS: u64 = 2;

/// QEMU flags for deterministic guest time (one instruction per virtual nanosecond;
/// idle time is skipped instead of slept).
const ICOUNT: &[&str] = crate::qemu::Clock::ExactDeterministic.arguments();

/// Kernel exit statuses (the ABI's, which kernel/src/power.rs writes).
const EXIT_FAILURE: i32 = spindle_abi::machine::MachineExit::Failure.code();
const EXIT_PANIC: i32 = spindle_abi::machine::MachineExit::Panic.code();
const EXIT_FATAL_FAULT: i32 = spindle_abi::machine::MachineExit::FatalFault.code();

/// Passed and failed counts plus the names of failures.
#[derive(Default)]
pub struct Tally {
    /// Tests that passed.
    pub passed: usize,
    /// Tests that failed.
    pub failed: usize,
    /// Names of the failed tests.
    pub failures: Vec<String>,
}

impl Tally {
    /// Counts one result and prints it.
    pub fn record(&mut self, name: &str, outcome: &std::result::Result<(), String>) {
        match outcome {
            Ok(()) => {
                self.passed += 1;
                println!("  ok    {name}");
            }
            Err(reason) => {
                self.failed += 1;
                self.failures.push(name.to_string());
                println!("  FAIL  {name}: {reason}");
            }
        }
    }
}

/// One parsed `ktest` event.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// `ktest begin <count>`
    Begin(usize),
    /// `ktest run <index> <name>`
    Run(usize, String),
    /// `ktest pass <index> <name>`
    Pass(usize, String),
    /// `ktest fail <index> <name>: <reason>`
    Fail(usize, String, String),
    /// `ktest end <passed> <failed>`
    End(usize, usize),
}

/// Parses one console line; `None` if it is not a ktest line.
pub fn parse_event(line: &str) -> Option<Event> {
    let rest = line.trim().strip_prefix("ktest ")?;
    let (verb, rest) = rest.split_once(' ')?;
    match verb {
        "begin" => Some(Event::Begin(rest.trim().parse().ok()?)),
        "end" => {
            let (passed, failed) = rest.split_once(' ')?;
            Some(Event::End(passed.parse().ok()?, failed.trim().parse().ok()?))
        }
        "run" | "pass" | "fail" => {
            let (index, rest) = rest.split_once(' ')?;
            let index = index.parse().ok()?;
            match verb {
                "run" => Some(Event::Run(index, rest.trim().to_string())),
                "pass" => Some(Event::Pass(index, rest.trim().to_string())),
                _ => {
                    let (name, reason) = rest.split_once(": ").unwrap_or((rest, "failed"));
                    Some(Event::Fail(index, name.to_string(), reason.to_string()))
                }
            }
        }
        _ => None,
    }
}

fn describe_exit(exit: Exit) -> String {
    match exit {
        Exit::TimedOut => "hung (host timeout)".into(),
        Exit::KilledAtCue => "killed by the test at its cue".into(),
        Exit::Status(EXIT_PANIC) => "kernel panic".into(),
        Exit::Status(EXIT_FATAL_FAULT) => "fatal kernel fault".into(),
        Exit::Status(code) => format!("kernel exited with status {code}"),
    }
}

fn show_tail(lines: &[String]) {
    let start = lines.len().saturating_sub(30);
    println!("    --- last {} lines of the kernel log ---", lines.len() - start);
    for line in &lines[start..] {
        println!("    | {line}");
    }
}

/// Runs the in-kernel suite, the harness self-tests and the console system tests.
pub fn run_all(kernel: &Image, verbose: bool, tally: &mut Tally) -> Result<()> {
    println!("== in-kernel tests (QEMU)");
    run_suite(kernel, None, verbose, tally)?;
    println!("== harness self-tests (each kernel test here must be reported as failing)");
    run_harness_self_tests(kernel, verbose, tally)?;
    println!("== console system tests (`cargo xtask qemu -- …`)");
    run_console_tests(kernel, verbose, tally)?;
    println!("== clock system tests (the clocks `cargo xtask qemu` and `--host-clock` run; the host kept busy)");
    run_host_clock_tests(kernel, verbose, tally)?;
    println!("== MD5 graft against the host's md5sum");
    run_md5sum_test(kernel, verbose, tally)?;
    println!("== disk system tests (the disk image across boots, a machine without one)");
    run_disk_tests(kernel, verbose, tally)?;
    println!("== hot-load system tests (`cargo xtask load` into a running kernel)");
    run_hotload_tests(kernel, verbose, tally)?;
    Ok(())
}

/// Runs only the in-kernel tests whose names contain `pattern`.
pub fn run_matching(kernel: &Image, pattern: &str, verbose: bool, tally: &mut Tally) -> Result<()> {
    println!("== in-kernel tests matching `{pattern}` (QEMU)");
    run_suite(kernel, Some(pattern), verbose, tally)
}

fn run_suite(kernel: &Image, only: Option<&str>, verbose: bool, tally: &mut Tally) -> Result<()> {
    let mut from = 0;
    let mut total = None;
    let mut reported = std::collections::BTreeSet::new();
    loop {
        let mut machine = Machine::for_image(kernel);
        machine.append("spindle.mode=test").append(&format!("spindle.test.from={from}"));
        if let Some(pattern) = only {
            machine.append(&format!("spindle.test.only={pattern}"));
        }
        // Exact, repeatable guest time: budgets and timeouts in the kernel are counted in
        // instructions, so a loaded host cannot make a handler overrun (or a test flaky).
        machine.extra(ICOUNT);
        let (exit, lines) = machine.run_captured(SUITE_TIMEOUT, verbose)?;
        let mut running: Option<(usize, String)> = None;
        let mut ended = false;
        let mut last_index = None;
        let mut failed_here = false;
        for event in lines.iter().filter_map(|line| parse_event(line)) {
            match event {
                Event::Begin(count) => total = Some(count),
                Event::Run(index, name) => running = Some((index, name)),
                Event::Pass(index, name) => {
                    reported.insert(index);
                    tally.record(&format!("kernel::{name}"), &Ok(()));
                    running = None;
                    last_index = Some(index);
                }
                Event::Fail(index, name, reason) => {
                    reported.insert(index);
                    tally.record(&format!("kernel::{name}"), &Err(reason));
                    running = None;
                    last_index = Some(index);
                    failed_here = true;
                }
                Event::End(..) => ended = true,
            }
        }
        if let Some((index, name)) = running {
            reported.insert(index);
            tally.record(&format!("kernel::{name}"), &Err(describe_exit(exit)));
            last_index = Some(index);
            failed_here = true;
        }
        if ended {
            if exit != Exit::Status(if failed_here { EXIT_FAILURE } else { 0 }) {
                tally.record("kernel::suite-exit-status", &Err(format!("suite ended but {}", describe_exit(exit))));
            }
            if failed_here && !verbose {
                show_tail(&lines);
            }
            break;
        }
        if failed_here && !verbose {
            show_tail(&lines);
        }
        match (last_index, total) {
            (Some(index), Some(count)) if index + 1 < count => from = index + 1,
            (Some(_), Some(_)) => break,
            _ => {
                tally.record("kernel::boot", &Err(format!("the kernel did not start its tests ({})", describe_exit(exit))));
                show_tail(&lines);
                return Ok(());
            }
        }
    }
    // Every test the kernel announced must have been reported, exactly once.
    if only.is_none()
        && let Some(count) = total
        && reported.len() != count
    {
        tally.record("kernel::suite-count", &Err(format!("the kernel announced {count} tests but {} were reported", reported.len())));
    }
    Ok(())
}

/// What a harness self-test must produce: an exit, a reason in the `fail` line and a
/// text in the log.
struct SelfTest {
    name: &'static str,
    expected_exit: Exit,
    reason_contains: &'static str,
    log_contains: &'static str,
    timeout: Duration,
}

const SELF_TESTS: &[SelfTest] = &[
    SelfTest { name: "harness::fails", expected_exit: Exit::Status(EXIT_FAILURE), reason_contains: "must fail", log_contains: "ktest end 0 1", timeout: SHORT_TIMEOUT },
    SelfTest { name: "harness::panics", expected_exit: Exit::Status(EXIT_PANIC), reason_contains: "panic", log_contains: "index out of bounds", timeout: SHORT_TIMEOUT },
    SelfTest { name: "harness::faults", expected_exit: Exit::Status(EXIT_FATAL_FAULT), reason_contains: "fatal kernel fault", log_contains: "load page fault (scause=0xd) at pc=", timeout: SHORT_TIMEOUT },
    SelfTest { name: "harness::hangs", expected_exit: Exit::Status(EXIT_FAILURE), reason_contains: "hung (watchdog", log_contains: "ktest fail", timeout: SHORT_TIMEOUT },
    SelfTest { name: "harness::hangs_with_interrupts_off", expected_exit: Exit::TimedOut, reason_contains: "", log_contains: "ktest run", timeout: HANG_TIMEOUT },
];

fn run_harness_self_tests(kernel: &Image, verbose: bool, tally: &mut Tally) -> Result<()> {
    for test in SELF_TESTS {
        let mut machine = Machine::for_image(kernel);
        machine
            .append("spindle.mode=test")
            .append(&format!("spindle.test.only={}", test.name))
            .append(&format!("spindle.test.watchdog={HARNESS_WATCHDOG_SECONDS}"));
        let (exit, lines) = machine.run_captured(test.timeout, verbose)?;
        let fail_reason = lines.iter().find_map(|line| match parse_event(line) {
            Some(Event::Fail(_, name, reason)) if name == test.name => Some(reason),
            _ => None,
        });
        let passed_line = lines.iter().any(|line| matches!(parse_event(line), Some(Event::Pass(..))));
        let mut problems = Vec::new();
        if exit != test.expected_exit {
            problems.push(format!("expected {:?}, got {:?}", test.expected_exit, exit));
        }
        if passed_line {
            problems.push("the kernel reported it as passing".to_string());
        }
        if test.expected_exit != Exit::TimedOut {
            match &fail_reason {
                Some(reason) if reason.contains(test.reason_contains) => {}
                Some(reason) => problems.push(format!("fail reason {reason:?} lacks {:?}", test.reason_contains)),
                None => problems.push("no `ktest fail` line".to_string()),
            }
        }
        if !lines.iter().any(|line| line.contains(test.log_contains)) {
            problems.push(format!("log lacks {:?}", test.log_contains));
        }
        let outcome = if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) };
        if outcome.is_err() && !verbose {
            show_tail(&lines);
        }
        tally.record(&format!("harness-self-test::{}", test.name), &outcome);
    }
    Ok(())
}

/// The boot argument that skips the user shell (spsh): the kernel console runs scripts.
pub const KERNEL_CONSOLE: &str = "spindle.shell=kernel";

/// A console script and what it must print and exit with.
struct ConsoleTest {
    name: &'static str,
    lines: &'static [&'static str],
    expected_exit: i32,
    log_contains: &'static [&'static str],
    /// Extensions the boot bundle's boot list names for this run (empty: the image's own).
    boot: &'static [&'static str],
    /// Run the lines on the raw kernel console (`spindle.shell=kernel`) instead of spsh.
    kernel_console: bool,
    /// Extra boot-bundle entries `(new name, existing entry)`: the existing entry's bytes
    /// under another name (an artifact whose manifest names something else).
    aliases: &'static [(&'static str, &'static str)],
}

/// Boot-bundle aliases: `hello`'s three builds under the name `impostor`.
const IMPOSTOR: &[(&str, &str)] = &[("impostor", "hello"), ("impostor.wasm", "hello.wasm"), ("bin/ext-impostor", "bin/ext-hello")];

const CONSOLE_TESTS: &[ConsoleTest] = &[
    ConsoleTest {
        name: "mem-halt",
        lines: &["mem", "halt"],
        expected_exit: 0,
        log_contains: &["clock exact: budgets are guest time", "RAM (device tree):", "frames:", "heap:", "halting"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "lines-run-in-order-with-spaces",
        lines: &["echo first, with a comma", "uptime", "echo second"],
        expected_exit: 0,
        log_contains: &["first, with a comma", "ticks at", "second"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "unknown-command-fails-the-script",
        lines: &["echo before", "no-such-command", "echo never"],
        expected_exit: EXIT_FAILURE,
        log_contains: &["spsh: no-such-command: unknown command", "the script stops"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "fault-is-reported-with-cause-and-address",
        lines: &["fault 0x10"],
        expected_exit: 0,
        log_contains: &["caught: load page fault (scause=0xd) at pc=", "stval=0x10 (address)"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "native-extension-demo",
        lines: &["ext load hello", "hello", "events", "ext unload hello", "ext list", "halt"],
        expected_exit: 0,
        log_contains: &["loaded `hello` 0.1.0 (native)", "hello from the `hello` extension", "Native:hello#0", "unloaded `hello`", "halting"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "native-containment-demo",
        lines: &["ext load faulty", "probe 1 21", "probe 2 0", "ext list", "probe 1 21"],
        expected_exit: 0,
        log_contains: &["(key=1, value=21) -> 42", "`faulty` killed: faulty#1 panicked", "KILLED", "(key=1, value=21) -> 0"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "wasm-extension-demo",
        lines: &["ext list", "ext load hello wasm", "hello", "events", "ext load faulty wasm", "probe 1 21", "probe 3 0", "ext list", "probe 1 21", "halt"],
        expected_exit: 0,
        log_contains: &[
            "loaded `hello` 0.1.0 (wasm)",
            "hello from the `hello` extension",
            "Wasm:hello#0",
            "(key=1, value=21) -> 42",
            "`faulty` killed: faulty#2 overran budget",
            "out of fuel",
            "(key=1, value=21) -> 0",
        ],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "hotlist-graft-from-the-console",
        lines: &[
            "reclaim 0x80400",
            "ext load hotlist",
            "reclaim hot 0 0x80400",
            "reclaim hot 1 0x80401",
            "reclaim 0x80400",
            "ext unload hotlist",
            "ext load hotlist wasm",
            "reclaim hot 0 0x80400",
            "reclaim 0x80401",
            "reclaim clear",
        ],
        expected_exit: 0,
        log_contains: &[
            "mm.Reclaim(candidate=0x80400) -> 0x80400",
            "loaded `hotlist` 0.1.0 (native)",
            "mm.Reclaim(candidate=0x80400) -> 0x80402",
            "loaded `hotlist` 0.1.0 (wasm)",
            "mm.Reclaim(candidate=0x80401) -> 0x80401 (queue 0x80400..0x80800; rejected answers: 0)",
        ],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "boot-list-loads-a-c-wasm-extension",
        lines: &["ext list", "hello-c", "probe 8 14"],
        expected_exit: 0,
        log_contains: &["[ext] boot: loaded `hello-c` (wasm), 2 binding(s)", "hello from C: greeting #1", "(key=8, value=14) -> 42"],
        boot: &["hello-c.wasm"],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "user-programs-run",
        lines: &["run hello 0", "run badcalls", "ps"],
        expected_exit: 0,
        log_contains: &["hello from user space: pid 2", "checks, 0 failed", "(badcalls) exited with status 0", "PARENT", "spsh -s"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "user-fault-kills-only-the-process",
        lines: &["run fault load 0x80200000", "echo never"],
        expected_exit: EXIT_FAILURE,
        log_contains: &["killed: load page fault at 0x80200000"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "boot-list-loads-extensions",
        lines: &["ext list", "hello"],
        expected_exit: 0,
        log_contains: &["[ext] boot: loaded `hello` (native)", "hello            native", "hello from the `hello` extension"],
        boot: &["hello"],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "spsh-runs-programs-and-lists",
        lines: &["run hello 0", "ps", "events", "echo done"],
        expected_exit: 0,
        log_contains: &["spsh> run hello 0", "[spsh] pid 2 (hello) exited with status 0", "PARENT", "spsh -s", "clock.Tick", "spsh> echo done", "[shell] spsh exited with status 0"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "spsh-loads-lists-and-unloads-extensions",
        lines: &["ext list", "ext load hello", "ext list", "hello", "ext unload hello", "ext load hello wasm", "ext unload hello", "ext load nosuch", "echo never"],
        expected_exit: EXIT_FAILURE,
        log_contains: &[
            // `ticker` is on image.toml's boot list.
            "ticker           native",
            "loaded `hello` 0.1.0 (native), 1 binding(s)",
            "hello from the `hello` extension",
            "unloaded `hello`",
            "loaded `hello` 0.1.0 (wasm)",
            "spsh: ext load nosuch: not found: neither built in nor in the boot bundle (list it in image.toml",
        ],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "spsh-shows-the-kernels-reason",
        lines: &["ext load hello", "ext load hello", "echo never"],
        expected_exit: EXIT_FAILURE,
        log_contains: &["spsh: ext load hello: extension `hello` is already loaded"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "spsh-passes-capabilities-only-when-asked",
        lines: &["run badcalls", "run -x badcalls loader", "run -c badcalls console"],
        expected_exit: 0,
        log_contains: &["(badcalls) exited with status 0", "badcalls: through the kernel console"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "spsh-failing-line-stops-the-script",
        lines: &["echo before", "run hello 3", "echo never"],
        expected_exit: EXIT_FAILURE,
        log_contains: &["spsh> echo before", "[spsh] pid 2 (hello) exited with status 3", "the script stops", "[shell] spsh exited with status 1"],
        boot: &[],
        kernel_console: false,
        aliases: &[],
    },
    ConsoleTest {
        name: "ext-load-refuses-an-artifact-declaring-another-name-native",
        lines: &["ext load impostor", "echo never"],
        expected_exit: EXIT_FAILURE,
        log_contains: &["ext load impostor: the build found for `impostor` declares the name `hello`: refused"],
        boot: &[],
        kernel_console: false,
        aliases: IMPOSTOR,
    },
    ConsoleTest {
        name: "ext-load-refuses-an-artifact-declaring-another-name-wasm",
        lines: &["ext load impostor wasm", "echo never"],
        expected_exit: EXIT_FAILURE,
        log_contains: &["ext load impostor: the build found for `impostor` declares the name `hello`: refused"],
        boot: &[],
        kernel_console: false,
        aliases: IMPOSTOR,
    },
    ConsoleTest {
        name: "ext-load-refuses-an-artifact-declaring-another-name-user",
        lines: &["ext load impostor user", "echo never"],
        expected_exit: EXIT_FAILURE,
        log_contains: &["ext load impostor: the build found for `impostor` declares the name `hello`: refused"],
        boot: &[],
        kernel_console: false,
        aliases: IMPOSTOR,
    },
    ConsoleTest {
        name: "raw-kernel-console-runs-scripts",
        lines: &["echo raw", "run hello 0", "no-such-command", "echo never"],
        expected_exit: EXIT_FAILURE,
        log_contains: &["spindle> echo raw", "(hello) exited with status 0", "error: unknown command"],
        boot: &[],
        kernel_console: true,
        aliases: &[],
    },
];

/// A copy of the image's boot bundle whose boot list is `boot`, with `aliases` added
/// (`(new name, existing entry)`: the existing entry's bytes under a new name).
fn bundle_with(image: &Image, boot: &[&str], aliases: &[(&str, &str)]) -> Result<std::path::PathBuf> {
    let bytes = std::fs::read(&image.bundle).map_err(|error| format!("cannot read {}: {error}", image.bundle.display()))?;
    let bundle = spindle_loader::bundle::parse(&bytes).map_err(|error| format!("{}: {error}", image.bundle.display()))?;
    let mut entries: Vec<(&str, &[u8])> = bundle.entries.iter().map(|entry| (entry.name, entry.payload)).collect();
    for (alias, existing) in aliases {
        let payload = bundle.entries.iter().find(|entry| entry.name == *existing).ok_or_else(|| format!("the boot bundle has no entry {existing}"))?.payload;
        entries.push((alias, payload));
    }
    let aliased: Vec<&str> = aliases.iter().map(|(alias, _)| *alias).collect();
    let name = format!("boot-{}-{}.bundle", boot.join("-"), aliased.join("-")).replace('/', "_");
    let path = image.bundle.with_file_name(name);
    std::fs::write(&path, spindle_loader::bundle::build(&entries, boot)).map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    Ok(path)
}

fn run_console_tests(kernel: &Image, verbose: bool, tally: &mut Tally) -> Result<()> {
    for test in CONSOLE_TESTS {
        let lines: Vec<String> = test.lines.iter().map(|line| line.to_string()).collect();
        let mut machine = Machine::for_image(kernel);
        if !test.boot.is_empty() || !test.aliases.is_empty() {
            machine.set_initrd(&bundle_with(kernel, test.boot, test.aliases)?);
        }
        // Deterministic guest time, as for the kernel tests (budgets cannot flake).
        machine.extra(ICOUNT);
        machine.append(&format!("spindle.script={}", crate::encode::encode_script(&lines)));
        if test.kernel_console {
            machine.append(KERNEL_CONSOLE);
        }
        let (exit, log) = machine.run_captured(SHORT_TIMEOUT, verbose)?;
        let mut problems = Vec::new();
        if exit != Exit::Status(test.expected_exit) {
            problems.push(format!("expected exit {}, got {}", test.expected_exit, describe_exit(exit)));
        }
        for text in test.log_contains {
            if !log.iter().any(|line| line.contains(text)) {
                problems.push(format!("output lacks {text:?}"));
            }
        }
        if test.expected_exit != 0 && log.iter().any(|line| line.contains("echo never")) {
            problems.push("a line after the failing one ran".into());
        }
        let outcome = if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) };
        if outcome.is_err() && !verbose {
            show_tail(&log);
        }
        tally.record(&format!("console::{}", test.name), &outcome);
    }
    Ok(())
}

/// Host timeout for one host-clock test (the guest runs at the host's pace, slowed by the
/// busy threads).
const HOST_CLOCK_TIMEOUT: Duration = Duration::from_secs(240);

/// A script run with the clock of an interactive machine while every host core is kept
/// busy, with texts the log must and must not contain and, per technology, the least
/// number of ticks `heartbeat` must report.
struct HostClockTest {
    name: &'static str,
    /// `Clock::Host` (no -icount, `--host-clock`) or `Clock::ExactInteractive` (what
    /// `cargo xtask qemu` runs).
    clock: crate::qemu::Clock,
    lines: &'static [&'static str],
    log_contains: &'static [&'static str],
    log_lacks: &'static [&'static str],
    /// `heartbeat: N ticks seen` lines that must appear, in order, each with N at least this.
    heartbeat_reports: usize,
}

/// Ticks of guest time each `heartbeat` report must have counted at least (about 3 s at
/// 100 Hz; `run spin` keeps the machine busy for longer).
const HEARTBEAT_MIN_TICKS: u64 = 200;

/// The disk clock tests' script: a policy loaded, blocks written in place and through the
/// logical disk, read back by content (`blockio`), the service's counters, the extensions.
const DISK_CLOCK_LINES: &[&str] = &["ext load disksched_clook", "blockio none 256", "blockio native 256", "disk", "ext list"];
/// What the disk clock tests' logs must not contain.
const DISK_CLOCK_LACKS: &[&str] = &["killed:", "KILLED", "DEGRADED", "DISABLED", "differs", "FAILED"];

/// The paging clock tests' script: a process four times its memory limit, then the hot-list
/// workload with the `hotlist` graft steering reclaim (swap on the HP 97560 model).
const PAGING_CLOCK_LINES: &[&str] = &["run vmtest swap 48 12 2", "run /bin/vmtest image 2 8", "ext load hotlist", "run vmtest hotscan 8 64 6 16 hot", "mem", "ext list"];
/// What the paging clock tests' logs must contain, besides the clock line.
const PAGING_CLOCK_CONTAINS: [&str; 5] = [
    "vmtest: swap: 48 pages under a limit of 12, 2 passes, every word right",
    "vmtest: image: 48 image pages written 2 times under a limit of 8: every word right",
    "loaded `hotlist` 0.1.0 (native)",
    "vmtest: hotscan: 8 hot pages, 6 rounds of 32 scan pages under 16 frames",
    "0 volunteers refused",
];

const HOST_CLOCK_TESTS: &[HostClockTest] = &[
    HostClockTest {
        name: "healthy-extensions-are-never-killed",
        clock: crate::qemu::Clock::Host,
        lines: &[
            "ext load heartbeat",
            "run spin 1000",
            "heartbeat",
            "ext unload heartbeat",
            "ext load heartbeat wasm",
            "run spin 1000",
            "heartbeat",
            "ext unload heartbeat",
            "ext load heartbeat user",
            "run spin 1000",
            "heartbeat",
            "events",
            "ext list",
        ],
        log_contains: &[
            "clock host: guest time is host time",
            "loaded `heartbeat` 0.1.0 (native)",
            "loaded `heartbeat` 0.1.0 (wasm)",
            "loaded `heartbeat` 0.1.0 (user-level)",
            "host-ticks=",
        ],
        log_lacks: &["killed:", "KILLED", "DEGRADED", "DISABLED", "instructions="],
        heartbeat_reports: 3,
    },
    HostClockTest {
        name: "runaway-handler-is-still-killed",
        clock: crate::qemu::Clock::Host,
        lines: &["ext load faulty", "probe 3 0", "ext list", "probe 1 21"],
        log_contains: &["`faulty` killed: faulty#2 overran budget of 10000 us", "KILLED", "(key=1, value=21) -> 0"],
        log_lacks: &[],
        heartbeat_reports: 0,
    },
    // The same at user level: the overrun aborts the dispatcher's bounded call in the middle
    // of the upcall, whose abort path switches the address space back; the console (a
    // process) keeps working afterwards.
    HostClockTest {
        name: "runaway-upcall-is-still-killed",
        clock: crate::qemu::Clock::Host,
        lines: &["ext load faulty user", "probe 3 0", "ext list", "probe 1 21", "run hello"],
        log_contains: &[
            "loaded `faulty` 0.1.0 (user-level)",
            "`faulty` killed: faulty#2 overran budget of 10000 us",
            "KILLED",
            "(key=1, value=21) -> 0",
            "hello from user space",
        ],
        log_lacks: &[],
        heartbeat_reports: 0,
    },
    // The README's extension flow in the default interactive machine: one crate loaded,
    // run, shown and listed the same way in every technology.
    HostClockTest {
        name: "heartbeat-in-every-technology",
        clock: crate::qemu::Clock::ExactInteractive,
        lines: &[
            "ext load heartbeat",
            "run spin 300",
            "heartbeat",
            "ext show heartbeat",
            "ext unload heartbeat",
            "ext load heartbeat wasm",
            "run spin 300",
            "heartbeat",
            "ext show heartbeat",
            "ext unload heartbeat",
            "ext load heartbeat user",
            "run spin 300",
            "heartbeat",
            "ext show heartbeat",
            "ext list",
            "events clock",
        ],
        log_contains: &[
            "clock exact: budgets are guest time",
            "loaded `heartbeat` 0.1.0 (native), 2 binding(s)",
            "heartbeat 0.1.0 (native)",
            "heartbeat 0.1.0 (wasm)",
            "heartbeat 0.1.0 (user-level)",
            "mode=bounded(100 us) (capped by the event's owner; manifest 1000 us)",
            "  state:     running",
            "instructions=",
        ],
        log_lacks: &["killed:", "KILLED", "DEGRADED", "DISABLED", "host-ticks="],
        heartbeat_reports: 3,
    },
    // The disk service in the clocks users run: modelled delays follow guest time (host
    // time with `--host-clock`); data written in place and through the logical disk reads
    // back by content, and a scheduling policy stays loaded and healthy.
    HostClockTest {
        name: "disk-writes-read-back-and-policy-stays-healthy",
        clock: crate::qemu::Clock::Host,
        lines: DISK_CLOCK_LINES,
        log_contains: &["clock host: guest time is host time", "blockio (none): 256 writes as 256 device writes", "blockio (native): 256 writes as 16 device writes", "blocks read back with their latest data", "disk: model hp97560"],
        log_lacks: DISK_CLOCK_LACKS,
        heartbeat_reports: 0,
    },
    HostClockTest {
        name: "disk-writes-read-back-and-policy-stays-healthy",
        clock: crate::qemu::Clock::ExactInteractive,
        lines: DISK_CLOCK_LINES,
        log_contains: &["clock exact: budgets are guest time", "blockio (none): 256 writes as 256 device writes", "blockio (native): 256 writes as 16 device writes", "blocks read back with their latest data", "disk: model hp97560"],
        log_lacks: DISK_CLOCK_LACKS,
        heartbeat_reports: 0,
    },
    // Paging to disk in the clocks users run: the reclaim handler's budget follows the clock,
    // swap transfers wait for the modelled disk, a file program's image pages are read
    // through the buffer cache and its written ones go to swap; every word comes back.
    HostClockTest {
        name: "paging-to-swap-with-the-hot-list",
        clock: crate::qemu::Clock::Host,
        lines: PAGING_CLOCK_LINES,
        log_contains: &["clock host: guest time is host time", PAGING_CLOCK_CONTAINS[0], PAGING_CLOCK_CONTAINS[1], PAGING_CLOCK_CONTAINS[2], PAGING_CLOCK_CONTAINS[3], PAGING_CLOCK_CONTAINS[4]],
        log_lacks: DISK_CLOCK_LACKS,
        heartbeat_reports: 0,
    },
    HostClockTest {
        name: "paging-to-swap-with-the-hot-list",
        clock: crate::qemu::Clock::ExactInteractive,
        lines: PAGING_CLOCK_LINES,
        log_contains: &["clock exact: budgets are guest time", PAGING_CLOCK_CONTAINS[0], PAGING_CLOCK_CONTAINS[1], PAGING_CLOCK_CONTAINS[2], PAGING_CLOCK_CONTAINS[3], PAGING_CLOCK_CONTAINS[4]],
        log_lacks: DISK_CLOCK_LACKS,
        heartbeat_reports: 0,
    },
];

/// Keeps every host core busy until dropped (the "host is busy" of the host-clock tests).
struct BusyHost {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyHost {
    fn start() -> BusyHost {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut spin = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        spin = std::hint::black_box(spin.wrapping_mul(6364136223846793005).wrapping_add(1));
                    }
                })
            })
            .collect();
        BusyHost { stop, threads }
    }
}

impl Drop for BusyHost {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Tick counts of the `heartbeat: N ticks seen` lines of a log, in order.
fn heartbeat_counts(log: &[String]) -> Vec<u64> {
    log.iter()
        .filter_map(|line| line.split_once("heartbeat: ")?.1.split_whitespace().next()?.parse().ok())
        .collect()
}

fn run_host_clock_tests(kernel: &Image, verbose: bool, tally: &mut Tally) -> Result<()> {
    for test in HOST_CLOCK_TESTS {
        let lines: Vec<String> = test.lines.iter().map(|line| line.to_string()).collect();
        let mut machine = Machine::for_image(kernel);
        // No `spindle.clock=`: the kernel must find out by itself.
        machine.extra(test.clock.arguments());
        machine.append(&format!("spindle.script={}", crate::encode::encode_script(&lines)));
        let busy = BusyHost::start();
        let (exit, log) = machine.run_captured(HOST_CLOCK_TIMEOUT, verbose)?;
        drop(busy);
        let mut problems = Vec::new();
        if exit != Exit::Status(0) {
            problems.push(format!("expected exit 0, got {}", describe_exit(exit)));
        }
        for text in test.log_contains {
            if !log.iter().any(|line| line.contains(text)) {
                problems.push(format!("output lacks {text:?}"));
            }
        }
        for text in test.log_lacks {
            if let Some(line) = log.iter().find(|line| line.contains(text)) {
                problems.push(format!("output has {text:?}: {line:?}"));
            }
        }
        let counts = heartbeat_counts(&log);
        if counts.len() != test.heartbeat_reports {
            problems.push(format!("{} heartbeat reports, expected {}", counts.len(), test.heartbeat_reports));
        }
        if let Some(count) = counts.iter().find(|&&count| count < HEARTBEAT_MIN_TICKS) {
            problems.push(format!("heartbeat saw only {count} ticks (at least {HEARTBEAT_MIN_TICKS} expected): {counts:?}"));
        }
        let outcome = if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) };
        if outcome.is_err() && !verbose {
            show_tail(&log);
        }
        let clock = if test.clock == crate::qemu::Clock::Host { "host-clock" } else { "interactive-clock" };
        tally.record(&format!("{clock}::{}", test.name), &outcome);
    }
    Ok(())
}

/// Host timeout for the MD5 end-to-end test (nine 1 MiB fingerprints, two of them in Wasm).
const MD5SUM_TIMEOUT: Duration = Duration::from_secs(180);

/// Boots the test image with `disk` and a script of `lines` (exact guest time); returns
/// the problems with its exit status (`expected_exit`) and its whole log.
fn run_disk_script(kernel: &Image, disk: crate::qemu::Disk, lines: &[String], expected_exit: i32, verbose: bool) -> Result<(Vec<String>, Vec<String>)> {
    let mut machine = Machine::for_image(kernel);
    machine.set_disk(disk);
    machine.extra(ICOUNT);
    machine.append(&format!("spindle.script={}", crate::encode::encode_script(lines)));
    let (exit, log) = machine.run_captured(SHORT_TIMEOUT, verbose)?;
    let mut problems = Vec::new();
    if exit != Exit::Status(expected_exit) {
        problems.push(format!("{:?}: expected exit {expected_exit}, got {}", lines, describe_exit(exit)));
    }
    Ok((problems, log))
}

fn run_disk_tests(kernel: &Image, verbose: bool, tally: &mut Tally) -> Result<()> {
    let outcome = disk_persistence_check(kernel, verbose);
    tally.record("disk::data-written-by-one-boot-is-read-by-the-next", &outcome);
    let outcome = no_disk_check(kernel, verbose);
    tally.record("disk::kernel-boots-without-a-disk", &outcome);
    let outcome = device_error_check(kernel, verbose);
    tally.record("disk::device-io-error-is-reported", &outcome);
    let outcome = fsync_survives_kill_check(kernel, verbose);
    tally.record("fs::data-acknowledged-by-fsync-survives-killing-the-machine", &outcome);
    Ok(())
}

/// Byte `index` of the pattern `fstest durable/verify` write and check for `seed`
/// (userspace/fstest).
fn fstest_pattern(seed: u64, index: usize) -> u8 {
    ((index as u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
}

/// Bytes `fstest durable` writes (userspace/fstest's `DURABLE_BYTES`).
const FSTEST_DURABLE_BYTES: usize = 50 * 4096 + 123;

/// Storage never loses data acknowledged by `fsync`: a user program writes 200 KiB to a
/// new file of the file system and calls `fsync`; the moment it says so, QEMU is killed
/// (SIGKILL: no shutdown). Then the host's checker (`cargo xtask fs fsck`) must find no
/// error in the image, the host must read the file back byte for byte, and a fresh boot
/// must read it back too (`fstest verify`). The seed differs per run, so stale data
/// cannot pass.
fn fsync_survives_kill_check(kernel: &Image, verbose: bool) -> std::result::Result<(), String> {
    use crate::qemu::Disk;
    let directory = crate::kernel_build::workspace_root().join("target").join("spindle").join("run");
    std::fs::create_dir_all(&directory).map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
    let image = directory.join(format!("disk-fsync-{}.img", std::process::id()));
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |elapsed| elapsed.as_nanos() as u64 % 1_000_000_007);
    let outcome = (|| -> std::result::Result<(), String> {
        let mut machine = Machine::for_image(kernel);
        machine.set_disk(Disk::Kept { path: image.clone(), bytes: None, fresh: true });
        machine.extra(ICOUNT);
        machine.append(&format!("spindle.script={}", crate::encode::encode_script(&[format!("run fstest durable /durable {seed}")])));
        let (exit, log) = machine.run_killed_at(SHORT_TIMEOUT, verbose, "fstest: fsync returned")?;
        if exit != Exit::KilledAtCue {
            if !verbose {
                show_tail(&log);
            }
            return Err(format!("boot 1: expected to be killed after `fstest: fsync returned`, but {}", describe_exit(exit)));
        }
        let report = crate::fs::check_image(&image, crate::fs::DEFAULT_OFFSET)?;
        if report.has_errors() {
            return Err(format!("after the kill the file system has errors:\n{report}"));
        }
        let on_disk = crate::fs::read_image_file(&image, crate::fs::DEFAULT_OFFSET, "/durable")?;
        let expected: Vec<u8> = (0..FSTEST_DURABLE_BYTES).map(|index| fstest_pattern(seed, index)).collect();
        if on_disk != expected {
            let first = on_disk.iter().zip(&expected).position(|(a, b)| a != b).unwrap_or(on_disk.len().min(expected.len()));
            return Err(format!("after the kill /durable has {} bytes (expected {}), first difference at byte {first}", on_disk.len(), expected.len()));
        }
        let mut machine = Machine::for_image(kernel);
        machine.set_disk(Disk::Kept { path: image.clone(), bytes: None, fresh: false });
        machine.extra(ICOUNT);
        machine.append(&format!("spindle.script={}", crate::encode::encode_script(&[format!("run fstest verify /durable {seed}")])));
        let (exit, log) = machine.run_captured(SHORT_TIMEOUT, verbose)?;
        let verified = log.iter().any(|line| line.contains("fstest: verified 204923 bytes of /durable"));
        if exit != Exit::Status(0) || !verified {
            if !verbose {
                show_tail(&log);
            }
            return Err(format!("boot 2: `fstest verify` did not read the file back ({})", describe_exit(exit)));
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&image);
    outcome
}

/// A disk whose reads of one sector fail on the host (QEMU's `blkdebug` driver injects
/// `EIO`, which virtio-blk answers with `VIRTIO_BLK_S_IOERR`): the sector before it reads,
/// that one is reported as the device's I/O error.
fn device_error_check(kernel: &Image, verbose: bool) -> std::result::Result<(), String> {
    const FAILING_SECTOR: u64 = 4096;
    let run = crate::kernel_build::workspace_root().join("target").join("spindle").join("run");
    let image = run.join(format!("disk-faulty-{}.img", std::process::id()));
    let config = run.join(format!("disk-faulty-{}.conf", std::process::id()));
    let prepare = || -> std::io::Result<()> {
        std::fs::create_dir_all(&run)?;
        std::fs::File::create(&image)?.set_len(64 << 20)?;
        std::fs::write(&config, format!("[inject-error]\nevent = \"read_aio\"\nerrno = \"5\"\nsector = \"{FAILING_SECTOR}\"\n"))
    };
    prepare().map_err(|error| format!("cannot prepare the faulty disk: {error}"))?;
    let escape = crate::qemu::escape_option_value;
    let drive = format!("file=blkdebug:{}:{},if=none,format=raw,id=disk", escape(&config), escape(&image));
    let lines = vec![format!("blockdev read {}", FAILING_SECTOR - 1), format!("blockdev read {FAILING_SECTOR}")];
    let mut machine = Machine::for_image(kernel);
    machine.set_disk(crate::qemu::Disk::None);
    machine.extra(ICOUNT);
    machine.extra(&["-drive", &drive, "-device", "virtio-blk-device,drive=disk"]);
    machine.append(&format!("spindle.script={}", crate::encode::encode_script(&lines)));
    let result = machine.run_captured(SHORT_TIMEOUT, verbose);
    let _ = std::fs::remove_file(&image);
    let _ = std::fs::remove_file(&config);
    let (exit, log) = result?;
    let mut problems = Vec::new();
    if exit != Exit::Status(EXIT_FAILURE) {
        problems.push(format!("expected exit {EXIT_FAILURE} (the failing read), got {}", describe_exit(exit)));
    }
    let readable = format!("sector {}: \"\"", FAILING_SECTOR - 1);
    for text in [readable.as_str(), "blockdev: the disk reported an I/O error"] {
        if !log.iter().any(|line| line.contains(text)) {
            problems.push(format!("output lacks {text:?}"));
        }
    }
    if !problems.is_empty() && !verbose {
        show_tail(&log);
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

/// Three boots of one kept image file: the first (a fresh 64 MiB image) finds the sector
/// empty and writes a text only this run knows, the second reads it back, the third
/// (fresh again, as `--fresh-disk`) finds it empty.
fn disk_persistence_check(kernel: &Image, verbose: bool) -> std::result::Result<(), String> {
    use crate::qemu::Disk;
    const SECTOR: u64 = 4096;
    const BYTES: u64 = 64 << 20;
    let path = crate::kernel_build::workspace_root().join("target").join("spindle").join("run").join(format!("disk-persist-{}.img", std::process::id()));
    let nonce = format!("persist-{}-{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos()));
    let empty = format!("sector {SECTOR}: \"\"");
    let written = format!("sector {SECTOR}: \"{nonce}\"");
    let boots: [(Disk, Vec<String>, Vec<String>); 3] = [
        (
            Disk::Kept { path: path.clone(), bytes: Some(BYTES), fresh: true },
            vec![format!("blockdev read {SECTOR}"), format!("blockdev write {SECTOR} {nonce}"), "blockdev".into()],
            vec![format!("[boot] disk virtio-blk: {} sectors (64 MiB)", BYTES / 512), empty.clone(), format!("sector {SECTOR}: wrote")],
        ),
        (Disk::Kept { path: path.clone(), bytes: None, fresh: false }, vec![format!("blockdev read {SECTOR}")], vec![written.clone()]),
        (Disk::Kept { path: path.clone(), bytes: None, fresh: true }, vec![format!("blockdev read {SECTOR}")], vec![empty]),
    ];
    let mut problems = Vec::new();
    for (boot, (disk, lines, wanted)) in boots.into_iter().enumerate() {
        let (mut found, log) = run_disk_script(kernel, disk, &lines, 0, verbose)?;
        for text in &wanted {
            if !log.iter().any(|line| line.contains(text.as_str())) {
                found.push(format!("boot {}: output lacks {text:?}", boot + 1));
            }
        }
        if found.is_empty() && boot != 1 && log.iter().any(|line| line.contains(&written)) {
            found.push(format!("boot {}: the text was there before it was written", boot + 1));
        }
        if !found.is_empty() && !verbose {
            show_tail(&log);
        }
        problems.extend(found);
    }
    let _ = std::fs::remove_file(&path);
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

/// A machine without a disk boots, says so, and `blockdev` fails with the reason.
fn no_disk_check(kernel: &Image, verbose: bool) -> std::result::Result<(), String> {
    let lines = vec!["uptime".to_string(), "blockdev".to_string()];
    let (mut problems, log) = run_disk_script(kernel, crate::qemu::Disk::None, &lines, EXIT_FAILURE, verbose)?;
    for text in ["[boot] disk: none (no unclaimed virtio-mmio Block device)", "spsh> uptime", "up ", "the machine has no disk"] {
        if !log.iter().any(|line| line.contains(text)) {
            problems.push(format!("output lacks {text:?}"));
        }
    }
    if !problems.is_empty() && !verbose {
        show_tail(&log);
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

fn run_md5sum_test(kernel: &Image, verbose: bool, tally: &mut Tally) -> Result<()> {
    let outcome = md5sum_check(kernel, verbose);
    tally.record("md5::kernel-digest-equals-host-md5sum", &outcome);
    Ok(())
}

/// The `md5` graft's digest of the benchmark's 1 MiB, computed in the kernel through
/// `block.ReadFilter` (console command `md5`) built in, native, Wasm and as the C
/// reference, must equal the host's `md5sum` of the same bytes (generated here with the
/// `md5` crate's workload generator and written to `target/spindle/md5-workload.bin`);
/// and the digest of the same bytes read from the device (`md5 … disk`, every technology
/// and the C reference) must equal the host's `md5sum` of that extent of the disk image.
/// Fails when `md5sum` is missing, when a digest differs, or when a technology prints none.
fn md5sum_check(kernel: &Image, verbose: bool) -> std::result::Result<(), String> {
    let mut bytes = vec![0u8; md5::workload::BYTES];
    md5::workload::fill(0, &mut bytes);
    let directory = crate::kernel_build::workspace_root().join("target/spindle");
    std::fs::create_dir_all(directory.join("run")).map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
    let path = directory.join("md5-workload.bin");
    std::fs::write(&path, &bytes).map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    let host = host_md5sum(&path)?;
    println!("host md5sum of the 1 MiB workload: {host}");
    // The same bytes on a disk image, at the offset `md5 … disk` reads; the host's digest of
    // that extent is taken from the image file itself.
    let image = directory.join("run").join(format!("disk-md5-{}.img", std::process::id()));
    let extent = directory.join("run").join(format!("disk-md5-{}.extent", std::process::id()));
    let prepare = || -> std::io::Result<()> {
        use std::io::{Read, Seek, SeekFrom, Write};
        let mut file = std::fs::File::create(&image)?;
        file.set_len(MD5_DISK_IMAGE_BYTES)?;
        file.seek(SeekFrom::Start(MD5_DISK_OFFSET))?;
        file.write_all(&bytes)?;
        drop(file);
        let mut file = std::fs::File::open(&image)?;
        file.seek(SeekFrom::Start(MD5_DISK_OFFSET))?;
        let mut read = vec![0u8; bytes.len()];
        file.read_exact(&mut read)?;
        std::fs::write(&extent, &read)
    };
    prepare().map_err(|error| format!("cannot prepare the MD5 disk image {}: {error}", image.display()))?;
    let disk_host = host_md5sum(&extent);
    let _ = std::fs::remove_file(&extent);
    let disk_host = disk_host?;
    println!("host md5sum of bytes {MD5_DISK_OFFSET}..+1 MiB of the disk image: {disk_host}");
    let technologies = ["builtin", "native", "wasm", "c"];
    let disk_technologies = ["builtin", "native", "wasm", "user", "c"];
    let lines: Vec<String> =
        technologies.iter().map(|technology| format!("md5 {technology}")).chain(disk_technologies.iter().map(|technology| format!("md5 {technology} disk"))).collect();
    let mut machine = Machine::for_image(kernel);
    machine.set_disk(crate::qemu::Disk::Kept { path: image.clone(), bytes: None, fresh: false });
    machine.extra(ICOUNT);
    machine.append(&format!("spindle.script={}", crate::encode::encode_script(&lines)));
    let run = machine.run_captured(MD5SUM_TIMEOUT, verbose);
    let _ = std::fs::remove_file(&image);
    let (exit, log) = run?;
    let mut problems = Vec::new();
    if exit != Exit::Status(0) {
        problems.push(format!("expected exit 0, got {}", describe_exit(exit)));
    }
    let cases = technologies.iter().map(|technology| (format!("md5 ({technology}): "), &host)).chain(disk_technologies.iter().map(|technology| (format!("md5 ({technology}, disk): "), &disk_host)));
    for (prefix, wanted) in cases {
        match log.iter().find_map(|line| line.split_once(&prefix).map(|(_, rest)| rest.split_whitespace().next().unwrap_or("").to_string())) {
            Some(kernel_digest) if &kernel_digest == wanted => {}
            Some(kernel_digest) => problems.push(format!("{prefix}kernel digest {kernel_digest}, host md5sum {wanted}")),
            None => problems.push(format!("{prefix}no digest printed")),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        if !verbose {
            show_tail(&log);
        }
        Err(problems.join("; "))
    }
}

/// Where `md5 … disk` reads its 1 MiB (the kernel's `bench::blockio::MD5_DISK_OFFSET`).
const MD5_DISK_OFFSET: u64 = 256 << 20;
/// The MD5 test's disk image: sparse, large enough for the extent.
const MD5_DISK_IMAGE_BYTES: u64 = 512 << 20;

/// The host's `md5sum` of a file, as 32 hex digits.
fn host_md5sum(path: &std::path::Path) -> std::result::Result<String, String> {
    let output = std::process::Command::new("md5sum").arg(path).output().map_err(|error| format!("cannot run md5sum: {error}"))?;
    if !output.status.success() {
        return Err(format!("md5sum failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.split_whitespace().next().filter(|digest| digest.len() == 32).map(str::to_string).ok_or_else(|| format!("unexpected md5sum output {stdout:?}"))
}

/// Host timeout for one hot-load system test (the script itself waits at most 60 s).
const HOTLOAD_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the host waits for QEMU to listen on the hot-load socket.
const HOTLOAD_CONNECT_WAIT: Duration = Duration::from_secs(20);
/// How long the host waits for the kernel's answer once the request is sent.
const HOTLOAD_ANSWER_WAIT: Duration = Duration::from_secs(60);

/// A script that waits for the host, a `.kext` pushed to it the way `cargo xtask load`
/// does, and what the answer, the log and the exit status must be.
struct HotloadTest {
    name: &'static str,
    lines: &'static [&'static str],
    /// Flip one bit of the `.kext` (in its last byte, inside the signed payload).
    corrupt: bool,
    /// Push the Wasm build (`cargo xtask load --wasm`) instead of the native one.
    wasm: bool,
    answer_starts: &'static str,
    answer_contains: &'static str,
    expected_exit: i32,
    log_contains: &'static [&'static str],
}

const HOTLOAD_TESTS: &[HotloadTest] = &[
    HotloadTest {
        name: "load-from-host-then-use-it",
        lines: &["hotload wait 60", "hello", "ext list"],
        corrupt: false,
        wasm: false,
        answer_starts: "OK loaded hello ",
        answer_contains: "(native), 1 binding(s)",
        expected_exit: 0,
        log_contains: &["[hotload] LOAD (", "hotload: OK loaded hello", "hello from"],
    },
    HotloadTest {
        name: "load-wasm-from-host-then-use-it",
        lines: &["hotload wait 60", "hello", "ext list"],
        corrupt: false,
        wasm: true,
        answer_starts: "OK loaded hello ",
        answer_contains: "(wasm), 1 binding(s)",
        expected_exit: 0,
        log_contains: &["[hotload] LOAD (", "hotload: OK loaded hello", "hello from", "wasm"],
    },
    HotloadTest {
        name: "corrupted-kext-is-refused",
        lines: &["hotload wait 60", "echo never"],
        corrupt: true,
        wasm: false,
        answer_starts: "ERR ",
        answer_contains: "signature",
        expected_exit: EXIT_FAILURE,
        log_contains: &["[hotload] LOAD (", "signature does not verify", "the request was refused"],
    },
];

fn run_hotload_tests(kernel: &Image, verbose: bool, tally: &mut Tally) -> Result<()> {
    let read = |path: std::path::PathBuf| std::fs::read(&path).map_err(|error| format!("cannot read {}: {error}", path.display()));
    let native = read(crate::ext::build_native("hello")?)?;
    let wasm = read(crate::ext::build_wasm("hello")?)?;
    for test in HOTLOAD_TESTS {
        let mut payload = if test.wasm { wasm.clone() } else { native.clone() };
        if test.corrupt
            && let Some(last) = payload.last_mut()
        {
            *last ^= 0x01;
        }
        let lines: Vec<String> = test.lines.iter().map(|line| line.to_string()).collect();
        let mut machine = Machine::for_image(kernel);
        machine.append(&format!("spindle.script={}", crate::encode::encode_script(&lines)));
        let socket = machine.hotload_socket().to_path_buf();
        let timeouts = crate::load::Timeouts { connect: HOTLOAD_CONNECT_WAIT, answer: HOTLOAD_ANSWER_WAIT };
        let (run, answer) = std::thread::scope(|scope| {
            let qemu = scope.spawn(|| machine.run_captured(HOTLOAD_TIMEOUT, verbose));
            let answer = crate::load::exchange(&socket, &crate::load::Request::Load(&payload), timeouts);
            (qemu.join(), answer)
        });
        let (exit, log) = run.map_err(|_| "the QEMU runner thread panicked".to_string())??;
        let mut problems = Vec::new();
        match &answer {
            Ok(answer) if answer.starts_with(test.answer_starts) && answer.contains(test.answer_contains) => {}
            Ok(answer) => problems.push(format!("answer {answer:?} does not start with {:?} and contain {:?}", test.answer_starts, test.answer_contains)),
            Err(error) => problems.push(format!("no answer: {error}")),
        }
        if exit != Exit::Status(test.expected_exit) {
            problems.push(format!("expected exit {}, got {}", test.expected_exit, describe_exit(exit)));
        }
        for text in test.log_contains {
            if !log.iter().any(|line| line.contains(text)) {
                problems.push(format!("output lacks {text:?}"));
            }
        }
        if log.iter().any(|line| line.contains("spindle> echo never") || line.contains("spsh> echo never")) {
            problems.push("a line after the failing one ran".into());
        }
        let outcome = if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) };
        if outcome.is_err() && !verbose {
            show_tail(&log);
        }
        tally.record(&format!("hotload::{}", test.name), &outcome);
    }
    let outcome = hotload_stats_check(kernel, &native, verbose);
    tally.record("hotload::stats-reports-what-was-pushed", &outcome);
    Ok(())
}

/// `cargo xtask load --stats` against a running kernel: after `hello` is pushed and has
/// answered a line, the `STATS` document names it as native and running, with the SHA-256
/// and size of exactly the bytes pushed and one call of its binding.
fn hotload_stats_check(kernel: &Image, native: &[u8], verbose: bool) -> std::result::Result<(), String> {
    let lines: Vec<String> = ["hotload wait 60", "hello", "hotload wait 60", "ext list"].iter().map(|line| line.to_string()).collect();
    let mut machine = Machine::for_image(kernel);
    machine.append(&format!("spindle.script={}", crate::encode::encode_script(&lines)));
    let socket = machine.hotload_socket().to_path_buf();
    let timeouts = crate::load::Timeouts { connect: HOTLOAD_CONNECT_WAIT, answer: HOTLOAD_ANSWER_WAIT };
    let (run, answers) = std::thread::scope(|scope| {
        let qemu = scope.spawn(|| machine.run_captured(HOTLOAD_TIMEOUT, verbose));
        let loaded = crate::load::exchange(&socket, &crate::load::Request::Load(native), timeouts);
        // The script runs `hello` between the two waits; ask once it has had time to.
        std::thread::sleep(Duration::from_secs(2));
        let stats = crate::load::exchange(&socket, &crate::load::Request::Stats, timeouts);
        (qemu.join(), (loaded, stats))
    });
    let (exit, log) = run.map_err(|_| "the QEMU runner thread panicked".to_string())??;
    let (loaded, stats) = answers;
    let mut problems = Vec::new();
    if !loaded.as_ref().is_ok_and(|answer| answer.starts_with("OK loaded hello 0.1.0 (native)")) {
        problems.push(format!("load answer {loaded:?}"));
    }
    let digest: String = spindle_loader::artifact_digest(native).iter().map(|byte| format!("{byte:02x}")).collect();
    match &stats {
        Ok(answer) => {
            for expected in [
                // Hot-load tests run without -icount, as `cargo xtask qemu --host-clock` does.
                "OK {\"clock\":\"host\",\"extensions\":[".to_string(),
                "{\"name\":\"hello\",\"version\":\"0.1.0\"".to_string(),
                "\"counter_unit\":\"host-ticks\"".to_string(),
                "\"technology\":\"native\",\"state\":\"running\"".to_string(),
                format!("\"artifact\":{{\"bytes\":{},\"sha256\":\"{digest}\"", native.len()),
                "\"event\":\"console.Line\"".to_string(),
                "\"calls\":1,".to_string(),
            ] {
                if !answer.contains(&expected) {
                    problems.push(format!("STATS answer lacks {expected:?}: {answer}"));
                }
            }
        }
        Err(error) => problems.push(format!("no STATS answer: {error}")),
    }
    if exit != Exit::Status(0) {
        problems.push(format!("expected exit 0, got {}", describe_exit(exit)));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        if !verbose {
            show_tail(&log);
        }
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_event() {
        assert_eq!(parse_event("ktest begin 12"), Some(Event::Begin(12)));
        assert_eq!(parse_event("ktest run 3 mm::frames"), Some(Event::Run(3, "mm::frames".into())));
        assert_eq!(parse_event("ktest pass 3 mm::frames"), Some(Event::Pass(3, "mm::frames".into())));
        assert_eq!(
            parse_event("ktest fail 4 a::b: expected x: got y"),
            Some(Event::Fail(4, "a::b".into(), "expected x: got y".into()))
        );
        assert_eq!(parse_event("ktest end 10 2"), Some(Event::End(10, 2)));
    }

    #[test]
    fn ignores_other_output() {
        assert_eq!(parse_event("[boot] hart 0"), None);
        assert_eq!(parse_event("ktest run x y"), None);
        assert_eq!(parse_event("ktest bogus 1"), None);
    }
}
