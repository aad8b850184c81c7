//! The `Handler::faulted` hook: called once per faulted invocation, including overruns
//! the bounded executor catches, and never for a successful one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{BENCH_PROBE, Probe, ProbeResult};
use spindle_dispatch::*;

struct Module;
impl PrimaryModule<Probe, ProbeResult> for Module {
    fn name(&self) -> &str {
        "test"
    }
    fn default_result(&self, _: &Probe) -> ProbeResult {
        ProbeResult { value: 0 }
    }
    fn authorize(&self, _: &InstallRequest<'_, Probe>) -> Result<Authorization<Probe>, Refusal> {
        Ok(Authorization::allow())
    }
}

/// Reports an overrun whenever the probe's key is 1, else runs the body.
struct Executor;
impl BoundedExecutor for Executor {
    fn run_bounded(&self, budget: u64, _prepared: u64, body: &mut dyn FnMut() -> Result<(), HandlerFault>) -> Result<(), HandlerFault> {
        if budget == 1 {
            return Err(HandlerFault::Overrun { budget });
        }
        body()
    }
}

struct Watched {
    faults: AtomicU64,
}
impl Handler<Probe, ProbeResult> for Watched {
    fn invoke(&self, probe: &Probe) -> Result<ProbeResult, HandlerFault> {
        if probe.key == 2 { Err(HandlerFault::Panicked) } else { Ok(ProbeResult { value: probe.value + 1 }) }
    }
    fn describe(&self) -> HandlerDescription {
        HandlerDescription { technology: Technology::BuiltIn, name: "watched".into() }
    }
    fn faulted(&self, _fault: &HandlerFault) {
        self.faults.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> u64 {
    0
}

#[test]
fn faulted_is_called_for_handler_faults_and_executor_overruns() {
    let dispatcher = Dispatcher::new(Platform::new(counter, 1).with_bounded_executor(&Executor));
    let table = dispatcher.register(&BENCH_PROBE, Arc::new(Module)).unwrap();
    let handler = Arc::new(Watched { faults: AtomicU64::new(0) });
    let id = dispatcher.install(&BENCH_PROBE, BindingSpec::new("t", handler.clone()).mode(Mode::Bounded { budget: 100 })).unwrap();
    assert_eq!(table.raise(&Probe { key: 0, value: 1 }).value, 2);
    assert_eq!(handler.faults.load(Ordering::SeqCst), 0, "called for a success");
    assert_eq!(table.raise(&Probe { key: 2, value: 1 }).value, 0);
    assert_eq!(handler.faults.load(Ordering::SeqCst), 1, "not called for a handler fault");
    dispatcher.uninstall(id).unwrap();
    let overrun = Arc::new(Watched { faults: AtomicU64::new(0) });
    dispatcher.install(&BENCH_PROBE, BindingSpec::new("t", overrun.clone()).mode(Mode::Bounded { budget: 1 })).unwrap();
    assert_eq!(table.raise(&Probe { key: 0, value: 1 }).value, 0);
    assert_eq!(overrun.faults.load(Ordering::SeqCst), 1, "not called for an overrun the executor caught");
}
