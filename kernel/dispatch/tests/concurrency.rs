//! Concurrency: atomic replacement and uninstallation while other threads raise.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use common::*;
use spindle_dispatch::{
    Authorization, BindingSpec, Combiner, DeclarativeGuard, EventTable, Handler, HandlerDescription, HandlerFault,
    InstallRequest, PrimaryModule, Refusal, Technology,
};

const RAISING_THREADS: usize = 4;
const RAISES_PER_THREAD: usize = 100_000;
/// How often a raising thread reports a quiescent state.
const QUIESCENT_EVERY: usize = 64;

/// Takes every hart but 0 out of grace-period tracking, as a kernel does before the other
/// harts are started: a raising thread brings its hart online when it starts running (an
/// OS thread, unlike a hart, may not run for a while) and offline when it is done.
fn park_unused_harts(dispatcher: &spindle_dispatch::Dispatcher) {
    for hart in 1..HARTS {
        // SAFETY: no thread has started playing these harts yet.
        unsafe { dispatcher.hart_offline(hart) }.unwrap();
    }
}

/// Primary module of `WHO`: sums contributions, so "both ran" and "neither ran" show up
/// in the result as {1, 1} and {0, 0}.
struct WhoPrimary;

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

/// Contributes `seen` and counts its calls.
struct Reporter {
    seen: Seen,
    calls: AtomicU64,
}

impl Reporter {
    fn new(old: u64, new: u64) -> Arc<Self> {
        Arc::new(Reporter { seen: Seen { old, new }, calls: AtomicU64::new(0) })
    }
}

impl Handler<Packet, Seen> for Reporter {
    fn invoke(&self, _args: &Packet) -> Result<Seen, HandlerFault> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(self.seen)
    }
    fn describe(&self) -> HandlerDescription {
        HandlerDescription { technology: Technology::BuiltIn, name: "reporter".into() }
    }
}

/// Raises `WHO` from several threads while the main thread replaces the "old" binding by
/// a "new" one and back, `replacements` times. Every raise must see exactly one of them.
/// `guarded` puts a guard on both (and adds a bystander binding) to exercise the general
/// path; otherwise the single-binding fast path runs.
fn replace_under_concurrent_raises(guarded: bool) {
    let dispatcher = dispatcher();
    let table: Arc<EventTable<Packet, Seen>> = dispatcher.register(&WHO, Arc::new(WhoPrimary)).unwrap();
    let old = Reporter::new(1, 0);
    let new = Reporter::new(0, 1);
    let bystander = Reporter::new(0, 0);
    let spec = move |handler: &Arc<Reporter>| {
        let spec = BindingSpec::new("ext", handler.clone() as Arc<dyn Handler<Packet, Seen>>);
        if guarded { spec.when(DeclarativeGuard::in_range(PORT, 0, 10)) } else { spec }
    };
    if guarded {
        table.install(BindingSpec::new("ext", bystander.clone() as Arc<dyn Handler<Packet, Seen>>)).unwrap();
    }
    let mut current = table.install(spec(&old)).unwrap();

    let start = Arc::new(Barrier::new(RAISING_THREADS + 1));
    let done = Arc::new(AtomicBool::new(false));
    // Thread `i` plays hart `i + 1` and reports a quiescent state every few raises, as the
    // kernel's idle loop would; the replacer is hart 0; the other harts are parked.
    park_unused_harts(&dispatcher);
    let dispatcher = Arc::new(dispatcher);
    let raisers: Vec<_> = (0..RAISING_THREADS)
        .map(|thread| {
            let (table, start, dispatcher) = (table.clone(), start.clone(), dispatcher.clone());
            thread::spawn(move || {
                start.wait();
                dispatcher.hart_online(thread + 1).unwrap();
                let (mut saw_old, mut saw_new) = (0u64, 0u64);
                for index in 0..RAISES_PER_THREAD {
                    let seen = table.raise(&packet(index as u64 % 4, 0));
                    match (seen.old, seen.new) {
                        (1, 0) => saw_old += 1,
                        (0, 1) => saw_new += 1,
                        other => panic!("raise {index} saw {other:?}: both or neither"),
                    }
                    if index % QUIESCENT_EVERY == 0 {
                        // SAFETY: between raises; this thread is hart `thread + 1`.
                        unsafe { dispatcher.quiescent(thread + 1) }.unwrap();
                    }
                }
                // SAFETY: this hart is done raising for good.
                unsafe { dispatcher.hart_offline(thread + 1) }.unwrap();
                (saw_old, saw_new)
            })
        })
        .collect();
    let replacer = {
        let (table, start, done, dispatcher) = (table.clone(), start.clone(), done.clone(), dispatcher.clone());
        let (old, new) = (old.clone(), new.clone());
        thread::spawn(move || {
            start.wait();
            let mut replacements = 0u64;
            let mut use_new = true;
            while !done.load(Ordering::Relaxed) {
                let handler = if use_new { &new } else { &old };
                current = table.replace(current, spec(handler)).unwrap();
                use_new = !use_new;
                replacements += 1;
                // SAFETY: the replacer never raises; it is hart 0.
                unsafe { dispatcher.quiescent(0) }.unwrap();
            }
            (replacements, current)
        })
    };
    let (mut saw_old, mut saw_new) = (0, 0);
    for raiser in raisers {
        let (old_count, new_count) = raiser.join().unwrap();
        saw_old += old_count;
        saw_new += new_count;
    }
    done.store(true, Ordering::Relaxed);
    let (replacements, current) = replacer.join().unwrap();
    // Every raiser went offline when done, so hart 0's report alone ends every grace period.
    // SAFETY: the main thread never raised; every other thread has finished.
    unsafe { dispatcher.quiescent(0) }.unwrap();
    dispatcher.reclaim();
    assert_eq!(table.snapshot().retired_plans, 0, "offline harts must not hold reclamation back");

    let total = (RAISING_THREADS * RAISES_PER_THREAD) as u64;
    assert_eq!(saw_old + saw_new, total);
    assert!(replacements > 100, "the replacer must actually have raced the raisers ({replacements})");
    // How many plans wait depends on how often each raiser gets a CPU to report on; the
    // point is that grace periods end while raises are running.
    assert_eq!(old.calls.load(Ordering::Relaxed), saw_old);
    assert_eq!(new.calls.load(Ordering::Relaxed), saw_new);
    // Ending the grace periods drops the replaced bindings, which fold in the counts that
    // raises still running them added after they were replaced.
    settle(&dispatcher);
    let snapshot = table.snapshot();
    assert_eq!(snapshot.raises, total);
    assert_eq!(snapshot.totals().invocations, total * if guarded { 2 } else { 1 });

    // No leak: once the last binding goes and retired plans are reclaimed, the test holds
    // the only references.
    table.uninstall(current).unwrap();
    if guarded {
        table.uninstall_owner("ext");
    }
    settle(&dispatcher);
    assert_eq!(table.snapshot().retired_plans, 0);
    assert_eq!((Arc::strong_count(&old), Arc::strong_count(&new), Arc::strong_count(&bystander)), (1, 1, 1));
}

#[test]
fn replace_is_atomic_under_concurrent_raises_on_the_fast_path() {
    replace_under_concurrent_raises(false);
}

#[test]
fn replace_is_atomic_under_concurrent_raises_on_the_general_path() {
    replace_under_concurrent_raises(true);
}

#[test]
fn install_and_uninstall_race_with_raises_without_losing_handlers() {
    let (dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    park_unused_harts(&dispatcher);
    let dispatcher = Arc::new(dispatcher);
    let stop = Arc::new(AtomicBool::new(false));
    let raisers: Vec<_> = (0..RAISING_THREADS)
        .map(|thread| {
            let (table, stop, dispatcher) = (table.clone(), stop.clone(), dispatcher.clone());
            thread::spawn(move || {
                dispatcher.hart_online(thread + 1).unwrap();
                let mut raises = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let answer = table.raise(&packet(raises % 8, 0));
                    assert!(answer == DEFAULT_ANSWER || answer.value < 8, "{answer:?}");
                    raises += 1;
                    if raises.is_multiple_of(QUIESCENT_EVERY as u64) {
                        // SAFETY: between raises; this thread is hart `thread + 1`.
                        unsafe { dispatcher.quiescent(thread + 1) }.unwrap();
                    }
                }
                // SAFETY: this hart is done raising for good.
                unsafe { dispatcher.hart_offline(thread + 1) }.unwrap();
                raises
            })
        })
        .collect();
    let handlers: Vec<_> = (0..8).map(answer).collect();
    for round in 0..2_000u64 {
        let port = round % 8;
        let spec = BindingSpec::new("ext", handlers[port as usize].clone()).when(DeclarativeGuard::equals(PORT, port));
        let id = table.install(spec).unwrap();
        table.uninstall(id).unwrap();
        // SAFETY: this thread (hart 0) never raises.
        unsafe { dispatcher.quiescent(0) }.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let raises: u64 = raisers.into_iter().map(|raiser| raiser.join().unwrap()).sum();
    settle(&dispatcher);
    assert_eq!(table.snapshot().raises, raises);
    assert_eq!(table.binding_count(), 0);
    for handler in &handlers {
        assert_eq!(Arc::strong_count(handler), 1);
    }
}

/// A success on the single bounded binding's way clears a fault streak that another hart
/// began while the handler ran: that way is taken only when the binding has no streak at
/// its entry, so without the clearing the streak would outlive the success and the
/// breaker would count faults that were not consecutive.
#[test]
fn a_bounded_success_clears_a_streak_begun_meanwhile_on_another_hart() {
    /// Lets the slow handler go however the test ends (an assertion failing first must
    /// not leave its thread spinning).
    struct Release(Arc<AtomicBool>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    /// Waits up to 10 s for `done`.
    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "gave up waiting: {what}");
            std::hint::spin_loop();
        }
    }
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::FirstNonDefault));
    let calls = Arc::new(AtomicU64::new(0));
    let faulted = Arc::new(AtomicBool::new(false));
    let handler = {
        let (calls, faulted) = (calls.clone(), faulted.clone());
        spindle_dispatch::handler_fn("slow-then-faulting", move |_: &Packet| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                // The first raise waits until the second has faulted and been counted.
                wait_for("the second raise", || faulted.load(Ordering::SeqCst));
                Ok(Answer { value: 7 })
            } else {
                Err(HandlerFault::Trapped { cause: 13 })
            }
        })
    };
    let id = table.install(BindingSpec::new("ext", handler).mode(spindle_dispatch::Mode::Bounded { budget: u64::MAX / 2 })).unwrap();
    let release = Release(faulted.clone());
    let slow = {
        let table = table.clone();
        thread::spawn(move || table.raise(&packet(1, 1)))
    };
    wait_for("the first raise's handler", || calls.load(Ordering::SeqCst) > 0);
    assert_eq!(table.raise(&packet(2, 2)), DEFAULT_ANSWER, "the second raise faults");
    assert_eq!(table.snapshot().binding(id).unwrap().consecutive_faults, 1);
    drop(release);
    assert_eq!(slow.join().unwrap(), Answer { value: 7 });
    let binding = table.snapshot().binding(id).cloned().unwrap();
    assert_eq!((binding.counters.invocations, binding.counters.faults), (2, 1));
    assert_eq!(binding.consecutive_faults, 0, "the success after the fault ends the streak");
}
