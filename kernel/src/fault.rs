//! What happens when the kernel itself faults or panics: a report with cause, address
//! and registers on the console, then a failure exit so a test run never passes by
//! accident.

use core::fmt::Write;

use crate::arch::trap::{FaultReport, TrapFrame, dump_registers};
use crate::power::{ExitStatus, exit};

/// Called with "panic" or "fatal kernel fault" just before the machine stops (the test
/// harness reports the running test as failed). Set once; layers above register it, so
/// this module calls nothing above itself.
static FATAL_HOOK: spin::Once<fn(&str)> = spin::Once::new();

/// Registers the hook told about a fatal event before the machine stops (first call wins).
pub fn set_fatal_hook(hook: fn(&str)) {
    FATAL_HOOK.call_once(|| hook);
}

fn note_fatal_event(what: &str) {
    if let Some(hook) = FATAL_HOOK.get() {
        hook(what);
    }
}

/// Reports an unrecoverable fault in S-mode and stops the machine.
pub fn fatal_kernel_fault(report: &FaultReport, frame: &TrapFrame) -> ! {
    let mut out = crate::console::unlocked_writer();
    let _ = writeln!(out, "\n[fatal] kernel fault on hart {}: {report}", crate::arch::hart::id());
    let _ = dump_registers(frame, &mut out);
    note_fatal_event("fatal kernel fault");
    exit(ExitStatus::FatalFault)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    // A panic inside a bounded extension handler (a built-in extension's code) is that
    // extension's panic: contain it like a native extension's (DESIGN.md §6).
    let local = crate::arch::hart::current();
    if local.budget_deadline.load(core::sync::atomic::Ordering::Relaxed) != 0 {
        crate::ext::record_panic(alloc::format!("{}", info.message()));
        local.pending_panic.store(1, core::sync::atomic::Ordering::Relaxed);
        crate::arch::trap::raise_breakpoint();
    }
    crate::arch::csr::disable_interrupts();
    let mut out = crate::console::unlocked_writer();
    let _ = write!(out, "\n[panic] hart {}", crate::arch::hart::id());
    if let Some(location) = info.location() {
        let _ = write!(out, " at {}:{}:{}", location.file(), location.line(), location.column());
    }
    let _ = writeln!(out, ": {}", info.message());
    note_fatal_event("panic");
    exit(ExitStatus::Panic)
}
