//! The disk: a virtio block device, with asynchronous requests completed by interrupt.
//!
//! `cargo xtask` gives every machine a virtio-blk disk (a sparse image file on the host).
//! [`init`] claims it, registers [`on_interrupt`] with the PLIC for the slot's interrupt and
//! turns the device's used-buffer interrupts on. A request ([`Request`]: read or write,
//! first sector, a buffer the driver owns while the request is in flight) is checked
//! before it reaches the device — length a non-zero multiple of [`SECTOR_SIZE`] up to
//! [`MAX_REQUEST_BYTES`], inside the disk, no write to a read-only disk — and [`submit`]
//! places it on the virtqueue and returns a [`Token`] at once; a full virtqueue is
//! [`BlockError::QueueFull`] (the request comes back in [`Refused`]), never a wait or a
//! panic.
//!
//! Completion runs in two steps, so that a layer above can stand between the device and
//! the waiter (a disk timing model that holds a completion until its modelled finish time,
//! a scheduler that picks the next request from its own queue):
//!
//! 1. The interrupt handler takes every used buffer off the virtqueue and turns it into a
//!    [`Completion`] (the token, the buffer, the device's status as a `Result`). It hands
//!    each to the completion hook ([`set_completion_hook`]) if a layer installed one, and
//!    otherwise straight to step 2.
//! 2. [`deliver`] finishes the request as it asked ([`Notify`]): it keeps the completion
//!    for [`wait`] and wakes the strand waiting for it, or calls the request's function.
//!
//! A strand that waits ([`wait`], and the blocking helpers [`read`] / [`write`] built on
//! it) is blocked in the scheduler until step 2, so other strands run during the I/O;
//! the helpers also wait for room when the virtqueue is full ([`submit_waiting_for_room`]).
//! Counters ([`stats`]) record every submission, completion and delivery, so a test can
//! check that each request completes exactly once.
//!
//! DMA: request headers, status bytes and data buffers are heap allocations, which are
//! physically contiguous (the heap is identity-mapped RAM, see `drivers::virtio`), and
//! stay owned by the in-flight table until the device has used them.
//!
//! Limitations: one disk (the first virtio-blk slot); the virtqueue has 16 entries (the
//! crate's fixed size; with indirect descriptors that is 16 requests in flight); no flush
//! or discard requests; a token is waited for by one strand.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use spin::Once;
use virtio_drivers::device::blk::{BlkReq, BlkResp, VirtIOBlk};
use virtio_drivers::transport::DeviceType;
use virtio_drivers::transport::mmio::MmioTransport;

use super::plic::{self, PlicError};
use super::virtio::{KernelHal, Slot, VirtioError, claim};
use crate::arch::csr::without_interrupts;
use crate::sched::{self, Strand};

/// Bytes per sector: the unit of every request's position and length.
pub const SECTOR_SIZE: usize = 512;
const _: () = assert!(SECTOR_SIZE == virtio_drivers::device::blk::SECTOR_SIZE);
/// Largest request accepted, in bytes (1 MiB): bounds the heap one request holds; larger
/// transfers are several requests.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Device to memory.
    Read,
    /// Memory to device.
    Write,
}

/// How a finished request is handed back ([`deliver`]).
#[derive(Clone, Copy, Debug)]
pub enum Notify {
    /// Kept until a strand collects it with [`wait`] (which blocks until then).
    Wait,
    /// Passed to this function, in interrupt context (interrupts off: it must not block).
    Call(fn(Completion)),
}

/// One read or write of whole sectors.
#[derive(Debug)]
pub struct Request {
    /// Read or write.
    pub operation: Operation,
    /// The first sector.
    pub sector: u64,
    /// The data to write, or the space to read into; its length is the request's length
    /// (a non-zero multiple of [`SECTOR_SIZE`], at most [`MAX_REQUEST_BYTES`]).
    pub buffer: Vec<u8>,
    /// How the completion is handed back.
    pub notify: Notify,
}

impl Request {
    /// A read of `sectors` sectors from `sector` into a zeroed buffer, collected with [`wait`].
    pub fn read(sector: u64, sectors: usize) -> Request {
        Request { operation: Operation::Read, sector, buffer: alloc::vec![0; sectors * SECTOR_SIZE], notify: Notify::Wait }
    }

    /// A write of `data` from `sector` on, collected with [`wait`].
    pub fn write(sector: u64, data: Vec<u8>) -> Request {
        Request { operation: Operation::Write, sector, buffer: data, notify: Notify::Wait }
    }

    /// The same request, handed back to `function` instead of [`wait`].
    pub fn calling(self, function: fn(Completion)) -> Request {
        Request { notify: Notify::Call(function), ..self }
    }

    /// Number of sectors the request covers (rounded down).
    pub fn sectors(&self) -> u64 {
        (self.buffer.len() / SECTOR_SIZE) as u64
    }
}

/// Names one submitted request, unique for the life of the kernel (never reused, unlike
/// the device's descriptor numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(u64);

impl Token {
    /// The token's number (tokens count up from 1 in submission order).
    pub fn value(self) -> u64 {
        self.0
    }
}

/// A request the device has finished.
#[derive(Debug)]
pub struct Completion {
    /// The token [`submit`] returned for it.
    pub token: Token,
    /// Read or write.
    pub operation: Operation,
    /// The first sector.
    pub sector: u64,
    /// The request's buffer: for a successful read, the data read.
    pub buffer: Vec<u8>,
    /// `Ok` when the device reported success; [`BlockError::DeviceIo`],
    /// [`BlockError::Unsupported`] or [`BlockError::Device`] otherwise.
    pub result: Result<(), BlockError>,
    notify: Notify,
}

/// Why a request was refused or failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockError {
    /// The machine has no disk (or [`init`] failed).
    NoDevice,
    /// The buffer is empty, not a multiple of [`SECTOR_SIZE`], or above [`MAX_REQUEST_BYTES`].
    BadLength(usize),
    /// The request ends past the last sector; refused before reaching the device.
    PastEnd {
        /// The request's first sector.
        sector: u64,
        /// The request's length in sectors.
        sectors: u64,
        /// The disk's capacity in sectors.
        capacity: u64,
    },
    /// A write to a read-only disk.
    ReadOnly,
    /// The virtqueue has no room now; try again after a completion.
    QueueFull,
    /// The device answered `VIRTIO_BLK_S_IOERR`.
    DeviceIo,
    /// The device answered `VIRTIO_BLK_S_UNSUPP`.
    Unsupported,
    /// Any other failure the virtio driver reported.
    Device(virtio_drivers::Error),
    /// [`wait`] for a token that is not (or no longer) waiting to be collected: never
    /// submitted, submitted with [`Notify::Call`], or already collected.
    UnknownToken(Token),
    /// [`wait`] for a token another strand is already waiting for.
    AlreadyWaited(Token),
}

impl BlockError {
    fn from_device(error: virtio_drivers::Error) -> BlockError {
        match error {
            virtio_drivers::Error::IoError => BlockError::DeviceIo,
            virtio_drivers::Error::Unsupported => BlockError::Unsupported,
            virtio_drivers::Error::QueueFull => BlockError::QueueFull,
            other => BlockError::Device(other),
        }
    }
}

impl fmt::Display for BlockError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockError::NoDevice => formatter.write_str("no disk"),
            BlockError::BadLength(length) => {
                write!(formatter, "bad request length {length} (a non-zero multiple of {SECTOR_SIZE}, at most {MAX_REQUEST_BYTES})")
            }
            BlockError::PastEnd { sector, sectors, capacity } => {
                write!(formatter, "sectors {sector}..{} are past the end of the disk ({capacity} sectors)", sector.saturating_add(*sectors))
            }
            BlockError::ReadOnly => formatter.write_str("the disk is read-only"),
            BlockError::QueueFull => formatter.write_str("the disk's virtqueue is full"),
            BlockError::DeviceIo => formatter.write_str("the disk reported an I/O error"),
            BlockError::Unsupported => formatter.write_str("the disk does not support the request"),
            BlockError::Device(error) => write!(formatter, "virtio-blk: {error}"),
            BlockError::UnknownToken(token) => write!(formatter, "no completion to collect for request {}", token.0),
            BlockError::AlreadyWaited(token) => write!(formatter, "another strand waits for request {}", token.0),
        }
    }
}

/// A request [`submit`] did not send, with the reason and the request itself (its buffer
/// is the caller's again).
#[derive(Debug)]
pub struct Refused {
    /// Why.
    pub error: BlockError,
    /// The request, unchanged.
    pub request: Request,
}

/// Why [`init`] found no usable disk.
#[derive(Debug)]
pub enum InitError {
    /// No virtio-blk slot, or the device did not initialise.
    Virtio(VirtioError),
    /// The device tree gives the slot no interrupt.
    NoInterrupt(usize),
    /// The interrupt could not be registered.
    Plic(PlicError),
}

impl fmt::Display for InitError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::Virtio(error) => error.fmt(formatter),
            InitError::NoInterrupt(base) => write!(formatter, "the virtio-mmio slot at {base:#x} has no interrupt"),
            InitError::Plic(error) => error.fmt(formatter),
        }
    }
}

/// The disk found by [`init`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskInfo {
    /// The virtio-mmio slot.
    pub slot: Slot,
    /// Its PLIC interrupt source.
    pub interrupt: u32,
    /// Capacity in sectors of [`SECTOR_SIZE`] bytes.
    pub sectors: u64,
    /// Whether the device refuses writes.
    pub read_only: bool,
}

/// The request header and status byte the device reads and writes; boxed so that their
/// addresses stay fixed while the request is in flight.
struct DeviceWords {
    header: BlkReq,
    response: BlkResp,
}

/// A request on the virtqueue, with everything the device may still touch.
struct InFlight {
    token: Token,
    operation: Operation,
    sector: u64,
    words: Box<DeviceWords>,
    data: Vec<u8>,
    notify: Notify,
}

/// The claimed device and its in-flight table, indexed by the virtqueue's descriptor
/// number (the crate's token; at most the queue size).
struct Disk {
    device: VirtIOBlk<KernelHal, MmioTransport<'static>>,
    in_flight: Vec<Option<InFlight>>,
}

/// What [`deliver`] keeps for [`wait`].
enum Waiting {
    /// Not finished yet; the strand waiting for it, if one is.
    Pending(Option<Arc<Strand>>),
    /// Finished, not collected yet.
    Done(Completion),
}

/// The disk; locked only with interrupts off (its interrupt handler takes it too).
static DISK: spin::Mutex<Option<Disk>> = spin::Mutex::new(None);
static INFO: Once<DiskInfo> = Once::new();
/// Requests submitted with [`Notify::Wait`], by token, until collected.
static WAITING: spin::Mutex<BTreeMap<Token, Waiting>> = spin::Mutex::new(BTreeMap::new());
/// Strands waiting for room on a full virtqueue; all are woken by the next completion.
static ROOM_WAITERS: spin::Mutex<Vec<Arc<Strand>>> = spin::Mutex::new(Vec::new());
/// The layer above's completion hook (step 1 of the module notes).
static COMPLETION_HOOK: spin::Mutex<Option<fn(Completion)>> = spin::Mutex::new(None);

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);
static SUBMITTED: AtomicU64 = AtomicU64::new(0);
static COMPLETED: AtomicU64 = AtomicU64::new(0);
static DELIVERED: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);
static QUEUE_FULL: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);
static INTERRUPTS: AtomicU64 = AtomicU64::new(0);
static BLOCKED_WAITS: AtomicU64 = AtomicU64::new(0);
static UNEXPECTED: AtomicU64 = AtomicU64::new(0);

/// Claims the first virtio block device, registers its interrupt with the PLIC (which
/// must be initialised) and enables the device's interrupts. Called once at boot.
///
/// Errors: [`InitError::Virtio`] (`NoDevice` when the machine has no disk),
/// [`InitError::NoInterrupt`], [`InitError::Plic`].
pub fn init() -> Result<DiskInfo, InitError> {
    if !plic::is_initialised() {
        return Err(InitError::Plic(PlicError::NotInitialised));
    }
    let (slot, transport) = claim(DeviceType::Block).map_err(InitError::Virtio)?;
    let interrupt = crate::devicetree::interrupt_of(slot.base).ok_or(InitError::NoInterrupt(slot.base))?;
    let mut device = VirtIOBlk::<KernelHal, _>::new(transport).map_err(|error| InitError::Virtio(VirtioError::Device(error)))?;
    let info = DiskInfo { slot, interrupt, sectors: device.capacity(), read_only: device.readonly() };
    let queue_size = usize::from(device.virt_queue_size());
    device.enable_interrupts();
    without_interrupts(|| {
        *DISK.lock() = Some(Disk { device, in_flight: (0..queue_size).map(|_| None).collect() });
    });
    INFO.call_once(|| info);
    plic::register(interrupt, on_interrupt).map_err(InitError::Plic)?;
    Ok(info)
}

/// The disk, if [`init`] found one.
pub fn info() -> Option<DiskInfo> {
    INFO.get().copied()
}

/// The disk's capacity in sectors of [`SECTOR_SIZE`] bytes, if there is a disk.
pub fn capacity() -> Option<u64> {
    info().map(|info| info.sectors)
}

/// Why `request` cannot be sent, checked before it reaches the device.
fn check(request: &Request, info: &DiskInfo) -> Result<(), BlockError> {
    let length = request.buffer.len();
    if length == 0 || !length.is_multiple_of(SECTOR_SIZE) || length > MAX_REQUEST_BYTES {
        return Err(BlockError::BadLength(length));
    }
    let sectors = request.sectors();
    if request.sector.checked_add(sectors).is_none_or(|end| end > info.sectors) {
        return Err(BlockError::PastEnd { sector: request.sector, sectors, capacity: info.sectors });
    }
    if request.operation == Operation::Write && info.read_only {
        return Err(BlockError::ReadOnly);
    }
    Ok(())
}

/// Sends `request` to the disk and returns its token at once; the completion arrives by
/// interrupt and is handed back as `request.notify` says (collect a [`Notify::Wait`]
/// request with [`wait`]). Thread or interrupt context; never blocks.
///
/// Errors (the request comes back in [`Refused`], nothing reached the device):
/// [`BlockError::NoDevice`], [`BlockError::BadLength`], [`BlockError::PastEnd`],
/// [`BlockError::ReadOnly`], [`BlockError::QueueFull`] (no room on the virtqueue now),
/// [`BlockError::Device`] (the driver refused the buffers).
pub fn submit(request: Request) -> Result<Token, Refused> {
    submit_or_wait(request, None)
}

/// [`submit`], but a full virtqueue makes the calling strand wait for a completion and
/// try again instead of failing. Thread context only (it may block).
///
/// Errors: those of [`submit`] except [`BlockError::QueueFull`].
pub fn submit_waiting_for_room(request: Request) -> Result<Token, Refused> {
    let me = sched::current();
    let mut request = request;
    loop {
        match submit_or_wait(request, Some(&me)) {
            Err(Refused { error: BlockError::QueueFull, request: back }) => {
                request = back;
                sched::block_current();
                without_interrupts(|| ROOM_WAITERS.lock().retain(|strand| !Arc::ptr_eq(strand, &me)));
            }
            other => return other,
        }
    }
}

/// [`submit`]; on a full virtqueue, `room_waiter` (if any) is queued for a wake-up at the
/// next completion, under the disk's lock, so that completion cannot be missed.
fn submit_or_wait(request: Request, room_waiter: Option<&Arc<Strand>>) -> Result<Token, Refused> {
    let refuse = |error: BlockError, request: Request| {
        REFUSED.fetch_add(1, Ordering::Relaxed);
        Err(Refused { error, request })
    };
    let Some(info) = info() else { return refuse(BlockError::NoDevice, request) };
    if let Err(error) = check(&request, &info) {
        return refuse(error, request);
    }
    let Request { operation, sector, mut buffer, notify } = request;
    let token = Token(NEXT_TOKEN.fetch_add(1, Ordering::Relaxed));
    let mut words = Box::new(DeviceWords { header: BlkReq::default(), response: BlkResp::default() });
    if matches!(notify, Notify::Wait) {
        // Before the device sees it, so the completion always finds its entry.
        without_interrupts(|| WAITING.lock().insert(token, Waiting::Pending(None)));
    }
    let outcome = without_interrupts(|| {
        let mut disk = DISK.lock();
        let Some(disk) = disk.as_mut() else { return Err(BlockError::NoDevice) };
        let DeviceWords { header, response } = &mut *words;
        // `check` kept the sector below the capacity, which a usize holds on this 64-bit kernel.
        let first = sector as usize;
        // `header`, `buffer` and `response` are heap allocations (fixed addresses, physically
        // contiguous; see the module notes) and the crate requires a length `check` enforced.
        let sent = match operation {
            // SAFETY: the three buffers move into the in-flight table below, untouched until
            // `on_interrupt` hands the same three to `complete_read_blocks` once the device has
            // used the descriptor; `check` made the length a non-zero multiple of SECTOR_SIZE.
            Operation::Read => unsafe { disk.device.read_blocks_nb(first, header, &mut buffer, response) },
            // SAFETY: the three buffers move into the in-flight table, untouched until
            // `on_interrupt` hands the same three to `complete_write_blocks` once the device has
            // used the descriptor; `check` made the length a non-zero multiple of SECTOR_SIZE.
            Operation::Write => unsafe { disk.device.write_blocks_nb(first, header, &buffer, response) },
        };
        match sent {
            Ok(descriptor) => {
                let entry = InFlight { token, operation, sector, words, data: core::mem::take(&mut buffer), notify };
                match disk.in_flight.get_mut(usize::from(descriptor)) {
                    Some(slot) => {
                        debug_assert!(slot.is_none(), "virtio-blk: descriptor {descriptor} handed out twice");
                        *slot = Some(entry);
                    }
                    // The crate numbers descriptors below its queue size, the table's length.
                    None => unreachable!("virtio-blk: descriptor {descriptor} outside the queue"),
                }
                SUBMITTED.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(virtio_drivers::Error::QueueFull) => {
                QUEUE_FULL.fetch_add(1, Ordering::Relaxed);
                if let Some(strand) = room_waiter {
                    ROOM_WAITERS.lock().push(strand.clone());
                }
                Err(BlockError::QueueFull)
            }
            Err(error) => Err(BlockError::Device(error)),
        }
    });
    match outcome {
        Ok(()) => Ok(token),
        Err(error) => {
            if matches!(notify, Notify::Wait) {
                without_interrupts(|| WAITING.lock().remove(&token));
            }
            refuse(error, Request { operation, sector, buffer, notify })
        }
    }
}

/// The disk's interrupt handler (registered with the PLIC; interrupt context): takes
/// every finished request off the virtqueue, hands each completion to the hook or to
/// [`deliver`], and wakes the strands waiting for room.
pub fn on_interrupt(_source: u32) {
    INTERRUPTS.fetch_add(1, Ordering::Relaxed);
    collect();
}

/// Takes finished requests off the virtqueue without an interrupt (any context; never
/// blocks): what a user that turned interrupts off ([`set_interrupts`]) calls.
pub fn poll() {
    collect();
}

/// Turns the device's completion interrupts on or off (on after [`init`]). The block
/// service turns them off while it serves a request: it polls at points that do not
/// depend on when the host finished the I/O, so runs under `-icount` repeat exactly.
///
/// Both the device's hint (virtio's "no interrupt" flag, which a device may ignore — with
/// event-index notification QEMU does) and the PLIC source are switched: masked, the
/// device's line cannot interrupt whatever strand runs at a host-dependent moment (which
/// would preempt it and send it to the back of its ready queue).
pub fn set_interrupts(enabled: bool) {
    without_interrupts(|| {
        if let Some(disk) = DISK.lock().as_mut() {
            if enabled {
                disk.device.enable_interrupts();
            } else {
                disk.device.disable_interrupts();
            }
        }
        if let Some(info) = info() {
            // Registered by `init` before `info` is set, so this only fails if the PLIC
            // vanished; the device's hint still applies then.
            let _ = plic::set_source_enabled(info.interrupt, enabled);
        }
    });
}

/// Hands every finished request to its hook or to [`deliver`], and wakes the strands
/// waiting for room.
fn collect() {
    let (completions, room_waiters) = without_interrupts(|| {
        let mut disk = DISK.lock();
        let Some(disk) = disk.as_mut() else { return (Vec::new(), Vec::new()) };
        disk.device.ack_interrupt();
        let mut completions = Vec::new();
        while let Some(descriptor) = disk.device.peek_used() {
            // A descriptor we did not send (or could not take back): stop rather than loop.
            let Some(mut entry) = disk.in_flight.get_mut(usize::from(descriptor)).and_then(Option::take) else {
                UNEXPECTED.fetch_add(1, Ordering::Relaxed);
                break;
            };
            let DeviceWords { header, response } = &mut *entry.words;
            let result = match entry.operation {
                // SAFETY: `header`, `data` and `response` are the very buffers `submit_or_wait`
                // gave `read_blocks_nb` for this descriptor (kept untouched in its in-flight
                // slot until now), and the device has put the descriptor on the used ring.
                Operation::Read => unsafe { disk.device.complete_read_blocks(descriptor, header, &mut entry.data, response) },
                // SAFETY: the buffers `submit_or_wait` gave `write_blocks_nb` for this
                // descriptor, untouched in its slot since, and the device has used them.
                Operation::Write => unsafe { disk.device.complete_write_blocks(descriptor, header, &entry.data, response) },
            };
            COMPLETED.fetch_add(1, Ordering::Relaxed);
            if result.is_err() {
                FAILED.fetch_add(1, Ordering::Relaxed);
            }
            completions.push(Completion {
                token: entry.token,
                operation: entry.operation,
                sector: entry.sector,
                buffer: entry.data,
                result: result.map_err(BlockError::from_device),
                notify: entry.notify,
            });
        }
        (completions, core::mem::take(&mut *ROOM_WAITERS.lock()))
    });
    let hook = without_interrupts(|| *COMPLETION_HOOK.lock());
    for completion in completions {
        match hook {
            Some(hook) => hook(completion),
            None => deliver(completion),
        }
    }
    for strand in room_waiters {
        sched::unblock(&strand);
    }
}

/// Installs (`Some`) or removes (`None`) the completion hook: from then on every
/// completion goes to it, in interrupt context, instead of to [`deliver`]; the hook owns
/// it and must pass it to [`deliver`] eventually (a request's waiter waits until then).
/// Returns the hook it replaces.
pub fn set_completion_hook(hook: Option<fn(Completion)>) -> Option<fn(Completion)> {
    without_interrupts(|| core::mem::replace(&mut *COMPLETION_HOOK.lock(), hook))
}

/// Finishes a completed request as it asked: keeps it for [`wait`] and wakes the waiting
/// strand, or calls its [`Notify::Call`] function. Any context; never blocks.
pub fn deliver(completion: Completion) {
    DELIVERED.fetch_add(1, Ordering::Relaxed);
    match completion.notify {
        Notify::Call(function) => function(completion),
        Notify::Wait => {
            let waiter = without_interrupts(|| {
                let mut waiting = WAITING.lock();
                // `submit` made the entry; a second delivery of one token keeps the first.
                let slot = waiting.get_mut(&completion.token)?;
                let Waiting::Pending(waiter) = slot else { return None };
                let waiter = waiter.take();
                *slot = Waiting::Done(completion);
                waiter
            });
            if let Some(strand) = waiter {
                sched::unblock(&strand);
            }
        }
    }
}

/// Blocks the calling strand until the request `token` (submitted with [`Notify::Wait`])
/// has been delivered, and returns its completion (whose `result` says whether the device
/// succeeded). Thread context, outside no-preemption sections.
///
/// Errors: [`BlockError::UnknownToken`] (never submitted, not a `Wait` request, or already
/// collected), [`BlockError::AlreadyWaited`] (another strand waits for it).
pub fn wait(token: Token) -> Result<Completion, BlockError> {
    let me = sched::current();
    loop {
        let outcome = without_interrupts(|| {
            let mut waiting = WAITING.lock();
            match waiting.get_mut(&token) {
                None => Some(Err(BlockError::UnknownToken(token))),
                Some(Waiting::Pending(Some(other))) if !Arc::ptr_eq(other, &me) => Some(Err(BlockError::AlreadyWaited(token))),
                Some(Waiting::Pending(waiter)) => {
                    *waiter = Some(me.clone());
                    None
                }
                Some(Waiting::Done(_)) => match waiting.remove(&token) {
                    Some(Waiting::Done(completion)) => Some(Ok(completion)),
                    _ => Some(Err(BlockError::UnknownToken(token))),
                },
            }
        });
        if let Some(outcome) = outcome {
            return outcome;
        }
        BLOCKED_WAITS.fetch_add(1, Ordering::Relaxed);
        sched::block_current();
    }
}

/// Submits `request` (waiting for room if the virtqueue is full) and waits for it:
/// the completion's buffer, or the first error.
fn transfer(request: Request) -> Result<Vec<u8>, BlockError> {
    let token = submit_waiting_for_room(request).map_err(|refused| refused.error)?;
    let completion = wait(token)?;
    completion.result.map(|()| completion.buffer)
}

/// Reads `buffer.len()` bytes (whole sectors) from `sector` on, blocking the calling
/// strand until the data is there. Thread context.
///
/// Errors: those of [`submit`] (except `QueueFull`: it waits for room), and the device's
/// ([`BlockError::DeviceIo`], [`BlockError::Unsupported`], [`BlockError::Device`]).
pub fn read(sector: u64, buffer: &mut [u8]) -> Result<(), BlockError> {
    let data = transfer(Request { operation: Operation::Read, sector, buffer: alloc::vec![0; buffer.len()], notify: Notify::Wait })?;
    buffer.copy_from_slice(&data);
    Ok(())
}

/// Writes `data` (whole sectors) from `sector` on, blocking the calling strand until the
/// device has taken it. Thread context.
///
/// Errors: as for [`read`], and [`BlockError::ReadOnly`].
pub fn write(sector: u64, data: &[u8]) -> Result<(), BlockError> {
    transfer(Request::write(sector, data.to_vec())).map(drop)
}

/// The driver's counters since boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Requests placed on the virtqueue.
    pub submitted: u64,
    /// Requests the device finished (taken off the used ring).
    pub completed: u64,
    /// Of those, finished with an error status.
    pub failed: u64,
    /// Completions passed to [`deliver`].
    pub delivered: u64,
    /// Requests refused before reaching the device (any reason).
    pub refused: u64,
    /// Of those, refused because the virtqueue was full.
    pub queue_full: u64,
    /// Interrupts the disk's handler ran for.
    pub interrupts: u64,
    /// Times a strand blocked in [`wait`].
    pub blocked_waits: u64,
    /// Used-ring entries for no request in flight (a device or driver bug).
    pub unexpected: u64,
    /// Requests on the virtqueue now.
    pub in_flight: u64,
}

/// The counters since boot.
pub fn stats() -> DiskStats {
    let in_flight = without_interrupts(|| DISK.lock().as_ref().map_or(0, |disk| disk.in_flight.iter().filter(|slot| slot.is_some()).count()));
    DiskStats {
        submitted: SUBMITTED.load(Ordering::Relaxed),
        completed: COMPLETED.load(Ordering::Relaxed),
        failed: FAILED.load(Ordering::Relaxed),
        delivered: DELIVERED.load(Ordering::Relaxed),
        refused: REFUSED.load(Ordering::Relaxed),
        queue_full: QUEUE_FULL.load(Ordering::Relaxed),
        interrupts: INTERRUPTS.load(Ordering::Relaxed),
        blocked_waits: BLOCKED_WAITS.load(Ordering::Relaxed),
        unexpected: UNEXPECTED.load(Ordering::Relaxed),
        in_flight: in_flight as u64,
    }
}
