//! `cargo xtask`: the only way to build, run, test and measure Spindle.
//!
//! Every verb first checks its prerequisites (rustup targets, QEMU, OpenSBI) and
//! installs what is missing, so the README's commands work on a fresh Debian machine.

mod bench;
mod encode;
mod ext;
mod fs;
mod host_tests;
mod kernel_build;
mod ktest;
mod lint;
mod load;
mod qemu;
mod repo_rules;
mod setup;
mod testkexts;
mod userspace;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Spindle's build driver.
#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", about = "Build, run, test and measure the Spindle kernel")]
struct Cli {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Subcommand)]
enum Verb {
    /// Build the kernel (release) and boot it in QEMU.
    ///
    /// With no LINES, opens the user shell spsh (Ctrl-A X quits; `exit` in spsh falls back
    /// to the kernel console). Each LINE after `--` is fed to spsh as one line of console
    /// input, in order, without interaction (lines spsh does not know run as kernel
    /// console commands); QEMU then exits with the kernel's status (0 when every line
    /// succeeded), e.g. `cargo xtask qemu -- mem 'uptime' halt`. `--kernel-console`
    /// skips spsh.
    Qemu(QemuArgs),
    /// Run every test: host unit tests and in-kernel tests under QEMU.
    ///
    /// Ends with one line `N passed, N failed` and exits non-zero on any failure.
    Test {
        /// Only the host unit tests.
        #[arg(long, conflicts_with = "kernel_only")]
        host_only: bool,
        /// Only the in-kernel and system tests.
        #[arg(long)]
        kernel_only: bool,
        /// Print the full kernel log of every QEMU run.
        #[arg(long, short)]
        verbose: bool,
        /// Only the in-kernel tests whose names contain PATTERN (e.g. `leaks::`).
        #[arg(long, value_name = "PATTERN", conflicts_with = "host_only")]
        only: Option<String>,
    },
    /// Measure instructions per operation under QEMU -icount (run twice, must match).
    ///
    /// Prints tables (with modelled cycles and break-even points for the grafts) and
    /// PASS / FALL SHORT lines for the goals, and writes target/bench/results.json,
    /// target/bench/report.md and target/bench/graft-*.svg (docs/benchmark-report.md
    /// explains the columns). The extension-cost and graft rows are
    /// measured again with a kernel built with +unaligned-scalar-mem (labelled), since
    /// that build changes what the Wasm interpreter costs.
    Bench {
        /// Only re-render target/bench/report.md and the charts from the
        /// target/bench/results.json of an earlier run (left unchanged) and print the
        /// tables: nothing is built or measured.
        #[arg(long)]
        report_only: bool,
        /// Only these groups (comma-separated, e.g. `graft-hotlist,extension-cost`), one
        /// run per build, rows printed only: no comparison, goals or report files.
        #[arg(long, value_name = "GROUPS", conflicts_with = "report_only")]
        groups: Option<String>,
        /// With --groups: measure only the +unaligned-scalar-mem build.
        #[arg(long, requires = "groups")]
        variant_only: bool,
    },
    /// Check and install prerequisites only (rustup targets, QEMU, OpenSBI).
    Setup,
    /// Hot load: build an extension and push it into the kernel `cargo xtask qemu` runs.
    ///
    /// Sends the signed .kext (with --wasm: the Wasm build) over the machine's hot-load
    /// socket (a virtio console) and prints the kernel's one-line answer; exits 0 for
    /// `OK …`, 1 for `ERR …`.
    /// `--unload NAME` and `--list` send those requests instead. A script can wait for
    /// it: `cargo xtask qemu -- 'hotload wait' hello`. A user-level build cannot be hot
    /// loaded (the protocol carries .kext containers only): `--user` says so.
    Load(load::LoadArgs),
    /// Extensions: `ext build CRATE [--wasm | --user]` builds one as a signed native
    /// extension (.kext), a signed Wasm one (--wasm) or a user-level program (--user);
    /// `ext header` writes the C header.
    Ext {
        #[command(subcommand)]
        command: ext::ExtCommand,
    },
    /// The on-disk file system in a disk image: `fs mkfs` makes one (optionally from a host
    /// directory), `fs fsck` checks it, `fs ls` and `fs cat` look inside.
    Fs {
        #[command(subcommand)]
        command: fs::FsCommand,
    },
}

/// `cargo xtask qemu` arguments.
#[derive(clap::Args)]
struct QemuArgs {
    /// Number of harts.
    #[arg(long, default_value_t = 1)]
    smp: u32,
    /// Guest RAM in MiB.
    #[arg(long, default_value_t = qemu::DEFAULT_MEMORY_MIB)]
    memory: u32,
    /// Seconds before a non-interactive run is stopped as hung.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// The Unix socket of the hot-load channel (`cargo xtask load --socket`); default
    /// target/spindle/hotload.sock.
    #[arg(long, value_name = "PATH")]
    hotload_socket: Option<std::path::PathBuf>,
    /// Use the raw kernel console instead of the user shell (boot argument
    /// `spindle.shell=kernel`), interactively or for LINES.
    #[arg(long)]
    kernel_console: bool,
    /// Run QEMU without `-icount`: guest time is host time, so budgets are enforced
    /// loosely (a handler is killed only far past its budget) and counters read host
    /// cycles. By default the guest clock counts instructions (`-icount shift=0`), so
    /// budgets mean exactly what the tests measure.
    #[arg(long)]
    host_clock: bool,
    /// Size of the disk image (target/spindle/disk.img, a sparse file kept between runs):
    /// bytes with an optional unit K, M, G or T, e.g. `256M`, `2G`. A new image gets 2 GiB
    /// by default; an existing one keeps its size unless this is given (growing keeps its
    /// data, shrinking cuts it off).
    #[arg(long, value_name = "SIZE", value_parser = qemu::parse_disk_size)]
    disk_size: Option<u64>,
    /// Start with an empty disk image instead of the one the last run left.
    #[arg(long)]
    fresh_disk: bool,
    /// Boot the test image instead of the production one: the kernel with the in-kernel
    /// tests and benchmarks (their console commands `md5` and `logdisk`) and a boot
    /// bundle with the deliberately broken `test-*` extensions.
    #[arg(long)]
    test_image: bool,
    /// Console command lines to run non-interactively.
    #[arg(last = true)]
    lines: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(error) = kernel_build::locate_workspace() {
        eprintln!("xtask: error: {error}");
        return ExitCode::FAILURE;
    }
    let result = match cli.verb {
        Verb::Setup => setup::ensure_prerequisites().map(|()| ExitCode::SUCCESS),
        Verb::Ext { command } => ext::run(command),
        Verb::Fs { command } => fs::run(command),
        Verb::Bench { report_only: true, .. } => bench::report_only().map(|()| ExitCode::SUCCESS),
        Verb::Bench { groups: Some(groups), variant_only, .. } => run_bench_groups(&groups, variant_only),
        Verb::Bench { report_only: false, groups: None, .. } => run_bench(),
        Verb::Load(arguments) => load::run(arguments),
        Verb::Qemu(arguments) => run_qemu(arguments),
        Verb::Test { host_only, kernel_only, verbose, only } => run_tests(!kernel_only && only.is_none(), !host_only, verbose, only.as_deref()),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("xtask: error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Errors are reported as text: xtask is the outermost layer and only prints them.
pub type Result<T, E = String> = std::result::Result<T, E>;

fn run_qemu(arguments: QemuArgs) -> Result<ExitCode> {
    let QemuArgs { smp, memory, timeout, hotload_socket, kernel_console, host_clock, disk_size, fresh_disk, test_image, lines } = arguments;
    let clock = if host_clock { qemu::Clock::Host } else { qemu::Clock::ExactInteractive };
    let purpose = if test_image { kernel_build::Purpose::Test } else { kernel_build::Purpose::Run };
    let lines = lines.as_slice();
    setup::ensure_prerequisites()?;
    let image = kernel_build::build_image(purpose)?;
    let mut machine = qemu::Machine::for_image(&image);
    machine.smp = smp;
    machine.memory_mib = memory;
    machine.extra(clock.arguments());
    let hotload_socket = hotload_socket.unwrap_or_else(qemu::default_hotload_socket);
    if std::os::unix::net::UnixStream::connect(&hotload_socket).is_ok() {
        eprintln!("xtask: another kernel is listening on {}; this one takes the socket over", hotload_socket.display());
    }
    machine.set_hotload_socket(&hotload_socket);
    machine.set_disk(qemu::Disk::Kept { path: qemu::default_disk_image(), bytes: disk_size, fresh: fresh_disk });
    if kernel_console {
        machine.append(ktest::KERNEL_CONSOLE);
    }
    let shell = if kernel_console { "the kernel console" } else { "spsh" };
    if lines.is_empty() {
        eprintln!("xtask: booting QEMU ({smp} hart(s), {memory} MiB) into {shell}; Ctrl-A X quits");
        let status = machine.run_interactive()?;
        return Ok(ExitCode::from(status.code().unwrap_or(1) as u8));
    }
    machine.append(&format!("spindle.script={}", encode::encode_script(lines)));
    eprintln!("xtask: booting QEMU ({smp} hart(s), {memory} MiB) with {} line(s) for {shell}", lines.len());
    let outcome = machine.run_to_terminal(std::time::Duration::from_secs(timeout))?;
    match outcome {
        qemu::Exit::Status(code) => Ok(ExitCode::from(code as u8)),
        qemu::Exit::TimedOut => {
            eprintln!("xtask: QEMU stopped after {timeout} s (the kernel did not exit)");
            Ok(ExitCode::from(124))
        }
        qemu::Exit::KilledAtCue => Ok(ExitCode::from(137)),
    }
}

fn run_tests(host: bool, kernel: bool, verbose: bool, only: Option<&str>) -> Result<ExitCode> {
    let started = std::time::Instant::now();
    let mut tally = ktest::Tally::default();
    if kernel {
        setup::ensure_prerequisites()?;
        // Before the first kernel build (clippy's included): the kernel's build script
        // compiles the C references with clang, and a build without them has other code.
        ext::c::ensure_c_tools()?;
    } else {
        setup::ensure_rust_targets()?;
    }
    if host {
        let (passed, failed) = host_tests::run()?;
        tally.passed += passed;
        tally.failed += failed;
        repo_rules::check(&kernel_build::workspace_root(), &mut tally);
        lint::run(&mut tally)?;
    }
    if kernel {
        let image = kernel_build::build_image(kernel_build::Purpose::Test)?;
        match only {
            Some(pattern) => ktest::run_matching(&image, pattern, verbose, &mut tally)?,
            None => {
                ktest::run_all(&image, verbose, &mut tally)?;
                println!("== the production image (what `cargo xtask qemu` boots) has no test or benchmark code");
                check_production_image(&image, &mut tally)?;
            }
        }
    }
    for name in &tally.failures {
        println!("FAILED: {name}");
    }
    println!("test time: {:.1} s", started.elapsed().as_secs_f64());
    println!("{} passed, {} failed", tally.passed, tally.failed);
    Ok(if tally.failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Builds the production kernel and requires its symbol table to hold no test or
/// benchmark code, while the test kernel's does (so the check can see it).
fn check_production_image(test_image: &kernel_build::Image, tally: &mut ktest::Tally) -> Result<()> {
    let production = kernel_build::build_kernel(kernel_build::Purpose::Run)?;
    let found = kernel_build::test_and_bench_symbols(&production)?;
    let in_test_image = kernel_build::test_and_bench_symbols(&test_image.kernel)?.len();
    let outcome = if !found.is_empty() {
        let examples: Vec<String> = found.iter().take(3).cloned().collect();
        Err(format!("{} test/bench symbols in {}, e.g. {}", found.len(), production.display(), examples.join(", ")))
    } else if in_test_image == 0 {
        Err("the test kernel has no test symbols either: the check cannot see them".into())
    } else {
        println!("  production kernel: 0 test/bench symbols (test kernel: {in_test_image})");
        Ok(())
    };
    tally.record("image::production-kernel-has-no-test-or-bench-code", &outcome);
    Ok(())
}

/// The bench image and its +unaligned-scalar-mem variant (the same bundle and file-system
/// root, another kernel).
fn bench_images() -> Result<(kernel_build::Image, &'static kernel_build::Variant, kernel_build::Image)> {
    setup::ensure_prerequisites()?;
    let image = kernel_build::build_image(kernel_build::Purpose::Bench)?;
    let variant = &kernel_build::UNALIGNED_SCALAR_MEM;
    let unaligned = kernel_build::Image {
        kernel: kernel_build::build_kernel_variant(kernel_build::Purpose::Bench, Some(variant))?,
        bundle: image.bundle.clone(),
        fs_root: image.fs_root.clone(),
    };
    Ok((image, variant, unaligned))
}

fn run_bench() -> Result<ExitCode> {
    let (image, variant, unaligned) = bench_images()?;
    bench::run(&image, Some((variant.name, variant.rustflags, &unaligned)))?;
    Ok(ExitCode::SUCCESS)
}

/// `cargo xtask bench --groups`: both builds (or only the variant), only those groups.
fn run_bench_groups(groups: &str, variant_only: bool) -> Result<ExitCode> {
    let (image, variant, unaligned) = bench_images()?;
    let label = format!("+{}", variant.name);
    if variant_only {
        bench::run_only(groups, &[(&label, &unaligned)])?;
    } else {
        bench::run_only(groups, &[("default", &image), (&label, &unaligned)])?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::Cli;

    fn help(path: &[&str]) -> String {
        let mut command = Cli::command();
        let mut current = &mut command;
        for name in path {
            current = current.find_subcommand_mut(name).unwrap_or_else(|| panic!("no subcommand {name}"));
        }
        current.render_long_help().to_string()
    }

    #[test]
    fn help_texts_name_every_technology() {
        let ext = help(&["ext"]);
        assert!(ext.contains("--wasm") && ext.contains("--user"), "{ext}");
        let build = help(&["ext", "build"]);
        assert!(build.contains("--wasm") && build.contains("--user"), "{build}");
        let load = help(&["load"]);
        assert!(load.contains("--user") && load.contains("cannot be hot loaded"), "{load}");
    }
}
