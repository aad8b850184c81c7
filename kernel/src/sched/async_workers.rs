//! Worker strands for the dispatcher's async bindings: the scheduler implements the
//! dispatcher's `AsyncExecutor` hook, and `main` hands it to `events::init`, so the
//! dispatcher (below the scheduler) never names the scheduler.

use alloc::sync::Arc;

use spindle_dispatch::{AsyncExecutor, AsyncWork, AsyncWorker};

use super::{Priority, Strand};

/// Runs async bindings: one worker strand per binding (priority
/// [`ASYNC_WORKER_PRIORITY`]), blocked while its queue is empty, woken by each raise that
/// queues work, ended when the binding is freed.
pub struct KernelAsyncExecutor;

/// Priority of async workers: that of ordinary kernel strands, so queued work runs when
/// the raiser gives up the hart or its time slice ends, never inside the raise.
pub const ASYNC_WORKER_PRIORITY: Priority = Priority::NORMAL;

/// One async binding's worker strand.
struct KernelAsyncWorker {
    strand: Arc<Strand>,
    stop: Arc<core::sync::atomic::AtomicBool>,
}

impl AsyncWorker for KernelAsyncWorker {
    /// An unblock: never blocks; inside a raise it never switches (preemption is off).
    fn notify(&self) {
        super::unblock(&self.strand);
    }
    fn stop(&self) {
        self.stop.store(true, core::sync::atomic::Ordering::Release);
        super::unblock(&self.strand);
    }
    fn id(&self) -> u64 {
        self.strand.id()
    }
}

impl AsyncExecutor for KernelAsyncExecutor {
    fn start(&self, work: Arc<dyn AsyncWork>) -> Option<alloc::boxed::Box<dyn AsyncWorker>> {
        let stop = Arc::new(core::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let name = work.name();
        let strand = super::spawn(&name, ASYNC_WORKER_PRIORITY, move || {
            use core::sync::atomic::Ordering;
            while !stopping.load(Ordering::Acquire) {
                work.run_pending();
                if stopping.load(Ordering::Acquire) {
                    break;
                }
                // A raise that queued after the last pop has unblocked us already: the
                // block then returns at once (no lost wake-up).
                super::block_current();
            }
        })
        .ok()?;
        Some(alloc::boxed::Box::new(KernelAsyncWorker { strand, stop }))
    }
}

/// The executor `events::init` is given.
pub fn executor() -> Arc<dyn AsyncExecutor> {
    Arc::new(KernelAsyncExecutor)
}
