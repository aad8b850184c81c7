//! Shared fixtures for the dispatcher's host tests: test events, a configurable primary
//! module, a fake instruction counter and a fake bounded executor.

#![allow(dead_code)] // Each test binary uses a different subset.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use spindle_abi::event::EventRecord;
use spindle_dispatch::{
    Authorization, BoundedExecutor, Combiner, DeclarativeGuard, Dispatcher, EventTable, HandlerFault, InstallRequest,
    Platform, PredicateGuard, PrimaryModule, Refusal, ResultRejection, handler_fn,
};

spindle_abi::declare_records! {
    /// Arguments of the test event.
    pub struct Packet {
        /// Destination port.
        pub port: u64,
        /// Payload length.
        pub length: u64,
    }
    /// Result of the test event.
    pub struct Answer {
        /// Some value.
        pub value: u64,
    }
    /// Result of the replacement test: which handler ran.
    pub struct Seen {
        /// Contributions of the old handler.
        pub old: u64,
        /// Contributions of the new handler.
        pub new: u64,
    }
}

spindle_abi::declare_events! {
    /// The test events.
    pub list TEST_EVENTS;
    /// A packet arrived; handlers answer with a value.
    pub event PACKET = 1000, "test.Packet", fn(Packet) -> Answer;
    /// Which of two handlers ran.
    pub event WHO = 1001, "test.Who", fn(Packet) -> Seen;
}

/// Field index of `Packet::port`.
pub const PORT: usize = spindle_abi::event::field_index(Packet::FIELDS, "port").unwrap();
/// Field index of `Packet::length`.
pub const LENGTH: usize = spindle_abi::event::field_index(Packet::FIELDS, "length").unwrap();

/// The default answer of the test primary module.
pub const DEFAULT_ANSWER: Answer = Answer { value: 1_000_000 };

thread_local! {
    static INSTRUCTIONS: Cell<u64> = const { Cell::new(0) };
}

/// Pretends the current thread executed `count` instructions.
pub fn burn(count: u64) {
    INSTRUCTIONS.with(|instructions| instructions.set(instructions.get() + count));
}

/// The fake instruction counter: what this thread has `burn`ed, plus one per read.
pub fn fake_instruction_counter() -> u64 {
    INSTRUCTIONS.with(|instructions| {
        instructions.set(instructions.get() + 1);
        instructions.get()
    })
}

/// A bounded executor that runs the body to completion, then reports an overrun if it
/// burned more than its budget (the kernel's aborts it at the budget instead).
pub struct FakeExecutor;

impl BoundedExecutor for FakeExecutor {
    fn run_bounded(&self, budget: u64, _prepared: u64, body: &mut dyn FnMut() -> Result<(), HandlerFault>) -> Result<(), HandlerFault> {
        let start = fake_instruction_counter();
        let outcome = body();
        if fake_instruction_counter() - start > budget {
            return Err(HandlerFault::Overrun { budget });
        }
        outcome
    }
}

/// Harts of the test dispatchers: thread `i` of a concurrent test plays hart `i`.
pub const HARTS: usize = 8;

/// A dispatcher with the fake counter and executor.
pub fn dispatcher() -> Dispatcher {
    Dispatcher::new(Platform::new(fake_instruction_counter, HARTS).with_bounded_executor(&FakeExecutor))
}

/// Ends the grace period of everything retired so far and frees it: every hart reports a
/// quiescent state, then the dispatcher reclaims.
///
/// Call only when no thread is inside a raise of `dispatcher`.
pub fn settle(dispatcher: &Dispatcher) {
    for hart in 0..HARTS {
        // SAFETY: the caller guarantees no raise is in progress on any thread, so no
        // "hart" holds a reference from a raise.
        unsafe { dispatcher.quiescent(hart) }.unwrap();
    }
    dispatcher.reclaim();
}

/// A configurable primary module for `PACKET`.
pub struct TestPrimary {
    pub combiner: Combiner<Answer>,
    /// Refuse installers with this owner name.
    pub refuse_owner: Option<(&'static str, Refusal)>,
    /// Impose `port == value` on installers with this owner name.
    pub impose_port: Option<(&'static str, u64)>,
    /// Impose a predicate `length < value` on every binding, logging evaluations.
    pub impose_length_below: Option<u64>,
    /// Cap every binding's budget.
    pub budget_cap: Option<u64>,
    /// Reject results with a value above this.
    pub reject_above: Option<u64>,
    pub breaker_threshold: u32,
    /// Log of guard evaluations and authorisation requests, for order checks.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl TestPrimary {
    pub fn new(combiner: Combiner<Answer>) -> Self {
        TestPrimary {
            combiner,
            refuse_owner: None,
            impose_port: None,
            impose_length_below: None,
            budget_cap: None,
            reject_above: None,
            breaker_threshold: 3,
            log: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

impl PrimaryModule<Packet, Answer> for TestPrimary {
    fn name(&self) -> &str {
        "test-primary"
    }

    fn default_result(&self, _args: &Packet) -> Answer {
        DEFAULT_ANSWER
    }

    fn combiner(&self) -> Combiner<Answer> {
        self.combiner
    }

    fn authorize(&self, request: &InstallRequest<'_, Packet>) -> Result<Authorization<Packet>, Refusal> {
        self.log.lock().unwrap().push(format!("authorize {}", request.owner));
        if let Some((owner, refusal)) = self.refuse_owner
            && request.owner == owner
        {
            return Err(refusal);
        }
        let mut authorization = Authorization::allow();
        if let Some((owner, port)) = self.impose_port
            && request.owner == owner
        {
            authorization = authorization.impose(DeclarativeGuard::equals(PORT, port));
        }
        if let Some(limit) = self.impose_length_below {
            let log = self.log.clone();
            authorization = authorization.impose_predicate(PredicateGuard::new("length below limit", move |args: &Packet| {
                log.lock().unwrap().push("imposed".into());
                args.length < limit
            }));
        }
        if let Some(cap) = self.budget_cap {
            authorization = authorization.cap_budget(cap);
        }
        Ok(authorization)
    }

    fn validates_results(&self) -> bool {
        self.reject_above.is_some()
    }

    fn validate_result(&self, _args: &Packet, result: &Answer) -> Result<(), ResultRejection> {
        match self.reject_above {
            Some(limit) if result.value > limit => Err(ResultRejection { reason: "value too large" }),
            _ => Ok(()),
        }
    }

    fn breaker_threshold(&self) -> u32 {
        self.breaker_threshold
    }
}

/// Registers `PACKET` with `primary` on a fresh dispatcher.
pub fn packet_table(primary: TestPrimary) -> (Dispatcher, Arc<EventTable<Packet, Answer>>) {
    let dispatcher = dispatcher();
    let table = dispatcher.register(&PACKET, Arc::new(primary)).unwrap();
    (dispatcher, table)
}

/// A handler answering `value`.
pub fn answer(value: u64) -> Arc<dyn spindle_dispatch::Handler<Packet, Answer>> {
    handler_fn("answer", move |_: &Packet| Ok(Answer { value }))
}

/// A packet to `port` of `length` bytes.
pub fn packet(port: u64, length: u64) -> Packet {
    Packet { port, length }
}
