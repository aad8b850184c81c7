//! The kernel console: a small command interpreter on the UART, and the start of the
//! user shell (`spsh`) in front of it.
//!
//! At boot the kernel starts the user shell `bin/spsh` with every privilege
//! ([`interactive_user_shell`]); the kernel console ([`interactive`]) takes over when spsh
//! exits or is missing. Non-interactively, each line given on the host's command line
//! (`cargo xtask qemu -- mem halt`) reaches the kernel through the boot arguments; the
//! kernel hands them to `spsh -s` as its console input ([`run_script_in_user_shell`]) and
//! exits with status 0 if spsh exited 0 (every line succeeded), else 1. spsh runs the
//! lines it does not know itself as kernel console lines ([`run_line`], through the
//! `kernel_command` system call). The boot argument `spindle.shell=kernel` skips spsh:
//! the kernel console then runs the script itself ([`run_script`]) or interactively.

use alloc::string::{String, ToString};
use core::fmt;

use crate::arch;
use crate::power::{ExitStatus, exit};
use crate::proc::{Grants, Parent, Process};

/// The user shell's program (`bin/spsh`).
pub const USER_SHELL: &str = "spsh";
/// The user shell's command line in script mode: stop at the first failing line, exit 1.
pub const USER_SHELL_SCRIPT: &str = "spsh -s";

/// Why a console command failed.
#[derive(Debug)]
pub enum CommandError {
    /// No command has this name.
    UnknownCommand,
    /// The arguments do not match the command's usage.
    Usage(&'static str),
    /// The command ran and failed.
    Failed(alloc::string::String),
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::UnknownCommand => f.write_str("unknown command (try `help`)"),
            CommandError::Usage(usage) => write!(f, "usage: {usage}"),
            CommandError::Failed(reason) => f.write_str(reason),
        }
    }
}

/// A console command.
pub struct Command {
    /// Name typed at the prompt.
    pub name: &'static str,
    /// One-line usage.
    pub usage: &'static str,
    /// One-line description.
    pub help: &'static str,
    /// Runs the command with its arguments (the words after the name).
    pub run: fn(&[&str]) -> Result<(), CommandError>,
}

/// Commands that higher layers add (the benchmarks' graft commands), after [`COMMANDS`].
static ADDED: spin::Mutex<alloc::vec::Vec<&'static [Command]>> = spin::Mutex::new(alloc::vec::Vec::new());

/// Adds `commands` to the console (a layer above the shell — the benchmarks — offers its
/// own without the shell naming it). A name already taken is ignored at lookup.
pub fn add_commands(commands: &'static [Command]) {
    crate::arch::csr::without_interrupts(|| ADDED.lock().push(commands));
}

/// Every command: the shell's own, then the added ones.
fn all_commands() -> impl Iterator<Item = &'static Command> {
    let added: alloc::vec::Vec<&'static [Command]> = crate::arch::csr::without_interrupts(|| ADDED.lock().clone());
    COMMANDS.iter().chain(added.into_iter().flatten())
}

/// Every console command, in `help` order.
pub static COMMANDS: &[Command] = &[
    Command { name: "help", usage: "help", help: "list commands", run: help },
    Command { name: "mem", usage: "mem [low-water FRAMES]", help: "memory map, frames, heap usage and paging; or set the low-water mark (free frames below which each new page is paid for by a page the global clock takes from any process)", run: mem },
    Command { name: "uptime", usage: "uptime", help: "time since boot and timer ticks", run: uptime },
    Command { name: "devices", usage: "devices", help: "devices from the device tree", run: devices },
    Command { name: "events", usage: "events [NAME]", help: "events (all, one, or one service's: `events clock`), their bindings, guards and counters", run: events },
    Command { name: "ext", usage: "ext list|load|replace NAME [builtin|wasm|user]|load /PATH.kext|unload NAME", help: "list, load (from the boot bundle, or a .kext file of the file system) and unload extensions", run: ext },
    Command { name: "hotload", usage: "hotload wait [SECONDS]", help: "wait for one `cargo xtask load` request (default 30 s); fails if it was refused", run: hotload },
    Command { name: "probe", usage: "probe KEY VALUE", help: "raise bench.Probe and print the combined result", run: probe },
    Command { name: "reclaim", usage: "reclaim FRAME|hot SLOT FRAME|clear", help: "raise mm.Reclaim for FRAME (synthetic LRU queue), or set/clear the hot list", run: reclaim },
    Command { name: "strands", usage: "strands", help: "the running strand and the ready count", run: strands },
    Command { name: "disk", usage: "disk", help: "the disk service: model, queue, counters (requests, modelled seek, busy time, response mean/p99)", run: disk },
    Command { name: "blockdev", usage: "blockdev [read SECTOR | write SECTOR TEXT…]", help: "the disk and its counters; read a sector (as text), or write TEXT into one (zero-padded)", run: blockdev },
    Command { name: "fs", usage: "fs [format [SIZE] | sync | check | remount [BUFFERS]]", help: "the file system (at 1 GiB on the disk) and its buffer cache; format (SIZE e.g. 256M; default the whole region), write back, check, mount again", run: fs },
    Command { name: "cache", usage: "cache [PATH]", help: "the buffer cache's exported state: counters, the file's blocks, the next victims", run: cache },
    Command { name: "setpolicy", usage: "setpolicy PATH|--process PID NAME [builtin|wasm|user]", help: "load policy extension NAME for the file at PATH only (its cache.*/lock.Grant bindings guarded on the file), or for process PID's file-system calls only (cache.* guarded on the process)", run: setpolicy },
    Command { name: "getpolicy", usage: "getpolicy [PATH]", help: "the policy extensions bound to the file at PATH (no PATH: every policy bound to a file or a process)", run: getpolicy },
    Command { name: "ls", usage: "ls [PATH]", help: "list a directory of the file system (default /)", run: ls },
    Command { name: "cat", usage: "cat PATH", help: "print a file of the file system", run: cat },
    Command { name: "write", usage: "write PATH TEXT…", help: "create or replace a file with TEXT and a newline, then fsync", run: write_file },
    Command { name: "mkdir", usage: "mkdir PATH", help: "make a directory", run: mkdir },
    Command { name: "rm", usage: "rm PATH", help: "remove a file or an empty directory", run: rm },
    Command { name: "run", usage: "run NAME|/PATH [ARGS…]", help: "run user program NAME from the boot bundle (or the ELF file at /PATH in the file system), wait, print its status", run: run_program },
    Command { name: "ps", usage: "ps", help: "processes and the user programs in the boot bundle", run: ps },
    Command { name: "echo", usage: "echo WORD…", help: "print the words", run: echo },
    Command { name: "fault", usage: "fault ADDRESS", help: "load from ADDRESS under a recovery point and report the fault", run: fault },
    Command { name: "halt", usage: "halt [STATUS]", help: "stop the machine (STATUS 0 = success)", run: halt },
];

const MAX_WORDS: usize = 16;

/// Runs one console line: first offered to `console.Line` handlers (extensions may
/// claim commands), then to the built-in commands. Empty lines succeed.
pub fn run_line(line: &str) -> Result<(), CommandError> {
    if !line.trim().is_empty() && crate::events::console::offer_line(line) {
        return Ok(());
    }
    match run_builtin(line) {
        Err(CommandError::UnknownCommand) => Err(killed_provider(line).unwrap_or(CommandError::UnknownCommand)),
        outcome => outcome,
    }
}

/// The text of the indexed guard with which an extension claims console command `word`
/// (as the dispatcher describes it).
fn command_guard_text(word: &str) -> String {
    alloc::format!("command_fingerprint == {:#x}", spindle_abi::fingerprint_of(word).0)
}

/// Which loaded extensions have a `console.Line` binding claiming `word`: installed
/// (`true`) or removed by a kill (`false`).
fn command_providers(word: &str) -> impl Iterator<Item = (crate::ext::introspect::ExtensionReport, bool)> {
    let guard = command_guard_text(word);
    crate::ext::introspect::reports().into_iter().filter_map(move |report| {
        let binding = report.bindings.iter().find(|binding| {
            binding.event == spindle_abi::event::CONSOLE_LINE.name() && binding.snapshot.guards.iter().any(|candidate| candidate.text == guard)
        })?;
        let installed = binding.installed;
        Some((report, installed))
    })
}

/// For a line no one claimed: if its command belonged to an extension that was killed,
/// an error saying so (instead of "unknown command").
fn killed_provider(line: &str) -> Option<CommandError> {
    let word = line.split_ascii_whitespace().next()?;
    let (report, _) = command_providers(word).find(|(_, installed)| !installed)?;
    Some(CommandError::Failed(alloc::format!(
        "`{word}` is a command of extension `{}`, which is not serving: {} (`ext unload {}` and load it again to restart it)",
        report.name,
        report.status.describe(),
        report.name
    )))
}

/// Runs one line with the built-in commands only.
pub fn run_builtin(line: &str) -> Result<(), CommandError> {
    let mut words = [""; MAX_WORDS];
    let mut count = 0;
    for word in line.split_ascii_whitespace() {
        if count == MAX_WORDS {
            return Err(CommandError::Usage("at most 16 words per line"));
        }
        words[count] = word;
        count += 1;
    }
    let Some((&name, arguments)) = words[..count].split_first() else {
        return Ok(());
    };
    let command = all_commands().find(|command| command.name == name).ok_or(CommandError::UnknownCommand)?;
    (command.run)(arguments)
}

/// The interactive console loop.
pub fn interactive() -> ! {
    crate::println!("Type `help` for commands; Ctrl-A X leaves QEMU.");
    let mut buffer = [0u8; crate::param::CONSOLE_LINE_MAX];
    loop {
        crate::print!("spindle> ");
        match crate::console::read_line(&mut buffer) {
            crate::console::LineInput::TooLong => crate::println!("error: line longer than {} bytes", buffer.len()),
            crate::console::LineInput::Line(length) => {
                let line = core::str::from_utf8(&buffer[..length]).unwrap_or("");
                if let Err(error) = run_line(line) {
                    crate::println!("error: {error}");
                }
            }
        }
    }
}

/// Runs `command_line` (the user shell) as the kernel's child with every privilege and
/// waits for it.
fn run_user_shell(command_line: &str) -> Result<spindle_abi::syscall::ExitStatus, String> {
    let process = crate::proc::spawn(command_line, Parent::Kernel, Grants::ALL).map_err(|error| error.to_string())?;
    crate::proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| alloc::format!("wait: {error:?}"))
}

/// Interactive boot: the user shell, then the kernel console when it exits or cannot
/// start.
pub fn interactive_user_shell() -> ! {
    match run_user_shell(USER_SHELL) {
        Ok(status) => crate::println!("[shell] {USER_SHELL} {status}; falling back to the kernel console"),
        Err(error) => crate::println!("[shell] cannot start the user shell (bin/{USER_SHELL}): {error}; falling back to the kernel console"),
    }
    interactive()
}

/// Decodes a script (comma-separated, percent-encoded lines) into console input: each
/// line followed by `\n`. Errors name the line that does not decode or holds a line break.
fn decode_script(encoded_lines: &str) -> Result<String, String> {
    let mut buffer = [0u8; crate::param::CONSOLE_LINE_MAX];
    let mut text = String::new();
    for encoded in encoded_lines.split(',').take(crate::param::SCRIPT_LINES_MAX) {
        let line = crate::bootargs::decode_line(encoded, &mut buffer)
            .map_err(|error| alloc::format!("script line {encoded:?} does not decode: {error:?}"))?;
        if line.contains(['\n', '\r']) {
            return Err(alloc::format!("script line {line:?} holds a line break"));
        }
        text.push_str(line);
        text.push('\n');
    }
    Ok(text)
}

/// Script mode: feeds the script to the user shell as its console input, waits for it and
/// exits with success iff it exited 0. Without `bin/spsh` the kernel console runs the
/// script ([`run_script`]), saying so.
pub fn run_script_in_user_shell(encoded_lines: &str) -> ! {
    if !crate::proc::programs().contains(&USER_SHELL) {
        crate::println!("[shell] no user shell (bin/{USER_SHELL}) in the boot bundle; the kernel console runs the script");
        run_script(encoded_lines);
    }
    let text = match decode_script(encoded_lines) {
        Ok(text) => text,
        Err(error) => {
            crate::println!("error: {error}");
            exit(ExitStatus::Failure);
        }
    };
    crate::console::set_script_input(&text);
    match run_user_shell(USER_SHELL_SCRIPT) {
        Ok(status) => {
            crate::println!("[shell] {USER_SHELL} {status}");
            exit(if status.is_success() { ExitStatus::Success } else { ExitStatus::Failure })
        }
        Err(error) => {
            crate::println!("[shell] cannot start the user shell (bin/{USER_SHELL}): {error}");
            exit(ExitStatus::Failure)
        }
    }
}

/// Runs a script of comma-separated, percent-encoded lines on the kernel console, then
/// exits.
pub fn run_script(encoded_lines: &str) -> ! {
    let mut buffer = [0u8; crate::param::CONSOLE_LINE_MAX];
    for encoded in encoded_lines.split(',').take(crate::param::SCRIPT_LINES_MAX) {
        let line = match crate::bootargs::decode_line(encoded, &mut buffer) {
            Ok(line) => line,
            Err(error) => {
                crate::println!("error: script line {encoded:?} does not decode: {error:?}");
                exit(ExitStatus::Failure);
            }
        };
        crate::println!("spindle> {line}");
        if let Err(error) = run_line(line) {
            crate::println!("error: {error}");
            exit(ExitStatus::Failure);
        }
    }
    exit(ExitStatus::Success)
}

fn help(_: &[&str]) -> Result<(), CommandError> {
    for command in all_commands() {
        crate::println!("  {:<16} {}", command.usage, command.help);
    }
    // Extensions claim commands by the fingerprint of the command word; an extension's
    // own name is the word it usually claims, so that is the name tried here.
    let mut first = true;
    for report in crate::ext::introspect::reports() {
        if let Some((_, installed)) = command_providers(&report.name).find(|(provider, _)| provider.name == report.name) {
            if first {
                crate::println!("commands provided by loaded extensions:");
                first = false;
            }
            let state = if installed { String::new() } else { alloc::format!(" ({})", report.status.describe()) };
            crate::println!("  {:<16} from extension `{}` ({}){state}", report.name, report.name, report.technology);
        }
    }
    Ok(())
}

fn mem(arguments: &[&str]) -> Result<(), CommandError> {
    match arguments {
        [] => {}
        ["low-water", frames] => {
            let frames = frames.parse::<u64>().map_err(|_| CommandError::Failed(alloc::format!("mem low-water: {frames:?} is not a number of frames")))?;
            crate::services::vm::set_low_water(frames);
            crate::println!("low-water mark: {frames} free frames");
            return Ok(());
        }
        _ => return Err(CommandError::Usage("mem [low-water FRAMES]")),
    }
    crate::println!("RAM (device tree):");
    for (start, size) in crate::devicetree::memory_regions() {
        crate::println!("  {:#012x}..{:#012x}  {:>6} KiB", start, start + size, size / 1024);
    }
    crate::println!("reserved:");
    for (start, size) in crate::devicetree::reserved_regions() {
        crate::println!("  {:#012x}..{:#012x}  {:>6} KiB  (firmware)", start, start + size, size / 1024);
    }
    let (blob_start, blob_end) = crate::devicetree::blob_range();
    crate::println!("  {:#012x}..{:#012x}  {:>6} KiB  (device tree)", blob_start, blob_end, (blob_end - blob_start) / 1024);
    crate::println!("  {:#012x}..{:#012x}  {:>6} KiB  (kernel image)", crate::memlayout::KERNEL_BASE, crate::mm::kernel_end(),
        (crate::mm::kernel_end() - crate::memlayout::KERNEL_BASE) / 1024);
    if let Some(free) = crate::mm::boot_free_ranges() {
        crate::println!("free at boot:");
        for (start, end) in free.iter() {
            crate::println!("  {:#012x}..{:#012x}  {:>6} KiB", start, end, (end - start) / 1024);
        }
    }
    let frames = crate::mm::frame::stats();
    let heap = crate::mm::heap::stats();
    crate::println!("frames: {} total, {} allocated, {} free ({} KiB each)", frames.total, frames.allocated,
        frames.total - frames.allocated, arch::PAGE_SIZE / 1024);
    crate::println!("{}", frames_by_owner_line(frames.allocated as u64));
    crate::println!("heap:   {} KiB total, {} bytes requested, {} bytes allocated", heap.total_bytes / 1024,
        heap.requested_bytes, heap.allocated_bytes);
    let vm = crate::services::vm::stats();
    crate::println!("vm:     {} frames held by address spaces' pages (image, stack, vm_map); {} faults: {} demand-zero, {} from pagers, {} protection changes, {} retried, {} killed; {} events raised, {} answers refused; {} image pages filled on first touch, {} dropped under pressure",
        vm.frames_held, vm.faults, vm.demand_zero, vm.pager_maps, vm.protects, vm.retries, vm.kills, vm.raised, vm.rejected, vm.image_pages, vm.image_drops);
    let swap = match crate::services::vm::swap_usage() {
        Ok((slots, used)) => alloc::format!("{used} of {slots} swap slots in use"),
        Err(why) => alloc::format!("{why}"),
    };
    crate::println!("paging: {} page-outs ({} written to swap, {} under pressure, {} of them another space's), {} page-ins ({} waited for a page in transit); {} mm.Reclaim raises over real frames, {} volunteers refused; {swap}; low-water mark {} free frames",
        vm.page_outs, vm.swap_writes, vm.pressure_page_outs, vm.taken_from_others, vm.page_ins, vm.transit_waits, vm.reclaim_raises, vm.reclaim_rejected, crate::services::vm::low_water());
    Ok(())
}

/// `mem`'s line of frames by owner, from the frame table (which records every allocated
/// frame's owner), and whether its count agrees with the allocator's `allocated`.
fn frames_by_owner_line(allocated: u64) -> alloc::string::String {
    use spindle_service_frames::Owner;
    let owners = crate::services::vm::frames_by_owner();
    let sum = |wanted: fn(&Owner) -> bool| owners.iter().filter(|(owner, _)| wanted(owner)).fold((0u64, 0usize), |(frames, owners), (_, held)| (frames + held, owners + 1));
    let (spaces, space_count) = sum(|owner| matches!(owner, Owner::AddressSpace(_)));
    let (arenas, arena_count) = sum(|owner| matches!(owner, Owner::ExtensionArena(_)));
    let (cache, _) = sum(|owner| matches!(owner, Owner::BufferCache));
    let (kernel, _) = sum(|owner| matches!(owner, Owner::Kernel));
    let agreement = match crate::mm::frame::audit() {
        Ok(()) => alloc::string::String::from("every allocated frame has an owner"),
        Err(why) => alloc::format!("MISMATCH: {why}"),
    };
    alloc::format!(
        "by owner: {spaces} to {space_count} address space(s), {arenas} to {arena_count} extension arena(s), {cache} to the buffer cache, {kernel} to the kernel (page tables, strand stacks, extension images, device rings, private heaps) of {allocated} allocated; {agreement}"
    )
}

fn uptime(_: &[&str]) -> Result<(), CommandError> {
    let micros = crate::time::uptime_micros();
    crate::println!("up {}.{:06} s, {} ticks at {} Hz, timebase {} Hz", micros / 1_000_000, micros % 1_000_000,
        crate::time::ticks(), crate::param::TICKS_PER_SECOND, crate::time::timebase_hz());
    Ok(())
}

fn devices(_: &[&str]) -> Result<(), CommandError> {
    crate::println!("model: {}, {} hart(s)", crate::devicetree::model(), crate::devicetree::hart_count());
    for device in crate::devicetree::devices() {
        crate::println!("  {:<28} {:<24} {:#012x} +{:#x}", device.name, device.compatible, device.base, device.size);
    }
    crate::println!("{}", crate::hotload::status_line());
    Ok(())
}

fn events(arguments: &[&str]) -> Result<(), CommandError> {
    match arguments {
        [] => crate::print!("{}", crate::events::listing(None)),
        [name] => {
            let text = crate::events::listing(Some(name));
            if text.lines().count() <= 1 {
                return Err(CommandError::Failed(alloc::format!("events {name}: no event is called `{name}` or `{name}.*` (`events` lists them all)")));
            }
            crate::print!("{text}");
        }
        _ => return Err(CommandError::Usage("events [NAME | SERVICE]")),
    }
    Ok(())
}

fn ext(arguments: &[&str]) -> Result<(), CommandError> {
    const USAGE: &str = "ext list [--json] | ext show NAME [--json] | ext load NAME [builtin|wasm|user] | ext load /PATH.kext | ext replace NAME [builtin|wasm|user] | ext unload NAME";
    let preference = |words: &[&str]| match words {
        [.., "builtin"] => crate::ext::Preference::BuiltIn,
        [.., "wasm"] => crate::ext::Preference::Wasm,
        [.., "user"] => crate::ext::Preference::User,
        _ => crate::ext::Preference::Default,
    };
    match arguments {
        ["list", "--json"] => {
            crate::println!("{}", crate::ext::introspect::all_json());
            Ok(())
        }
        ["show", name] | ["show", name, "--json"] => {
            let extension = crate::ext::find(name)
                .ok_or_else(|| CommandError::Failed(alloc::format!("ext show {name}: extension `{name}` is not loaded (`ext list` shows what is)")))?;
            let report = crate::ext::introspect::report(&extension);
            if arguments.len() == 3 {
                crate::println!("{}", crate::ext::introspect::to_json(&report));
            } else {
                crate::print!("{}", crate::ext::introspect::show_text(&report));
            }
            Ok(())
        }
        ["list"] => {
            let reports = crate::ext::introspect::reports();
            crate::println!("loaded:");
            if reports.is_empty() {
                crate::println!("  (none)");
            }
            for report in &reports {
                crate::println!("  {}", crate::ext::introspect::list_line(report));
            }
            crate::println!("available (in the boot bundle: NAME native, NAME.wasm Wasm — `ext load NAME wasm`, bin/ext-NAME user-level — `ext load NAME user`):");
            match crate::ext::bundle::get() {
                Some(bundle) => {
                    // Other entries under `bin/` are user programs (`run NAME`), not extensions.
                    let user_prefix = alloc::format!("{}{}", crate::proc::PROGRAM_PREFIX, crate::ext::user::PROGRAM_PREFIX);
                    for entry in bundle.entries.iter().filter(|entry| !entry.name.starts_with("bin/") || entry.name.starts_with(&user_prefix)) {
                        crate::println!("  {:<16} {} bytes{}", entry.name, entry.payload.len(),
                            if bundle.boot.contains(&entry.name) { ", loaded at boot" } else { "" });
                    }
                }
                None => crate::println!("  (no boot bundle)"),
            }
            crate::println!("available (built-in):");
            for declaration in crate::ext::builtin::AVAILABLE {
                let declaration = declaration();
                crate::println!("  {:<16} {:<8} budget {} us, quota {} bytes, domains {:?}", declaration.name, declaration.version,
                    declaration.budget_microseconds, declaration.memory_quota_bytes, declaration.domains);
            }
            Ok(())
        }
        ["load", path] if path.starts_with('/') => {
            // A `.kext` file of the file system: native or Wasm by its container's kind.
            let bytes = crate::services::fs::read_file(path).map_err(|error| fs_failed(&alloc::format!("ext load {path}"), error))?;
            let extension = crate::ext::load_kext_bytes(&bytes).map_err(|error| CommandError::Failed(alloc::format!("ext load {path}: {error}")))?;
            loaded_message("loaded", &extension).map_err(|error| CommandError::Failed(alloc::format!("ext load {path}: {error}")))
        }
        ["load", name] | ["load", name, "builtin" | "wasm" | "user"] => {
            let preference = preference(arguments);
            let extension = crate::ext::load(name, preference).map_err(|error| CommandError::Failed(alloc::format!("ext load {name}: {error}")))?;
            loaded_message("loaded", &extension).map_err(|error| CommandError::Failed(alloc::format!("ext load {name}: {error}")))
        }
        ["replace", name] | ["replace", name, "builtin" | "wasm" | "user"] => {
            let preference = preference(arguments);
            let extension = crate::ext::replace(name, preference)
                .map_err(|error| CommandError::Failed(alloc::format!("ext replace {name}: {error}")))?;
            loaded_message("replaced by", &extension).map_err(|error| CommandError::Failed(alloc::format!("ext replace {name}: {error}")))
        }
        ["unload", name] => {
            crate::ext::unload(name).map_err(|error| CommandError::Failed(alloc::format!("ext unload {name}: {error}")))?;
            crate::println!("unloaded `{name}`");
            Ok(())
        }
        _ => Err(CommandError::Usage(USAGE)),
    }
}

/// Prints what a load did (`loaded `NAME` VERSION (TECHNOLOGY), N binding(s)` and any
/// budget the events' owners capped), or fails if the extension did not survive its load.
fn loaded_message(verb: &str, extension: &crate::ext::LoadedExtension) -> Result<(), alloc::string::String> {
    crate::ext::loaded_summary(extension).map(|summary| crate::println!("{verb} {summary}"))
}

fn hotload(arguments: &[&str]) -> Result<(), CommandError> {
    const USAGE: &str = "hotload wait [SECONDS]";
    let seconds = match arguments {
        ["wait"] => crate::hotload::DEFAULT_WAIT_SECONDS,
        ["wait", seconds] => parse_number(seconds).ok_or(CommandError::Usage(USAGE))? as u64,
        _ => return Err(CommandError::Usage(USAGE)),
    };
    let answer = crate::hotload::wait_for_request(seconds).map_err(|error| CommandError::Failed(alloc::format!("hotload wait: {error}")))?;
    if !answer.starts_with("OK") {
        return Err(CommandError::Failed(alloc::format!("hotload wait: the request was refused: {answer}")));
    }
    crate::println!("hotload: {answer}");
    Ok(())
}

fn reclaim(arguments: &[&str]) -> Result<(), CommandError> {
    const USAGE: &str = "reclaim FRAME|hot SLOT FRAME|clear (numbers: decimal or 0x hex)";
    use crate::services::frames as mm;
    match arguments {
        ["clear"] => {
            mm::clear_hot();
            crate::println!("hot list cleared");
        }
        ["hot", slot, frame] => {
            let (Some(slot), Some(frame)) = (parse_number(slot), parse_number(frame)) else { return Err(CommandError::Usage(USAGE)) };
            mm::set_hot(slot, frame as u64);
            crate::println!("hot[{slot}] = {frame:#x}");
        }
        [frame] => {
            let frame = parse_number(frame).ok_or(CommandError::Usage(USAGE))? as u64;
            let before = mm::rejections();
            let chosen = mm::reclaim(frame);
            crate::println!(
                "mm.Reclaim(candidate={frame:#x}) -> {chosen:#x} (queue {:#x}..{:#x}; rejected answers: {})",
                mm::LRU_BASE_FRAME,
                mm::LRU_BASE_FRAME + mm::LRU_FRAMES,
                mm::rejections() - before
            );
        }
        _ => return Err(CommandError::Usage(USAGE)),
    }
    Ok(())
}


fn probe(arguments: &[&str]) -> Result<(), CommandError> {
    let [key, value] = arguments else { return Err(CommandError::Usage("probe KEY VALUE")) };
    let (Some(key), Some(value)) = (parse_number(key), parse_number(value)) else {
        return Err(CommandError::Usage("probe KEY VALUE (numbers)"));
    };
    crate::println!("bench.Probe(key={key}, value={value}) -> {}", crate::events::probe::raise(key as u64, value as u64));
    Ok(())
}

fn strands(_: &[&str]) -> Result<(), CommandError> {
    let current = crate::sched::current();
    crate::println!("running: #{} {} (priority {}), {} ready", current.id(), current.name(), current.priority().level(),
        crate::sched::ready_count());
    Ok(())
}

fn disk(arguments: &[&str]) -> Result<(), CommandError> {
    if !arguments.is_empty() {
        return Err(CommandError::Usage("disk"));
    }
    match crate::services::disk::stats() {
        Some(stats) => {
            crate::println!("{stats}");
            Ok(())
        }
        None => Err(CommandError::Failed("disk: no disk service (the machine has no disk)".into())),
    }
}

fn blockdev(arguments: &[&str]) -> Result<(), CommandError> {
    use crate::drivers::{plic, virtio_blk};
    const USAGE: &str = "blockdev [read SECTOR | write SECTOR TEXT…]";
    let Some(disk) = virtio_blk::info() else {
        return Err(CommandError::Failed("blockdev: the machine has no disk".into()));
    };
    let sector = |word: &str| word.parse::<u64>().map_err(|_| CommandError::Usage(USAGE));
    let failed = |error: virtio_blk::BlockError| CommandError::Failed(alloc::format!("blockdev: {error}"));
    match arguments {
        [] => {
            let stats = virtio_blk::stats();
            let interrupts = plic::stats();
            crate::println!("disk virtio-blk at {:#x}, irq {}: {} sectors ({} MiB){}", disk.slot.base, disk.interrupt, disk.sectors,
                (disk.sectors * virtio_blk::SECTOR_SIZE as u64) >> 20, if disk.read_only { ", read-only" } else { "" });
            crate::println!("requests: {} submitted, {} completed ({} failed), {} delivered, {} in flight; {} refused ({} queue full)",
                stats.submitted, stats.completed, stats.failed, stats.delivered, stats.in_flight, stats.refused, stats.queue_full);
            crate::println!("interrupts: {} disk, PLIC {} claimed, {} completed, {} spurious", stats.interrupts, interrupts.claims,
                interrupts.completions, interrupts.spurious);
        }
        ["read", at] => {
            let at = sector(at)?;
            let mut data = [0u8; virtio_blk::SECTOR_SIZE];
            virtio_blk::read(at, &mut data).map_err(failed)?;
            let text_end = data.iter().position(|&byte| byte == 0).unwrap_or(data.len());
            let text = String::from_utf8_lossy(&data[..text_end]);
            crate::println!("sector {at}: {text:?}{}", if data[text_end..].iter().any(|&byte| byte != 0) { " (and more bytes after a NUL)" } else { "" });
        }
        ["write", at, words @ ..] if !words.is_empty() => {
            let at = sector(at)?;
            let text = words.join(" ");
            if text.len() > virtio_blk::SECTOR_SIZE {
                return Err(CommandError::Failed(alloc::format!("blockdev: {} bytes do not fit one {}-byte sector", text.len(), virtio_blk::SECTOR_SIZE)));
            }
            let mut data = [0u8; virtio_blk::SECTOR_SIZE];
            data[..text.len()].copy_from_slice(text.as_bytes());
            virtio_blk::write(at, &data).map_err(failed)?;
            crate::println!("sector {at}: wrote {} bytes", text.len());
        }
        _ => return Err(CommandError::Usage(USAGE)),
    }
    Ok(())
}

/// A file-system command's error as a console error.
fn fs_failed(command: &str, error: crate::services::fs::FsCallError) -> CommandError {
    CommandError::Failed(alloc::format!("{command}: {error}"))
}

/// Parses a size: bytes with an optional unit K, M or G (binary).
fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.char_indices().last()? {
        (at, 'K' | 'k') => (&text[..at], 1 << 10),
        (at, 'M' | 'm') => (&text[..at], 1 << 20),
        (at, 'G' | 'g') => (&text[..at], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

fn fs(arguments: &[&str]) -> Result<(), CommandError> {
    use crate::services::fs;
    const USAGE: &str = "fs [format [SIZE] | sync | check | remount [BUFFERS]]";
    match arguments {
        [] => {
            let status = fs::status().map_err(|error| fs_failed("fs", error))?;
            crate::println!("file system: {}", fs::summary(&status.stats));
            let cache = status.cache;
            crate::println!(
                "cache: {} of {} buffers ({} KiB; {} given back under memory pressure and {} taken back since the mount), {} dirty; {} hits, {} misses, {} prefetches ({} hit), {} evictions, {} write-backs, {} write errors",
                status.cache_buffers,
                status.cache_blocks,
                status.cache_buffers * 4,
                cache.given_back,
                cache.taken_back,
                status.dirty,
                cache.hits,
                cache.misses,
                cache.prefetches,
                cache.prefetch_hits,
                cache.evictions,
                cache.writebacks,
                cache.write_errors
            );
            crate::println!("disk: {} block reads, {} block writes since boot", status.disk_reads, status.disk_writes);
            if let Some(error) = fs::last_disk_error() {
                crate::println!("last disk error: {error}");
            }
            Ok(())
        }
        ["format"] | ["format", _] => {
            let bytes = match arguments.get(1) {
                Some(size) => parse_size(size).ok_or(CommandError::Usage(USAGE))?,
                None => 0,
            };
            let stats = fs::format(bytes).map_err(|error| fs_failed("fs format", error))?;
            crate::println!("formatted: {} MiB, {} data blocks, {} inodes", (stats.blocks * stats.block_bytes) >> 20, stats.data_blocks, stats.inodes);
            Ok(())
        }
        ["sync"] => fs::sync().map_err(|error| fs_failed("fs sync", error)),
        ["check"] => {
            let report = fs::check().map_err(|error| fs_failed("fs check", error))?;
            crate::println!("{}", alloc::format!("{report}").trim_end());
            if report.has_errors() { Err(CommandError::Failed("fs check: the file system has errors".into())) } else { Ok(()) }
        }
        ["remount"] | ["remount", _] => {
            let buffers = match arguments.get(1) {
                Some(count) => count.parse::<usize>().map_err(|_| CommandError::Usage(USAGE))?,
                None => fs::DEFAULT_CACHE_BLOCKS,
            };
            fs::remount(buffers).map(drop).map_err(|error| fs_failed("fs remount", error))
        }
        _ => Err(CommandError::Usage(USAGE)),
    }
}

fn cache(arguments: &[&str]) -> Result<(), CommandError> {
    let path = match arguments {
        [] => None,
        [path] => Some(*path),
        _ => return Err(CommandError::Usage("cache [PATH]")),
    };
    let text = crate::services::policy::cache_state_text(path).map_err(|error| fs_failed("cache", error))?;
    crate::print!("{text}");
    Ok(())
}

fn setpolicy(arguments: &[&str]) -> Result<(), CommandError> {
    const USAGE: &str = "setpolicy PATH|--process PID NAME [builtin|wasm|user]";
    let (process, arguments) = match arguments {
        ["--process", pid, rest @ ..] => (Some(pid.parse::<u64>().map_err(|_| CommandError::Usage(USAGE))?), rest),
        rest => (None, rest),
    };
    let (target, name, technology) = match (process, arguments) {
        (Some(_), [name]) => ("", *name, None),
        (Some(_), [name, technology @ ("builtin" | "wasm" | "user")]) => ("", *name, Some(*technology)),
        (None, [path, name]) => (*path, *name, None),
        (None, [path, name, technology @ ("builtin" | "wasm" | "user")]) => (*path, *name, Some(*technology)),
        _ => return Err(CommandError::Usage(USAGE)),
    };
    let preference = match technology {
        Some("builtin") => crate::ext::Preference::BuiltIn,
        Some("wasm") => crate::ext::Preference::Wasm,
        Some("user") => crate::ext::Preference::User,
        _ => crate::ext::Preference::Default,
    };
    let failed = |error: crate::services::policy::BindError| CommandError::Failed(alloc::format!("setpolicy: {error}"));
    match process {
        Some(pid) => {
            crate::services::policy::bind_to_process(pid, name, preference).map_err(failed)?;
            crate::println!("`{name}` bound to process {pid}");
        }
        None => {
            crate::services::policy::bind_to_file(target, name, preference).map_err(failed)?;
            crate::println!("`{name}` bound to {target}");
        }
    }
    Ok(())
}

fn getpolicy(arguments: &[&str]) -> Result<(), CommandError> {
    if arguments.is_empty() {
        let scoped = crate::services::policy::scoped_policies();
        if scoped.is_empty() {
            crate::println!("no policy is bound to a file or a process");
        }
        for (name, technology, scope) in scoped {
            crate::println!("{name}\t{technology}\t{scope}");
        }
        return Ok(());
    }
    let [path] = arguments else { return Err(CommandError::Usage("getpolicy [PATH]")) };
    let bound = crate::services::policy::bound_to_file(path).map_err(|error| fs_failed("getpolicy", error))?;
    if bound.is_empty() {
        crate::println!("{path}: the cache-wide policies");
    }
    for (name, technology) in bound {
        crate::println!("{name}\t{technology}");
    }
    Ok(())
}

fn ls(arguments: &[&str]) -> Result<(), CommandError> {
    let path = match arguments {
        [] => "/",
        [path] => path,
        _ => return Err(CommandError::Usage("ls [PATH]")),
    };
    let entries = crate::services::fs::list(path).map_err(|error| fs_failed("ls", error))?;
    for (entry, stat) in entries {
        let kind = if stat.kind == spindle_service_fs::Kind::Directory { 'd' } else { '-' };
        crate::println!("{kind} {:>10} {}", stat.size, entry.name_str().unwrap_or("?"));
    }
    Ok(())
}

fn cat(arguments: &[&str]) -> Result<(), CommandError> {
    let [path] = arguments else { return Err(CommandError::Usage("cat PATH")) };
    let bytes = crate::services::fs::read_file(path).map_err(|error| fs_failed("cat", error))?;
    crate::print!("{}", alloc::string::String::from_utf8_lossy(&bytes));
    Ok(())
}

fn write_file(arguments: &[&str]) -> Result<(), CommandError> {
    let [path, words @ ..] = arguments else { return Err(CommandError::Usage("write PATH TEXT…")) };
    let mut text = words.join(" ");
    text.push('\n');
    crate::services::fs::write_file(path, text.as_bytes()).map_err(|error| fs_failed("write", error))?;
    crate::services::fs::sync().map_err(|error| fs_failed("write (fsync)", error))
}

fn mkdir(arguments: &[&str]) -> Result<(), CommandError> {
    let [path] = arguments else { return Err(CommandError::Usage("mkdir PATH")) };
    crate::services::fs::mkdir(path).map_err(|error| fs_failed("mkdir", error))
}

fn rm(arguments: &[&str]) -> Result<(), CommandError> {
    let [path] = arguments else { return Err(CommandError::Usage("rm PATH")) };
    crate::services::fs::unlink(path).map_err(|error| fs_failed("rm", error))
}

fn run_program(words: &[&str]) -> Result<(), CommandError> {
    if words.is_empty() {
        return Err(CommandError::Usage("run NAME [ARGS…]"));
    }
    let command_line = words.join(" ");
    let process = crate::proc::spawn(&command_line, crate::proc::Parent::Kernel, crate::proc::Grants::NONE)
        .map_err(|error| CommandError::Failed(alloc::format!("run {}: {error}", words[0])))?;
    let pid = process.pid();
    let status = crate::proc::wait(pid, crate::proc::Parent::Kernel, &|| false)
        .map_err(|error| CommandError::Failed(alloc::format!("run {}: wait: {error:?}", words[0])))?;
    crate::println!("[proc] pid {pid} ({}) {status}", process.name());
    if !status.is_success() {
        return Err(CommandError::Failed(alloc::format!("{} {status}", process.name())));
    }
    Ok(())
}

fn ps(_: &[&str]) -> Result<(), CommandError> {
    crate::println!("{:>5} {:>6} {:<22} {:>9} {:>9}  COMMAND", "PID", "PARENT", "STATE", "MEMORY", "SYSCALLS");
    for process in crate::proc::list() {
        let state = process_state(&process);
        crate::println!("{:>5} {:>6} {:<22} {:>7}Ki {:>9}  {}", process.pid(), alloc::format!("{}", process.parent()), state,
            process.mapped_bytes() / 1024, process.system_calls(), process.command_line());
    }
    crate::println!("programs: {}", crate::proc::programs().join(" "));
    Ok(())
}

/// A process's state as `ps` shows it: `running`, `being killed`, or how it ended.
pub fn process_state(process: &Process) -> String {
    match process.exit_status() {
        Some(status) => alloc::format!("{status}"),
        None if process.kill_requested() => String::from("being killed"),
        None => String::from("running"),
    }
}

fn echo(words: &[&str]) -> Result<(), CommandError> {
    let mut first = true;
    for word in words {
        if !first {
            crate::print!(" ");
        }
        crate::print!("{word}");
        first = false;
    }
    crate::println!();
    Ok(())
}

/// A decimal or `0x` hexadecimal number.
pub(crate) fn parse_number(text: &str) -> Option<usize> {
    match text.strip_prefix("0x") {
        Some(hex) => usize::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

fn fault(arguments: &[&str]) -> Result<(), CommandError> {
    let [address] = arguments else { return Err(CommandError::Usage("fault ADDRESS")) };
    let address = parse_number(address).ok_or(CommandError::Usage("fault ADDRESS (decimal or 0x hex)"))?;
    let report = crate::mm::kernel_space::probe_unmapped_load(address)
        .map_err(|reason| CommandError::Failed(alloc::format!("{address:#x}: {reason}")))?;
    crate::println!("caught: {report}");
    Ok(())
}

fn halt(arguments: &[&str]) -> Result<(), CommandError> {
    let status = match arguments {
        [] => ExitStatus::Success,
        ["0"] => ExitStatus::Success,
        [_] => ExitStatus::Failure,
        _ => return Err(CommandError::Usage("halt [STATUS]")),
    };
    crate::println!("halting");
    exit(status)
}
