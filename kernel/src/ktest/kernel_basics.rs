//! Tests of the foundation: traps and recovery, W^X paging, guard pages, frames, heap,
//! timer, boot arguments and the console interpreter.

use alloc::vec::Vec;

use super::{KernelTest, TestResult};
use crate::arch::recovery::catch_faults;
use crate::arch::sv39::PteFlags;
use crate::arch::trap::{Exception, TrapCause};
use crate::ensure;

/// The foundation tests.
pub static TESTS: &[KernelTest] = &[
    KernelTest { name: "trap::unmapped_load_is_reported_with_address", run: unmapped_load_is_reported_with_address },
    KernelTest { name: "trap::recovery_returns_closure_value", run: recovery_returns_closure_value },
    KernelTest { name: "trap::nested_recovery_points", run: nested_recovery_points },
    KernelTest { name: "paging::rodata_is_not_writable", run: rodata_is_not_writable },
    KernelTest { name: "paging::large_pages_unmap_whole_and_map_again", run: large_pages_unmap_whole_and_map_again },
    KernelTest { name: "paging::text_is_not_writable", run: text_is_not_writable },
    KernelTest { name: "paging::heap_is_not_executable", run: heap_is_not_executable },
    KernelTest { name: "paging::sections_have_wx_permissions", run: sections_have_wx_permissions },
    KernelTest { name: "paging::firmware_is_not_mapped", run: firmware_is_not_mapped },
    KernelTest { name: "trap::stack_overflow_hits_guard_page", run: stack_overflow_hits_guard_page },
    KernelTest { name: "mm::frames_roundtrip_without_leak", run: frames_roundtrip_without_leak },
    KernelTest { name: "mm::heap_roundtrip_without_leak", run: heap_roundtrip_without_leak },
    KernelTest { name: "time::tick_advances", run: tick_advances },
    KernelTest { name: "budget::infinite_loop_is_aborted", run: infinite_loop_is_aborted },
    KernelTest { name: "budget::completed_call_returns_value", run: completed_bounded_call_returns_value },
    KernelTest { name: "budget::fault_inside_bounded_call", run: fault_inside_bounded_call },
    KernelTest { name: "bootargs::modes", run: bootargs_modes },
    KernelTest { name: "bootargs::decode_line", run: bootargs_decode_line },
    KernelTest { name: "shell::commands_and_errors", run: shell_commands_and_errors },
    KernelTest { name: "devicetree::describes_virt", run: devicetree_describes_virt },
];

const UNMAPPED_ADDRESS: usize = 0x8;

fn expect_exception(result: Result<(), crate::arch::trap::FaultReport>, expected: Exception) -> TestResult {
    match result {
        Ok(()) => Err(alloc::format!("expected {expected}, but the access succeeded")),
        Err(report) if report.cause == TrapCause::Exception(expected) => Ok(()),
        Err(report) => Err(alloc::format!("expected {expected}, got {report}")),
    }
}

fn unmapped_load_is_reported_with_address() -> TestResult {
    let report = crate::mm::kernel_space::probe_unmapped_load(UNMAPPED_ADDRESS).map_err(alloc::string::String::from)?;
    ensure!(report.cause == TrapCause::Exception(Exception::LoadPageFault), "cause was {}", report.cause);
    ensure!(report.stval == UNMAPPED_ADDRESS, "stval was {:#x}", report.stval);
    ensure!(report.scause == 13, "scause was {}", report.scause);
    let text = alloc::format!("{report}");
    ensure!(text.contains("load page fault") && text.contains("stval=0x8"), "report text: {text}");
    Ok(())
}

fn recovery_returns_closure_value() -> TestResult {
    let value = catch_faults(|| 6 * 7).map_err(|report| alloc::format!("{report}"))?;
    ensure!(value == 42, "got {value}");
    Ok(())
}

fn nested_recovery_points() -> TestResult {
    let outer = catch_faults(|| {
        let inner = crate::mm::kernel_space::probe_unmapped_load(UNMAPPED_ADDRESS);
        inner.is_ok()
    });
    ensure!(outer == Ok(true), "inner fault must be caught by the inner point, outer sees success");
    // The chain must be empty again: a fault now is caught by a fresh point.
    ensure!(crate::mm::kernel_space::probe_unmapped_load(UNMAPPED_ADDRESS).is_ok(), "recovery chain broken");
    Ok(())
}

static READ_ONLY_VALUE: u64 = 0x5a5a;

/// A 2 MiB-aligned range mapped to 2 MiB-aligned frames gets a megapage; unmapping it
/// removes it (a 4 KiB piece of it is refused), so the range maps again; a span whose page
/// table is left from earlier 4 KiB mappings is mapped with 4 KiB pages instead of being
/// reported as already mapped. (A native extension's slot is reused this way: before the
/// fix its megapage arena stayed mapped after unload and the next load of the slot failed.)
fn large_pages_unmap_whole_and_map_again() -> TestResult {
    use crate::arch::PAGE_SIZE;
    use crate::arch::sv39::{MEGAPAGE_SIZE, MapError};
    let root = crate::mm::kernel_space::root().ok_or("no kernel page table")?;
    let frames = crate::mm::frame::allocate_zeroed(2 * MEGAPAGE_SIZE / PAGE_SIZE).ok_or("no 4 MiB of frames")?;
    let physical = frames.address().next_multiple_of(MEGAPAGE_SIZE);
    ensure!(physical + MEGAPAGE_SIZE <= frames.address() + frames.size(), "no aligned 2 MiB inside the run");
    // The last native-extension slot: unused by the tests before this one.
    let base = crate::memlayout::EXTENSION_REGION_BASE + crate::memlayout::EXTENSION_REGION_SIZE - 8 * MEGAPAGE_SIZE;
    let flags = PteFlags::READ | PteFlags::WRITE | PteFlags::GLOBAL;
    let map = |va: usize, length: usize| crate::arch::csr::without_interrupts(|| root.map_range(va, physical, length, flags, &mut crate::mm::frame::PermanentFrames));
    let unmap = |va: usize, length: usize| {
        let outcome = crate::arch::csr::without_interrupts(|| root.unmap_range(va, length));
        crate::arch::csr::flush_tlb();
        outcome
    };
    // A fresh span: one megapage.
    map(base, MEGAPAGE_SIZE).map_err(|error| alloc::format!("mapping 2 MiB: {error}"))?;
    ensure!(root.translate(base + 5 * PAGE_SIZE).map(|(address, _)| address) == Some(physical + 5 * PAGE_SIZE), "the megapage translates wrongly");
    ensure!(unmap(base + PAGE_SIZE, PAGE_SIZE) == Err(MapError::SplitsLargePage(base + PAGE_SIZE)), "a 4 KiB piece of a megapage was unmapped");
    unmap(base, MEGAPAGE_SIZE).map_err(|error| alloc::format!("unmapping the megapage: {error}"))?;
    ensure!(root.translate(base).is_none() && root.translate(base + MEGAPAGE_SIZE - PAGE_SIZE).is_none(), "the megapage is still mapped");
    map(base, MEGAPAGE_SIZE).map_err(|error| alloc::format!("mapping the span again: {error}"))?;
    unmap(base, MEGAPAGE_SIZE).map_err(|error| alloc::format!("unmapping again: {error}"))?;
    // A span with a page table left by a 4 KiB mapping: 4 KiB pages, then unmapped whole.
    let other = base + 2 * MEGAPAGE_SIZE;
    map(other, PAGE_SIZE).map_err(|error| alloc::format!("mapping 4 KiB: {error}"))?;
    unmap(other, PAGE_SIZE).map_err(|error| alloc::format!("unmapping 4 KiB: {error}"))?;
    map(other, MEGAPAGE_SIZE).map_err(|error| alloc::format!("mapping 2 MiB over an empty page table: {error}"))?;
    ensure!(root.translate(other + MEGAPAGE_SIZE - PAGE_SIZE).map(|(address, _)| address) == Some(physical + MEGAPAGE_SIZE - PAGE_SIZE), "wrong translation");
    unmap(other, MEGAPAGE_SIZE).map_err(|error| alloc::format!("unmapping 512 pages: {error}"))?;
    ensure!(root.translate(other).is_none(), "still mapped");
    ensure!(unmap(other, PAGE_SIZE) == Err(MapError::NotMapped(other)), "unmapping nothing succeeded");
    drop(frames);
    Ok(())
}

fn rodata_is_not_writable() -> TestResult {
    let address = core::hint::black_box(&READ_ONLY_VALUE as *const u64 as usize);
    expect_exception(
        catch_faults(|| {
            // SAFETY: the target is in .rodata, mapped read-only: the store traps before
            // writing, and the recovery point catches it.
            unsafe { (address as *mut u64).write_volatile(1) }
        }),
        Exception::StorePageFault,
    )?;
    ensure!(READ_ONLY_VALUE == 0x5a5a, "read-only value changed");
    Ok(())
}

fn text_is_not_writable() -> TestResult {
    let address = core::hint::black_box(text_is_not_writable as fn() -> TestResult as usize);
    expect_exception(
        catch_faults(|| {
            // SAFETY: the target is kernel text, mapped r-x: the store traps before writing.
            unsafe { (address as *mut u32).write_volatile(0) }
        }),
        Exception::StorePageFault,
    )
}

fn heap_is_not_executable() -> TestResult {
    // `ret` (0x00008067) on the heap: executing it must fault, not return.
    let code: Vec<u32> = alloc::vec![0x0000_8067; 4];
    let address = code.as_ptr() as usize;
    expect_exception(
        catch_faults(|| {
            // SAFETY: the heap is mapped rw-, so fetching from it traps before anything
            // executes; the recovery point catches the instruction page fault.
            let function: extern "C" fn() = unsafe { core::mem::transmute(address) };
            function();
        }),
        Exception::InstructionPageFault,
    )
}

fn sections_have_wx_permissions() -> TestResult {
    let root = crate::mm::kernel_space::root().ok_or("paging off")?;
    let text = sections_have_wx_permissions as fn() -> TestResult as usize;
    let rodata = &READ_ONLY_VALUE as *const u64 as usize;
    let heap_value = alloc::boxed::Box::new(1u64);
    let heap = &*heap_value as *const u64 as usize;
    for (name, address, expected) in [
        ("text", text, PteFlags::READ | PteFlags::EXECUTE),
        ("rodata", rodata, PteFlags::READ),
        ("heap", heap, PteFlags::READ | PteFlags::WRITE),
    ] {
        let (_, flags) = root.translate(address).ok_or(alloc::format!("{name} not mapped"))?;
        for bit in [PteFlags::READ, PteFlags::WRITE, PteFlags::EXECUTE] {
            ensure!(flags.contains(bit) == expected.contains(bit), "{name} at {address:#x} has {flags}, expected {expected}");
        }
    }
    Ok(())
}

fn firmware_is_not_mapped() -> TestResult {
    let root = crate::mm::kernel_space::root().ok_or("paging off")?;
    ensure!(root.translate(crate::memlayout::RAM_BASE).is_none(), "OpenSBI's memory is mapped");
    for hart in 0..crate::arch::hart::MAX_HARTS {
        let (guard, _) = crate::arch::boot::boot_stack_guard(hart);
        ensure!(root.translate(guard).is_none(), "guard page of hart {hart} is mapped");
    }
    Ok(())
}

/// Recurses until `limit` (never reached in the test: the stack overflows first).
#[inline(never)]
fn recurse(depth: u64, limit: u64) -> u64 {
    if depth >= limit {
        return depth;
    }
    let mut frame = [0u8; 1024];
    frame[0] = depth as u8;
    let frame = core::hint::black_box(frame);
    frame[0] as u64 + recurse(core::hint::black_box(depth + 1), limit)
}

fn stack_overflow_hits_guard_page() -> TestResult {
    match catch_faults(|| recurse(0, u64::MAX)) {
        Ok(_) => Err("unbounded recursion returned".into()),
        Err(report) => {
            ensure!(report.stack_overflow, "fault not flagged as a stack overflow: {report}");
            ensure!(report.cause == TrapCause::Exception(Exception::StorePageFault), "cause {report}");
            Ok(())
        }
    }
}

fn frames_roundtrip_without_leak() -> TestResult {
    let before = crate::mm::frame::stats();
    {
        let run = crate::mm::frame::allocate_zeroed(3).ok_or("no frames")?;
        ensure!(run.address() % crate::arch::PAGE_SIZE == 0, "unaligned frame {:#x}", run.address());
        ensure!(crate::mm::frame::stats().allocated == before.allocated + 3, "allocated count not updated");
        // SAFETY: the run is ours and identity-mapped read-write.
        let first = unsafe { (run.address() as *const u64).read() };
        ensure!(first == 0, "frame not zeroed");
    }
    ensure!(crate::mm::frame::stats() == before, "frames leaked: {:?} -> {:?}", before, crate::mm::frame::stats());
    Ok(())
}

fn heap_roundtrip_without_leak() -> TestResult {
    let before = crate::mm::heap::stats();
    {
        let values: Vec<u64> = (0..10_000).collect();
        ensure!(values.iter().sum::<u64>() == 49_995_000, "sum wrong");
        ensure!(crate::mm::heap::stats().requested_bytes > before.requested_bytes, "heap counters did not move");
    }
    ensure!(crate::mm::heap::stats() == before, "heap leaked: {:?} -> {:?}", before, crate::mm::heap::stats());
    Ok(())
}

fn tick_advances() -> TestResult {
    let start = crate::time::ticks();
    let start_time = crate::time::uptime_micros();
    while crate::time::ticks() < start + 3 {
        if crate::time::uptime_micros() - start_time > 2_000_000 {
            return Err(alloc::format!("no timer interrupts: ticks stuck at {}", crate::time::ticks()));
        }
        crate::arch::csr::wait_for_interrupt();
    }
    Ok(())
}

fn bootargs_modes() -> TestResult {
    use crate::bootargs::{Mode, parse};
    ensure!(parse("") == Mode::Interactive, "empty");
    ensure!(parse("console=ttyS0 spindle.mode=test") == Mode::Test { from: 0, only: None, watchdog_seconds: None }, "test");
    ensure!(parse("spindle.mode=test spindle.test.from=5") == Mode::Test { from: 5, only: None, watchdog_seconds: None }, "from");
    ensure!(parse("spindle.mode=test spindle.test.only=a::b") == Mode::Test { from: 0, only: Some("a::b"), watchdog_seconds: None }, "only");
    ensure!(parse("spindle.mode=test spindle.test.watchdog=2") == Mode::Test { from: 0, only: None, watchdog_seconds: Some(2) }, "watchdog");
    ensure!(parse("spindle.mode=bench") == Mode::Bench, "bench");
    ensure!(parse("spindle.script=mem,halt") == Mode::Script("mem,halt"), "script");
    Ok(())
}

fn bootargs_decode_line() -> TestResult {
    use crate::bootargs::{DecodeError, decode_line};
    let mut buffer = [0u8; 16];
    ensure!(decode_line("ext%20load%20hello", &mut [0u8; 64]) == Ok("ext load hello"), "spaces");
    ensure!(decode_line("a%2Cb", &mut buffer) == Ok("a,b"), "comma");
    ensure!(decode_line("bad%2", &mut buffer) == Err(DecodeError::BadEscape), "short escape");
    ensure!(decode_line("bad%zz", &mut buffer) == Err(DecodeError::BadEscape), "non-hex escape");
    ensure!(decode_line("0123456789abcdefX", &mut buffer) == Err(DecodeError::TooLong), "too long");
    ensure!(decode_line("%ff", &mut buffer) == Err(DecodeError::NotUtf8), "utf8");
    Ok(())
}

fn shell_commands_and_errors() -> TestResult {
    use crate::shell::{CommandError, run_line};
    ensure!(run_line("").is_ok(), "empty line");
    ensure!(run_line("echo hello from a test").is_ok(), "echo");
    ensure!(matches!(run_line("no-such-command"), Err(CommandError::UnknownCommand)), "unknown command accepted");
    ensure!(matches!(run_line("fault"), Err(CommandError::Usage(_))), "fault without address accepted");
    ensure!(matches!(run_line("fault 0x80200000"), Err(CommandError::Failed(_))), "probing mapped memory accepted");
    ensure!(run_line("fault 0x8").is_ok(), "probing unmapped memory failed");
    ensure!(matches!(run_line("halt 0 1"), Err(CommandError::Usage(_))), "halt with two arguments accepted");
    Ok(())
}

fn devicetree_describes_virt() -> TestResult {
    ensure!(crate::devicetree::memory_regions().count() >= 1, "no memory");
    ensure!(crate::devicetree::hart_count() >= 1, "no harts");
    ensure!(crate::devicetree::devices().any(|device| device.compatible == "ns16550a"), "no UART");
    ensure!(crate::devicetree::timebase_frequency() == Some(10_000_000), "timebase {:?}", crate::devicetree::timebase_frequency());
    Ok(())
}

fn infinite_loop_is_aborted() -> TestResult {
    use crate::arch::recovery::{Abort, run_bounded};
    let budget = crate::time::micros_to_timebase(2_000);
    let start = crate::time::now();
    let outcome = run_bounded(start + budget, || loop {
        core::hint::spin_loop();
    });
    let elapsed = crate::time::now() - start;
    ensure!(matches!(outcome, Err(Abort::BudgetExceeded)), "outcome {:?}", outcome.err());
    ensure!(elapsed >= budget, "aborted early: {elapsed} < {budget}");
    // Aborted within a tick of the deadline, not at some later tick.
    ensure!(elapsed < budget + crate::time::micros_to_timebase(10_000), "aborted late: {elapsed}");
    ensure!(crate::arch::hart::current().budget_deadline.load(core::sync::atomic::Ordering::Relaxed) == 0, "deadline left armed");
    // The hart still works and ticks keep coming.
    tick_advances()
}

fn completed_bounded_call_returns_value() -> TestResult {
    let deadline = crate::time::now() + crate::time::micros_to_timebase(1_000_000);
    let value = crate::arch::recovery::run_bounded(deadline, || 7 * 6).map_err(|abort| alloc::format!("{abort:?}"))?;
    ensure!(value == 42, "value {value}");
    Ok(())
}

fn fault_inside_bounded_call() -> TestResult {
    use crate::arch::recovery::{Abort, run_bounded};
    let deadline = crate::time::now() + crate::time::micros_to_timebase(1_000_000);
    let outcome = run_bounded(deadline, || {
        // SAFETY: the first page is never mapped; the load traps and is recovered.
        unsafe { (core::hint::black_box(UNMAPPED_ADDRESS) as *const u64).read_volatile() }
    });
    match outcome {
        Err(Abort::Fault(report)) => {
            ensure!(report.stval == UNMAPPED_ADDRESS, "stval {:#x}", report.stval);
            Ok(())
        }
        other => Err(alloc::format!("expected a fault, got {other:?}")),
    }
}
