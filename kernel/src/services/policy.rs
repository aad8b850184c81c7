//! Per-file policies (Seltzer '95 §2: a policy for one file, not the whole system): binds
//! a policy extension to one file of the file system, and the cache's exported state as
//! text (what `setpolicy`, `getpolicy`, `cache_state` and the console's `setpolicy`,
//! `getpolicy` and `cache` use).
//!
//! A policy can also be bound to one process's calls ([`bind_to_process`]: the guard
//! `process == P` on every `cache.*` record, which names the process whose call raised it).
//!
//! Binding is by guard, not by a table of its own: the file's inode is assigned to the
//! extension's name ([`super::cache_events::assign`], one table for `cache.*` and
//! `lock.Grant`) before it loads,
//! so every binding it installs on `cache.*` or `lock.Grant` carries the guard
//! `file == inode` (imposed by the events' primary modules). Policies for different files
//! coexist on one event, and dispatch stays one indexed lookup.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use super::fs::{self, FsCallError};
use super::cache_events;

/// Why [`bind_to_file`] failed.
#[derive(Debug)]
pub enum BindError {
    /// The path: as the file system said.
    File(FsCallError),
    /// No extension of that name is available.
    Unknown,
    /// The extension is loaded already, or the loader refused it (the words say why).
    Refused(String),
    /// No running process has this id ([`bind_to_process`]).
    NoProcess(u64),
}

impl core::fmt::Display for BindError {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BindError::File(error) => error.fmt(formatter),
            BindError::Unknown => formatter.write_str("no such extension"),
            BindError::Refused(why) => formatter.write_str(why),
            BindError::NoProcess(pid) => write!(formatter, "no running process {pid}"),
        }
    }
}

/// Loads extension `name` as `technology`, its `cache.*` and `lock.Grant` bindings for the
/// file at `path` only.
pub fn bind_to_file(path: &str, name: &str, technology: crate::ext::Preference) -> Result<(), BindError> {
    let inode = fs::inode_of(path).map_err(BindError::File)?;
    bind(&alloc::format!("setpolicy {path} {name}"), name, cache_events::Scope::File(inode), technology)
}

/// Loads extension `name` as `technology`, its `cache.*` bindings for the file-system calls
/// of process `pid` only (the imposed guard `process == pid`, on every file it uses). An
/// extension that binds `lock.Grant` is refused (that record names no process). Unloaded
/// when the process ends ([`process_exited`]).
pub fn bind_to_process(pid: u64, name: &str, technology: crate::ext::Preference) -> Result<(), BindError> {
    let Some(process) = crate::proc::find(pid).filter(|process| process.exit_status().is_none()) else {
        return Err(BindError::NoProcess(pid));
    };
    let Ok(scope) = u32::try_from(process.pid()) else { return Err(BindError::NoProcess(pid)) };
    bind(&alloc::format!("setpolicy --process {pid} {name}"), name, cache_events::Scope::Process(scope), technology)
}

/// Assigns `scope` to `name` and loads it (`what`: the command, for the refusals' words);
/// a failed load leaves no assignment behind.
fn bind(what: &str, name: &str, scope: cache_events::Scope, technology: crate::ext::Preference) -> Result<(), BindError> {
    if crate::ext::find(name).is_some() {
        return Err(BindError::Refused(alloc::format!("{what}: `{name}` is loaded already (unload it first)")));
    }
    cache_events::assign_scope(name, Some(scope));
    match crate::ext::load(name, technology) {
        Ok(_) => Ok(()),
        Err(error) => {
            cache_events::assign_scope(name, None);
            match error {
                crate::ext::ExtensionError::Unknown(_) => Err(BindError::Unknown),
                error => Err(BindError::Refused(alloc::format!("{what}: {error}"))),
            }
        }
    }
}

/// Unloads the policy extensions bound to process `pid` ([`bind_to_process`]): called when
/// it ends, so a policy does not outlive the only calls it could see.
pub fn process_exited(pid: u64) {
    let Ok(pid) = u32::try_from(pid) else { return };
    for extension in crate::ext::list() {
        if cache_events::scope_of(&extension.name) == Some(cache_events::Scope::Process(pid)) {
            let _ = crate::ext::unload(&extension.name);
            cache_events::assign_scope(&extension.name, None);
        }
    }
}

/// Every loaded policy extension with a scope: (name, technology, `file INODE` or
/// `process PID`).
pub fn scoped_policies() -> Vec<(String, String, String)> {
    crate::ext::list()
        .iter()
        .filter_map(|extension| {
            let scope = match cache_events::scope_of(&extension.name)? {
                cache_events::Scope::File(inode) => alloc::format!("file {inode}"),
                cache_events::Scope::Process(pid) => alloc::format!("process {pid}"),
            };
            Some((extension.name.clone(), alloc::format!("{}", extension.technology), scope))
        })
        .collect()
}

/// Unloads policy extension `name` bound by [`bind_to_file`] or [`bind_to_process`]
/// (waiting for a user-level server to be reaped) and forgets its scope, so a later load
/// is cache-wide again.
pub fn unbind(name: &str) -> Result<(), crate::ext::ExtensionError> {
    let server = crate::ext::user::serving_pid(name);
    let unloaded = crate::ext::unload(name);
    if let Some(pid) = server {
        crate::proc::wait_until_reaped(pid, 200);
    }
    cache_events::assign(name, None);
    unloaded
}

/// The loaded extensions bound to the file at `path`: (name, technology).
pub fn bound_to_file(path: &str) -> Result<Vec<(String, String)>, FsCallError> {
    let inode = fs::inode_of(path)?;
    Ok(crate::ext::list()
        .iter()
        .filter(|extension| cache_events::assignment(&extension.name) == Some(inode))
        .map(|extension| (extension.name.clone(), alloc::format!("{}", extension.technology)))
        .collect())
}

/// Victims listed by [`cache_state_text`].
pub const LISTED_VICTIMS: usize = 16;

/// The cache's exported state as text (see `spindle_abi::syscall::Syscall::CacheState`).
pub fn cache_state_text(path: Option<&str>) -> Result<String, FsCallError> {
    let (status, victims, file) = fs::cache_state(LISTED_VICTIMS, path)?;
    let counters = status.cache;
    let mut text = String::new();
    let rejected: u64 = counters.rejections.iter().sum();
    let _ = writeln!(
        text,
        "counters\tbuffers {}\tdirty {}\thits {}\tmisses {}\tprefetches {}\tprefetch_hits {}\tevictions {}\twritebacks {}\twrite_errors {}\trejected {}",
        status.cache_blocks,
        status.dirty,
        counters.hits,
        counters.misses,
        counters.prefetches,
        counters.prefetch_hits,
        counters.evictions,
        counters.writebacks,
        counters.write_errors,
        rejected
    );
    if let Some(file) = file {
        let _ = writeln!(text, "file\tinode {}\tresident {}\tdirty {}", file.inode, file.resident, file.dirty);
    }
    for victim in victims {
        let owner = victim.file.map_or(String::from("-"), |file| alloc::format!("{file}"));
        let _ = writeln!(
            text,
            "victim\tblock {}\tfile {owner}\tfile_block {}\t{}\treferences {}",
            victim.block,
            victim.file_block,
            if victim.dirty { "dirty" } else { "clean" },
            victim.references
        );
    }
    Ok(text)
}
