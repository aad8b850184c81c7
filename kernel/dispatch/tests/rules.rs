//! One test (or a few) per dispatcher rule, through the public API.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use spindle_abi::event::{CONSOLE_LINE, ConsoleLine, ConsoleVerdict, EventId, EventRecord};
use spindle_abi::fingerprint_of;
use spindle_dispatch::{
    Authorization, BindingSpec, Combiner, DeclarativeGuard, Fault, GuardKind, Handler, HandlerDescription,
    HandlerFault, InstallError, InstallRequest, Mode, Order, PredicateGuard, PrimaryModule, Refusal, RegisterError,
    ResultRejection, Technology, UpdateError, handler_fn,
};

/// A handler that logs its name into a shared log and answers `value`.
fn logging(log: &Arc<Mutex<Vec<String>>>, name: &'static str, value: u64) -> Arc<dyn Handler<Packet, Answer>> {
    let log = log.clone();
    handler_fn(name, move |_: &Packet| {
        log.lock().unwrap().push(name.to_string());
        Ok(Answer { value })
    })
}

fn install_values(table: &spindle_dispatch::EventTable<Packet, Answer>, values: &[u64]) {
    for &value in values {
        table.install(BindingSpec::new("ext", answer(value))).unwrap();
    }
}

#[test]
fn no_binding_yields_the_default_and_counts_it() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    assert_eq!(table.raise(&packet(1, 1)), DEFAULT_ANSWER);
    let snapshot = table.snapshot();
    assert_eq!((snapshot.raises, snapshot.defaulted), (1, 1));
}

#[test]
fn combiner_last_returns_the_last_result() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    install_values(&table, &[5, 7, 3]);
    assert_eq!(table.raise(&packet(0, 0)).value, 3);
}

#[test]
fn combiner_first_runs_only_the_first_candidate() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::First));
    install_values(&table, &[5, 7, 3]);
    assert_eq!(table.raise(&packet(0, 0)).value, 5);
    let snapshot = table.snapshot();
    let calls: Vec<u64> = snapshot.bindings.iter().map(|binding| binding.counters.invocations).collect();
    assert_eq!(calls, [1, 0, 0]);
}

#[test]
fn combiner_first_non_default_skips_defaults_and_stops() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::FirstNonDefault));
    install_values(&table, &[DEFAULT_ANSWER.value, 8, 9]);
    assert_eq!(table.raise(&packet(0, 0)).value, 8);
    let calls: Vec<u64> = table.snapshot().bindings.iter().map(|binding| binding.counters.invocations).collect();
    assert_eq!(calls, [1, 1, 0]);
}

#[test]
fn combiner_all_folds_every_result() {
    let (_dispatcher, table) =
        packet_table(TestPrimary::new(Combiner::All { fold: |a, b| Answer { value: a.value * 10 + b.value } }));
    install_values(&table, &[1, 2, 3]);
    assert_eq!(table.raise(&packet(0, 0)).value, 123);
}

#[test]
fn combiners_min_max_and_vote() {
    for (combiner, expected) in [(Combiner::Min, 2), (Combiner::Max, 9), (Combiner::Vote, 4)] {
        let (_dispatcher, table) = packet_table(TestPrimary::new(combiner));
        install_values(&table, &[4, 9, 2, 4, 9, 4]);
        assert_eq!(table.raise(&packet(0, 0)).value, expected, "{}", combiner.name());
    }
}

#[test]
fn bindings_run_first_then_by_priority_then_last() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let log = Arc::new(Mutex::new(Vec::new()));
    let orders = [
        ("last-a", Order::Last),
        ("low", Order::Priority(-5)),
        ("first-a", Order::First),
        ("high", Order::Priority(10)),
        ("zero-a", Order::Priority(0)),
        ("last-b", Order::Last),
        ("first-b", Order::First),
        ("zero-b", Order::default()),
    ];
    for (name, order) in orders {
        table.install(BindingSpec::new("ext", logging(&log, name, 0)).order(order)).unwrap();
    }
    table.raise(&packet(0, 0));
    let ran = log.lock().unwrap().clone();
    assert_eq!(ran, ["first-b", "first-a", "high", "zero-a", "zero-b", "low", "last-a", "last-b"]);
    // Introspection lists bindings in run order too.
    let names: Vec<String> = table.snapshot().bindings.iter().map(|binding| binding.handler.name.clone()).collect();
    assert_eq!(names, ran);
}

#[test]
fn predicate_guards_run_in_order_and_stop_at_the_first_false() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let log = Arc::new(Mutex::new(Vec::new()));
    let guard = |name: &'static str, verdict: fn(&Packet) -> bool| {
        let log = log.clone();
        PredicateGuard::new(name, move |args: &Packet| {
            log.lock().unwrap().push(name.to_string());
            verdict(args)
        })
    };
    let id = table
        .install(
            BindingSpec::new("ext", answer(1))
                .guard(guard("even port", |args| args.port % 2 == 0))
                .guard(guard("short", |args| args.length < 10)),
        )
        .unwrap();
    assert_eq!(table.raise(&packet(2, 5)).value, 1);
    assert_eq!(table.raise(&packet(3, 5)), DEFAULT_ANSWER, "first guard false");
    assert_eq!(table.raise(&packet(2, 50)), DEFAULT_ANSWER, "second guard false");
    assert_eq!(*log.lock().unwrap(), ["even port", "short", "even port", "even port", "short"]);
    let snapshot = table.snapshot();
    let binding = snapshot.binding(id).unwrap();
    assert_eq!((binding.counters.invocations, binding.counters.guard_rejections), (1, 2));
    assert_eq!(snapshot.guard_evaluations, 5);
    assert_eq!(snapshot.defaulted, 2);
}

#[test]
fn imposed_predicate_guards_run_before_the_installers_own() {
    let mut primary = TestPrimary::new(Combiner::Last);
    primary.impose_length_below = Some(100);
    let log = primary.log.clone();
    let (_dispatcher, table) = packet_table(primary);
    let own_log = log.clone();
    let id = table
        .install(BindingSpec::new("ext", answer(1)).guard(PredicateGuard::new("own", move |_: &Packet| {
            own_log.lock().unwrap().push("own".into());
            true
        })))
        .unwrap();
    log.lock().unwrap().clear();
    assert_eq!(table.raise(&packet(0, 5)).value, 1);
    assert_eq!(table.raise(&packet(0, 500)), DEFAULT_ANSWER, "imposed guard refuses");
    // The installer's guard never saw the raise its primary module filtered out.
    assert_eq!(*log.lock().unwrap(), ["imposed", "own", "imposed"]);
    let guards = &table.snapshot().binding(id).unwrap().guards.clone();
    assert_eq!((guards[0].text.as_str(), guards[0].imposed), ("length below limit", true));
    assert_eq!((guards[1].text.as_str(), guards[1].imposed), ("own", false));
}

#[test]
fn imposed_declarative_guard_narrows_a_binding() {
    let mut primary = TestPrimary::new(Combiner::Last);
    primary.impose_port = Some(("tenant", 80));
    let (_dispatcher, table) = packet_table(primary);
    let id = table.install(BindingSpec::new("tenant", answer(7))).unwrap();
    assert_eq!(table.raise(&packet(80, 0)).value, 7);
    assert_eq!(table.raise(&packet(81, 0)), DEFAULT_ANSWER);
    let snapshot = table.snapshot();
    let guard = &snapshot.binding(id).unwrap().guards[0];
    assert_eq!((guard.text.as_str(), guard.imposed, guard.kind), ("port == 80", true, GuardKind::Indexed));
    assert!(snapshot.to_string().contains("when port == 80 [indexed] (imposed)"), "{snapshot}");
}

#[test]
fn declarative_index_runs_only_matching_bindings_without_evaluating_guards() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let mut ids = Vec::new();
    for port in 0..64 {
        ids.push(table.install(BindingSpec::new("ext", answer(port)).when(DeclarativeGuard::equals(PORT, port))).unwrap());
    }
    for port in [0, 17, 63] {
        assert_eq!(table.raise(&packet(port, 0)).value, port);
    }
    assert_eq!(table.raise(&packet(64, 0)), DEFAULT_ANSWER);
    let snapshot = table.snapshot();
    assert_eq!(snapshot.guard_evaluations, 0, "the index answers; no guard is evaluated one by one");
    for (port, binding) in snapshot.bindings.iter().enumerate() {
        let expected = u64::from([0, 17, 63].contains(&port));
        assert_eq!(binding.counters.invocations, expected, "port {port}");
        assert_eq!(binding.counters.guard_rejections, 0);
        assert_eq!(binding.guards[0].kind, GuardKind::Indexed);
    }
    assert_eq!(snapshot.defaulted, 1);
}

#[test]
fn would_run_follows_the_index_and_counts_what_it_spares_as_defaulted() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    assert!(!table.would_run(&packet(80, 0)), "nothing bound");
    table.install(BindingSpec::new("ext", answer(80)).when(DeclarativeGuard::equals(PORT, 80))).unwrap();
    assert!(table.would_run(&packet(80, 0)));
    assert!(!table.would_run(&packet(81, 0)), "the index names no candidate for port 81");
    assert_eq!(table.snapshot().defaulted, 2, "each spared raise is a defaulted raise");
    let guard = PredicateGuard::new("port is odd", |args: &Packet| args.port % 2 == 1);
    table.install(BindingSpec::new("ext", answer(1)).guard(guard)).unwrap();
    assert!(table.would_run(&packet(82, 0)), "an unindexed binding is a candidate for every raise (its guard is not evaluated)");
    assert_eq!(table.snapshot().guard_evaluations, 0);
}

#[test]
fn predicate_guards_are_evaluated_one_by_one_for_contrast() {
    // The same 64 bindings as predicates: the counter that stayed 0 above must move here,
    // which shows the index test can fail.
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    for port in 0..64 {
        let guard = PredicateGuard::new("port matches", move |args: &Packet| args.port == port);
        table.install(BindingSpec::new("ext", answer(port)).guard(guard)).unwrap();
    }
    assert_eq!(table.raise(&packet(17, 0)).value, 17);
    let snapshot = table.snapshot();
    assert_eq!(snapshot.guard_evaluations, 64);
    assert_eq!(snapshot.totals().guard_rejections, 63);
}

#[test]
fn range_mask_and_combined_declarative_guards() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::All { fold: |a, b| Answer { value: a.value + b.value } }));
    let range = table.install(BindingSpec::new("ext", answer(1)).when(DeclarativeGuard::in_range(PORT, 10, 20))).unwrap();
    let mask = table.install(BindingSpec::new("ext", answer(10)).when(DeclarativeGuard::mask(LENGTH, 1, 1))).unwrap();
    let both = table
        .install(
            BindingSpec::new("ext", answer(100))
                .when(DeclarativeGuard::in_range(PORT, 15, 30))
                .when(DeclarativeGuard::equals(LENGTH, 4)),
        )
        .unwrap();
    let unguarded = table.install(BindingSpec::new("ext", answer(1000))).unwrap();
    assert_eq!(table.raise(&packet(12, 3)).value, 1011);
    assert_eq!(table.raise(&packet(16, 4)).value, 1101);
    assert_eq!(table.raise(&packet(25, 4)).value, 1100);
    assert_eq!(table.raise(&packet(25, 5)).value, 1010);
    let snapshot = table.snapshot();
    let kinds = |id| snapshot.binding(id).unwrap().guards.iter().map(|guard| guard.kind).collect::<Vec<_>>();
    assert_eq!(kinds(range), [GuardKind::Indexed]);
    assert_eq!(kinds(mask), [GuardKind::Declarative], "masks are not indexed");
    assert_eq!(kinds(both), [GuardKind::Declarative, GuardKind::Indexed], "equality is the preferred key");
    assert!(kinds(unguarded).is_empty());
}

#[test]
fn invalid_guards_are_refused_before_the_primary_is_asked() {
    let primary = TestPrimary::new(Combiner::Last);
    let log = primary.log.clone();
    let (_dispatcher, table) = packet_table(primary);
    let bad_field = table.install(BindingSpec::new("ext", answer(1)).when(DeclarativeGuard::equals(9, 1)));
    assert_eq!(bad_field, Err(InstallError::UnknownField { field: 9, field_count: 2 }));
    let empty = table.install(BindingSpec::new("ext", answer(1)).when(DeclarativeGuard::in_range(PORT, 5, 4)));
    assert_eq!(empty, Err(InstallError::EmptyRange { field: PORT }));
    assert!(log.lock().unwrap().is_empty());
    assert_eq!(table.binding_count(), 0);
}

#[test]
fn primary_module_refusal_carries_its_reason() {
    let mut primary = TestPrimary::new(Combiner::Last);
    primary.refuse_owner = Some(("intruder", Refusal::GuardRequired));
    let (_dispatcher, table) = packet_table(primary);
    let refused = table.install(BindingSpec::new("intruder", answer(1)));
    assert_eq!(refused, Err(InstallError::Refused(Refusal::GuardRequired)));
    assert_eq!(refused.unwrap_err().to_string(), "refused by primary module: a guard is required");
    assert_eq!(table.binding_count(), 0);
    assert!(table.install(BindingSpec::new("friend", answer(1))).is_ok());
}

#[test]
fn async_is_refused_and_bounded_needs_an_executor_and_a_budget() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let spec = |mode| BindingSpec::new("ext", answer(1)).mode(mode);
    assert_eq!(table.install(spec(Mode::Async)), Err(InstallError::AsyncUnsupported), "no async executor");
    assert_eq!(table.install(spec(Mode::Bounded { budget: 0 })), Err(InstallError::ZeroBudget));

    let no_executor = spindle_dispatch::Dispatcher::new(spindle_dispatch::Platform::new(fake_instruction_counter, 1));
    let table = no_executor.register(&PACKET, Arc::new(TestPrimary::new(Combiner::Last))).unwrap();
    assert_eq!(table.install(spec(Mode::Bounded { budget: 10 })), Err(InstallError::BoundedUnsupported));
    assert_eq!(table.binding_count(), 0);
}

/// A handler that burns `cost` fake instructions and answers `value`.
fn costly(cost: u64, value: u64) -> Arc<dyn Handler<Packet, Answer>> {
    handler_fn("costly", move |_: &Packet| {
        burn(cost);
        Ok(Answer { value })
    })
}

#[test]
fn bounded_overrun_yields_the_default_and_is_counted() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let fits = table.install(BindingSpec::new("ext", costly(10, 1)).mode(Mode::Bounded { budget: 100 })).unwrap();
    assert_eq!(table.raise(&packet(0, 0)).value, 1);
    table.uninstall(fits).unwrap();
    let overruns = table.install(BindingSpec::new("ext", costly(1000, 2)).mode(Mode::Bounded { budget: 100 })).unwrap();
    assert_eq!(table.raise(&packet(0, 0)), DEFAULT_ANSWER);
    let snapshot = table.snapshot();
    let binding = snapshot.binding(overruns).unwrap();
    assert_eq!((binding.counters.invocations, binding.counters.faults, binding.counters.overruns), (1, 1, 1));
    assert_eq!(binding.last_fault, Some(Fault::Handler(HandlerFault::Overrun { budget: 100 })));
    assert!(binding.counters.instructions >= 1000);
}

#[test]
fn primary_budget_cap_forces_bounded_mode() {
    let mut primary = TestPrimary::new(Combiner::Last);
    primary.budget_cap = Some(50);
    let (_dispatcher, table) = packet_table(primary);
    let sync = table.install(BindingSpec::new("ext", costly(500, 1))).unwrap();
    let generous = table.install(BindingSpec::new("ext", costly(1, 2)).mode(Mode::Bounded { budget: 5000 })).unwrap();
    let snapshot = table.snapshot();
    assert_eq!(snapshot.binding(sync).unwrap().mode, Mode::Bounded { budget: 50 });
    assert_eq!(snapshot.binding(sync).unwrap().requested_mode, Mode::Sync);
    assert_eq!(snapshot.binding(generous).unwrap().mode, Mode::Bounded { budget: 50 });
    // The capped sync binding overruns; the last (cheap) one answers.
    assert_eq!(table.raise(&packet(0, 0)).value, 2);
    assert_eq!(table.snapshot().binding(sync).unwrap().counters.overruns, 1);
}

/// A handler that fails with a trap while `failing` is non-zero, else answers 5.
fn flaky(failing: &Arc<AtomicU64>) -> Arc<dyn Handler<Packet, Answer>> {
    let failing = failing.clone();
    handler_fn("flaky", move |_: &Packet| {
        if failing.load(Ordering::Relaxed) != 0 {
            Err(HandlerFault::Trapped { cause: 13 })
        } else {
            Ok(Answer { value: 5 })
        }
    })
}

#[test]
fn faults_yield_the_default_and_the_breaker_disables_after_three_in_a_row() {
    let (dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let failing = Arc::new(AtomicU64::new(1));
    let id = table.install(BindingSpec::new("ext", flaky(&failing))).unwrap();
    // Two faults, a success (streak reset), then three faults trip the breaker.
    assert_eq!(table.raise(&packet(0, 0)), DEFAULT_ANSWER);
    assert_eq!(table.raise(&packet(0, 0)), DEFAULT_ANSWER);
    failing.store(0, Ordering::Relaxed);
    assert_eq!(table.raise(&packet(0, 0)).value, 5);
    assert_eq!(table.snapshot().binding(id).unwrap().consecutive_faults, 0);
    failing.store(1, Ordering::Relaxed);
    for _ in 0..3 {
        assert_eq!(table.raise(&packet(0, 0)), DEFAULT_ANSWER);
    }
    let snapshot = table.snapshot();
    let binding = snapshot.binding(id).unwrap();
    let reason = binding.disabled.expect("breaker tripped");
    assert_eq!(reason.consecutive_faults, 3);
    assert_eq!(reason.fault, Fault::Handler(HandlerFault::Trapped { cause: 13 }));
    assert!(snapshot.to_string().contains("DISABLED after 3 faults: trapped (cause 0xd)"), "{snapshot}");
    // Disabled: not invoked any more, even when it would now succeed.
    failing.store(0, Ordering::Relaxed);
    assert_eq!(table.raise(&packet(0, 0)), DEFAULT_ANSWER);
    assert_eq!(table.snapshot().binding(id).unwrap().counters.invocations, 6);
    // Re-enabled by the operator.
    dispatcher.enable(id).unwrap();
    assert_eq!(table.raise(&packet(0, 0)).value, 5);
    assert_eq!(table.snapshot().binding(id).unwrap().counters.faults, 5);
}

#[test]
fn a_single_candidate_after_the_index_follows_the_general_rules() {
    // With accounting off, a raise whose index lookup leaves one binding that needs no
    // further check calls it directly; results, faults, the breaker and the counters must
    // be what the general path gives.
    let (dispatcher, table) = packet_table(TestPrimary::new(Combiner::FirstNonDefault));
    table.set_instruction_accounting(false);
    let failing = Arc::new(AtomicU64::new(1));
    let flaky_spec = BindingSpec::new("ext", flaky(&failing)).when(DeclarativeGuard::equals(PORT, 1));
    let flaky_id = table.install(flaky_spec).unwrap();
    let other = table.install(BindingSpec::new("ext", answer(2)).when(DeclarativeGuard::equals(PORT, 2))).unwrap();
    assert_eq!(table.raise(&packet(2, 0)).value, 2);
    // A fault, then a success that ends the streak, then three faults trip the breaker.
    assert_eq!(table.raise(&packet(1, 0)), DEFAULT_ANSWER);
    failing.store(0, Ordering::Relaxed);
    assert_eq!(table.raise(&packet(1, 0)).value, 5);
    assert_eq!(table.snapshot().binding(flaky_id).unwrap().consecutive_faults, 0);
    failing.store(1, Ordering::Relaxed);
    for _ in 0..3 {
        assert_eq!(table.raise(&packet(1, 0)), DEFAULT_ANSWER);
    }
    assert!(table.snapshot().binding(flaky_id).unwrap().disabled.is_some(), "breaker tripped");
    failing.store(0, Ordering::Relaxed);
    assert_eq!(table.raise(&packet(1, 0)), DEFAULT_ANSWER, "disabled: not run");
    assert_eq!(table.raise(&packet(3, 0)), DEFAULT_ANSWER, "no candidate");
    let snapshot = table.snapshot();
    let flaky_counters = snapshot.binding(flaky_id).unwrap().counters;
    assert_eq!((flaky_counters.invocations, flaky_counters.faults), (5, 4));
    assert_eq!(snapshot.binding(other).unwrap().counters.invocations, 1);
    assert_eq!((snapshot.raises, snapshot.defaulted, snapshot.guard_evaluations), (8, 2, 0));
    dispatcher.enable(flaky_id).unwrap();
    assert_eq!(table.raise(&packet(1, 0)).value, 5);
}

#[test]
fn a_faulting_binding_contributes_the_default_among_others() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::All { fold: |a, b| Answer { value: a.value + b.value } }));
    let failing = Arc::new(AtomicU64::new(1));
    table.install(BindingSpec::new("ext", answer(1))).unwrap();
    table.install(BindingSpec::new("ext", flaky(&failing))).unwrap();
    assert_eq!(table.raise(&packet(0, 0)).value, 1 + DEFAULT_ANSWER.value);
}

#[test]
fn results_are_validated_and_invalid_ones_count_as_faults() {
    let mut primary = TestPrimary::new(Combiner::Max);
    primary.reject_above = Some(100);
    let (_dispatcher, table) = packet_table(primary);
    let good = table.install(BindingSpec::new("ext", answer(40))).unwrap();
    let bad = table.install(BindingSpec::new("ext", answer(5_000_000))).unwrap();
    // The bad result is replaced by the default (1_000_000), which max then picks: the
    // point is that 5_000_000 never reaches the raiser.
    assert_eq!(table.raise(&packet(0, 0)), DEFAULT_ANSWER);
    table.uninstall(good).unwrap();
    assert_eq!(table.raise(&packet(0, 0)), DEFAULT_ANSWER, "single binding, still validated");
    let snapshot = table.snapshot();
    let binding = snapshot.binding(bad).unwrap();
    assert_eq!(binding.counters.faults, 2);
    assert_eq!(binding.last_fault, Some(Fault::InvalidResult(ResultRejection { reason: "value too large" })));
}

#[test]
fn uninstall_stops_a_binding_and_releases_its_handler() {
    let (dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let handler = Arc::new(Counting::default());
    let id = table.install(BindingSpec::new("ext", handler.clone())).unwrap();
    assert_eq!(Arc::strong_count(&handler), 2);
    table.raise(&packet(0, 0));
    dispatcher.uninstall(id).unwrap();
    assert_eq!(table.raise(&packet(0, 0)), DEFAULT_ANSWER);
    assert_eq!(handler.calls.load(Ordering::Relaxed), 1);
    assert_eq!(Arc::strong_count(&handler), 2, "the retired plan waits for a grace period");
    settle(&dispatcher);
    assert_eq!(Arc::strong_count(&handler), 1, "no plan or list keeps the handler alive");
    assert_eq!(dispatcher.uninstall(id), Err(UpdateError::UnknownBinding(id)));
    assert_eq!(table.snapshot().removed.invocations, 1, "removed bindings' counters are kept");
}

#[test]
fn replace_swaps_handlers_and_releases_the_old_one() {
    let (dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let old = Arc::new(Counting::default());
    let new = Arc::new(Counting::default());
    let old_id = table.install(BindingSpec::new("ext", old.clone()).order(Order::Last)).unwrap();
    let new_id = dispatcher.replace(&PACKET, old_id, BindingSpec::new("ext", new.clone()).order(Order::Last)).unwrap();
    assert_ne!(old_id, new_id);
    table.raise(&packet(0, 0));
    assert_eq!((old.calls.load(Ordering::Relaxed), new.calls.load(Ordering::Relaxed)), (0, 1));
    settle(&dispatcher);
    assert_eq!(Arc::strong_count(&old), 1);
    assert_eq!(table.replace(old_id, BindingSpec::new("ext", answer(1))), Err(InstallError::UnknownBinding(old_id)));
    table.uninstall(new_id).unwrap();
    settle(&dispatcher);
    assert_eq!(Arc::strong_count(&new), 1);
}

#[test]
fn introspection_counts_invocations_instructions_and_raises() {
    let (dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let id = table.install(BindingSpec::new("ext", costly(100, 1))).unwrap();
    for _ in 0..10 {
        table.raise(&packet(0, 0));
    }
    let binding = table.snapshot().binding(id).unwrap().counters;
    assert_eq!(binding.invocations, 10);
    assert!((1000..1100).contains(&binding.instructions), "{}", binding.instructions);
    // Accounting off: the counter stops moving (the fast path skips the counter reads).
    dispatcher.set_instruction_accounting(PACKET.id(), false).unwrap();
    table.raise(&packet(0, 0));
    let snapshot = table.snapshot();
    assert!(!snapshot.instruction_accounting);
    assert_eq!(snapshot.binding(id).unwrap().counters.instructions, binding.instructions);
    assert_eq!(snapshot.binding(id).unwrap().counters.invocations, 11);
    assert_eq!(snapshot.raises, 11);
    assert_eq!(snapshot.owner, "test-primary");
    assert_eq!(snapshot.combiner, "last");
    assert_eq!(snapshot.declaration, "1000 test.Packet(Packet) -> Answer");
    let text = snapshot.to_string();
    assert!(text.contains("test.Packet owner=test-primary combiner=last raises=11"), "{text}");
    assert!(text.contains("BuiltIn:costly sync priority(0) calls=11"), "{text}");
}

#[test]
fn dispatcher_checks_registration_and_declarations() {
    let dispatcher = dispatcher();
    dispatcher.register(&PACKET, Arc::new(TestPrimary::new(Combiner::Last))).unwrap();
    assert_eq!(
        dispatcher.register(&PACKET, Arc::new(TestPrimary::new(Combiner::Last))).err(),
        Some(RegisterError::DuplicateId(EventId(1000)))
    );
    // An extension built against a different declaration of event 1000.
    spindle_abi::declare_records! {
        /// Another layout.
        struct Stale {
            /// Only one field.
            port: u32,
        }
    }
    spindle_abi::declare_events! {
        /// Stale events.
        list STALE_EVENTS;
        /// Same id and name, other argument type.
        event STALE_PACKET = 1000, "test.Packet", fn(Stale) -> Answer;
    }
    let stale = dispatcher.install(&STALE_PACKET, BindingSpec::new("ext", handler_fn("stale", |_: &Stale| Ok(Answer::default()))));
    assert!(matches!(stale, Err(InstallError::SignatureMismatch { .. })), "{stale:?}");
    let unknown = dispatcher.install(&WHO, BindingSpec::new("ext", handler_fn("who", |_: &Packet| Ok(Seen::default()))));
    assert_eq!(unknown, Err(InstallError::UnknownEvent(EventId(1001))));
    assert_eq!(dispatcher.uninstall(spindle_dispatch::BindingId { event: EventId(7), serial: 1 }), Err(UpdateError::UnknownEvent(EventId(7))));
}

#[test]
fn killing_an_owner_removes_its_bindings_on_every_event() {
    let dispatcher = dispatcher();
    let packets = dispatcher.register(&PACKET, Arc::new(TestPrimary::new(Combiner::Last))).unwrap();
    let who = dispatcher.register(&WHO, Arc::new(WhoPrimary)).unwrap();
    packets.install(BindingSpec::new("doomed", answer(1))).unwrap();
    packets.install(BindingSpec::new("survivor", answer(2))).unwrap();
    who.install(BindingSpec::new("doomed", handler_fn("who", |_: &Packet| Ok(Seen { old: 1, new: 0 })))).unwrap();
    assert_eq!(dispatcher.uninstall_owner("doomed"), 2);
    assert_eq!(packets.raise(&packet(0, 0)).value, 2);
    assert_eq!(who.raise(&packet(0, 0)), Seen::default());
    let names: Vec<&str> = dispatcher.snapshot().iter().map(|event| event.name).collect();
    assert_eq!(names, ["test.Packet", "test.Who"]);
}

#[test]
fn handlers_may_raise_and_rebind_their_own_event_reentrantly() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let weak = Arc::downgrade(&table);
    let installed = Arc::new(AtomicU64::new(0));
    let installed_in_handler = installed.clone();
    table
        .install(BindingSpec::new(
            "ext",
            handler_fn("reentrant", move |args: &Packet| {
                let table = weak.upgrade().unwrap();
                if args.port == 0 {
                    // Install another binding mid-raise: this raise must not see it.
                    table.install(BindingSpec::new("ext", answer(99)).order(Order::Last)).unwrap();
                    installed_in_handler.fetch_add(1, Ordering::Relaxed);
                    // A nested raise sees the new plan.
                    return Ok(Answer { value: table.raise(&packet(1, 0)).value + 1 });
                }
                Ok(Answer { value: 10 })
            }),
        ))
        .unwrap();
    assert_eq!(table.raise(&packet(0, 0)).value, 100, "nested raise ran both bindings, the outer only its own");
    assert_eq!(installed.load(Ordering::Relaxed), 1);
    assert_eq!(table.binding_count(), 2);
}

#[test]
fn retired_handlers_are_freed_only_after_every_online_hart_reports() {
    let (dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    let handler = Arc::new(Counting::default());
    let id = table.install(BindingSpec::new("ext", handler.clone())).unwrap();
    table.uninstall(id).unwrap();
    for hart in 0..HARTS - 1 {
        // SAFETY: no raise is in progress in this test.
        unsafe { dispatcher.quiescent(hart) }.unwrap();
    }
    dispatcher.reclaim();
    assert_eq!(Arc::strong_count(&handler), 2, "the last hart has not reported");
    assert_eq!(table.snapshot().retired_plans, 2, "the install's plan and the uninstall's");
    // A parked hart can be taken out of the wait, and brought back.
    // SAFETY: "hart" HARTS - 1 runs nothing in this test.
    unsafe { dispatcher.hart_offline(HARTS - 1) }.unwrap();
    dispatcher.reclaim();
    assert_eq!(Arc::strong_count(&handler), 1);
    assert_eq!(table.snapshot().retired_plans, 0);
    dispatcher.hart_online(HARTS - 1).unwrap();
    // SAFETY: out-of-range harts are refused, not trusted.
    assert_eq!(unsafe { dispatcher.quiescent(HARTS) }, Err(spindle_dispatch::UnknownHart(HARTS)));
}

#[test]
fn fast_and_general_raises_are_both_counted() {
    let (dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    dispatcher.set_instruction_accounting(PACKET.id(), false).unwrap();
    let failing = Arc::new(AtomicU64::new(0));
    let id = table.install(BindingSpec::new("ext", flaky(&failing))).unwrap();
    table.raise(&packet(0, 0)); // fast path
    failing.store(1, Ordering::Relaxed);
    table.raise(&packet(0, 0)); // fast path, faults
    table.raise(&packet(0, 0)); // fault streak: general path
    failing.store(0, Ordering::Relaxed);
    table.raise(&packet(0, 0)); // general path, resets the streak
    table.raise(&packet(0, 0)); // fast path again
    dispatcher.set_instruction_accounting(PACKET.id(), true).unwrap();
    table.raise(&packet(0, 0)); // accounted single path
    table.install(BindingSpec::new("ext", answer(1)).when(DeclarativeGuard::equals(PORT, 5))).unwrap();
    table.raise(&packet(0, 0)); // general path, one candidate
    table.uninstall(id).unwrap();
    table.raise(&packet(9, 0)); // general path, no candidate
    settle(&dispatcher);
    let snapshot = table.snapshot();
    assert_eq!(snapshot.raises, 8);
    assert_eq!(snapshot.defaulted, 1);
    assert_eq!(snapshot.removed.invocations, 7);
    assert_eq!(snapshot.removed.faults, 2);
}

/// Console primary module: a line is claimed by the first handler that says so.
struct Console;

impl PrimaryModule<ConsoleLine, ConsoleVerdict> for Console {
    fn name(&self) -> &str {
        "console"
    }
    fn default_result(&self, _args: &ConsoleLine) -> ConsoleVerdict {
        ConsoleVerdict::UNCLAIMED
    }
    fn combiner(&self) -> Combiner<ConsoleVerdict> {
        Combiner::FirstNonDefault
    }
    fn authorize(
        &self,
        request: &InstallRequest<'_, ConsoleLine>,
    ) -> Result<Authorization<ConsoleLine>, Refusal> {
        // Extensions must claim a specific command.
        if request.declarative_guards.is_empty() {
            return Err(Refusal::GuardRequired);
        }
        Ok(Authorization::allow())
    }
}

#[test]
fn kernel_console_event_claims_commands_by_fingerprint() {
    let dispatcher = dispatcher();
    let console = dispatcher.register(&CONSOLE_LINE, Arc::new(Console)).unwrap();
    let command = spindle_abi::event::field_index(ConsoleLine::FIELDS, "command_fingerprint").unwrap();
    let claim = |tag| handler_fn("claim", move |_: &ConsoleLine| Ok(ConsoleVerdict { claimed: tag }));
    assert_eq!(
        dispatcher.install(&CONSOLE_LINE, BindingSpec::new("greedy", claim(1))),
        Err(InstallError::Refused(Refusal::GuardRequired))
    );
    for (word, tag) in [("hello", 2), ("md5", 3)] {
        let guard = DeclarativeGuard::equals(command, fingerprint_of(word).0);
        dispatcher.install(&CONSOLE_LINE, BindingSpec::new("ext", claim(tag)).when(guard)).unwrap();
    }
    let line = |word: &str| ConsoleLine {
        length: word.len() as u64,
        first_byte: u64::from(word.as_bytes()[0]),
        command_fingerprint: fingerprint_of(word).0,
        sequence: 1,
    };
    assert_eq!(console.raise(&line("md5")).claimed, 3);
    assert_eq!(console.raise(&line("hello")).claimed, 2);
    assert_eq!(console.raise(&line("events")), ConsoleVerdict::UNCLAIMED);
}

/// A handler that counts its calls.
#[derive(Default)]
struct Counting {
    calls: AtomicU64,
}

impl Handler<Packet, Answer> for Counting {
    fn invoke(&self, _args: &Packet) -> Result<Answer, HandlerFault> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(Answer { value: 3 })
    }
    fn describe(&self) -> HandlerDescription {
        HandlerDescription { technology: Technology::BuiltIn, name: "counting".into() }
    }
}

/// Primary module of `WHO`: sums contributions, so "both ran" and "neither ran" show.
pub struct WhoPrimary;

impl PrimaryModule<Packet, Seen> for WhoPrimary {
    fn name(&self) -> &str {
        "who"
    }
    fn default_result(&self, _args: &Packet) -> Seen {
        Seen::default()
    }
    fn combiner(&self) -> Combiner<Seen> {
        Combiner::All { fold: |a, b| Seen { old: a.old + b.old, new: a.new + b.new } }
    }
    fn authorize(&self, _request: &InstallRequest<'_, Packet>) -> Result<Authorization<Packet>, Refusal> {
        Ok(Authorization::allow())
    }
}

/// A bounded executor that counts the calls handed to it as a plain function
/// (`run_bounded_raw`: the single bounded binding's way) apart from the general loop's.
struct CountingExecutor {
    raw: AtomicU64,
}

impl spindle_dispatch::BoundedExecutor for CountingExecutor {
    fn run_bounded(&self, budget: u64, prepared: u64, body: &mut dyn FnMut() -> Result<(), HandlerFault>) -> Result<(), HandlerFault> {
        FakeExecutor.run_bounded(budget, prepared, body)
    }

    unsafe fn run_bounded_raw(
        &self,
        budget: u64,
        prepared: u64,
        counter: fn() -> u64,
        spent: Option<&mut u64>,
        function: unsafe extern "C" fn(*mut u8),
        data: *mut u8,
    ) -> Result<(), HandlerFault> {
        self.raw.fetch_add(1, Ordering::Relaxed);
        // SAFETY: this method's contract, forwarded.
        unsafe { spindle_dispatch::run_function_bounded(self, budget, prepared, counter, spent, function, data) }
    }
}

/// Raises on a table of bounded bindings keyed on the port, each with a residual guard
/// `length <= 9`; with `second_index`, one more binding keyed on the length makes the
/// table index two fields (candidates are then the union of two lookups).
fn one_bounded_candidate(second_index: bool) {
    // Its own executor (tests run in parallel): leaked, as a platform's is `'static`.
    let executor: &'static CountingExecutor = Box::leak(Box::new(CountingExecutor { raw: AtomicU64::new(0) }));
    let mut primary = TestPrimary::new(Combiner::FirstNonDefault);
    primary.reject_above = Some(100);
    let dispatcher = spindle_dispatch::Dispatcher::new(spindle_dispatch::Platform::new(fake_instruction_counter, HARTS).with_bounded_executor(executor));
    let table = dispatcher.register(&PACKET, Arc::new(primary)).unwrap();
    let bounded = |value: u64, port: u64, cost: u64| {
        BindingSpec::new("ext", costly(cost, value))
            .mode(Mode::Bounded { budget: 100 })
            .when(DeclarativeGuard::equals(PORT, port))
            .when(DeclarativeGuard::in_range(LENGTH, 0, 9))
    };
    let first = table.install(bounded(7, 1, 1)).unwrap();
    let second = table.install(bounded(8, 2, 1)).unwrap();
    let rejected = table.install(bounded(500, 3, 1)).unwrap();
    let overruns = table.install(bounded(9, 4, 1000)).unwrap();
    if second_index {
        table.install(BindingSpec::new("ext", answer(11)).mode(Mode::Bounded { budget: 100 }).when(DeclarativeGuard::equals(LENGTH, 77))).unwrap();
    }
    let raw = || executor.raw.load(Ordering::Relaxed);
    let before = raw();
    // The index leaves one candidate; its residual guard holds, or does not.
    assert_eq!(table.raise(&packet(1, 5)).value, 7);
    assert_eq!(table.raise(&packet(2, 5)).value, 8);
    assert_eq!(table.raise(&packet(2, 50)), DEFAULT_ANSWER, "the residual guard fails");
    assert_eq!(table.raise(&packet(5, 5)), DEFAULT_ANSWER, "no candidate");
    // A result the primary module rejects, and an overrun: the default, each a fault.
    assert_eq!(table.raise(&packet(3, 5)), DEFAULT_ANSWER);
    assert_eq!(table.raise(&packet(4, 5)), DEFAULT_ANSWER);
    assert_eq!(raw() - before, 4, "the four runs took the single bounded binding's way");
    // With a fault streak the candidate goes the general way (which knows streaks).
    assert_eq!(table.raise(&packet(4, 5)), DEFAULT_ANSWER);
    assert_eq!(raw() - before, 4, "a streaked candidate is run by the general loop");
    let snapshot = table.snapshot();
    assert_eq!((snapshot.raises, snapshot.defaulted), (7, 2), "every raise counted once");
    assert_eq!(snapshot.guard_evaluations, 6, "one residual guard per candidate");
    let counters = |id| snapshot.binding(id).unwrap().counters;
    assert_eq!((counters(first).invocations, counters(first).guard_rejections), (1, 0));
    assert_eq!((counters(second).invocations, counters(second).guard_rejections), (1, 1));
    assert_eq!((counters(rejected).invocations, counters(rejected).faults), (1, 1));
    assert_eq!((counters(overruns).invocations, counters(overruns).faults, counters(overruns).overruns), (2, 2, 2));
    assert_eq!(snapshot.binding(rejected).unwrap().last_fault, Some(Fault::InvalidResult(ResultRejection { reason: "value too large" })));
}

#[test]
fn one_bounded_candidate_after_the_index_runs_as_the_single_bounded_binding_does() {
    one_bounded_candidate(false);
}

#[test]
fn one_bounded_candidate_of_two_indexes_runs_as_the_single_bounded_binding_does() {
    one_bounded_candidate(true);
}
