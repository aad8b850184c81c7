//! Extension-technology costs (Small & Seltzer '96): the same trivial handler — `faulty`'s
//! `KEY_ANSWER` binding on `bench.Probe` (`value * 2`) — raised through the kernel
//! dispatcher as built-in, native, Wasm and user-level (an upcall into the serving
//! process), and what loading costs per technology (Wasm:
//! validate + compile + instantiate + describe + install, all at load, never per event).
//!
//! Each invocation row is a full `bench.Probe` raise (snapshot, guard index, bounded
//! executor, the technology's marshalling and call) minus the empty loop; the
//! `raise-default-only` row of the `dispatch` group is the raise without any binding.
//! Load rows are averaged over [`LOAD_ITERATIONS`] loads, each followed by an unload that
//! is not counted. Every invocation is checked to answer 42, so a broken technology
//! cannot post a fast number.

use super::{DEFAULT_ITERATIONS, measure, report};
use crate::arch::csr;
use crate::ext::{self, Preference};

/// Loads averaged per load row (each allocates and compiles; far fewer than calls).
const LOAD_ITERATIONS: u64 = 20;

/// Instructions ×1000 per load of `faulty` as `preference` (unloads not counted).
///
/// A user-level load starts a process and waits for it to register, so it runs with
/// interrupts on and its count is everything the hart executed meanwhile: the process's
/// creation, its own start-up in U-mode up to `upcall_serve`, the registration and
/// installation — and the timer ticks and idle loop in between (deterministic under
/// `-icount`). After each unload the test waits for the serving process to be reaped.
fn measure_load(preference: Preference) -> Option<u64> {
    let mut total = 0u64;
    for _ in 0..LOAD_ITERATIONS {
        let load = || {
            let start = csr::instret();
            let loaded = ext::load("faulty", preference);
            (csr::instret() - start, loaded)
        };
        let (cost, loaded) = if preference == Preference::User { load() } else { csr::without_interrupts(load) };
        if let Err(error) = loaded {
            crate::println!("bench: loading faulty ({}) failed: {error}", preference.label());
            return None;
        }
        total += cost as u64;
        let server = ext::user::serving_pid("faulty");
        let _ = ext::unload("faulty");
        crate::events::quiescent();
        crate::events::reclaim();
        if let Some(pid) = server {
            crate::proc::wait_until_reaped(pid, 200);
        }
    }
    Some(total * 1000 / LOAD_ITERATIONS)
}

/// Runs the extension-cost rows.
pub fn run() {
    let group = "extension-cost";
    for preference in [Preference::BuiltIn, Preference::Default, Preference::Wasm, Preference::User] {
        let name = preference.label();
        if let Some(cost) = measure_load(preference) {
            report(group, &alloc::format!("load-faulty-{name}"), LOAD_ITERATIONS, cost);
        }
        if let Err(error) = ext::load("faulty", preference) {
            crate::println!("bench: loading faulty ({name}) failed: {error}");
            continue;
        }
        let iterations = DEFAULT_ITERATIONS;
        let mut wrong = 0u64;
        let hardware = super::HardwareEvents::now();
        let cost = measure(iterations, |index| {
            let value = index & 0xffff;
            if crate::events::probe::raise(faulty::KEY_ANSWER, value) != value * 2 {
                wrong += 1;
            }
        });
        let row = alloc::format!("probe-answer-{name}");
        super::HardwareEvents::report_since(hardware, group, &row, iterations);
        let server = ext::user::serving_pid("faulty");
        let _ = ext::unload("faulty");
        if let Some(pid) = server {
            crate::proc::wait_until_reaped(pid, 200);
        }
        if wrong > 0 {
            crate::println!("bench: faulty ({name}) answered {wrong} of {iterations} probes wrongly; row withheld");
            continue;
        }
        report(group, &row, iterations, cost);
    }
}
