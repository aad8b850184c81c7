//! Tests of the disk service (`services::disk`): data through the queue, FIFO by default,
//! `disk.Schedule` answers used, garbage refused, the starvation bound, modelled time,
//! injected device errors (the data never corrupted), a full queue, a scheduling policy
//! that panics or loops (killed, FIFO goes on) in every technology — and after each test
//! (and before each reconfiguration) every submitted request completed exactly once
//! ([`exactly_once`]).

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use spindle_abi::event::{DISK_SCHEDULE, DiskQueueEntry, DiskSchedule, ScheduleChoice};
use spindle_dispatch::{BindingSpec, handler_fn};
use spindle_service_disk::model::Parameters;
use spindle_service_disk::queue::{Decision, Policy, QueuedRequest, choose};

use super::{KernelTest, TestResult};
use super::text;
use crate::arch::csr::without_interrupts;
use crate::ensure;
use crate::ext;
use crate::sched::{self, Priority};
use crate::services::disk::{self, DiskError, Dispatched};
use crate::drivers::virtio_blk::BlockError;
use disksched_faulty::{LOOP_SECTOR, PANIC_SECTOR};
use spindle_service_disk::faults::FaultTarget;

/// The disk-service tests.
pub const TESTS: &[KernelTest] = &[
    KernelTest { name: "disk::data_round_trips_through_the_queue", run: || exactly_once(data_round_trips_through_the_queue) },
    KernelTest { name: "disk::modelled_time_depends_on_placement", run: || exactly_once(modelled_time_depends_on_placement) },
    KernelTest { name: "disk::fifo_by_default_every_request_once", run: || exactly_once(fifo_by_default_every_request_once) },
    KernelTest { name: "disk::schedule_answers_are_used", run: || exactly_once(schedule_answers_are_used) },
    KernelTest { name: "disk::garbage_answers_fall_back_to_fifo", run: || exactly_once(garbage_answers_fall_back_to_fifo) },
    KernelTest { name: "disk::starvation_bound_overrides_the_answer", run: || exactly_once(starvation_bound_overrides_the_answer) },
    KernelTest { name: "disk::bad_requests_are_refused", run: || exactly_once(bad_requests_are_refused) },
    KernelTest { name: "disk::policies_match_the_reference_in_every_technology", run: || exactly_once(policies_match_the_reference_in_every_technology) },
    KernelTest { name: "disk::injected_write_error_keeps_the_old_data", run: || exactly_once(injected_write_error_keeps_the_old_data) },
    KernelTest { name: "disk::injected_read_error_then_the_right_data", run: || exactly_once(injected_read_error_then_the_right_data) },
    KernelTest { name: "disk::next_requests_fail_then_requests_work", run: || exactly_once(next_requests_fail_then_requests_work) },
    KernelTest { name: "disk::full_queue_refuses_and_counts", run: || exactly_once(full_queue_refuses_and_counts) },
    KernelTest { name: "disk::panicking_policy_is_killed_fifo_serves_in_every_technology", run: || exactly_once(|| broken_policy_is_contained(PANIC_SECTOR)) },
    KernelTest { name: "disk::looping_policy_is_killed_fifo_serves_in_every_technology", run: || exactly_once(|| broken_policy_is_contained(LOOP_SECTOR)) },
    KernelTest { name: "disk::exported_state_matches_the_service", run: || exactly_once(exported_state_matches_the_service) },
    KernelTest { name: "disk::user_program_sees_the_state_change", run: || exactly_once(user_program_sees_the_state_change) },
    KernelTest { name: "disk::user_program_without_a_disk_gets_no_device", run: || exactly_once(user_program_without_a_disk_gets_no_device) },
    KernelTest { name: "disk::benchmark_runs_repeat_their_order_of_service", run: || exactly_once(benchmark_runs_repeat_their_order_of_service) },
];

/// Runs `test`, then checks that every request submitted since the service last
/// (re)started completed exactly once and was delivered ([`disk::Accounting::check_idle`]),
/// whether the test passed or not (a test's own failure is reported first).
fn exactly_once(test: impl FnOnce() -> TestResult) -> TestResult {
    let outcome = test();
    let accounted = disk::accounting().ok_or_else(|| String::from("no disk service")).and_then(|accounting| accounting.check_idle());
    // A failed test may leave rules armed; the next test starts without them.
    let armed = disk::clear_injected_errors();
    outcome?;
    accounted.map_err(|error| alloc::format!("exactly once: {error}"))?;
    ensure!(armed == 0, "{armed} injected errors were armed and not used");
    Ok(())
}

/// Checks the requests so far completed exactly once, then restarts the service with
/// `model` and `max_wait_ns` (its counters start again).
fn configure(model: &str, max_wait_ns: u64) -> TestResult {
    let accounting = disk::accounting().ok_or("no disk service")?;
    accounting.check_idle().map_err(|error| alloc::format!("exactly once (before reconfiguring): {error}"))?;
    disk::configure(model, max_wait_ns)
}

/// Sectors of the test area (away from the driver tests' sectors).
const BASE: u64 = 1 << 20;

/// A sector's test pattern.
fn pattern(sector: u64, salt: u8) -> Vec<u8> {
    (0..512u64).map(|index| (sector.wrapping_mul(31) ^ index ^ u64::from(salt)) as u8).collect()
}

fn data_round_trips_through_the_queue() -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let data: Vec<u8> = (0..4).flat_map(|index| pattern(BASE + index, 7)).collect();
    disk::write(BASE, &data).map_err(text)?;
    let mut read = alloc::vec![0u8; data.len()];
    disk::read(BASE, &mut read).map_err(text)?;
    ensure!(read == data, "the sectors read back differ from those written");
    let stats = disk::stats().ok_or("no disk service")?;
    ensure!(stats.completed == 2 && stats.queue.submitted == 2 && stats.queue.dispatched == 2, "counters {stats:?}");
    ensure!(stats.busy_ns > 2 * 2_200_000, "modelled busy time {} ns is below two controller overheads", stats.busy_ns);
    Ok(())
}

/// Reads one sector and returns the guest time it took, ns.
fn timed_read(sector: u64) -> Result<u64, String> {
    let mut buffer = [0u8; 512];
    let start = crate::time::now_ns();
    disk::read(sector, &mut buffer).map_err(text)?;
    Ok(crate::time::now_ns() - start)
}

/// Under the HP 97560 model a read next to the last one is faster than one across the
/// disk (a long seek); under `none` no time is modelled (the read takes what the host's
/// I/O takes).
fn modelled_time_depends_on_placement() -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    timed_read(BASE)?;
    let near = timed_read(BASE + 72)?;
    let far = timed_read(2_000_000)?;
    ensure!(near >= 2_200_000, "a read took {near} ns, less than the controller overhead");
    ensure!(far > near + 8_000_000, "a long seek ({far} ns) is not 8 ms slower than a short one ({near} ns)");
    configure("none", disk::DEFAULT_MAX_WAIT_NS)?;
    timed_read(2_000_000)?;
    timed_read(BASE)?;
    let unmodelled = disk::stats().ok_or("no disk service")?;
    ensure!(unmodelled.completed == 2 && unmodelled.busy_ns == 0, "with no model: {unmodelled:?}");
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    Ok(())
}

/// Reads `sectors` from as many strands at once (each one sector); returns the dispatch
/// decisions of those requests in service order, and checks every read's data and that
/// each was served exactly once.
fn concurrent_reads(sectors: &[u64]) -> Result<Vec<Dispatched>, String> {
    let before = disk::stats().ok_or("no disk service")?;
    let failures: Arc<spin::Mutex<Vec<String>>> = Arc::new(spin::Mutex::new(Vec::new()));
    let mut strands = Vec::new();
    for &sector in sectors {
        let failures = failures.clone();
        let body = move || {
            let mut buffer = [0u8; 512];
            if let Err(error) = disk::read(sector, &mut buffer) {
                without_interrupts(|| failures.lock().push(alloc::format!("sector {sector}: {error}")));
            }
        };
        strands.push(sched::spawn("test-disk", Priority::NORMAL, body).map_err(text)?);
    }
    for strand in &strands {
        strand.join();
    }
    let failures = without_interrupts(|| failures.lock().clone());
    ensure!(failures.is_empty(), "{}", failures.join("; "));
    let after = disk::stats().ok_or("no disk service")?;
    let count = sectors.len() as u64;
    ensure!(after.queue.submitted - before.queue.submitted == count, "submitted {} of {count}", after.queue.submitted - before.queue.submitted);
    ensure!(after.queue.dispatched - before.queue.dispatched == count, "dispatched {} of {count}", after.queue.dispatched - before.queue.dispatched);
    ensure!(after.completed - before.completed == count, "completed {} of {count}", after.completed - before.completed);
    ensure!(after.queued == 0, "{} still queued", after.queued);
    let recent = disk::recent_dispatches();
    Ok(recent[recent.len() - sectors.len()..].to_vec())
}

/// Sectors spread over the disk in a fixed scrambled order.
fn spread(count: u64) -> Vec<u64> {
    (0..count).map(|index| (index * 7_919 % count) * 25_000 + 4_096).collect()
}

fn fifo_by_default_every_request_once() -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let served = concurrent_reads(&spread(12))?;
    let ids: Vec<u64> = served.iter().map(|dispatched| dispatched.id).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    ensure!(ids == sorted, "served out of arrival order without a policy: {ids:?}");
    ensure!(served.iter().all(|dispatched| dispatched.decision == Decision::Reference { bad_answer: None }), "decisions {served:?}");
    Ok(())
}

/// A built-in handler answering the newest queued request (read through the `disk`
/// domain, as an extension would).
fn newest(_: &DiskSchedule) -> Result<ScheduleChoice, spindle_dispatch::HandlerFault> {
    let mut bytes = [0u8; 64 * DiskQueueEntry::SIZE];
    let newest = DiskQueueEntry::read_queue(&mut bytes).map(|entry| entry.id).max().unwrap_or(0);
    Ok(ScheduleChoice { request: newest })
}

/// Runs `body` with `handler` bound to `disk.Schedule`.
fn with_policy<T>(
    name: &'static str,
    handler: fn(&DiskSchedule) -> Result<ScheduleChoice, spindle_dispatch::HandlerFault>,
    body: impl FnOnce() -> Result<T, String>,
) -> Result<T, String> {
    let binding = crate::events::dispatcher().install(&DISK_SCHEDULE, BindingSpec::new("test", handler_fn(name, handler))).map_err(text)?;
    let outcome = body();
    let _ = crate::events::dispatcher().uninstall(binding);
    outcome
}

fn schedule_answers_are_used() -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let served = with_policy("test.newest", newest, || concurrent_reads(&spread(12)))?;
    let answered = served.iter().filter(|dispatched| dispatched.decision == Decision::Answer).count();
    // The first request is served as soon as it arrives (alone in the queue, it is the
    // newest too); while it is on the disk the others queue, and the newest goes first.
    ensure!(answered == served.len(), "{answered} of {} dispatches used the answer: {served:?}", served.len());
    let ids: Vec<u64> = served.iter().map(|dispatched| dispatched.id).collect();
    ensure!(ids.windows(2).skip(1).all(|pair| pair[0] > pair[1]), "not newest-first after the first: {ids:?}");
    Ok(())
}

fn garbage(_: &DiskSchedule) -> Result<ScheduleChoice, spindle_dispatch::HandlerFault> {
    Ok(ScheduleChoice { request: 0xdead_beef })
}

fn garbage_answers_fall_back_to_fifo() -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let rejected_before = rejections();
    let served = with_policy("test.garbage", garbage, || concurrent_reads(&spread(8)))?;
    let ids: Vec<u64> = served.iter().map(|dispatched| dispatched.id).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    ensure!(ids == sorted, "garbage answers changed the order: {ids:?}");
    // Each refused answer is a fault of the binding (three in a row disable it).
    ensure!(rejections() > rejected_before, "no answer was refused");
    ensure!(served.iter().all(|dispatched| dispatched.decision == Decision::Reference { bad_answer: None }), "decisions {served:?}");
    Ok(())
}

/// Faults (refused answers among them) of `disk.Schedule`'s bindings, removed ones included.
fn rejections() -> u64 {
    crate::events::dispatcher()
        .snapshot()
        .into_iter()
        .filter(|event| event.name == "disk.Schedule")
        .map(|event| event.removed.faults + event.bindings.iter().map(|binding| binding.counters.faults).sum::<u64>())
        .sum()
}

fn starvation_bound_overrides_the_answer() -> TestResult {
    // A bound shorter than one request's service time: whoever has waited longest goes first.
    configure("hp97560", 1_000_000)?;
    let served = with_policy("test.newest", newest, || concurrent_reads(&spread(12)));
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let served = served?;
    let overrides = served.iter().filter(|dispatched| matches!(dispatched.decision, Decision::Starvation { .. })).count();
    ensure!(overrides > 0, "no starvation override with a 1 ms bound: {served:?}");
    ensure!(disk::stats().map(|stats| stats.queue.starvation_overrides) == Some(0), "configure did not start the counters again");
    Ok(())
}

fn bad_requests_are_refused() -> TestResult {
    let mut buffer = [0u8; 512];
    let past = disk::read(u64::MAX - 1, &mut buffer);
    ensure!(matches!(past, Err(DiskError::PastEnd { .. })), "a read past the end gave {past:?}");
    let mut odd = [0u8; 100];
    ensure!(disk::read(0, &mut odd) == Err(DiskError::BadLength(100)), "a partial sector was accepted");
    ensure!(disk::write(0, &[]) == Err(DiskError::BadLength(0)), "an empty write was accepted");
    Ok(())
}

/// The block service's own policy `policy` as a built-in handler, on the exported queue.
fn reference(policy: Policy) -> impl Fn(&DiskSchedule) -> Result<ScheduleChoice, spindle_dispatch::HandlerFault> + Send + Sync + 'static {
    move |args: &DiskSchedule| {
        let mut bytes = alloc::vec![0u8; 256 * DiskQueueEntry::SIZE];
        let queue: Vec<QueuedRequest> = DiskQueueEntry::read_queue(&mut bytes)
            .map(|entry| QueuedRequest { id: entry.id, start_block: entry.sector, blocks: 1, write: false, arrival_ns: entry.arrival_ns, submitter: 0 })
            .collect();
        let geometry = *Parameters::hp97560().geometry();
        let chosen = choose(policy, &queue, args.head_cylinder as u32, &geometry).map_or(ScheduleChoice::NONE, |index| queue[index].id);
        Ok(ScheduleChoice { request: chosen })
    }
}

/// Each policy extension, built in, native, Wasm and user-level, serves the same queue in
/// the same order as the block service's reference policy, and every answer is used.
fn policies_match_the_reference_in_every_technology() -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let sectors = spread(16);
    let fifo: Vec<u64> = concurrent_reads(&sectors)?.iter().map(|dispatched| dispatched.sector).collect();
    for (name, policy) in [("disksched_sstf", Policy::ShortestSeekFirst), ("disksched_clook", Policy::CircularLook)] {
        let binding = crate::events::dispatcher()
            .install(&DISK_SCHEDULE, BindingSpec::new("test", handler_fn("test.reference", reference(policy))))
            .map_err(text)?;
        let expected = concurrent_reads(&sectors);
        let _ = crate::events::dispatcher().uninstall(binding);
        let expected: Vec<u64> = expected?.iter().map(|dispatched| dispatched.sector).collect();
        ensure!(expected != fifo, "{name}: the reference order equals FIFO's on this queue (a useless test)");
        for preference in [ext::Preference::BuiltIn, ext::Preference::Default, ext::Preference::Wasm, ext::Preference::User] {
            let extension = ext::load(name, preference).map_err(text)?;
            let technology = extension.technology;
            drop(extension);
            let served = concurrent_reads(&sectors);
            let state = ext::find(name).map(|extension| extension.state.lock().clone());
            let server = ext::user::serving_pid(name);
            ext::unload(name).map_err(text)?;
            if let Some(pid) = server {
                ensure!(crate::proc::wait_until_reaped(pid, 200), "serving process {pid} did not end after the unload");
            }
            let served = served?;
            ensure!(state == Some(ext::ExtensionState::Running), "{name} {technology}: state {state:?}");
            let order: Vec<u64> = served.iter().map(|dispatched| dispatched.sector).collect();
            ensure!(order == expected, "{name} {technology}: served {order:?}, the reference {expected:?}");
            ensure!(served.iter().all(|dispatched| dispatched.decision == Decision::Answer), "{name} {technology}: decisions {served:?}");
        }
    }
    Ok(())
}

/// Sectors of the fault tests (inside the test area, apart from the other tests').
const FAULT_BASE: u64 = BASE + 4_096;

/// Writes pattern `salt` at `sector` (one sector) and reads it back.
fn write_checked(sector: u64, salt: u8) -> TestResult {
    disk::write(sector, &pattern(sector, salt)).map_err(text)?;
    read_expecting(sector, salt)
}

/// Reads `sector` and checks it holds pattern `salt`.
fn read_expecting(sector: u64, salt: u8) -> TestResult {
    let mut buffer = alloc::vec![0u8; 512];
    disk::read(sector, &mut buffer).map_err(text)?;
    ensure!(buffer == pattern(sector, salt), "sector {sector} does not hold pattern {salt} (first bytes {:02x?})", &buffer[..8]);
    Ok(())
}

/// What the strands of a test record, shared with it.
type Shared<T> = Arc<spin::Mutex<Vec<T>>>;

/// The error an injected fault delivers.
const INJECTED: DiskError = DiskError::Device(BlockError::DeviceIo);

/// A write the fault plan fails leaves the old data on the disk; the next write works.
fn injected_write_error_keeps_the_old_data() -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let sector = FAULT_BASE;
    write_checked(sector, 1)?;
    disk::inject_device_error(FaultTarget::Writes, 1)?;
    let failed = disk::write(sector, &pattern(sector, 2));
    ensure!(failed == Err(INJECTED), "the write with an injected error gave {failed:?}");
    read_expecting(sector, 1).map_err(|error| alloc::format!("after the failed write: {error}"))?;
    // The rule is used up: the same write now lands.
    write_checked(sector, 2)?;
    // A multi-sector write hit at one of its sectors leaves all of them as they were.
    let data: Vec<u8> = (0..4).flat_map(|index| pattern(sector + 8 + index, 3)).collect();
    disk::write(sector + 8, &data).map_err(text)?;
    disk::inject_device_error(FaultTarget::Sector(sector + 10), 1)?;
    let other: Vec<u8> = (0..4).flat_map(|index| pattern(sector + 8 + index, 4)).collect();
    let failed = disk::write(sector + 8, &other);
    ensure!(failed == Err(INJECTED), "the 4-sector write covering the faulty sector gave {failed:?}");
    for index in 0..4 {
        read_expecting(sector + 8 + index, 3)?;
    }
    let stats = disk::stats().ok_or("no disk service")?;
    ensure!(stats.injected_errors == 2 && stats.device_errors == 2, "errors counted: {stats:?}");
    Ok(())
}

/// A read the fault plan fails gets the device error and no data; the next read of the
/// same sector gets the right data.
fn injected_read_error_then_the_right_data() -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let sector = FAULT_BASE + 64;
    write_checked(sector, 5)?;
    disk::inject_device_error(FaultTarget::Sector(sector), 1)?;
    // A read elsewhere does not match the rule.
    write_checked(sector + 1, 6)?;
    let mut buffer = alloc::vec![0xeeu8; 512];
    let failed = disk::read(sector, &mut buffer);
    ensure!(failed == Err(INJECTED), "the read with an injected error gave {failed:?}");
    ensure!(buffer.iter().all(|&byte| byte == 0xee), "a failed read changed the caller's buffer");
    read_expecting(sector, 5)?;
    let stats = disk::stats().ok_or("no disk service")?;
    ensure!(stats.injected_errors == 1 && stats.completed == 6, "counters after the fault: {stats:?}");
    ensure!(disk::inject_device_error(FaultTarget::Any, 0).is_err(), "a rule hitting no request was accepted");
    Ok(())
}

/// The next three requests fail (from strands queued behind each other), the rest read the
/// right data; each request completes once.
fn next_requests_fail_then_requests_work() -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let sectors: Vec<u64> = (0..6).map(|index| FAULT_BASE + 128 + index * 8).collect();
    for &sector in &sectors {
        disk::write(sector, &pattern(sector, 9)).map_err(text)?;
    }
    disk::inject_device_error(FaultTarget::Any, 3)?;
    let outcomes: Shared<(u64, Result<bool, DiskError>)> = Arc::new(spin::Mutex::new(Vec::new()));
    let mut strands = Vec::new();
    for &sector in &sectors {
        let outcomes = outcomes.clone();
        let body = move || {
            let mut buffer = [0u8; 512];
            let outcome = disk::read(sector, &mut buffer).map(|()| buffer[..] == pattern(sector, 9)[..]);
            without_interrupts(|| outcomes.lock().push((sector, outcome)));
        };
        strands.push(sched::spawn("test-disk", Priority::NORMAL, body).map_err(text)?);
    }
    for strand in &strands {
        strand.join();
    }
    let outcomes = without_interrupts(|| outcomes.lock().clone());
    ensure!(outcomes.len() == sectors.len(), "{} of {} reads returned", outcomes.len(), sectors.len());
    let failed = outcomes.iter().filter(|(_, outcome)| *outcome == Err(INJECTED)).count();
    let right = outcomes.iter().filter(|(_, outcome)| *outcome == Ok(true)).count();
    ensure!(failed == 3 && right == 3, "{failed} failed and {right} read the right data: {outcomes:?}");
    // FIFO: the first three served are the ones that failed.
    let served: Vec<u64> = disk::recent_dispatches().iter().rev().take(sectors.len()).rev().map(|dispatched| dispatched.sector).collect();
    let failed_sectors: Vec<u64> = served[..3].to_vec();
    ensure!(
        outcomes.iter().all(|(sector, outcome)| (*outcome == Err(INJECTED)) == failed_sectors.contains(sector)),
        "the failed reads are not the first three served ({served:?}): {outcomes:?}"
    );
    let stats = disk::stats().ok_or("no disk service")?;
    ensure!(stats.injected_errors == 3 && stats.device_errors == 3, "errors counted: {stats:?}");
    Ok(())
}

/// With a queue of 8, 16 strands reading at once: the first request goes to the disk, 8
/// queue behind it, and the rest are refused with `QueueFull` (counted as `refused_full`);
/// every accepted read completes with the right data.
fn full_queue_refuses_and_counts() -> TestResult {
    const CAPACITY: usize = 8;
    const READERS: u64 = 16;
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let sectors: Vec<u64> = (0..READERS).map(|index| FAULT_BASE + 512 + index * 8).collect();
    for &sector in &sectors {
        disk::write(sector, &pattern(sector, 11)).map_err(text)?;
    }
    disk::configure_queue("hp97560", disk::DEFAULT_MAX_WAIT_NS, CAPACITY)?;
    let outcome = (|| -> TestResult {
        let outcomes: Shared<Result<bool, DiskError>> = Arc::new(spin::Mutex::new(Vec::new()));
        let mut strands = Vec::new();
        for &sector in &sectors {
            let outcomes = outcomes.clone();
            let body = move || {
                let mut buffer = [0u8; 512];
                let outcome = disk::read(sector, &mut buffer).map(|()| buffer[..] == pattern(sector, 11)[..]);
                without_interrupts(|| outcomes.lock().push(outcome));
            };
            strands.push(sched::spawn("test-disk", Priority::NORMAL, body).map_err(text)?);
        }
        for strand in &strands {
            strand.join();
        }
        let outcomes = without_interrupts(|| outcomes.lock().clone());
        let refused = outcomes.iter().filter(|outcome| **outcome == Err(DiskError::QueueFull)).count() as u64;
        let right = outcomes.iter().filter(|outcome| **outcome == Ok(true)).count() as u64;
        ensure!(refused + right == READERS, "outcomes other than the right data or QueueFull: {outcomes:?}");
        // CAPACITY queued, plus the first if the service took it to the disk before the
        // queue filled; all before the first finishes (2.2 ms at least).
        ensure!((CAPACITY as u64..=CAPACITY as u64 + 1).contains(&right) && refused == READERS - right, "{right} accepted, {refused} refused: {outcomes:?}");
        let stats = disk::stats().ok_or("no disk service")?;
        ensure!(stats.queue.refused_full == refused, "refused_full {} for {refused} refusals", stats.queue.refused_full);
        ensure!(stats.queue.submitted == right && stats.completed == right, "counters {stats:?}");
        Ok(())
    })();
    let accounting = disk::accounting().ok_or("no disk service")?;
    // Back to the full queue (checked first: every accepted request completed once).
    let restored = configure("hp97560", disk::DEFAULT_MAX_WAIT_NS);
    outcome?;
    restored?;
    ensure!(accounting.submitted >= CAPACITY as u64 && accounting.delivered == accounting.submitted, "accounting {accounting:?}");
    let text = alloc::format!("{}", DiskError::QueueFull);
    ensure!(text.contains("full") && text.contains("nothing was queued"), "QueueFull reads {text:?}");
    Ok(())
}

/// `disksched_faulty`, built in, native, Wasm and user-level: its answers (newest first) are
/// used while no trigger is queued; once the request at `trigger` is, it panics or loops, is
/// killed, and the rest of the queue is served in FIFO order — every read completing once
/// with its data.
fn broken_policy_is_contained(trigger: u64) -> TestResult {
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let (reason, label) = if trigger == PANIC_SECTOR { ("panicked", "panic") } else { ("overran budget", "loop") };
    // Spread reads, the trigger in the middle of the arrivals.
    let mut sectors = spread(10);
    sectors.insert(5, trigger);
    for preference in [ext::Preference::BuiltIn, ext::Preference::Default, ext::Preference::Wasm, ext::Preference::User] {
        let extension = ext::load("disksched_faulty", preference).map_err(text)?;
        let technology = extension.technology;
        drop(extension);
        let healthy = concurrent_reads(&spread(8));
        let served = healthy.and_then(|healthy| {
            ensure!(healthy.iter().all(|dispatched| dispatched.decision == Decision::Answer), "healthy answers not all used: {healthy:?}");
            concurrent_reads(&sectors)
        });
        let state = ext::find("disksched_faulty").map(|extension| extension.state.lock().clone());
        let server = ext::user::serving_pid("disksched_faulty");
        ext::unload("disksched_faulty").map_err(text)?;
        if let Some(pid) = server {
            ensure!(crate::proc::wait_until_reaped(pid, 200), "{technology}: serving process {pid} did not end after the unload");
        }
        let served = served.map_err(|error| alloc::format!("{technology} {label}: {error}"))?;
        ensure!(
            matches!(&state, Some(ext::ExtensionState::Killed(why)) if why.contains(reason)),
            "{technology} {label}: state {state:?}, expected a kill for {reason:?}"
        );
        // Answers used while it was healthy, then the default: FIFO by id.
        let killed_at = served
            .iter()
            .position(|dispatched| dispatched.decision != Decision::Answer)
            .ok_or_else(|| alloc::format!("{technology} {label}: never fell back: {served:?}"))?;
        let after = &served[killed_at..];
        ensure!(after.iter().all(|dispatched| dispatched.decision == Decision::Reference { bad_answer: None }), "{technology} {label}: decisions after the kill {after:?}");
        ensure!(after.windows(2).all(|pair| pair[0].id < pair[1].id), "{technology} {label}: not FIFO after the kill: {after:?}");
        ensure!(served.iter().any(|dispatched| dispatched.sector == trigger), "{technology} {label}: the trigger read was not served");
    }
    Ok(())
}

/// What `disk_state` copies agrees with the service's counters, and lists the queued
/// requests while strands wait (read from a strand polling while they queue).
fn exported_state_matches_the_service() -> TestResult {
    use spindle_abi::syscall::DiskState;
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let empty = disk::exported_state(crate::time::now_ns()).ok_or("no disk service")?;
    let header = DiskState::from_bytes(&empty).ok_or("no valid header")?;
    ensure!(header.queued == 0 && header.submitted == 0 && header.mean_response_ns == DiskState::NO_VALUE, "fresh state {header:?}");
    ensure!(empty.len() == DiskState::SIZE && header.queue_capacity == disk::QUEUE_CAPACITY as u64, "fresh state {header:?}, {} bytes", empty.len());
    // A strand copying the state while 12 reads queue: the largest queue it saw.
    type Seen = Option<(DiskState, Vec<DiskQueueEntry>)>;
    let largest: Arc<spin::Mutex<Seen>> = Arc::new(spin::Mutex::new(None));
    let watching = Arc::new(core::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (largest, watching) = (largest.clone(), watching.clone());
        sched::spawn("test-disk-watch", Priority::NORMAL, move || {
            while watching.load(core::sync::atomic::Ordering::Relaxed) {
                if let Some(bytes) = disk::exported_state(crate::time::now_ns())
                    && let Some(state) = DiskState::from_bytes(&bytes)
                {
                    let entries: Vec<DiskQueueEntry> = state.entries(&bytes).collect();
                    without_interrupts(|| {
                        let mut largest = largest.lock();
                        if largest.as_ref().is_none_or(|(seen, _)| seen.queued < state.queued) {
                            *largest = Some((state, entries));
                        }
                    });
                }
                sched::yield_now();
            }
        })
        .map_err(text)?
    };
    let sectors = spread(12);
    let reads = concurrent_reads(&sectors);
    watching.store(false, core::sync::atomic::Ordering::Relaxed);
    watcher.join();
    reads?;
    let (seen, entries) = without_interrupts(|| largest.lock().clone()).ok_or("the watcher copied no state")?;
    ensure!(seen.queued >= 2 && entries.len() as u64 == seen.queued, "largest queue seen {seen:?} with {} entries", entries.len());
    let geometry = *Parameters::hp97560().geometry();
    for entry in &entries {
        ensure!(sectors.contains(&entry.sector), "queued sector {} was never read", entry.sector);
        ensure!(entry.cylinder == u64::from(geometry.cylinder_of_block(entry.sector)), "entry {entry:?}: wrong cylinder");
        ensure!(entry.arrival_ns <= seen.now_ns, "entry {entry:?} arrived after the copy at {}", seen.now_ns);
    }
    ensure!(entries.windows(2).all(|pair| pair[0].id < pair[1].id), "queue not oldest first: {entries:?}");
    ensure!(seen.submitted == seen.completed + seen.queued + seen.on_device, "counts do not add up: {seen:?}");
    let after = DiskState::from_bytes(&disk::exported_state(crate::time::now_ns()).ok_or("no disk service")?).ok_or("no valid header")?;
    let stats = disk::stats().ok_or("no disk service")?;
    ensure!(
        after.completed == stats.completed && after.submitted == 12 && after.seek_cylinders == stats.seek_cylinders && after.busy_ns == stats.busy_ns,
        "exported {after:?} but the service counts {stats:?}"
    );
    ensure!(Some(after.mean_response_ns) == stats.mean_response_ns && Some(after.p99_response_ns) == stats.p99_response_ns, "response times {after:?} vs {stats:?}");
    ensure!(u64::from(Parameters::hp97560().geometry().cylinders()) == after.cylinders && after.head_cylinder < after.cylinders, "arm {after:?}");
    Ok(())
}

/// A user program (`diskstat wait`) reading `disk_state` in a loop sees the counters grow
/// while the kernel reads 12 sectors, a queue of waiting requests, and every copy consistent.
fn user_program_sees_the_state_change() -> TestResult {
    use crate::proc::{self, Grants, Parent};
    use spindle_abi::syscall::ExitStatus;
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let before = disk::stats().ok_or("no disk service")?;
    let command = alloc::format!("diskstat wait {} queue", before.completed + 12);
    let process = proc::spawn(&command, Parent::Kernel, Grants::NONE).map_err(|error| alloc::format!("spawn {command:?}: {error}"))?;
    let reads = concurrent_reads(&spread(12));
    let status = proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| alloc::format!("wait for {command:?}: {error:?}"))?;
    reads?;
    ensure!(status == ExitStatus::Exited(0), "{command:?} ended {status} (2 timed out, 3 inconsistent, 4 no queue seen; its output is above)");
    ensure!(process.system_calls() > 3, "{command:?} made only {} system calls", process.system_calls());
    Ok(())
}

/// Without a disk service `disk_state` answers `NoDevice` (`diskstat` exits 100 + its code)
/// and the kernel's requests `NoDisk`; with it back, `diskstat` reads the state.
fn user_program_without_a_disk_gets_no_device() -> TestResult {
    use crate::proc::{self, Grants, Parent};
    use spindle_abi::syscall::{Error, ExitStatus};
    configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    let run = || -> Result<ExitStatus, String> {
        let process = proc::spawn("diskstat", Parent::Kernel, Grants::NONE).map_err(|error| alloc::format!("spawn diskstat: {error}"))?;
        proc::wait(process.pid(), Parent::Kernel, &|| false).map_err(|error| alloc::format!("wait for diskstat: {error:?}"))
    };
    let (status, exported, read) = disk::without_service(|| {
        let mut buffer = [0u8; 512];
        (run(), disk::exported_state(0).is_none(), disk::read(BASE, &mut buffer))
    })?;
    let status = status?;
    let expected = ExitStatus::Exited(100 + Error::NoDevice.code() as i32);
    ensure!(status == expected, "diskstat without a disk ended {status}, expected {expected}");
    ensure!(exported, "the state was exported without a disk service");
    ensure!(read == Err(DiskError::NoDisk), "a read without the service gave {read:?}");
    let status = run()?;
    ensure!(status == ExitStatus::Exited(0), "diskstat with the disk back ended {status}");
    Ok(())
}

/// The disk benchmark's workload (64 streams) run twice in one boot — at different guest
/// times, so at different phases of the timer tick and (without the model's origin) of
/// the platter — serves its requests in the same order both times, with FIFO and with the
/// built-in SSTF, and the modelled busy time is the same within 1 %: the streams start
/// through a gate, the device's interrupt is masked while the service polls it, and the
/// model starts at each run ([`disk::configure`]). This is what lets `cargo xtask bench`
/// compare seek distances between technologies exactly.
fn benchmark_runs_repeat_their_order_of_service() -> TestResult {
    use crate::bench::disk::{capacity, run_once};
    let capacity = capacity().ok_or("no disk")?;
    let streams = 64;
    let run = |policy: &str| -> Result<disk::DiskStats, String> {
        // A run is about 12 s of modelled time: more than the watchdog's 20 s for two.
        super::progress();
        if policy == "fifo" {
            run_once("fifo", "none", streams, capacity)?;
        } else {
            let name = alloc::format!("disksched_{policy}");
            crate::bench::with_extension(&name, crate::ext::Preference::BuiltIn, || run_once(policy, "builtin", streams, capacity))?;
        }
        disk::stats().ok_or_else(|| String::from("no disk service"))
    };
    for policy in ["fifo", "sstf"] {
        let first = run(policy)?;
        // Move the second run to another phase of the tick and of the platter.
        sched::sleep_ticks(1);
        let until = crate::time::now_ns() + 1_234_567;
        while crate::time::now_ns() < until {
            core::hint::spin_loop();
        }
        let second = run(policy)?;
        ensure!(first.order_digest == second.order_digest, "{policy}: the order of service differs between two runs ({:016x} vs {:016x})", first.order_digest, second.order_digest);
        ensure!(first.seek_cylinders == second.seek_cylinders, "{policy}: seek distance {} vs {}", first.seek_cylinders, second.seek_cylinders);
        // The same order; the times may differ by the few instructions a timer tick adds
        // at another moment of the run: a dispatch starts a little later or earlier, which
        // shifts its rotational wait — and turns a just-reached sector into one just missed
        // (a whole revolution, 15 ms) now and then. Measured: 0.06 % for SSTF; allowed: 1 %.
        let drift = first.busy_ns.abs_diff(second.busy_ns);
        ensure!(drift <= first.busy_ns / 100, "{policy}: busy time {} ns vs {} ns", first.busy_ns, second.busy_ns);
    }
    Ok(())
}
