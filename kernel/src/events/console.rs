//! The console service's event: `console.Line`, raised for every line entered.
//!
//! Handlers may claim a line (first non-default verdict wins); an unclaimed line goes to
//! the built-in command interpreter.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

use spindle_abi::event::{CONSOLE_LINE, ConsoleLine, ConsoleVerdict, EventRecord, field_index};
use spindle_abi::fingerprint_of;
use spindle_dispatch::{Authorization, Combiner, EventTable, InstallRequest, PrimaryModule, Refusal};
use spin::Once;

/// Budget imposed on every console handler: 50 million instructions (50 ms at 1 GHz;
/// console output under emulation is slow, and budgets are enforced in time).
pub const LINE_HANDLER_BUDGET: u64 = 50_000_000;

/// Index of `command_fingerprint` in `ConsoleLine`.
pub const COMMAND_FIELD: usize = match field_index(ConsoleLine::FIELDS, "command_fingerprint") {
    Some(index) => index,
    None => panic!("ConsoleLine has no command_fingerprint field"),
};

struct ConsoleService;

impl PrimaryModule<ConsoleLine, ConsoleVerdict> for ConsoleService {
    fn name(&self) -> &str {
        "console"
    }
    fn default_result(&self, _: &ConsoleLine) -> ConsoleVerdict {
        ConsoleVerdict::UNCLAIMED
    }
    fn combiner(&self) -> Combiner<ConsoleVerdict> {
        Combiner::FirstNonDefault
    }
    /// A handler must name the command it claims (a declarative guard on
    /// `command_fingerprint`), so no extension can silently swallow every console line;
    /// every handler runs bounded.
    fn authorize(&self, request: &InstallRequest<'_, ConsoleLine>) -> Result<Authorization<ConsoleLine>, Refusal> {
        if !request.declarative_guards.iter().any(|guard| guard.field == COMMAND_FIELD) {
            return Err(Refusal::GuardRequired);
        }
        Ok(Authorization::allow().cap_budget(LINE_HANDLER_BUDGET))
    }
}

static TABLE: Once<Arc<EventTable<ConsoleLine, ConsoleVerdict>>> = Once::new();
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// Registers `console.Line`.
pub fn init() {
    let table = super::dispatcher().register(&CONSOLE_LINE, Arc::new(ConsoleService)).expect("console.Line registered twice");
    TABLE.call_once(|| table);
}

/// The `console.Line` table.
pub fn table() -> &'static Arc<EventTable<ConsoleLine, ConsoleVerdict>> {
    TABLE.get().expect("console not initialised")
}

/// The `console.Line` arguments describing `line`.
pub fn describe_line(line: &str) -> ConsoleLine {
    let command = line.split_ascii_whitespace().next().map_or(0, |word| fingerprint_of(word).0);
    ConsoleLine {
        length: line.len() as u64,
        first_byte: line.bytes().next().map_or(0, u64::from),
        command_fingerprint: command,
        sequence: SEQUENCE.fetch_add(1, Ordering::Relaxed) + 1,
    }
}

/// Raises `console.Line` for `line`; true if a handler claimed it.
pub fn offer_line(line: &str) -> bool {
    match TABLE.get() {
        Some(table) => super::raise(table, &describe_line(line)) != ConsoleVerdict::UNCLAIMED,
        None => false,
    }
}
