//! Dispatcher microbenchmarks (SPIN §5): the cost of raising an event with 0 and 1
//! bindings, with N predicate guards (all false / one true) and with declarative guards,
//! next to the direct and indirect call baselines measured in the same run.
//!
//! Each configuration gets a fresh dispatcher with the kernel's platform hooks and the
//! synthetic `bench.Probe` event. Raises go through [`crate::events::raise`], exactly as
//! core services raise (a no-preemption section around the table's raise); the bare
//! table raise is reported too. Instruction accounting is off unless a row says `acct`.

use alloc::sync::Arc;
use alloc::vec::Vec;

use spindle_abi::event::{BENCH_PROBE, EventRecord, Probe, ProbeResult, field_index};

use spindle_dispatch::{BindingSpec, DeclarativeGuard, Dispatcher, EventTable, Mode, PredicateGuard, handler_fn};

use super::{DEFAULT_ITERATIONS, measure, report};

const KEY_FIELD: usize = match field_index(Probe::FIELDS, "key") {
    Some(index) => index,
    None => panic!("Probe has no key field"),
};


struct Setup {
    // Keeps the dispatcher (and so the table's registration) alive while measuring.
    _dispatcher: Dispatcher,
    table: Arc<EventTable<Probe, ProbeResult>>,
}

fn setup(bindings: impl FnOnce(&Dispatcher)) -> Setup {
    let dispatcher = crate::events::new_dispatcher();
    let table = dispatcher.register(&BENCH_PROBE, Arc::new(crate::events::probe::ProbeService)).expect("fresh dispatcher");
    table.set_instruction_accounting(false);
    bindings(&dispatcher);
    Setup { _dispatcher: dispatcher, table }
}

fn add_one() -> BindingSpec<Probe, ProbeResult> {
    BindingSpec::new("bench", handler_fn("bench.add-one", |probe: &Probe| Ok(ProbeResult { value: probe.value + 1 })))
}

fn install(dispatcher: &Dispatcher, spec: BindingSpec<Probe, ProbeResult>) {
    dispatcher.install(&BENCH_PROBE, spec).expect("bench binding refused");
}

fn measure_raise(group: &str, name: &str, setup: &Setup, key: u64) {
    let iterations = DEFAULT_ITERATIONS;
    let table = &setup.table;
    let cost = measure(iterations, |index| {
        let result = crate::events::raise(table, &core::hint::black_box(Probe { key, value: index }));
        core::hint::black_box(result);
    });
    report(group, name, iterations, cost);
}

/// Runs the dispatcher rows.
pub fn run() {
    let group = "dispatch";
    let iterations = DEFAULT_ITERATIONS;

    let empty = setup(|_| {});
    measure_raise(group, "raise-default-only", &empty, 0);

    let one = setup(|dispatcher| install(dispatcher, add_one()));
    measure_raise(group, "raise-1-binding", &one, 0);
    let table = &one.table;
    let bare = measure(iterations, |index| {
        core::hint::black_box(table.raise(&core::hint::black_box(Probe { key: 0, value: index })));
    });
    report(group, "table-raise-1-binding-no-preempt-guard", iterations, bare);
    one.table.set_instruction_accounting(true);
    measure_raise(group, "raise-1-binding-acct", &one, 0);

    // The same handler as one bounded binding (the mode every loaded extension runs in):
    // what the budget and the recovery point add to a raise.
    let budget = crate::time::budget_from_micros(100);
    let bounded = setup(|dispatcher| install(dispatcher, add_one().mode(Mode::Bounded { budget })));
    measure_raise(group, "raise-1-bounded-binding", &bounded, 0);
    bounded.table.set_instruction_accounting(true);
    measure_raise(group, "raise-1-bounded-binding-acct", &bounded, 0);

    for count in [1u64, 8, 64] {
        let guarded = setup(|dispatcher| {
            for key in 0..count {
                let guard = PredicateGuard::new("key == k", move |probe: &Probe| probe.key == key + 1);
                install(dispatcher, add_one().guard(guard));
            }
        });
        measure_raise(group, &alloc::format!("raise-{count}-predicate-all-false"), &guarded, 0);
        measure_raise(group, &alloc::format!("raise-{count}-predicate-one-true"), &guarded, count);
    }

    let single_declarative = setup(|dispatcher| install(dispatcher, add_one().when(DeclarativeGuard::equals(KEY_FIELD, 1))));
    measure_raise(group, "raise-1-declarative-true", &single_declarative, 1);
    measure_raise(group, "raise-1-declarative-false", &single_declarative, 0);

    let declarative: Vec<u64> = (1..=64).collect();
    let many = setup(|dispatcher| {
        for &key in &declarative {
            install(dispatcher, add_one().when(DeclarativeGuard::equals(KEY_FIELD, key)));
        }
    });
    measure_raise(group, "raise-64-declarative-one-true", &many, 64);
    measure_raise(group, "raise-64-declarative-all-false", &many, 0);
}
