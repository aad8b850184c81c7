//! `async` bindings: the raise queues the invocation and returns; a worker runs it later.
//!
//! Design: every async binding has its own *lane*: a bounded queue of argument records
//! ([`ASYNC_QUEUE_CAPACITY`] entries, allocated at installation) and a worker that the
//! platform's [`AsyncExecutor`] starts (the kernel: one strand per binding). A raise whose
//! guards accept the binding pushes a copy of the arguments and calls
//! [`AsyncWorker::notify`]; it never blocks, never allocates, and when the queue is full it
//! drops the invocation and counts it. The worker calls [`AsyncWork::run_pending`], which
//! pops each queued invocation and runs the handler — under the platform's bounded
//! executor when the binding has a budget — counting it on the binding like any other
//! invocation (invocations, instructions, faults, overruns, circuit breaker, the
//! handler's `faulted` hook). Async handlers contribute no result: the raiser gets what
//! the event's other (sync) bindings combine to, or the default.
//!
//! The queue is a bounded multi-producer queue with a sequence number per slot (a slot is
//! claimed with one compare-and-swap on the tail, written, then published by storing its
//! sequence), so raisers on several harts never wait for each other or for the worker.
//! Each slot's value sits behind a `spin::Mutex` that the sequence protocol makes
//! uncontended (only the slot's claimant touches it), which keeps this module free of
//! `unsafe`.
//!
//! Lifetime: the binding owns the worker handle; the worker's [`AsyncWork`] holds only a
//! weak reference to the binding. When the binding is freed (after uninstallation and the
//! grace period), its lane stops the worker; invocations still queued are discarded and
//! counted as dropped.
//!
//! Limitations: one worker per binding (many async bindings mean many strands); the order
//! of invocations is kept per binding only; arguments are copied, so a handler sees the
//! event as it was raised, not the state when it runs.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::{Arc, Weak};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use spindle_abi::event::EventRecord;

use crate::binding::{BindingCore, DISABLED};
use crate::handler::HandlerFault;
use crate::introspect::{AsyncSnapshot, Fault};
use crate::platform::BoundedExecutor;

/// Invocations one async binding may have waiting; a raise that finds the queue full
/// drops its invocation (and counts it). A power of two.
pub const ASYNC_QUEUE_CAPACITY: usize = 16;

/// The work of one async binding, as its worker sees it.
pub trait AsyncWork: Send + Sync {
    /// Runs every invocation queued so far (each bounded if the binding has a budget) and
    /// returns how many ran. Called on the worker's own strand, never concurrently with
    /// itself.
    fn run_pending(&self) -> usize;
    /// A name for the worker: `async <binding id> <handler name>`.
    fn name(&self) -> String;
}

/// A worker the platform started for one async binding.
pub trait AsyncWorker: Send + Sync {
    /// Wakes the worker: work is queued. Called from raises; must not block or allocate.
    fn notify(&self);
    /// Asks the worker to end once it is not running a handler (the binding is gone).
    fn stop(&self);
    /// The worker's identity for introspection (the kernel: its strand id).
    fn id(&self) -> u64;
}

/// Starts workers for async bindings (the kernel: a strand each).
pub trait AsyncExecutor: Send + Sync {
    /// Starts a worker that calls `work.run_pending()` after each `notify`. `None` if it
    /// cannot (no memory for a strand); the installation then fails.
    fn start(&self, work: Arc<dyn AsyncWork>) -> Option<Box<dyn AsyncWorker>>;
}

/// One slot of the queue: `sequence` says whose turn it is (see the module docs).
struct Slot<A> {
    sequence: AtomicUsize,
    value: spin::Mutex<A>,
}

/// A bounded multi-producer, multi-consumer queue of argument records.
pub(crate) struct AsyncQueue<A> {
    slots: Box<[Slot<A>]>,
    /// Next position to write.
    tail: AtomicUsize,
    /// Next position to read.
    head: AtomicUsize,
}

impl<A: Copy + Default> AsyncQueue<A> {
    /// An empty queue of `capacity` slots (a power of two).
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(capacity.is_power_of_two(), "queue capacity must be a power of two");
        let slots = (0..capacity).map(|index| Slot { sequence: AtomicUsize::new(index), value: spin::Mutex::new(A::default()) }).collect();
        AsyncQueue { slots, tail: AtomicUsize::new(0), head: AtomicUsize::new(0) }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Appends `value`; false if the queue is full. Never waits for another producer or
    /// the consumer.
    pub(crate) fn push(&self, value: A) -> bool {
        let mut position = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[position & self.mask()];
            let sequence = slot.sequence.load(Ordering::Acquire);
            let lag = sequence.wrapping_sub(position) as isize;
            if lag == 0 {
                // The slot is free for `position`: claim it.
                match self.tail.compare_exchange_weak(position, position.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        *slot.value.lock() = value;
                        slot.sequence.store(position.wrapping_add(1), Ordering::Release);
                        return true;
                    }
                    Err(current) => position = current,
                }
            } else if lag < 0 {
                return false; // the slot still holds an unread value from a lap ago: full
            } else {
                position = self.tail.load(Ordering::Relaxed); // another producer claimed it
            }
        }
    }

    /// Removes the oldest published value, if any.
    pub(crate) fn pop(&self) -> Option<A> {
        let mut position = self.head.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[position & self.mask()];
            let sequence = slot.sequence.load(Ordering::Acquire);
            let lag = sequence.wrapping_sub(position.wrapping_add(1)) as isize;
            if lag == 0 {
                match self.head.compare_exchange_weak(position, position.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        let value = *slot.value.lock();
                        slot.sequence.store(position.wrapping_add(self.slots.len()), Ordering::Release);
                        return Some(value);
                    }
                    Err(current) => position = current,
                }
            } else if lag < 0 {
                return None; // empty (or the next value is not published yet)
            } else {
                position = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// Values waiting (approximate while producers or the consumer run).
    pub(crate) fn len(&self) -> usize {
        self.tail.load(Ordering::Relaxed).wrapping_sub(self.head.load(Ordering::Relaxed)).min(self.slots.len())
    }
}

/// Counters of one async binding (its runs are counted as the binding's invocations).
#[derive(Default)]
pub(crate) struct AsyncCounters {
    /// Invocations queued by raises.
    pub(crate) queued: AtomicU64,
    /// Invocations dropped: queue full, or discarded when the binding went away.
    pub(crate) dropped: AtomicU64,
}

/// What the worker runs: pops the lane's queue and runs the binding's handler.
pub(crate) struct AsyncRunner<A: EventRecord, R: EventRecord> {
    pub(crate) queue: Arc<AsyncQueue<A>>,
    pub(crate) counters: Arc<AsyncCounters>,
    /// The binding, set once it exists; weak, so the worker does not keep it alive.
    pub(crate) binding: spin::Once<Weak<BindingCore<A, R>>>,
    /// The handler's budget per invocation, if bounded.
    pub(crate) budget: Option<u64>,
    /// `budget` in the executor's units (`BoundedExecutor::prepare`).
    pub(crate) prepared_budget: u64,
    pub(crate) executor: Option<&'static dyn BoundedExecutor>,
    pub(crate) instruction_counter: fn() -> u64,
    pub(crate) breaker_threshold: u32,
    pub(crate) name: String,
}

impl<A: EventRecord, R: EventRecord> AsyncRunner<A, R> {
    fn discard_all(&self) -> usize {
        let mut discarded = 0;
        while self.queue.pop().is_some() {
            discarded += 1;
        }
        self.counters.dropped.fetch_add(discarded as u64, Ordering::Relaxed);
        0
    }

    fn run_one(&self, binding: &BindingCore<A, R>, args: &A) -> Result<R, HandlerFault> {
        match (self.budget, &self.executor) {
            (Some(budget), Some(executor)) => {
                let mut result = None;
                executor.run_bounded(budget, self.prepared_budget, &mut || {
                    result = Some(binding.handler.invoke(args)?);
                    Ok(())
                })?;
                result.ok_or(HandlerFault::Unavailable)
            }
            _ => binding.handler.invoke(args),
        }
    }
}

impl<A: EventRecord, R: EventRecord> AsyncWork for AsyncRunner<A, R> {
    fn run_pending(&self) -> usize {
        let Some(binding) = self.binding.get().and_then(Weak::upgrade) else {
            return self.discard_all();
        };
        let mut ran = 0;
        while let Some(args) = self.queue.pop() {
            if binding.health.load(Ordering::Relaxed) & DISABLED != 0 {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            binding.counters.general_invocations.fetch_add(1, Ordering::Relaxed);
            let start = (self.instruction_counter)();
            let outcome = self.run_one(&binding, &args);
            let spent = (self.instruction_counter)().wrapping_sub(start);
            binding.counters.instructions.fetch_add(spent, Ordering::Relaxed);
            match outcome {
                Ok(_) => binding.record_success(),
                Err(fault) => binding.record_fault(Fault::Handler(fault), self.breaker_threshold),
            }
            ran += 1;
        }
        ran
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

/// The part of a binding that only async bindings have: queue, counters, worker.
pub(crate) struct AsyncLane<A> {
    pub(crate) queue: Arc<AsyncQueue<A>>,
    pub(crate) counters: Arc<AsyncCounters>,
    pub(crate) worker: Box<dyn AsyncWorker>,
    pub(crate) budget: Option<u64>,
}

impl<A: Copy + Default> AsyncLane<A> {
    /// Queues one invocation and wakes the worker, or drops it if the queue is full.
    pub(crate) fn enqueue(&self, args: &A) {
        if self.queue.push(*args) {
            self.counters.queued.fetch_add(1, Ordering::Relaxed);
            self.worker.notify();
        } else {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// What introspection shows.
    pub(crate) fn snapshot(&self) -> AsyncSnapshot {
        AsyncSnapshot {
            queued: self.counters.queued.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            pending: self.queue.len() as u64,
            worker: self.worker.id(),
            budget: self.budget,
        }
    }
}

impl<A> Drop for AsyncLane<A> {
    /// The binding is gone: end its worker.
    fn drop(&mut self) {
        self.worker.stop();
    }
}

/// Starts the lane of a new async binding: queue, runner and worker. `None` if the
/// A started async lane and the runner to point at its binding once installed.
pub(crate) type StartedLane<A, R> = (AsyncLane<A>, Arc<AsyncRunner<A, R>>);

/// executor could not start a worker.
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_lane<A: EventRecord, R: EventRecord>(
    executor: &dyn AsyncExecutor,
    budget: Option<u64>,
    bounded: Option<&'static dyn BoundedExecutor>,
    instruction_counter: fn() -> u64,
    breaker_threshold: u32,
    name: String,
) -> Option<StartedLane<A, R>> {
    let queue = Arc::new(AsyncQueue::new(ASYNC_QUEUE_CAPACITY));
    let counters = Arc::new(AsyncCounters::default());
    let prepared_budget = match (budget, &bounded) {
        (Some(budget), Some(bounded)) => bounded.prepare(budget),
        _ => 0,
    };
    let runner = Arc::new(AsyncRunner {
        queue: queue.clone(),
        counters: counters.clone(),
        binding: spin::Once::new(),
        budget,
        prepared_budget,
        executor: bounded,
        instruction_counter,
        breaker_threshold,
        name,
    });
    let worker = executor.start(runner.clone())?;
    Some((AsyncLane { queue, counters, worker, budget }, runner))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_is_fifo_and_bounded() {
        let queue: AsyncQueue<u64> = AsyncQueue::new(4);
        assert_eq!(queue.pop(), None);
        for value in 1..=4 {
            assert!(queue.push(value));
        }
        assert!(!queue.push(5), "a full queue accepts nothing");
        assert_eq!(queue.len(), 4);
        assert_eq!(queue.pop(), Some(1));
        assert!(queue.push(6));
        let drained: Vec<u64> = core::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(drained, [2, 3, 4, 6]);
        assert_eq!(queue.len(), 0);
    }

    #[test]
    fn queue_wraps_many_laps() {
        let queue: AsyncQueue<u64> = AsyncQueue::new(2);
        for value in 0..1000 {
            assert!(queue.push(value));
            assert_eq!(queue.pop(), Some(value));
        }
    }

    #[test]
    fn concurrent_producers_lose_nothing_that_was_accepted() {
        let queue = Arc::new(AsyncQueue::<u64>::new(1024));
        let threads: Vec<_> = (0..4u64)
            .map(|thread| {
                let queue = queue.clone();
                std::thread::spawn(move || (0..200u64).filter(|index| queue.push(thread * 1000 + index)).count())
            })
            .collect();
        let accepted: usize = threads.into_iter().map(|thread| thread.join().unwrap()).sum();
        let mut seen: Vec<u64> = core::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(seen.len(), accepted);
        assert_eq!(accepted, 800);
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 800, "no value delivered twice");
    }
}
