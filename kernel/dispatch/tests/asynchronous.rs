//! Async bindings on the host: a fake async executor records its workers, and the tests
//! play the worker by calling `run_pending` themselves.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use spindle_dispatch::{
    ASYNC_QUEUE_CAPACITY, AsyncExecutor, AsyncWork, AsyncWorker, BindingSpec, Combiner, DeclarativeGuard, Dispatcher, Handler,
    HandlerDescription, HandlerFault, InstallError, Mode, Platform, Technology, handler_fn,
};

/// One worker the fake executor started: its work, and what was asked of it.
struct FakeWorkerState {
    work: Arc<dyn AsyncWork>,
    notified: AtomicU64,
    stopped: AtomicBool,
}

struct FakeWorker(Arc<FakeWorkerState>);

impl AsyncWorker for FakeWorker {
    fn notify(&self) {
        self.0.notified.fetch_add(1, Ordering::SeqCst);
    }
    fn stop(&self) {
        self.0.stopped.store(true, Ordering::SeqCst);
    }
    fn id(&self) -> u64 {
        77
    }
}

#[derive(Default)]
struct FakeAsyncExecutor {
    workers: Mutex<Vec<Arc<FakeWorkerState>>>,
    refuse: bool,
}

impl AsyncExecutor for FakeAsyncExecutor {
    fn start(&self, work: Arc<dyn AsyncWork>) -> Option<Box<dyn AsyncWorker>> {
        if self.refuse {
            return None;
        }
        let state = Arc::new(FakeWorkerState { work, notified: AtomicU64::new(0), stopped: AtomicBool::new(false) });
        self.workers.lock().unwrap().push(state.clone());
        Some(Box::new(FakeWorker(state)))
    }
}

impl FakeAsyncExecutor {
    fn worker(&self, index: usize) -> Arc<FakeWorkerState> {
        self.workers.lock().unwrap()[index].clone()
    }
}

fn async_dispatcher(executor: Arc<FakeAsyncExecutor>) -> Dispatcher {
    Dispatcher::new(
        Platform::new(fake_instruction_counter, HARTS).with_bounded_executor(&FakeExecutor).with_async_executor(executor),
    )
}

/// A handler that records every packet it sees.
fn recorder(log: Arc<Mutex<Vec<u64>>>) -> Arc<dyn Handler<Packet, Answer>> {
    handler_fn("recorder", move |packet: &Packet| {
        log.lock().unwrap().push(packet.length);
        Ok(Answer { value: 5 })
    })
}

#[test]
fn async_needs_an_executor_and_a_worker() {
    let (_dispatcher, table) = packet_table(TestPrimary::new(Combiner::Last));
    assert_eq!(table.install(BindingSpec::new("ext", answer(1)).mode(Mode::Async)), Err(InstallError::AsyncUnsupported));
    let refusing = Arc::new(FakeAsyncExecutor { refuse: true, ..Default::default() });
    let dispatcher = async_dispatcher(refusing);
    let table = dispatcher.register(&PACKET, Arc::new(TestPrimary::new(Combiner::Last))).unwrap();
    assert_eq!(table.install(BindingSpec::new("ext", answer(1)).mode(Mode::Async)), Err(InstallError::AsyncWorkerUnavailable));
    assert_eq!(table.binding_count(), 0);
}

#[test]
fn raise_returns_before_the_handler_runs_and_the_worker_runs_it_later() {
    let executor = Arc::new(FakeAsyncExecutor::default());
    let dispatcher = async_dispatcher(executor.clone());
    let table = dispatcher.register(&PACKET, Arc::new(TestPrimary::new(Combiner::Last))).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let id = table.install(BindingSpec::new("ext", recorder(log.clone())).mode(Mode::Async)).unwrap();
    // The async handler contributes nothing: the raiser gets the default, at once.
    assert_eq!(table.raise(&packet(1, 10)), DEFAULT_ANSWER);
    assert_eq!(table.raise(&packet(1, 11)), DEFAULT_ANSWER);
    assert!(log.lock().unwrap().is_empty(), "the handler ran inside the raise");
    let worker = executor.worker(0);
    assert_eq!(worker.notified.load(Ordering::SeqCst), 2);
    assert!(worker.work.name().contains("recorder"));
    assert_eq!(worker.work.run_pending(), 2);
    assert_eq!(*log.lock().unwrap(), [10, 11], "run in raise order, with the raised arguments");
    let snapshot = table.snapshot();
    let binding = snapshot.binding(id).unwrap();
    assert_eq!(binding.counters.invocations, 2);
    let lane = binding.asynchronous.unwrap();
    assert_eq!((lane.queued, lane.dropped, lane.pending, lane.worker), (2, 0, 0, 77));
    assert!(snapshot.to_string().contains("queued=2 dropped=0 pending=0 worker=#77"), "{snapshot}");
    assert_eq!(worker.work.run_pending(), 0, "nothing left");
}

#[test]
fn async_and_sync_bindings_mix_and_guards_apply_at_raise() {
    let executor = Arc::new(FakeAsyncExecutor::default());
    let dispatcher = async_dispatcher(executor.clone());
    let table = dispatcher.register(&PACKET, Arc::new(TestPrimary::new(Combiner::Last))).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    table.install(BindingSpec::new("ext", recorder(log.clone())).mode(Mode::Async).when(DeclarativeGuard::equals(PORT, 7))).unwrap();
    table.install(BindingSpec::new("sync", answer(3))).unwrap();
    assert_eq!(table.raise(&packet(7, 1)).value, 3, "the sync binding's answer");
    assert_eq!(table.raise(&packet(8, 2)).value, 3);
    assert_eq!(executor.worker(0).work.run_pending(), 1, "only the raise its guard accepted was queued");
    assert_eq!(*log.lock().unwrap(), [1]);
}

#[test]
fn a_full_queue_drops_and_counts() {
    let executor = Arc::new(FakeAsyncExecutor::default());
    let dispatcher = async_dispatcher(executor.clone());
    let table = dispatcher.register(&PACKET, Arc::new(TestPrimary::new(Combiner::Last))).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let id = table.install(BindingSpec::new("ext", recorder(log.clone())).mode(Mode::Async)).unwrap();
    let extra = 3;
    for length in 0..(ASYNC_QUEUE_CAPACITY + extra) as u64 {
        table.raise(&packet(0, length));
    }
    let lane = table.snapshot().binding(id).unwrap().asynchronous.unwrap();
    assert_eq!(lane.queued, ASYNC_QUEUE_CAPACITY as u64);
    assert_eq!(lane.dropped, extra as u64);
    assert_eq!(lane.pending, ASYNC_QUEUE_CAPACITY as u64);
    assert_eq!(executor.worker(0).work.run_pending(), ASYNC_QUEUE_CAPACITY);
    let expected: Vec<u64> = (0..ASYNC_QUEUE_CAPACITY as u64).collect();
    assert_eq!(*log.lock().unwrap(), expected, "the oldest invocations are kept");
}

/// A handler that burns instructions, faults on request, and counts `faulted` calls.
struct Unruly {
    faulted: AtomicU64,
}

impl Handler<Packet, Answer> for Unruly {
    fn invoke(&self, packet: &Packet) -> Result<Answer, HandlerFault> {
        burn(packet.length);
        if packet.port == 13 {
            return Err(HandlerFault::Trapped { cause: 13 });
        }
        Ok(Answer { value: 1 })
    }
    fn describe(&self) -> HandlerDescription {
        HandlerDescription { technology: Technology::BuiltIn, name: "unruly".into() }
    }
    fn faulted(&self, _: &HandlerFault) {
        self.faulted.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn async_runs_are_bounded_and_contained() {
    let executor = Arc::new(FakeAsyncExecutor::default());
    let dispatcher = async_dispatcher(executor.clone());
    let mut primary = TestPrimary::new(Combiner::Last);
    primary.budget_cap = Some(1_000);
    let table = dispatcher.register(&PACKET, Arc::new(primary)).unwrap();
    let handler = Arc::new(Unruly { faulted: AtomicU64::new(0) });
    // The installer asks for 5,000; the primary module caps it at 1,000.
    let id = table.install(BindingSpec::new("ext", handler.clone()).mode(Mode::Async).async_budget(5_000)).unwrap();
    let snapshot = table.snapshot();
    let binding = snapshot.binding(id).unwrap();
    assert_eq!(binding.mode, Mode::Async, "a capped async binding stays async");
    assert_eq!(binding.asynchronous.unwrap().budget, Some(1_000));
    table.raise(&packet(0, 10)); // fine
    table.raise(&packet(0, 50_000)); // overruns
    table.raise(&packet(13, 10)); // traps
    assert_eq!(executor.worker(0).work.run_pending(), 3);
    let counters = table.snapshot().binding(id).unwrap().counters;
    assert_eq!((counters.invocations, counters.faults, counters.overruns), (3, 2, 1));
    assert_eq!(handler.faulted.load(Ordering::SeqCst), 2, "the faulted hook ran for both");
    // A third fault in a row trips the breaker; a disabled binding queues nothing.
    table.raise(&packet(13, 10));
    executor.worker(0).work.run_pending();
    assert!(table.snapshot().binding(id).unwrap().disabled.is_some());
    table.raise(&packet(0, 1));
    assert_eq!(table.snapshot().binding(id).unwrap().asynchronous.unwrap().queued, 4);
}

#[test]
fn uninstalling_stops_the_worker_and_discards_the_queue() {
    let executor = Arc::new(FakeAsyncExecutor::default());
    let dispatcher = async_dispatcher(executor.clone());
    let table = dispatcher.register(&PACKET, Arc::new(TestPrimary::new(Combiner::Last))).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let id = table.install(BindingSpec::new("ext", recorder(log.clone())).mode(Mode::Async)).unwrap();
    table.raise(&packet(0, 1));
    let worker = executor.worker(0);
    table.uninstall(id).unwrap();
    settle(&dispatcher);
    assert!(worker.stopped.load(Ordering::SeqCst), "the worker was not told to stop");
    assert_eq!(worker.work.run_pending(), 0, "a gone binding's queue is discarded, not run");
    assert!(log.lock().unwrap().is_empty());
}
