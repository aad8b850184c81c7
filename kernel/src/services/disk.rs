//! The block service's disk: a request queue in front of the virtio-blk device, a
//! deterministic timing model, and request scheduling as an event (`disk.Schedule`).
//!
//! Kernel code reads and writes whole sectors with [`read`] and [`write`], which block the
//! calling strand. Each request is queued ([`spindle_service_disk::queue::Scheduler`]); the
//! service's strand serves one at a time:
//!
//! 1. when the disk is idle and requests are queued, it raises `disk.Schedule` (if anything
//!    is bound) with the queue exported through the `disk` domain's `spindle_disk_queue`;
//!    the primary module refuses an answer that names no queued request (counted per
//!    binding) and the default is the service's FIFO; the queue imposes the maximum wait,
//!    after which the oldest request goes first whatever the answer (counted);
//! 2. the disk model ([`spindle_service_disk::model::DiskModel`]) says when the request
//!    finishes: seek, rotation and transfer from where the arm and the platter are;
//! 3. the request goes to the device; its completion is delivered to the waiting strand
//!    when both the device has finished and guest time has reached the modelled finish
//!    (an alarm, [`crate::time::set_alarm`]), and the order and placement of requests change
//!    how long I/O takes. With the model `none` (`spindle.disk.model=none`) there is no
//!    modelled delay. For repeatable runs under `-icount … sleep=off` the device's
//!    interrupt is masked (at the PLIC) while the service has a request on it and the
//!    modelled finish is ahead: the completion is polled for when the hart is idle (which
//!    spins instead of letting QEMU jump to the next timer while the device works:
//!    `sched::set_idle_poll_hook`) and at the modelled finish, never taken at a guest time
//!    that depends on how fast the host did the I/O. Only if the device has not finished
//!    by the modelled finish is the interrupt unmasked, so the completion arrives even
//!    while a strand keeps the hart busy.
//!
//! Counters ([`stats`]): requests, modelled seek distance, busy time, mean and p99 response
//! time, answers refused and starvation overrides; `disk` at the console prints them.
//!
//! Every submitted request completes exactly once: [`accounting`] counts them where they
//! are (queued, on the device, completed and waiting for its strand, delivered) and
//! [`Accounting::check`] says whether they add up, with no request completed twice.
//!
//! Test hooks: [`inject_device_error`] arms the model's fault plan
//! ([`spindle_service_disk::faults::FaultPlan`]): the next requests it names fail with the
//! device's I/O error without reaching the device (their data is never touched), at the
//! time the model says they would have finished; [`configure_queue`] restarts the service
//! with a smaller queue.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use spindle_abi::event::{DISK_SCHEDULE, DiskQueueEntry, DiskSchedule, ScheduleChoice};
use spindle_dispatch::{EventTable, PrimaryModule, ResultRejection};
use spindle_service_disk::faults::{FaultPlan, FaultTarget};
use spindle_service_disk::model::{DiskModel, Parameters};
use spindle_service_disk::queue::{Decision, Policy, QueueCounters, Scheduler, SchedulerConfig, SubmitError};
use spindle_service_disk::stats::Stats;

use crate::arch::csr::without_interrupts;
use crate::drivers::virtio_blk::{self, BlockError, Completion, Operation};
use crate::sched::{self, Priority, Strand};

/// Requests the queue holds.
pub const QUEUE_CAPACITY: usize = 256;
/// The longest a request waits before it goes first whatever `disk.Schedule` answers.
pub const DEFAULT_MAX_WAIT_NS: u64 = 2_000_000_000;
/// Dispatches remembered for introspection and tests ([`recent_dispatches`]).
const RECENT: usize = 64;

/// Why a disk request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskError {
    /// The machine has no disk, or the service is not running.
    NoDisk,
    /// The buffer is empty, not whole sectors, or longer than one request may be.
    BadLength(usize),
    /// The request reaches past the end of the disk (device or model, the smaller).
    PastEnd {
        /// First sector asked for.
        sector: u64,
        /// Sectors asked for.
        sectors: u64,
        /// Sectors the disk has.
        capacity: u64,
    },
    /// The queue is full (it holds [`QUEUE_CAPACITY`] requests unless a test configured
    /// fewer with [`configure_queue`]); nothing was queued.
    QueueFull,
    /// The device reported an error.
    Device(BlockError),
}

impl fmt::Display for DiskError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DiskError::NoDisk => formatter.write_str("no disk (the machine has none, or the disk service is not running)"),
            DiskError::BadLength(length) => {
                write!(formatter, "{length} bytes is not a whole number of {SECTOR_SIZE}-byte sectors between 1 and {}", virtio_blk::MAX_REQUEST_BYTES)
            }
            DiskError::PastEnd { sector, sectors, capacity } => {
                write!(formatter, "sectors {sector}..{} are past the end of the disk ({capacity} sectors)", sector.saturating_add(sectors))
            }
            DiskError::QueueFull => formatter.write_str("the disk queue is full; nothing was queued (try again after a request completes)"),
            DiskError::Device(error) => write!(formatter, "the device failed the request: {error}"),
        }
    }
}

/// One queued request's data and who waits for it.
struct Pending {
    operation: Operation,
    buffer: Vec<u8>,
    waiter: Arc<Strand>,
}

/// The request on the device.
struct InFlight {
    id: u64,
    finish_ns: u64,
    waiter: Arc<Strand>,
    /// The device's answer (a read's data, or why it failed), once it arrived; an injected
    /// fault has it from the start (the device never sees the request).
    done: Option<Result<Vec<u8>, DiskError>>,
}

/// The service's state (behind [`STATE`]).
struct Service {
    scheduler: Scheduler,
    model: DiskModel,
    stats: Stats,
    capacity: u64,
    pending: BTreeMap<u64, Pending>,
    in_flight: Option<InFlight>,
    finished: BTreeMap<u64, Result<Vec<u8>, DiskError>>,
    recent: Vec<Dispatched>,
    faults: FaultPlan,
    completed: u64,
    delivered: u64,
    duplicate_completions: u64,
    refused_answers: u64,
    device_errors: u64,
    decisions: u64,
    decision_instructions: u64,
    /// FNV-1a over the sectors in the order they were served.
    order_digest: u64,
}

/// FNV-1a's offset basis: the order digest of no request.
const ORDER_DIGEST_START: u64 = 0xcbf2_9ce4_8422_2325;

/// Bytes per sector (the device's).
pub use crate::drivers::virtio_blk::SECTOR_SIZE;

static STATE: spin::Mutex<Option<Service>> = spin::Mutex::new(None);
/// The service's strand.
static STRAND: spin::Once<Arc<Strand>> = spin::Once::new();
/// `disk.Schedule`'s table.
static TABLE: spin::Once<Arc<EventTable<DiskSchedule, ScheduleChoice>>> = spin::Once::new();
/// The queue as `disk.Schedule`'s handlers see it (what `spindle_disk_queue` copies).
static SNAPSHOT: spin::Mutex<Vec<DiskQueueEntry>> = spin::Mutex::new(Vec::new());

/// `disk.Schedule`'s primary module: the default is the service's own order; an answer
/// must name a queued request.
struct ScheduleService;

impl PrimaryModule<DiskSchedule, ScheduleChoice> for ScheduleService {
    fn name(&self) -> &str {
        "disk"
    }

    fn default_result(&self, _: &DiskSchedule) -> ScheduleChoice {
        ScheduleChoice { request: ScheduleChoice::NONE }
    }

    fn validates_results(&self) -> bool {
        true
    }

    fn validate_result(&self, _: &DiskSchedule, result: &ScheduleChoice) -> Result<(), ResultRejection> {
        if result.request == ScheduleChoice::NONE || without_interrupts(|| SNAPSHOT.lock().iter().any(|entry| entry.id == result.request)) {
            Ok(())
        } else {
            Err(ResultRejection { reason: "names no queued request" })
        }
    }
}

/// Registers `disk.Schedule` and, if the machine has a disk, starts the service with the
/// model `spindle.disk.model=` names (default `hp97560`).
pub fn init() {
    let dispatcher = crate::events::dispatcher();
    let table = dispatcher.register(&DISK_SCHEDULE, Arc::new(ScheduleService)).expect("disk.Schedule registered twice");
    TABLE.call_once(|| table);
    crate::time::set_alarm_hook(wake);
    sched::set_idle_poll_hook(device_busy);
    let Some(device_sectors) = virtio_blk::capacity() else { return };
    let name = crate::bootargs::value(crate::devicetree::bootargs(), "spindle.disk.model").unwrap_or(spindle_service_disk::model::DEFAULT_MODEL);
    let parameters = match Parameters::by_name(name) {
        Ok(parameters) => parameters,
        Err(error) => {
            crate::println!("[disk] {error}; using {}", spindle_service_disk::model::DEFAULT_MODEL);
            Parameters::default()
        }
    };
    if let Err(error) = start(parameters, DEFAULT_MAX_WAIT_NS, QUEUE_CAPACITY, device_sectors) {
        crate::println!("[disk] not started: {error}");
        return;
    }
    match sched::spawn("disk", Priority::HIGHEST, serve) {
        Ok(strand) => {
            STRAND.call_once(|| strand);
        }
        Err(error) => crate::println!("[disk] no service strand: {error:?}"),
    }
    crate::println!("[boot] disk service: model {name}, queue {QUEUE_CAPACITY}, maximum wait {} ms", DEFAULT_MAX_WAIT_NS / 1_000_000);
}

/// (Re)starts the service's state with `parameters`, `max_wait_ns` and a queue of
/// `queue_capacity` requests: refused while a request is queued or on the device.
fn start(parameters: Parameters, max_wait_ns: u64, queue_capacity: usize, device_sectors: u64) -> Result<(), String> {
    let geometry = *parameters.geometry();
    let config = SchedulerConfig { capacity: queue_capacity, max_wait_ns: Some(max_wait_ns), reference: Policy::Fifo };
    let scheduler = Scheduler::new(geometry, config).map_err(|error| alloc::format!("{error}"))?;
    let capacity = device_sectors.min(geometry.capacity_blocks());
    without_interrupts(|| {
        let mut state = STATE.lock();
        if state.as_ref().is_some_and(|service| !service.pending.is_empty() || service.in_flight.is_some() || !service.finished.is_empty()) {
            return Err(String::from("the disk is busy"));
        }
        *state = Some(Service {
            scheduler,
            model: DiskModel::new_at(&parameters, crate::time::now_ns()),
            stats: Stats::new(),
            capacity,
            pending: BTreeMap::new(),
            in_flight: None,
            finished: BTreeMap::new(),
            recent: Vec::new(),
            faults: FaultPlan::new(),
            completed: 0,
            delivered: 0,
            duplicate_completions: 0,
            refused_answers: 0,
            device_errors: 0,
            decisions: 0,
            decision_instructions: 0,
            order_digest: ORDER_DIGEST_START,
        });
        Ok(())
    })
}

/// Restarts the idle service with the model called `model` and a maximum wait (tests,
/// benchmarks; counters start again). Errors: no disk, an unknown model, or the disk busy.
pub fn configure(model: &str, max_wait_ns: u64) -> Result<(), String> {
    configure_queue(model, max_wait_ns, QUEUE_CAPACITY)
}

/// [`configure`] with a queue of `queue_capacity` requests instead of [`QUEUE_CAPACITY`]
/// (a test hook: a full queue without hundreds of strands). Errors as for [`configure`],
/// and a capacity of 0 or above the queue's maximum.
pub fn configure_queue(model: &str, max_wait_ns: u64, queue_capacity: usize) -> Result<(), String> {
    let device_sectors = virtio_blk::capacity().ok_or_else(|| alloc::format!("{}", DiskError::NoDisk))?;
    let parameters = Parameters::by_name(model).map_err(|error| alloc::format!("{error}"))?;
    start(parameters, max_wait_ns, queue_capacity, device_sectors)
}

/// Test hook: the next `count` requests matching `target` that the service takes off its
/// queue fail with [`DiskError::Device`]`(`[`BlockError::DeviceIo`]`)` — the device's I/O
/// error — without reaching the device: a failed write leaves the disk's old data, a failed
/// read fills no buffer. The failure is delivered when the model says the request would
/// have finished, and counted ([`DiskStats::injected_errors`], [`DiskStats::device_errors`]).
/// Rules add up (oldest first); [`configure`] clears them.
///
/// Errors: no disk, a count of 0, or too many rules pending (the plan's words).
pub fn inject_device_error(target: FaultTarget, count: u32) -> Result<(), String> {
    without_interrupts(|| {
        let mut state = STATE.lock();
        let service = state.as_mut().ok_or_else(|| alloc::format!("{}", DiskError::NoDisk))?;
        service.faults.inject(target, count).map_err(|error| alloc::format!("{error}"))
    })
}

/// Test hook: drops every pending injected error; returns how many requests they would
/// still have failed.
pub fn clear_injected_errors() -> u64 {
    without_interrupts(|| {
        let mut state = STATE.lock();
        let Some(service) = state.as_mut() else { return 0 };
        let armed = service.faults.armed();
        service.faults.clear();
        armed
    })
}

/// Wakes the service's strand (alarm, device completion, a new request).
fn wake() {
    if let Some(strand) = STRAND.get() {
        sched::unblock(strand);
    }
}

/// The request on the device, if any, as (done by the device, modelled finish), read
/// without waiting for the lock (the idle loop asks; a held lock reads as none).
fn on_device() -> Option<(bool, u64)> {
    without_interrupts(|| {
        let state = STATE.try_lock()?;
        let in_flight = state.as_ref()?.in_flight.as_ref()?;
        Some((in_flight.done.is_some(), in_flight.finish_ns))
    })
}

/// Whether a request is on the device and the device has not finished it (the idle loop
/// then polls instead of letting guest time jump to the modelled finish).
fn device_busy() -> bool {
    if !matches!(on_device(), Some((false, _))) {
        return false;
    }
    // The service turned the device's interrupts off: look for the completion here.
    virtio_blk::poll();
    // If it arrived and is due already (model `none`, or the host was slower than the
    // model), the service strand was just woken to deliver it: say "busy" once more so the
    // idle loop yields to it instead of waiting for the next tick. If it is not due, the
    // hart waits for the alarm at the modelled finish, a guest time no host speed changes.
    match on_device() {
        Some((false, _)) => true,
        Some((true, finish_ns)) => finish_ns <= crate::time::now_ns(),
        None => false,
    }
}

/// The device finished the request on it (interrupt context): keep the completion and wake
/// the service, which delivers it at the modelled finish.
fn device_done(completion: Completion) {
    without_interrupts(|| {
        if let Some(in_flight) = STATE.lock().as_mut().and_then(|service| service.in_flight.as_mut()) {
            in_flight.done = Some(completion.result.map(|()| completion.buffer).map_err(DiskError::Device));
        }
    });
    wake();
}

/// The service's strand: delivers the request on the device when it is done, then starts
/// the next one.
fn serve() {
    loop {
        deliver_finished();
        if start_next() == Started::Injected {
            // No device completion will wake the strand: deliver at the modelled finish.
            continue;
        }
        sched::block_current();
    }
}

/// Records request `id`'s outcome for its waiter: counted once as completed (a device
/// error too); a second completion of the same request is counted as a duplicate.
fn complete(service: &mut Service, id: u64, result: Result<Vec<u8>, DiskError>) {
    if matches!(result, Err(DiskError::Device(_))) {
        service.device_errors += 1;
    }
    service.completed += 1;
    if service.finished.insert(id, result).is_some() {
        service.duplicate_completions += 1;
    }
}

/// Delivers the request on the device if the device has finished it and guest time has
/// reached its modelled finish; otherwise sets the alarm for that time.
fn deliver_finished() {
    // Interrupts are off while the service has a request on the device: collect it now.
    virtio_blk::poll();
    let now = crate::time::now_ns();
    let delivered = without_interrupts(|| {
        let mut state = STATE.lock();
        let service = state.as_mut()?;
        let in_flight = service.in_flight.as_ref()?;
        if in_flight.done.is_none() {
            if now < in_flight.finish_ns {
                crate::time::set_alarm(in_flight.finish_ns);
            } else {
                // The host is slower than the model (or the model is `none`): let the
                // completion interrupt (a strand that never idles would otherwise keep the
                // idle loop from polling); its moment depends on the host anyway.
                virtio_blk::set_interrupts(true);
            }
            return None;
        }
        if now < in_flight.finish_ns {
            crate::time::set_alarm(in_flight.finish_ns);
            return None;
        }
        let in_flight = service.in_flight.take()?;
        let result = in_flight.done?;
        complete(service, in_flight.id, result);
        Some(in_flight.waiter)
    });
    if let Some(waiter) = delivered {
        sched::unblock(&waiter);
    }
}

/// What [`start_next`] does after taking a request off the queue.
enum Next {
    /// Wake the waiter: its request already has its (failed) outcome.
    Unblock(Arc<Strand>),
    /// Send request `id` to the device.
    Device(u64, virtio_blk::Request),
    /// Nothing: an injected fault took the request.
    Injected,
}

/// What [`start_next`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Started {
    /// Nothing (the disk is busy or nothing is queued), or a request went to the device.
    Nothing,
    /// An injected fault took the request: it is "on the device" until its modelled finish,
    /// but the device will not report it.
    Injected,
}

/// Starts the next request if the disk is idle and something is queued: asks
/// `disk.Schedule`, then the queue (validation, starvation bound), then the model, then
/// the fault plan (a test hook; a hit never reaches the device).
fn start_next() -> Started {
    let Some(args) = without_interrupts(|| {
        let mut state = STATE.lock();
        let service = state.as_mut()?;
        if service.in_flight.is_some() {
            return None;
        }
        if service.scheduler.is_empty() {
            // Idle: other users of the device get its interrupts back.
            virtio_blk::set_interrupts(true);
            return None;
        }
        let geometry = *service.scheduler.geometry();
        let entries: Vec<DiskQueueEntry> = service
            .scheduler
            .pending()
            .iter()
            .map(|request| DiskQueueEntry {
                id: request.id,
                sector: request.start_block,
                cylinder: u64::from(geometry.cylinder_of_block(request.start_block)),
                arrival_ns: request.arrival_ns,
            })
            .collect();
        let oldest = entries.iter().min_by_key(|entry| (entry.arrival_ns, entry.id)).map_or(0, |entry| entry.id);
        let args = DiskSchedule { queued: entries.len() as u64, head_cylinder: u64::from(service.model.head_cylinder()), oldest, now_ns: 0 };
        *SNAPSHOT.lock() = entries;
        Some(args)
    }) else {
        return Started::Nothing;
    };
    let now = crate::time::now_ns();
    let args = DiskSchedule { now_ns: now, ..args };
    let table = TABLE.get().expect("disk::init registers disk.Schedule");
    // Raised in thread context on the service's strand, outside the state's lock: a
    // handler reads the queue through `spindle_disk_queue`.
    let (choice, instructions) = if table.has_bindings() {
        let start = crate::arch::csr::instret();
        let choice = crate::events::raise(table, &args);
        (choice, Some((crate::arch::csr::instret() - start) as u64))
    } else {
        (ScheduleChoice { request: ScheduleChoice::NONE }, None)
    };
    let answer = (choice.request != ScheduleChoice::NONE).then_some(choice.request);
    let submitted = without_interrupts(|| {
        let mut state = STATE.lock();
        let service = state.as_mut()?;
        if let Some(instructions) = instructions {
            service.decisions += 1;
            service.decision_instructions += instructions;
        }
        let head = service.model.head_cylinder();
        let dispatch = service.scheduler.dispatch(now, answer, head)?;
        if matches!(dispatch.decision, Decision::Reference { bad_answer: Some(_) }) {
            service.refused_answers += 1;
        }
        if service.recent.len() == RECENT {
            service.recent.remove(0);
        }
        service.recent.push(Dispatched { id: dispatch.request.id, sector: dispatch.request.start_block, decision: dispatch.decision });
        service.order_digest = (service.order_digest ^ dispatch.request.start_block).wrapping_mul(0x0100_0000_01b3);
        let request = dispatch.request;
        let pending = service.pending.remove(&request.id)?;
        let timing = match service.model.service(now, request.start_block, request.blocks, request.write) {
            Ok(timing) => timing,
            // Checked at submission against the same geometry; not reached.
            Err(_) => {
                let error = DiskError::PastEnd { sector: request.start_block, sectors: u64::from(request.blocks), capacity: service.capacity };
                complete(service, request.id, Err(error));
                return Some(Next::Unblock(pending.waiter));
            }
        };
        service.stats.record(&request, &timing);
        if service.faults.take(request.start_block, request.blocks, request.write) {
            // The buffer (a write's new data) is dropped here: the device never sees it.
            let injected = Err(DiskError::Device(BlockError::DeviceIo));
            service.in_flight = Some(InFlight { id: request.id, finish_ns: timing.finish_ns, waiter: pending.waiter, done: Some(injected) });
            return Some(Next::Injected);
        }
        service.in_flight = Some(InFlight { id: request.id, finish_ns: timing.finish_ns, waiter: pending.waiter.clone(), done: None });
        // The device's interrupt is masked from here on: the alarm at the modelled finish
        // is what makes the service look for the completion if the hart never idles.
        crate::time::set_alarm(timing.finish_ns);
        let device_request = virtio_blk::Request { operation: pending.operation, sector: request.start_block, buffer: pending.buffer, notify: virtio_blk::Notify::Call(device_done) };
        Some(Next::Device(request.id, device_request))
    });
    match submitted {
        Some(Next::Injected) => return Started::Injected,
        Some(Next::Unblock(waiter)) => sched::unblock(&waiter),
        Some(Next::Device(id, device_request)) => {
            // The completion is collected by polling (the idle loop, the modelled finish):
            // an interrupt would land at a host-dependent guest time.
            virtio_blk::set_interrupts(false);
            if let Err(refused) = virtio_blk::submit(device_request) {
                let waiter = without_interrupts(|| {
                    let mut state = STATE.lock();
                    let service = state.as_mut()?;
                    let in_flight = service.in_flight.take()?;
                    complete(service, id, Err(DiskError::Device(refused.error)));
                    Some(in_flight.waiter)
                });
                if let Some(waiter) = waiter {
                    sched::unblock(&waiter);
                }
            }
        }
        None => {}
    }
    Started::Nothing
}

/// Queues a request and blocks until it is delivered.
fn transfer(operation: Operation, sector: u64, buffer: Vec<u8>) -> Result<Vec<u8>, DiskError> {
    let length = buffer.len();
    if length == 0 || !length.is_multiple_of(SECTOR_SIZE) || length > virtio_blk::MAX_REQUEST_BYTES {
        return Err(DiskError::BadLength(length));
    }
    let sectors = (length / SECTOR_SIZE) as u64;
    let me = sched::current();
    let now = crate::time::now_ns();
    let id = without_interrupts(|| {
        let mut state = STATE.lock();
        let service = state.as_mut().ok_or(DiskError::NoDisk)?;
        if sector.checked_add(sectors).is_none_or(|end| end > service.capacity) {
            return Err(DiskError::PastEnd { sector, sectors, capacity: service.capacity });
        }
        let id = service.scheduler.submit(sector, sectors as u32, operation == Operation::Write, now, me.id()).map_err(|error| match error {
            SubmitError::QueueFull { .. } => DiskError::QueueFull,
            SubmitError::Request(_) => DiskError::PastEnd { sector, sectors, capacity: service.capacity },
        })?;
        service.pending.insert(id, Pending { operation, buffer, waiter: me.clone() });
        Ok(id)
    })?;
    if STRAND.get().is_none() {
        return Err(DiskError::NoDisk);
    }
    wake();
    loop {
        let result = without_interrupts(|| {
            let mut state = STATE.lock();
            let service = state.as_mut()?;
            let result = service.finished.remove(&id)?;
            service.delivered += 1;
            Some(result)
        });
        if let Some(result) = result {
            return result;
        }
        sched::block_current();
    }
}

/// Reads `buffer.len()` bytes (whole sectors) from `sector` on through the queue, blocking
/// the calling strand (thread context). Errors: [`DiskError`].
pub fn read(sector: u64, buffer: &mut [u8]) -> Result<(), DiskError> {
    let data = transfer(Operation::Read, sector, alloc::vec![0; buffer.len()])?;
    buffer.copy_from_slice(&data);
    Ok(())
}

/// Writes `data` (whole sectors) from `sector` on through the queue, blocking the calling
/// strand until the device has it (thread context). Errors: [`DiskError`].
pub fn write(sector: u64, data: &[u8]) -> Result<(), DiskError> {
    transfer(Operation::Write, sector, data.to_vec()).map(drop)
}

/// Sectors the service serves (the device's, or the model's if fewer); `None` without a
/// disk service.
pub fn capacity_sectors() -> Option<u64> {
    without_interrupts(|| STATE.lock().as_ref().map(|service| service.capacity))
}

/// What the service has done since it (re)started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// The model's name.
    pub model: &'static str,
    /// The queue's counters (submitted, dispatched, refused, answers, starvation overrides).
    pub queue: QueueCounters,
    /// Requests delivered to their waiters.
    pub completed: u64,
    /// Requests queued now.
    pub queued: u64,
    /// `disk.Schedule` answers the queue refused (the primary module refuses first, so this
    /// stays 0 unless an answer's request left the queue meanwhile).
    pub refused_answers: u64,
    /// Requests the device failed (injected errors included).
    pub device_errors: u64,
    /// Requests failed by [`inject_device_error`] (they never reached the device).
    pub injected_errors: u64,
    /// Whether a request is on the device now.
    pub on_device: bool,
    /// `disk.Schedule` raises (only while something is bound).
    pub decisions: u64,
    /// Guest instructions those raises took (`rdinstret`; host ticks without `-icount`).
    pub decision_instructions: u64,
    /// A digest (FNV-1a) of the sectors in the order they were served: two runs served in
    /// the same order have the same digest.
    pub order_digest: u64,
    /// Modelled seek distance, cylinders.
    pub seek_cylinders: u64,
    /// Modelled busy time, ns.
    pub busy_ns: u64,
    /// Mean response time (queueing + service), ns.
    pub mean_response_ns: Option<u64>,
    /// 99th-percentile response time, ns (at most 1/32 above the true value).
    pub p99_response_ns: Option<u64>,
}

/// The service's counters; `None` without a disk.
pub fn stats() -> Option<DiskStats> {
    without_interrupts(|| {
        let state = STATE.lock();
        let service = state.as_ref()?;
        Some(DiskStats {
            model: service.model.parameters().name(),
            queue: service.scheduler.counters(),
            completed: service.completed,
            queued: service.scheduler.len() as u64,
            refused_answers: service.refused_answers,
            device_errors: service.device_errors,
            injected_errors: service.faults.injected(),
            on_device: service.in_flight.is_some(),
            decisions: service.decisions,
            decision_instructions: service.decision_instructions,
            order_digest: service.order_digest,
            seek_cylinders: service.stats.seek_cylinders(),
            busy_ns: service.stats.busy_ns(),
            mean_response_ns: service.stats.mean_response_ns(),
            p99_response_ns: service.stats.p99_response_ns(),
        })
    })
}

/// Where every request submitted since the service (re)started is: the counts behind
/// "every submitted request completes exactly once".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// Requests the queue accepted.
    pub submitted: u64,
    /// Requests queued now.
    pub queued: u64,
    /// Request data held for queued requests (one per queued request).
    pub queued_data: u64,
    /// Requests on the device now (0 or 1).
    pub on_device: u64,
    /// Requests that completed (successfully or not), each counted once.
    pub completed: u64,
    /// Completed requests whose strand has taken the outcome.
    pub delivered: u64,
    /// Completed requests whose strand has not taken the outcome yet.
    pub awaiting: u64,
    /// Completions of a request that had already completed (never expected).
    pub duplicate_completions: u64,
}

impl Accounting {
    /// Whether the counts add up: submitted = completed + queued + on the device, completed
    /// = delivered + awaiting, one piece of data per queued request, and no request
    /// completed twice. Errors: which equation fails, with the counts.
    pub fn check(&self) -> Result<(), String> {
        if self.duplicate_completions != 0 {
            return Err(alloc::format!("{} requests completed more than once: {self:?}", self.duplicate_completions));
        }
        if self.submitted != self.completed + self.queued + self.on_device {
            return Err(alloc::format!(
                "{} submitted but {} completed + {} queued + {} on the device (a request lost or invented): {self:?}",
                self.submitted,
                self.completed,
                self.queued,
                self.on_device
            ));
        }
        if self.completed != self.delivered + self.awaiting {
            return Err(alloc::format!("{} completed but {} delivered + {} awaiting their strand: {self:?}", self.completed, self.delivered, self.awaiting));
        }
        if self.queued_data != self.queued {
            return Err(alloc::format!("{} requests queued but data held for {}: {self:?}", self.queued, self.queued_data));
        }
        Ok(())
    }

    /// [`Accounting::check`], and nothing left anywhere: every request submitted has been
    /// delivered to its strand (the state after the strands that used the disk are done).
    pub fn check_idle(&self) -> Result<(), String> {
        self.check()?;
        if self.queued + self.on_device + self.awaiting != 0 {
            return Err(alloc::format!("not idle: {} queued, {} on the device, {} awaiting their strand", self.queued, self.on_device, self.awaiting));
        }
        Ok(())
    }
}

/// The service's [`Accounting`]; `None` without a disk.
pub fn accounting() -> Option<Accounting> {
    without_interrupts(|| {
        let state = STATE.lock();
        let service = state.as_ref()?;
        Some(Accounting {
            submitted: service.scheduler.counters().submitted,
            queued: service.scheduler.len() as u64,
            queued_data: service.pending.len() as u64,
            on_device: u64::from(service.in_flight.is_some()),
            completed: service.completed,
            delivered: service.delivered,
            awaiting: service.finished.len() as u64,
            duplicate_completions: service.duplicate_completions,
        })
    })
}

/// The state user programs read with the system call `disk_state` (Infokernel-style
/// exported state): a [`spindle_abi::syscall::DiskState`] header — the arm's cylinder and
/// the counters — then every queued request's [`DiskQueueEntry`], oldest first, all taken
/// under one lock at guest time `now_ns`. `None` without a disk.
pub fn exported_state(now_ns: u64) -> Option<Vec<u8>> {
    use spindle_abi::syscall::DiskState;
    without_interrupts(|| {
        let state = STATE.lock();
        let service = state.as_ref()?;
        let geometry = *service.scheduler.geometry();
        let counters = service.scheduler.counters();
        let header = DiskState {
            header_bytes: DiskState::SIZE as u64,
            now_ns,
            head_cylinder: u64::from(service.model.head_cylinder()),
            cylinders: u64::from(geometry.cylinders()),
            capacity_sectors: service.capacity,
            queue_capacity: service.scheduler.config().capacity as u64,
            queued: service.scheduler.len() as u64,
            on_device: u64::from(service.in_flight.is_some()),
            submitted: counters.submitted,
            completed: service.completed,
            dispatched: counters.dispatched,
            refused_full: counters.refused_full,
            device_errors: service.device_errors,
            answered: counters.answered,
            starvation_overrides: counters.starvation_overrides,
            seek_cylinders: service.stats.seek_cylinders(),
            busy_ns: service.stats.busy_ns(),
            mean_response_ns: service.stats.mean_response_ns().unwrap_or(DiskState::NO_VALUE),
            p99_response_ns: service.stats.p99_response_ns().unwrap_or(DiskState::NO_VALUE),
        };
        let mut bytes = Vec::with_capacity(header.total_bytes() as usize);
        bytes.extend_from_slice(&header.to_bytes());
        for request in service.scheduler.pending() {
            let entry = DiskQueueEntry {
                id: request.id,
                sector: request.start_block,
                cylinder: u64::from(geometry.cylinder_of_block(request.start_block)),
                arrival_ns: request.arrival_ns,
            };
            bytes.extend_from_slice(&entry.to_bytes());
        }
        Some(bytes)
    })
}

/// Test hook: runs `body` as if the machine had no disk (the service's state set aside:
/// requests get [`DiskError::NoDisk`], [`stats`] and [`exported_state`] answer `None`),
/// then puts the state back. Errors: no disk, or the disk is busy (a request queued, on
/// the device or not yet taken by its strand).
pub fn without_service<T>(body: impl FnOnce() -> T) -> Result<T, String> {
    let service = without_interrupts(|| {
        let mut state = STATE.lock();
        let service = state.as_ref().ok_or_else(|| alloc::format!("{}", DiskError::NoDisk))?;
        if !service.pending.is_empty() || service.in_flight.is_some() || !service.finished.is_empty() {
            return Err(String::from("the disk is busy"));
        }
        Ok(state.take())
    })?;
    let outcome = body();
    without_interrupts(|| *STATE.lock() = service);
    Ok(outcome)
}

/// One request the service took off its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatched {
    /// The request's id.
    pub id: u64,
    /// Its first sector.
    pub sector: u64,
    /// Why it was chosen.
    pub decision: Decision,
}

/// The last dispatches, oldest first.
pub fn recent_dispatches() -> Vec<Dispatched> {
    without_interrupts(|| STATE.lock().as_ref().map(|service| service.recent.clone()).unwrap_or_default())
}

impl fmt::Display for DiskStats {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = |ns: Option<u64>| ns.map_or(String::from("-"), |ns| alloc::format!("{}.{:03} ms", ns / 1_000_000, ns / 1_000 % 1_000));
        writeln!(
            formatter,
            "disk: model {}, {} queued, {} on the device, {} completed, {} device errors ({} injected)",
            self.model,
            self.queued,
            u64::from(self.on_device),
            self.completed,
            self.device_errors,
            self.injected_errors
        )?;
        writeln!(
            formatter,
            "  queue: {} submitted, {} dispatched ({} answered by disk.Schedule, {} by FIFO), {} refused full, {} starvation overrides",
            self.queue.submitted, self.queue.dispatched, self.queue.answered, self.queue.unanswered + self.queue.bad_answers, self.queue.refused_full, self.queue.starvation_overrides
        )?;
        write!(
            formatter,
            "  modelled: seek {} cylinders, busy {}, response mean {}, p99 {}",
            self.seek_cylinders,
            millis(Some(self.busy_ns)),
            millis(self.mean_response_ns),
            millis(self.p99_response_ns)
        )
    }
}

/// Domain `disk` of the kernel functions (`spindle_abi::host`).
impl spindle_abi::host::domains::Disk for crate::ext::glue::KernelFunctions {
    /// The queue `disk.Schedule` is being asked about, oldest first.
    fn disk_queue(&self, destination: &mut [u8]) -> u64 {
        without_interrupts(|| {
            let snapshot = SNAPSHOT.lock();
            let mut copied = 0;
            for (chunk, entry) in destination.chunks_exact_mut(DiskQueueEntry::SIZE).zip(snapshot.iter()) {
                chunk.copy_from_slice(&entry.to_bytes());
                copied += 1;
            }
            copied
        })
    }
}
