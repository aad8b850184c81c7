//! Extension-technology costs (Small & Seltzer '96): the same trivial handler — `faulty`'s
//! `KEY_ANSWER` binding on `bench.Probe` (`value * 2`) — raised through the kernel
//! dispatcher as built-in, native and Wasm, and what loading costs per technology (Wasm:
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
fn measure_load(preference: Preference) -> Option<u64> {
    let mut total = 0u64;
    for _ in 0..LOAD_ITERATIONS {
        let (cost, loaded) = csr::without_interrupts(|| {
            let start = csr::instret();
            let loaded = ext::load("faulty", preference);
            (csr::instret() - start, loaded)
        });
        if let Err(error) = loaded {
            crate::println!("bench: loading faulty ({}) failed: {error}", preference.label());
            return None;
        }
        total += cost as u64;
        let _ = ext::unload("faulty");
        crate::events::quiescent();
        crate::events::reclaim();
    }
    Some(total * 1000 / LOAD_ITERATIONS)
}

/// Runs the extension-cost rows.
pub fn run() {
    let group = "extension-cost";
    for preference in [Preference::BuiltIn, Preference::Native, Preference::Wasm] {
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
        let cost = measure(iterations, |index| {
            let value = index & 0xffff;
            if crate::events::probe::raise(faulty::KEY_ANSWER, value) != value * 2 {
                wrong += 1;
            }
        });
        let _ = ext::unload("faulty");
        if wrong > 0 {
            crate::println!("bench: faulty ({name}) answered {wrong} of {iterations} probes wrongly; row withheld");
            continue;
        }
        report(group, &alloc::format!("probe-answer-{name}"), iterations, cost);
    }
}
