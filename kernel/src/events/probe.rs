//! `bench.Probe` in the kernel dispatcher: a synthetic event that tests (and the
//! `probe` console command) raise to exercise extensions end to end; no core service
//! raises it.

use alloc::sync::Arc;

use spindle_abi::event::{BENCH_PROBE, Probe, ProbeResult};
use spindle_dispatch::{Combiner, EventTable, PrimaryModule};
use spin::Once;

/// The probe's primary module: default result 0, last result wins, anyone may bind.
pub struct ProbeService;

impl PrimaryModule<Probe, ProbeResult> for ProbeService {
    fn name(&self) -> &str {
        "probe"
    }
    fn default_result(&self, _: &Probe) -> ProbeResult {
        ProbeResult { value: 0 }
    }
    fn combiner(&self) -> Combiner<ProbeResult> {
        Combiner::Last
    }
}

static TABLE: Once<Arc<EventTable<Probe, ProbeResult>>> = Once::new();

/// Registers `bench.Probe`.
pub fn init() {
    let table = super::dispatcher().register(&BENCH_PROBE, Arc::new(ProbeService)).expect("bench.Probe registered twice");
    TABLE.call_once(|| table);
}

/// Raises `bench.Probe` and returns the combined result.
pub fn raise(key: u64, value: u64) -> u64 {
    match TABLE.get() {
        Some(table) => super::raise(table, &Probe { key, value }).value,
        None => 0,
    }
}
