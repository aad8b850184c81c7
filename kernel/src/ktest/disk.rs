//! Tests of the disk service (`services::disk`): data through the queue, FIFO by default,
//! `disk.Schedule` answers used, garbage refused, the starvation bound, modelled time, and
//! every request served exactly once.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use spindle_abi::event::{DISK_SCHEDULE, DiskQueueEntry, DiskSchedule, ScheduleChoice};
use spindle_dispatch::{BindingSpec, handler_fn};
use spindle_service_disk::model::Parameters;
use spindle_service_disk::queue::{Decision, Policy, QueuedRequest, choose};

use super::{KernelTest, TestResult};
use crate::arch::csr::without_interrupts;
use crate::ensure;
use crate::ext;
use crate::sched::{self, Priority};
use crate::services::disk::{self, DiskError, Dispatched};

/// The disk-service tests.
pub const TESTS: &[KernelTest] = &[
    KernelTest { name: "disk::data_round_trips_through_the_queue", run: data_round_trips_through_the_queue },
    KernelTest { name: "disk::modelled_time_depends_on_placement", run: modelled_time_depends_on_placement },
    KernelTest { name: "disk::fifo_by_default_every_request_once", run: fifo_by_default_every_request_once },
    KernelTest { name: "disk::schedule_answers_are_used", run: schedule_answers_are_used },
    KernelTest { name: "disk::garbage_answers_fall_back_to_fifo", run: garbage_answers_fall_back_to_fifo },
    KernelTest { name: "disk::starvation_bound_overrides_the_answer", run: starvation_bound_overrides_the_answer },
    KernelTest { name: "disk::bad_requests_are_refused", run: bad_requests_are_refused },
    KernelTest { name: "disk::policies_match_the_reference_in_every_technology", run: policies_match_the_reference_in_every_technology },
];

fn text(error: impl core::fmt::Display) -> String {
    alloc::format!("{error}")
}

/// Sectors of the test area (away from the driver tests' sectors).
const BASE: u64 = 1 << 20;

/// A sector's test pattern.
fn pattern(sector: u64, salt: u8) -> Vec<u8> {
    (0..512u64).map(|index| (sector.wrapping_mul(31) ^ index ^ u64::from(salt)) as u8).collect()
}

fn data_round_trips_through_the_queue() -> TestResult {
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
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
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
    timed_read(BASE)?;
    let near = timed_read(BASE + 72)?;
    let far = timed_read(2_000_000)?;
    ensure!(near >= 2_200_000, "a read took {near} ns, less than the controller overhead");
    ensure!(far > near + 8_000_000, "a long seek ({far} ns) is not 8 ms slower than a short one ({near} ns)");
    disk::configure("none", disk::DEFAULT_MAX_WAIT_NS)?;
    timed_read(2_000_000)?;
    timed_read(BASE)?;
    let unmodelled = disk::stats().ok_or("no disk service")?;
    ensure!(unmodelled.completed == 2 && unmodelled.busy_ns == 0, "with no model: {unmodelled:?}");
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
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
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
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
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
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
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
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
    disk::configure("hp97560", 1_000_000)?;
    let served = with_policy("test.newest", newest, || concurrent_reads(&spread(12)));
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
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
    disk::configure("hp97560", disk::DEFAULT_MAX_WAIT_NS)?;
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
