//! `spsh [-s]`: the Spindle user shell, the program the kernel starts at boot.
//!
//! It reads lines from the console (edited and echoed by the runtime's `LineReader`:
//! backspace/delete, Ctrl-U) and runs them:
//!
//! | command | what it does |
//! |---|---|
//! | `run [-x] [-c] NAME [ARGS…]` | spawn program NAME, wait, print its status (`-x`: pass the extension-loading capability, `-c`: the console capability) |
//! | `ext list` | the loaded extensions (`ext_list`) |
//! | `ext load NAME [builtin\|native\|wasm\|user]` | load an extension (`ext_load`); refusals print the kernel's reason (`last_error`) |
//! | `ext unload NAME` | unload it (`ext_unload`) |
//! | `ext available`, `ext replace …` | the kernel console's `ext list` (loaded, bundled, built-in) and `ext replace` |
//! | `events` | the dispatcher's events, bindings and counters (`events`) |
//! | `ps` | the processes (`processes`) |
//! | `echo WORD…`, `help`, `exit [STATUS]` | |
//! | anything else | one kernel console line (`kernel_command`): `mem`, `probe`, `reclaim`, `hotload wait`, `halt`, … |
//!
//! Interactively a failing line prints `spsh: …` and the shell carries on. With `-s`
//! (script mode: the kernel feeds a non-interactive run's lines as console input) it
//! stops at the first failing line and exits 1, and exits 0 when the input ends; each
//! line appears after the prompt (`spsh> LINE`) because the shell echoes what it reads.
//!
//! The kernel starts spsh with the extension-loading and console capabilities; without
//! them `ext` and kernel commands answer "not permitted".
//!
//! Limitations: no pipes, redirection, quoting or background jobs; `run` always waits.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

use spindle_runtime::arch::{self, Error, MAX_COMMAND_LINE, SPAWN_CONSOLE, SPAWN_EXTENSION_LOADER, Technology};
use spindle_runtime::input::{LineReader, ReadLine, with_listing};
use spindle_runtime::line::LineError;
use spindle_runtime::{Arguments, print, println};

spindle_runtime::entry!(main);

/// The prompt.
const PROMPT: &str = "spsh> ";
/// Most words in one line.
const MAX_WORDS: usize = 32;

/// A line failed; its message has been printed.
struct Failed;

/// What the shell does after a line.
enum Flow {
    /// Read the next line.
    Continue,
    /// Exit with this status.
    Exit(i32),
}

fn main(arguments: &Arguments) -> i32 {
    let script = arguments.get(0) == Some("-s");
    if !script {
        println!("spsh: the Spindle user shell (pid {}); `help` lists commands, `exit` returns to the kernel console", arch::getpid());
    }
    let mut reader = LineReader::new();
    loop {
        print!("{PROMPT}");
        let outcome = match reader.read_line() {
            ReadLine::End => {
                println!();
                return 0;
            }
            ReadLine::Failed(error) => {
                println!("spsh: cannot read the console: {error}");
                return 1;
            }
            ReadLine::Bad(LineError::TooLong) => fail(format_args!("line longer than {MAX_COMMAND_LINE} bytes")),
            ReadLine::Bad(LineError::NotUtf8) => fail(format_args!("line is not UTF-8")),
            ReadLine::Line(line) => run_line(line),
        };
        match outcome {
            Ok(Flow::Continue) => {}
            Ok(Flow::Exit(status)) => return status,
            Err(Failed) if script => {
                println!("spsh: the line failed; the script stops (status 1)");
                return 1;
            }
            Err(Failed) => {}
        }
    }
}

/// Prints `spsh: MESSAGE` and fails the line.
fn fail<T>(message: core::fmt::Arguments<'_>) -> Result<T, Failed> {
    println!("spsh: {message}");
    Err(Failed)
}

/// Runs one line.
fn run_line(line: &str) -> Result<Flow, Failed> {
    let mut words = [""; MAX_WORDS];
    let mut count = 0;
    for word in line.split_ascii_whitespace() {
        if count == MAX_WORDS {
            return fail(format_args!("at most {MAX_WORDS} words per line"));
        }
        words[count] = word;
        count += 1;
    }
    let Some((&command, arguments)) = words[..count].split_first() else { return Ok(Flow::Continue) };
    match command {
        "help" => help(),
        "echo" => {
            let mut separator = "";
            for word in arguments {
                print!("{separator}{word}");
                separator = " ";
            }
            println!();
            Ok(Flow::Continue)
        }
        "exit" => match arguments {
            [] => Ok(Flow::Exit(0)),
            [status] => match status.parse() {
                Ok(status) => Ok(Flow::Exit(status)),
                Err(_) => fail(format_args!("exit: not a status: {status}")),
            },
            _ => fail(format_args!("usage: exit [STATUS]")),
        },
        "run" => run(arguments),
        "ext" => ext(arguments),
        "events" if arguments.is_empty() => listing("events", arch::events, |text| print!("{text}")),
        // `events NAME`: the kernel console's filter.
        "ps" => listing("ps", arch::processes, print_processes),
        "ls" => ls(arguments),
        "cat" => cat(arguments),
        "write" => write_file(arguments),
        "mkdir" => match arguments {
            [path] => arch::mkdir(path).or_else(|error| fail(format_args!("mkdir {path}: {error}"))).map(|()| Flow::Continue),
            _ => fail(format_args!("usage: mkdir PATH")),
        },
        "rm" => match arguments {
            [path] => arch::unlink(path).or_else(|error| fail(format_args!("rm {path}: {error}"))).map(|()| Flow::Continue),
            _ => fail(format_args!("usage: rm PATH")),
        },
        _ => kernel_command(command, line),
    }
}

fn help() -> Result<Flow, Failed> {
    println!("spsh commands:");
    for (usage, what) in [
        ("run [-x] [-c] NAME [ARGS…]", "run program NAME, wait, print its status (-x: may load extensions, -c: may run kernel commands)"),
        ("ext list", "the loaded extensions"),
        ("ext load NAME [builtin|native|wasm|user]", "load an extension (default: native if bundled, else built-in)"),
        ("ext unload NAME", "unload an extension"),
        ("ext available", "loaded, bundled and built-in extensions (the kernel console's `ext list`)"),
        ("ext replace NAME [builtin|wasm|user]", "swap in a fresh load (the kernel console's `ext replace`)"),
        ("ext show NAME [--json]", "everything about one extension: artifact, signer, load cost, budget, memory, bindings with guards and counters"),
        ("ext list --json", "every extension's record as JSON (the `ext_stats` system call)"),
        ("events [NAME]", "events (all, or one event or service: `events clock`), their bindings, guards and counters"),
        ("ps", "processes"),
        ("ls [PATH]", "list a directory of the file system (`readdir`)"),
        ("cat PATH", "print a file (`open`, `read`)"),
        ("write PATH TEXT…", "create or replace a file with TEXT and a newline, then fsync"),
        ("mkdir PATH", "make a directory"),
        ("rm PATH", "remove a file or an empty directory"),
        ("run /PATH [ARGS…]", "run the ELF file at /PATH of the file system (e.g. run /bin/hello)"),
        ("echo WORD…", "print the words"),
        ("exit [STATUS]", "leave the shell (the kernel console takes over)"),
        ("help", "this list"),
    ] {
        println!("  {usage:<42} {what}");
    }
    println!("Any other line goes to the kernel console (`kernel_command`), whose commands are:");
    match arch::kernel_command("help") {
        Ok(()) => {}
        Err(Error::NotPermitted) => println!("  (this shell does not hold the console capability)"),
        Err(error) => println!("  (cannot list them: {error})"),
    }
    Ok(Flow::Continue)
}

/// `ls [PATH]`: the directory's entries as `KIND SIZE NAME`.
fn ls(arguments: &[&str]) -> Result<Flow, Failed> {
    let path = match arguments {
        [] => "/",
        [path] => path,
        _ => return fail(format_args!("usage: ls [PATH]")),
    };
    let mut buffer = [0u8; 8192];
    let total = arch::readdir(path, &mut buffer).or_else(|error| fail(format_args!("ls {path}: {error}")))?;
    let text = core::str::from_utf8(&buffer[..total.min(buffer.len())]).unwrap_or("");
    for line in text.lines() {
        let mut fields = line.split('\t');
        let (kind, size, name) = (fields.next().unwrap_or("?"), fields.next().unwrap_or("?"), fields.next().unwrap_or("?"));
        println!("{} {size:>10} {name}", if kind == "d" { 'd' } else { '-' });
    }
    if total > buffer.len() {
        println!("spsh: ls {path}: {} more bytes of listing not shown", total - buffer.len());
    }
    Ok(Flow::Continue)
}

/// `cat PATH`: the file's bytes, as they are, to the console.
fn cat(arguments: &[&str]) -> Result<Flow, Failed> {
    let [path] = arguments else { return fail(format_args!("usage: cat PATH")) };
    let handle = arch::open(path, arch::OPEN_READ).or_else(|error| fail(format_args!("cat {path}: {error}")))?;
    let mut buffer = [0u8; 4096];
    let outcome = loop {
        match arch::read(handle, &mut buffer) {
            Ok(0) => break Ok(Flow::Continue),
            Ok(count) => {
                let _ = arch::write(arch::CONSOLE, &buffer[..count]);
            }
            Err(error) => break fail(format_args!("cat {path}: {error}")),
        }
    };
    let _ = arch::close(handle);
    outcome
}

/// `write PATH TEXT…`: creates or replaces the file with the words and a newline, fsyncs.
fn write_file(arguments: &[&str]) -> Result<Flow, Failed> {
    let [path, words @ ..] = arguments else { return fail(format_args!("usage: write PATH TEXT…")) };
    let mut buffer = [0u8; MAX_COMMAND_LINE + 1];
    let Some(text) = join(words, &mut buffer[..MAX_COMMAND_LINE]) else { return fail(format_args!("write: text too long")) };
    let length = text.len();
    buffer[length] = b'\n';
    let handle = arch::open(path, arch::OPEN_WRITE | arch::OPEN_CREATE | arch::OPEN_TRUNCATE)
        .or_else(|error| fail(format_args!("write {path}: {error}")))?;
    let outcome = match arch::write(handle, &buffer[..=length]).and_then(|_| arch::fsync(handle)) {
        Ok(()) => Ok(Flow::Continue),
        Err(error) => fail(format_args!("write {path}: {error}")),
    };
    let _ = arch::close(handle);
    outcome
}

/// Joins `words` with single spaces into `buffer`.
fn join<'buffer>(words: &[&str], buffer: &'buffer mut [u8]) -> Option<&'buffer str> {
    let mut length = 0;
    for (index, word) in words.iter().enumerate() {
        let separator: &[u8] = if index == 0 { b"" } else { b" " };
        for part in [separator, word.as_bytes()] {
            buffer.get_mut(length..length + part.len())?.copy_from_slice(part);
            length += part.len();
        }
    }
    core::str::from_utf8(&buffer[..length]).ok()
}

fn run(arguments: &[&str]) -> Result<Flow, Failed> {
    let mut flags = 0;
    let mut rest = arguments;
    while let Some((&option, tail)) = rest.split_first() {
        match option {
            "-x" => flags |= SPAWN_EXTENSION_LOADER,
            "-c" => flags |= SPAWN_CONSOLE,
            _ => break,
        }
        rest = tail;
    }
    let Some(&name) = rest.first() else { return fail(format_args!("usage: run [-x] [-c] NAME [ARGS…]")) };
    let mut buffer = [0u8; MAX_COMMAND_LINE];
    let Some(command_line) = join(rest, &mut buffer) else { return fail(format_args!("run {name}: command line longer than {MAX_COMMAND_LINE} bytes")) };
    let pid = match arch::spawn_with_flags(command_line, flags) {
        Ok(pid) => pid,
        Err(error) => return fail(format_args!("run {name}: {error}")),
    };
    match arch::wait(pid) {
        Ok(status) => {
            println!("[spsh] pid {pid} ({name}) {status}");
            if status.is_success() { Ok(Flow::Continue) } else { Err(Failed) }
        }
        Err(error) => fail(format_args!("run {name}: wait for pid {pid}: {error}")),
    }
}

fn ext(arguments: &[&str]) -> Result<Flow, Failed> {
    const USAGE: &str =
        "usage: ext list [--json] | ext show NAME [--json] | ext available | ext load NAME [builtin|native|wasm|user] | ext unload NAME | ext replace NAME [builtin|wasm|user]";
    match arguments {
        ["list"] => listing("ext list", arch::ext_list, print_extensions),
        ["load", name] | ["load", name, _] => {
            let technology = match arguments.get(2).copied() {
                None | Some("native") => Technology::Default,
                Some("builtin") => Technology::BuiltIn,
                Some("wasm") => Technology::Wasm,
                Some("user") => Technology::User,
                Some(other) => return fail(format_args!("ext load {name}: unknown technology `{other}` ({USAGE})")),
            };
            match arch::ext_load(name, technology) {
                Ok(()) => {
                    let _ = with_listing(arch::ext_list, |text| match extension_fields(text, name) {
                        Some([_, technology, version, _, bindings, ..]) => {
                            println!("loaded `{name}` {version} ({technology}), {bindings} binding(s)")
                        }
                        _ => println!("loaded `{name}`"),
                    });
                    Ok(Flow::Continue)
                }
                Err(Error::NotFound) => fail(format_args!(
                    "ext load {name}: not found: neither built in nor in the boot bundle (list it in image.toml and run `cargo xtask qemu` again, or push it with `cargo xtask load CRATE`; `ext available` lists what is here)"
                )),
                Err(error) => refused(&["ext load ", name], error),
            }
        }
        ["unload", name] => match arch::ext_unload(name) {
            Ok(()) => {
                println!("unloaded `{name}`");
                Ok(Flow::Continue)
            }
            Err(error) => refused(&["ext unload ", name], error),
        },
        // What the kernel console's own `ext list` shows: loaded, bundled and built-in.
        ["available"] => kernel_command("ext", "ext list"),
        // `ext replace …` and anything newer: the kernel console's `ext`.
        [subcommand, ..] if !matches!(*subcommand, "load" | "unload") => {
            let mut buffer = [0u8; MAX_COMMAND_LINE];
            let mut words = [""; MAX_WORDS];
            words[0] = "ext";
            let count = arguments.len().min(MAX_WORDS - 1);
            words[1..=count].copy_from_slice(&arguments[..count]);
            match join(&words[..=count], &mut buffer) {
                Some(line) => kernel_command("ext", line),
                None => fail(format_args!("ext: line too long")),
            }
        }
        _ => fail(format_args!("{USAGE}")),
    }
}

/// Reports a failed call made for `what` (its words, concatenated): the kernel's reason
/// for `Refused`, else the error.
fn refused<T>(what: &[&str], error: Error) -> Result<T, Failed> {
    let mut buffer = [0u8; MAX_COMMAND_LINE];
    let what = join_plain(what, &mut buffer);
    if error == Error::Refused {
        let printed = with_listing(arch::last_error, |reason| {
            if reason.starts_with(what) {
                println!("spsh: {reason}");
            } else {
                println!("spsh: {what}: {reason}");
            }
        });
        if printed.is_ok() {
            return Err(Failed);
        }
    }
    fail(format_args!("{what}: {error}"))
}

/// Concatenates `parts` into `buffer` (truncating at its length).
fn join_plain<'buffer>(parts: &[&str], buffer: &'buffer mut [u8]) -> &'buffer str {
    let mut length = 0;
    for part in parts {
        let take = part.len().min(buffer.len() - length);
        buffer[length..length + take].copy_from_slice(&part.as_bytes()[..take]);
        length += take;
    }
    match core::str::from_utf8(&buffer[..length]) {
        Ok(text) => text,
        Err(error) => core::str::from_utf8(&buffer[..error.valid_up_to()]).unwrap_or(""),
    }
}

/// Fetches a listing with `fetch` and shows it with `show`.
fn listing(what: &str, fetch: fn(&mut [u8]) -> Result<usize, Error>, show: fn(&str)) -> Result<Flow, Failed> {
    match with_listing(fetch, show) {
        Ok(()) => Ok(Flow::Continue),
        Err(error) => fail(format_args!("{what}: {error}")),
    }
}

/// The six tab-separated fields of extension `name`'s line in an `ext_list` listing.
fn extension_fields<'text>(text: &'text str, name: &str) -> Option<[&'text str; 9]> {
    text.lines().map(listing_fields).find(|fields| fields[0] == name)
}

/// The tab-separated fields of one `ext_list` line: NAME TECHNOLOGY VERSION STATE BINDINGS
/// MEMORY CALLS FAULTS OVERRUNS (missing ones empty).
fn listing_fields(line: &str) -> [&str; 9] {
    let mut fields = line.splitn(9, '\t');
    core::array::from_fn(|_| fields.next().unwrap_or(""))
}

fn print_extensions(text: &str) {
    if text.is_empty() {
        println!("(no extensions loaded)");
        return;
    }
    println!("{:<16} {:<10} {:<8} {:>8} {:<16} {:>8} {:>6} {:>8} STATE", "NAME", "TECH", "VERSION", "BINDINGS", "MEMORY", "CALLS", "FAULTS", "OVERRUNS");
    for line in text.lines() {
        let [name, technology, version, state, bindings, memory, calls, faults, overruns] = listing_fields(line);
        println!("{name:<16} {technology:<10} {version:<8} {bindings:>8} {memory:<16} {calls:>8} {faults:>6} {overruns:>8} {state}");
    }
}

fn print_processes(text: &str) {
    println!("{:>5} {:>6} {:<22} {:>9} {:>9}  COMMAND", "PID", "PARENT", "STATE", "MEMORY", "SYSCALLS");
    for line in text.lines() {
        let mut fields = line.splitn(6, '\t');
        let [pid, parent, state, memory, system_calls, command] = core::array::from_fn(|_| fields.next().unwrap_or(""));
        let kibibytes = memory.parse::<usize>().map(|bytes| bytes / 1024).unwrap_or(0);
        println!("{pid:>5} {parent:>6} {state:<22} {kibibytes:>7}Ki {system_calls:>9}  {command}");
    }
}

/// Passes `line` to the kernel console.
fn kernel_command(command: &str, line: &str) -> Result<Flow, Failed> {
    match arch::kernel_command(line.trim()) {
        Ok(()) => Ok(Flow::Continue),
        Err(Error::NotPermitted) => fail(format_args!("{command}: not a shell command, and this shell may not run kernel console commands")),
        Err(error) => refused(&[command], error),
    }
}
