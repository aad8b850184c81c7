//! The clock service's event: `clock.Tick`, raised once per timer tick.
//!
//! The timer interrupt only counts ticks and wakes the clock strand; the strand raises
//! `clock.Tick` for each tick in thread context with interrupts on, so bounded handlers
//! are stopped by their budget timer and never run in interrupt context.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{CLOCK_TICK, ClockTick};
use spindle_dispatch::{Authorization, Combiner, EventTable, InstallRequest, PrimaryModule, Refusal};
use spin::Once;

use crate::sched::{self, Priority, Strand};

/// Budget imposed on every clock handler: 100,000 instructions (0.1 ms at 1 GHz).
pub const TICK_HANDLER_BUDGET: u64 = 100_000;

/// The clock service as primary module of `clock.Tick`.
struct ClockService;

impl PrimaryModule<ClockTick, ()> for ClockService {
    fn name(&self) -> &str {
        "clock"
    }
    fn default_result(&self, _: &ClockTick) {}
    fn combiner(&self) -> Combiner<()> {
        Combiner::Last
    }
    /// Anyone may watch the clock, but every handler runs bounded: a tick handler that
    /// loops must not stop time.
    fn authorize(&self, _: &InstallRequest<'_, ClockTick>) -> Result<Authorization<ClockTick>, Refusal> {
        Ok(Authorization::allow().cap_budget(TICK_HANDLER_BUDGET))
    }
}

static TABLE: Once<Arc<EventTable<ClockTick, ()>>> = Once::new();
static STRAND: Once<Arc<Strand>> = Once::new();
/// Ticks already raised as events.
static RAISED: AtomicU64 = AtomicU64::new(0);

/// Registers `clock.Tick` and starts the clock strand.
pub fn init() {
    let table = crate::events::dispatcher().register(&CLOCK_TICK, Arc::new(ClockService)).expect("clock.Tick registered twice");
    TABLE.call_once(|| table);
    if let Err(error) = super::add_tick_hook(on_tick) {
        crate::println!("[clock] clock.Tick will not be raised: {error}");
    }
    RAISED.store(crate::time::ticks(), Ordering::Relaxed);
    match sched::spawn("clock", Priority::HIGHEST, clock_strand) {
        Ok(strand) => {
            STRAND.call_once(|| strand);
        }
        Err(error) => crate::println!("[clock] no clock strand, clock.Tick will not be raised: {error}"),
    }
}

/// The `clock.Tick` table.
pub fn table() -> &'static Arc<EventTable<ClockTick, ()>> {
    TABLE.get().expect("clock not initialised")
}

/// Timer-tick hook (interrupt context): wakes the clock strand.
fn on_tick(_: u64) {
    if let Some(strand) = STRAND.get() {
        sched::unblock(strand);
    }
}

fn clock_strand() {
    loop {
        let now = crate::time::ticks();
        while RAISED.load(Ordering::Relaxed) < now {
            let tick = RAISED.fetch_add(1, Ordering::Relaxed) + 1;
            crate::events::raise(table(), &ClockTick { tick, hart: crate::arch::hart::id() as u64 });
        }
        sched::block_current();
    }
}

/// Domain `clock` of the kernel functions (`spindle_abi::host`).
impl spindle_abi::host::domains::Clock for crate::ext::glue::KernelFunctions {
    fn clock_ticks(&self) -> u64 {
        super::ticks()
    }

    fn clock_uptime_microseconds(&self) -> u64 {
        super::uptime_micros()
    }
}
