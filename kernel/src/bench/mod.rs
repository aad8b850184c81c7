//! In-kernel benchmarks: instruction counts per operation, measured with `rdinstret`.
//!
//! Booted with `spindle.mode=bench` (by `cargo xtask bench`, under QEMU
//! `-icount shift=0,align=off,sleep=off`, where the count is exact and identical run to
//! run), the kernel runs every benchmark with interrupts off and prints one line each:
//!
//! ```text
//! bench begin
//! bench row <group> <name> <iterations> <instructions-per-op ×1000>
//! bench hw <group> <name> <traps ×1000> <satp writes ×1000> <sfence.vma ×1000>
//! bench end
//! ```
//!
//! Each measurement runs the operation `iterations` times in a loop and subtracts the
//! same loop with an empty body (the *empty-loop baseline*), so a row is the cost of
//! the operation alone. Blind spots: instruction counts ignore caches, TLBs, branch
//! prediction and memory latency; QEMU executes misaligned accesses for free.

#[allow(unsafe_code)]
pub mod blackbox;
pub mod blockio;
pub(crate) mod disk;
pub mod policies;
mod calls;
mod dispatch;
mod extensions;
mod user;
mod vm;
#[allow(unsafe_code)]
pub mod grafts;
#[allow(unsafe_code)]
pub mod stream;
mod scheduling;

use crate::arch::csr;

/// Default repetitions for per-call costs (≥ 1,000 as the method requires).
pub const DEFAULT_ITERATIONS: u64 = 10_000;

/// Measures `operation(i)` for i in 0..iterations; returns instructions per operation
/// ×1000 (fixed-point, so fractional costs survive), the empty-loop baseline removed.
pub fn measure(iterations: u64, mut operation: impl FnMut(u64)) -> u64 {
    csr::without_interrupts(|| {
        let baseline = {
            let start = csr::instret();
            for index in 0..iterations {
                core::hint::black_box(index);
            }
            csr::instret() - start
        };
        let measured = {
            let start = csr::instret();
            for index in 0..iterations {
                operation(core::hint::black_box(index));
            }
            csr::instret() - start
        };
        (measured.saturating_sub(baseline) as u64) * 1000 / iterations
    })
}

/// What the hardware did during a measurement: traps taken, `satp` writes (each with a
/// full `sfence.vma`) and `sfence.vma`s (those included), read from this hart's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HardwareEvents {
    /// Traps, `satp` writes, `sfence.vma`s (`HartLocal::hardware_events`).
    counts: [u64; spindle_abi::syscall::HwCounters::WORDS],
}

impl HardwareEvents {
    /// The counters now.
    pub fn now() -> HardwareEvents {
        HardwareEvents { counts: crate::arch::hart::current().hardware_events().words() }
    }

    /// Prints what happened since `start`, per operation ×1000, as a `bench hw` line:
    /// `bench hw <group> <name> <traps> <satp writes> <sfence.vma>` (the `sfence.vma`
    /// count includes the one in every `satp` write).
    pub fn report_since(start: HardwareEvents, group: &str, name: &str, iterations: u64) {
        let end = HardwareEvents::now();
        let [traps, satp, sfence] = core::array::from_fn(|index| (end.counts[index] - start.counts[index]) * 1000 / iterations.max(1));
        crate::println!("bench hw {group} {name} {traps} {satp} {sfence}");
    }
}

/// Loads extension `name` as `preference`, runs `body`, then unloads it (waiting for a
/// user-level server to be reaped) and frees what the unload retired; `body`'s result, or
/// why loading or unloading failed.
pub fn with_extension<T>(name: &str, preference: crate::ext::Preference, body: impl FnOnce() -> Result<T, alloc::string::String>) -> Result<T, alloc::string::String> {
    crate::ext::load(name, preference).map_err(|error| alloc::format!("loading {name} ({}): {error}", preference.label()))?;
    let result = body();
    let server = crate::ext::user::serving_pid(name);
    crate::ext::unload(name).map_err(|error| alloc::format!("unloading {name}: {error}"))?;
    if let Some(pid) = server {
        crate::proc::wait_until_reaped(pid, 200);
    }
    crate::events::quiescent();
    crate::events::reclaim();
    result
}

/// Waits for the next timer tick, so that a measurement starts right after one. A graft's
/// rows need it: code that runs with interrupts on inside the measured loop (a user-level
/// upcall's user mode) meets the ticks at the same points in every run, and a bounded call
/// arms its own deadline only when no tick comes first — so their counts would otherwise
/// follow the tick phase at which the row began (how long the boot's disk I/O took on the
/// host), and two identical runs would differ by a few instructions.
pub fn align_to_tick() {
    crate::sched::sleep_ticks(1);
}

/// Prints one result row in the format `xtask bench` parses.
pub fn report(group: &str, name: &str, iterations: u64, per_operation_milli: u64) {
    crate::println!("bench row {group} {name} {iterations} {per_operation_milli}");
}

/// Runs every benchmark and exits.
pub fn run() -> ! {
    crate::println!("bench begin");
    let arguments = crate::devicetree::bootargs();
    // `spindle.bench.groups=A,B` (`cargo xtask bench --groups`): only those groups.
    let groups = crate::bootargs::value(arguments, "spindle.bench.groups");
    let wanted = |group: &str| groups.is_none_or(|list| list.split(',').any(|name| name == group));
    if wanted("calls") {
        calls::run();
    }
    if wanted("dispatch") {
        dispatch::run();
    }
    if wanted("sched") {
        scheduling::run();
    }
    if wanted("extension-cost") {
        extensions::run();
    }
    if wanted("user-space") {
        user::run();
    }
    // `spindle.bench.io=off` (the variant builds of `cargo xtask bench`, which keep only
    // the extension-cost and graft groups): no disk groups, no paging to disk.
    let io = crate::bootargs::value(arguments, "spindle.bench.io") != Some("off");
    if wanted("vm") {
        vm::run(io);
    }
    let mut grafts_clean = true;
    if wanted(grafts::GROUP) {
        grafts_clean &= grafts::run();
    }
    if wanted(stream::GROUP) {
        grafts_clean &= stream::run();
    }
    if wanted(blackbox::GROUP) {
        grafts_clean &= blackbox::run();
    }
    if !io {
        crate::println!("bench: disk, blockio and policies groups skipped (spindle.bench.io=off)");
    } else {
        if wanted("disk") {
            grafts_clean &= disk::run();
        }
        if wanted("blockio") {
            grafts_clean &= blockio::run();
        }
        if wanted("policies") {
            grafts_clean &= policies::run();
        }
    }
    if !grafts_clean {
        // No `bench end`: xtask reports the run as failed.
        crate::println!("bench FAILED: a graft answered wrongly");
        crate::power::exit(crate::power::ExitStatus::Failure)
    }
    crate::println!("bench end");
    crate::power::exit(crate::power::ExitStatus::Success)
}

/// Which implementation of a graft runs: an extension technology, or the C reference
/// linked into the kernel (bound through the dispatcher like a built-in extension).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Graft {
    /// The extension crate as this technology.
    Extension(crate::ext::Preference),
    /// The C reference (`extensions/<name>/c/`).
    CReference,
}

impl Graft {
    /// Every implementation, in row order.
    pub const ALL: [Graft; 5] = [
        Graft::Extension(crate::ext::Preference::BuiltIn),
        Graft::Extension(crate::ext::Preference::Default),
        Graft::Extension(crate::ext::Preference::Wasm),
        Graft::Extension(crate::ext::Preference::User),
        Graft::CReference,
    ];

    /// The console word and row suffix: `builtin`, `native`, `wasm`, `user`, `c`.
    pub fn name(self) -> &'static str {
        match self {
            Graft::Extension(preference) => preference.label(),
            Graft::CReference => "c",
        }
    }

    /// The implementation a console word names.
    pub fn parse(word: &str) -> Option<Graft> {
        Graft::ALL.into_iter().find(|graft| graft.name() == word)
    }
}

// ---------------------------------------------------------------------------------------
// The graft console commands (`md5`, `logdisk`), offered to the shell by this layer.
// ---------------------------------------------------------------------------------------

/// The benchmarks' console commands.
static COMMANDS: &[crate::shell::Command] = &[
    crate::shell::Command {
        name: "md5",
        usage: "md5 [builtin|native|wasm|user|c] [disk]",
        help: "fingerprint the 1 MiB file through block.ReadFilter with the md5 graft (default native); with disk: the 1 MiB at byte 256 MiB of the disk, read from the device",
        run: md5_graft,
    },
    crate::shell::Command {
        name: "diskbench",
        usage: "diskbench [fifo|sstf|clook] [STREAMS]",
        help: "run the disk benchmark's workload once (STREAMS streams of 8 random 4 KiB reads, default 192) with the built-in policy; prints its `bench disk` line and the digest of the order of service",
        run: diskbench_command,
    },
    crate::shell::Command {
        name: "blockio",
        usage: "blockio [none|builtin|native|wasm|user] [WRITES]",
        help: "write WRITES (default 4096) stamped 4 KiB blocks of the 80/20 workload to the disk in place (none) or through the logdisk graft, sync, read each back by content; prints the modelled disk time",
        run: blockio_command,
    },
    crate::shell::Command {
        name: "policybench",
        usage: "policybench [readahead|locks|replacement|overhead]...",
        help: "run experiments of the benchmark group `policies` (default: all) on the file system's /bench files; prints their `bench policies` lines",
        run: policybench_command,
    },
    crate::shell::Command { name: "logdisk", usage: "logdisk [builtin|native|wasm|user|c] [WRITES]", help: "run WRITES writes (default 4096) of the 80/20 workload through the logdisk graft and check its map", run: logdisk_graft },
];

/// Adds the graft commands to the console (called once at boot in images with benchmarks).
pub fn add_console_commands() {
    crate::shell::add_commands(COMMANDS);
}

/// The graft a console word names (default: native).
fn graft_named(word: Option<&&str>, usage: &'static str) -> Result<crate::bench::Graft, crate::shell::CommandError> {
    match word {
        None => Ok(crate::bench::Graft::Extension(crate::ext::Preference::Default)),
        Some(word) => crate::bench::Graft::parse(word).ok_or(crate::shell::CommandError::Usage(usage)),
    }
}

fn md5_graft(arguments: &[&str]) -> Result<(), crate::shell::CommandError> {
    const USAGE: &str = "md5 [builtin|native|wasm|user|c] [disk]";
    let (arguments, from_disk) = match arguments {
        [rest @ .., "disk"] => (rest, true),
        _ => (arguments, false),
    };
    if arguments.len() > 1 {
        return Err(crate::shell::CommandError::Usage(USAGE));
    }
    let graft = graft_named(arguments.first(), USAGE)?;
    let before = crate::services::blockpath::rejections();
    let outcome = if from_disk { crate::bench::stream::read_disk_with(graft) } else { crate::bench::stream::read_with(graft) }.map_err(crate::shell::CommandError::Failed)?;
    let rejected = crate::services::blockpath::rejections() - before;
    match outcome.digest {
        Some(digest) if rejected == 0 => {
            let source = if from_disk { ", disk" } else { "" };
            crate::println!("md5 ({}{source}): {}  {} bytes in {} blocks, {} consumed", graft.name(), crate::bench::stream::hex(&digest), outcome.bytes, outcome.bytes.div_ceil(crate::services::blockpath::BLOCK_SIZE), outcome.consumed);
            Ok(())
        }
        _ => Err(crate::shell::CommandError::Failed(alloc::format!("no valid digest ({} bytes consumed of {}, {rejected} answers rejected)", outcome.consumed, outcome.bytes))),
    }
}

fn diskbench_command(arguments: &[&str]) -> Result<(), crate::shell::CommandError> {
    const USAGE: &str = "diskbench [fifo|sstf|clook] [STREAMS]";
    let (policy, streams) = match arguments {
        [] => ("clook", disk::STREAMS as usize),
        [policy] => (*policy, disk::STREAMS as usize),
        [policy, streams] => (*policy, crate::shell::parse_number(streams).ok_or(crate::shell::CommandError::Usage(USAGE))?),
        _ => return Err(crate::shell::CommandError::Usage(USAGE)),
    };
    if !matches!(policy, "fifo" | "sstf" | "clook") || streams == 0 || streams > 200 {
        return Err(crate::shell::CommandError::Usage(USAGE));
    }
    let capacity = disk::capacity().ok_or_else(|| crate::shell::CommandError::Failed(alloc::string::String::from("no disk")))?;
    let result = match policy {
        "fifo" => disk::run_once(policy, "none", streams as u64, capacity),
        _ => with_extension(&alloc::format!("disksched_{policy}"), crate::ext::Preference::BuiltIn, || disk::run_once(policy, "builtin", streams as u64, capacity)),
    };
    result.map_err(crate::shell::CommandError::Failed)
}

fn blockio_command(arguments: &[&str]) -> Result<(), crate::shell::CommandError> {
    const USAGE: &str = "blockio [none|builtin|native|wasm|user] [WRITES]";
    let (technology, count) = match arguments {
        [] => ("native", 4096),
        [word] => (*word, 4096),
        [word, count] => (*word, crate::shell::parse_number(count).ok_or(crate::shell::CommandError::Usage(USAGE))?),
        _ => return Err(crate::shell::CommandError::Usage(USAGE)),
    };
    let run = || -> Result<(blockio::WriteRun, u64), alloc::string::String> {
        let run = blockio::write_workload(count, "hp97560", || {})?;
        let checked = blockio::read_back(&run.versions, || {})?;
        Ok((run, checked))
    };
    let result = match technology {
        "none" => run(),
        word => match Graft::parse(word) {
            Some(Graft::Extension(preference)) => with_extension("logdisk", preference, run),
            _ => return Err(crate::shell::CommandError::Usage(USAGE)),
        },
    };
    crate::services::blockpath::format();
    let (run, checked) = result.map_err(crate::shell::CommandError::Failed)?;
    crate::println!(
        "blockio ({technology}): {} writes as {} device writes, modelled disk time {} ms (seek {} cylinders), {} ms elapsed; {checked} blocks read back with their latest data",
        run.writes,
        run.device_writes,
        run.busy_ns / 1_000_000,
        run.seek_cylinders,
        run.elapsed_ns / 1_000_000
    );
    Ok(())
}

fn policybench_command(arguments: &[&str]) -> Result<(), crate::shell::CommandError> {
    const USAGE: &str = "policybench [readahead|locks|replacement|overhead]...";
    let mut experiments = alloc::vec::Vec::new();
    for word in arguments {
        let experiment = policies::Experiment::ALL.into_iter().find(|experiment| experiment.word() == *word).ok_or(crate::shell::CommandError::Usage(USAGE))?;
        experiments.push(experiment);
    }
    if experiments.is_empty() {
        experiments.extend(policies::Experiment::ALL);
    }
    if policies::run_experiments(&experiments) { Ok(()) } else { Err(crate::shell::CommandError::Failed(alloc::string::String::from("a run failed (its `bench FAILED policies` line says why)"))) }
}

fn logdisk_graft(arguments: &[&str]) -> Result<(), crate::shell::CommandError> {
    const USAGE: &str = "logdisk [builtin|native|wasm|user|c] [WRITES]";
    let (graft, count) = match arguments {
        [] => (graft_named(None, USAGE)?, 4096),
        [word] => (graft_named(Some(word), USAGE)?, 4096),
        [word, count] => (graft_named(Some(word), USAGE)?, crate::shell::parse_number(count).ok_or(crate::shell::CommandError::Usage(USAGE))?),
        _ => return Err(crate::shell::CommandError::Usage(USAGE)),
    };
    let run = crate::bench::blackbox::run_with(graft, count).map_err(crate::shell::CommandError::Failed)?;
    match run.map {
        Ok(mapped) if run.problems == 0 => {
            crate::println!(
                "logdisk ({}): {} writes placed at the log head ({} segments), map verified: {mapped} blocks mapped",
                graft.name(),
                run.writes,
                run.writes.div_ceil(crate::services::blockpath::SEGMENT_BLOCKS)
            );
            Ok(())
        }
        Ok(_) => Err(crate::shell::CommandError::Failed(alloc::format!("{} of {} writes misplaced, rejected or refused", run.problems, run.writes))),
        Err(mismatch) => Err(crate::shell::CommandError::Failed(alloc::format!("the logical disk's map differs: {mismatch:?}"))),
    }
}
