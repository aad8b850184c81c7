//! The platform-level interrupt controller (PLIC): device interrupts to the harts.
//!
//! [`init`] finds the PLIC in the device tree (`riscv,plic0` / `sifive,plic-1.0.0`, at
//! `0x0c00_0000` on QEMU `virt`) with the supervisor-mode context of each hart, gives every
//! source priority 0 (never delivered), opens every S-mode context (threshold 0, nothing
//! enabled), installs [`handle_interrupt`] as the trap vector's external-interrupt handler
//! and sets `sie.SEIE` on the calling hart. A driver then [`register`]s a handler for its
//! source: the source gets priority 1 and is enabled in the registering hart's context.
//!
//! On a supervisor external interrupt the trap handler calls [`handle_interrupt`], which
//! claims sources from this hart's context until the claim reads 0, calls each source's
//! handler (interrupt context: interrupts off, must not block) and completes the source.
//! A claim of 0 at the first read (another hart took it, or the source went quiet) is
//! counted as spurious and otherwise ignored; a claimed source with no handler is
//! completed and counted, so it cannot wedge the controller.
//!
//! Register map (PLIC specification, "Memory Map"): priority `4 × source`; enable bits
//! `0x2000 + 0x80 × context`; threshold `0x20_0000 + 0x1000 × context`, claim/complete 4
//! bytes after it.
//!
//! Limitations: every source is routed to the hart that registered it (one hart runs
//! today); priorities are 0 or 1 (no nesting: handlers run with interrupts off).

use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use spin::Once;

use crate::arch::csr::{self, without_interrupts};
use crate::mmio::MmioRegion;

/// Offset of source 0's priority register (one 32-bit word per source).
const PRIORITY_BASE: usize = 0x0;
/// Offset of context 0's enable bits (one bit per source).
const ENABLE_BASE: usize = 0x2000;
/// Bytes of enable bits per context.
const ENABLE_STRIDE: usize = 0x80;
/// Offset of context 0's priority threshold register.
const CONTEXT_BASE: usize = 0x20_0000;
/// Bytes of registers per context (threshold, claim/complete).
const CONTEXT_STRIDE: usize = 0x1000;
/// The claim/complete register's offset inside a context's registers.
const CLAIM_COMPLETE_OFFSET: usize = 4;
/// Sources per 32-bit enable word.
const SOURCES_PER_WORD: u32 = 32;
/// The priority of a registered source (any non-zero priority is above threshold 0).
const REGISTERED_PRIORITY: u32 = 1;
/// The priority that masks a source.
const MASKED_PRIORITY: u32 = 0;
/// The threshold that lets every non-zero priority through.
const OPEN_THRESHOLD: u32 = 0;
/// The largest source number the PLIC architecture allows.
const LARGEST_SOURCE: u32 = 1023;

/// What an interrupt handler is: called with the source number, interrupts off.
pub type Handler = fn(source: u32);

/// Why the PLIC could not be set up or a handler registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlicError {
    /// The device tree has no PLIC (or it has no S-mode context for any hart).
    NotFound,
    /// The PLIC's register window is smaller than its contexts need.
    WindowTooSmall {
        /// The window's size.
        size: usize,
        /// The bytes the highest context needs.
        needed: usize,
    },
    /// [`init`] has not run (or failed).
    NotInitialised,
    /// The calling hart has no S-mode context.
    NoContextForHart(usize),
    /// Source 0 or a source above the PLIC's `riscv,ndev`.
    BadSource(u32),
    /// The source already has a handler.
    AlreadyRegistered(u32),
}

impl fmt::Display for PlicError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlicError::NotFound => formatter.write_str("no PLIC with a supervisor context in the device tree"),
            PlicError::WindowTooSmall { size, needed } => write!(formatter, "PLIC window of {size:#x} bytes, contexts need {needed:#x}"),
            PlicError::NotInitialised => formatter.write_str("the PLIC is not initialised"),
            PlicError::NoContextForHart(hart) => write!(formatter, "the PLIC has no supervisor context for hart {hart}"),
            PlicError::BadSource(source) => write!(formatter, "no PLIC interrupt source {source}"),
            PlicError::AlreadyRegistered(source) => write!(formatter, "PLIC source {source} already has a handler"),
        }
    }
}

/// The PLIC found by [`init`].
struct Plic {
    registers: MmioRegion,
    /// Highest source number.
    sources: u32,
    /// `(hart id, context)` of each hart's S-mode context.
    contexts: Vec<(usize, usize)>,
}

impl Plic {
    fn context_of(&self, hart: usize) -> Option<usize> {
        self.contexts.iter().find(|(owner, _)| *owner == hart).map(|(_, context)| *context)
    }

    fn set_priority(&self, source: u32, priority: u32) {
        self.registers.write_u32(PRIORITY_BASE + 4 * source as usize, priority);
    }

    fn enable_word_offset(context: usize, source: u32) -> usize {
        ENABLE_BASE + ENABLE_STRIDE * context + 4 * (source / SOURCES_PER_WORD) as usize
    }

    fn set_enabled(&self, context: usize, source: u32, enabled: bool) {
        let offset = Plic::enable_word_offset(context, source);
        let bit = 1 << (source % SOURCES_PER_WORD);
        let word = self.registers.read_u32(offset);
        self.registers.write_u32(offset, if enabled { word | bit } else { word & !bit });
    }

    fn threshold_offset(context: usize) -> usize {
        CONTEXT_BASE + CONTEXT_STRIDE * context
    }

    fn claim(&self, context: usize) -> u32 {
        self.registers.read_u32(Plic::threshold_offset(context) + CLAIM_COMPLETE_OFFSET)
    }

    fn complete(&self, context: usize, source: u32) {
        self.registers.write_u32(Plic::threshold_offset(context) + CLAIM_COMPLETE_OFFSET, source);
    }
}

static PLIC: Once<Plic> = Once::new();
/// The handler of each source (index = source number), `None` where nobody registered.
static HANDLERS: spin::Mutex<Vec<Option<Handler>>> = spin::Mutex::new(Vec::new());

static CLAIMS: AtomicU64 = AtomicU64::new(0);
static COMPLETIONS: AtomicU64 = AtomicU64::new(0);
static SPURIOUS: AtomicU64 = AtomicU64::new(0);
static UNHANDLED: AtomicU64 = AtomicU64::new(0);

/// What [`init`] found, for the boot line.
#[derive(Clone, Copy, Debug)]
pub struct PlicInfo {
    /// Register window base.
    pub base: usize,
    /// Highest source number.
    pub sources: u32,
    /// The calling (boot) hart's S-mode context.
    pub context: usize,
}

/// Finds the PLIC, masks every source, opens every S-mode context, installs the
/// external-interrupt handler and enables external interrupts on this hart. Called once,
/// on the boot hart, after paging is on (the PLIC window is mapped with the devices).
///
/// Errors: [`PlicError::NotFound`] (no PLIC or no S-mode context),
/// [`PlicError::WindowTooSmall`], [`PlicError::NoContextForHart`] (none for this hart).
pub fn init() -> Result<PlicInfo, PlicError> {
    let description = crate::devicetree::plic().ok_or(PlicError::NotFound)?;
    let sources = description.sources.min(LARGEST_SOURCE);
    let highest_context = description.supervisor_contexts.iter().map(|(_, context)| *context).max().ok_or(PlicError::NotFound)?;
    let needed = Plic::threshold_offset(highest_context) + CONTEXT_STRIDE;
    if description.size < needed {
        return Err(PlicError::WindowTooSmall { size: description.size, needed });
    }
    // SAFETY: the window is the device tree's PLIC node, which `mm::kernel_space` maps
    // read-write as device memory for the kernel's life (it maps every device window up to
    // 8 MiB; the PLIC's is 6 MiB on `virt`); it is not RAM, and its size was checked above.
    let registers = unsafe { MmioRegion::new(description.base, description.size) };
    let plic = Plic { registers, sources, contexts: description.supervisor_contexts };
    let hart = crate::arch::hart::id();
    let context = plic.context_of(hart).ok_or(PlicError::NoContextForHart(hart))?;
    for source in 1..=sources {
        plic.set_priority(source, MASKED_PRIORITY);
    }
    for &(_, context) in &plic.contexts {
        for source in 1..=sources {
            plic.set_enabled(context, source, false);
        }
        plic.registers.write_u32(Plic::threshold_offset(context), OPEN_THRESHOLD);
    }
    without_interrupts(|| *HANDLERS.lock() = alloc::vec![None; sources as usize + 1]);
    let plic = PLIC.call_once(|| plic);
    crate::arch::trap::set_external_interrupt_handler(handle_interrupt);
    csr::enable_interrupt_sources(csr::SIE_SEIE);
    Ok(PlicInfo { base: plic.registers.base(), sources: plic.sources, context })
}

/// Whether [`init`] found the PLIC.
pub fn is_initialised() -> bool {
    PLIC.get().is_some()
}

/// Makes `handler` the handler of `source` and enables the source in the calling hart's
/// context (priority 1), so its interrupts reach this hart from now on.
///
/// Errors: [`PlicError::NotInitialised`], [`PlicError::BadSource`] (0 or above the
/// PLIC's sources), [`PlicError::AlreadyRegistered`], [`PlicError::NoContextForHart`].
pub fn register(source: u32, handler: Handler) -> Result<(), PlicError> {
    let plic = PLIC.get().ok_or(PlicError::NotInitialised)?;
    if source == 0 || source > plic.sources {
        return Err(PlicError::BadSource(source));
    }
    let hart = crate::arch::hart::id();
    let context = plic.context_of(hart).ok_or(PlicError::NoContextForHart(hart))?;
    without_interrupts(|| {
        let mut handlers = HANDLERS.lock();
        let slot = handlers.get_mut(source as usize).ok_or(PlicError::BadSource(source))?;
        if slot.is_some() {
            return Err(PlicError::AlreadyRegistered(source));
        }
        *slot = Some(handler);
        plic.set_priority(source, REGISTERED_PRIORITY);
        plic.set_enabled(context, source, true);
        Ok(())
    })
}

/// Masks (`enabled == false`) or unmasks a registered `source` in the calling hart's
/// context. A device that raises its line while masked is taken when it is unmasked (the
/// PLIC keeps it pending). For a driver that must not be interrupted at host-dependent
/// times: a device's own "no interrupt" hint (virtio's `VIRTQ_AVAIL_F_NO_INTERRUPT`) is
/// only advice that a device may ignore, the mask is not.
///
/// Errors: [`PlicError::NotInitialised`], [`PlicError::BadSource`] (0, above the PLIC's
/// sources, or nobody registered it), [`PlicError::NoContextForHart`].
pub fn set_source_enabled(source: u32, enabled: bool) -> Result<(), PlicError> {
    let plic = PLIC.get().ok_or(PlicError::NotInitialised)?;
    let hart = crate::arch::hart::id();
    let context = plic.context_of(hart).ok_or(PlicError::NoContextForHart(hart))?;
    without_interrupts(|| {
        let handlers = HANDLERS.lock();
        if source == 0 || handlers.get(source as usize).is_none_or(Option::is_none) {
            return Err(PlicError::BadSource(source));
        }
        plic.set_enabled(context, source, enabled);
        Ok(())
    })
}

/// The external-interrupt handler (interrupt context, interrupts off): claims every
/// pending source of this hart's context, runs its handler and completes it; then gives
/// the hart to a strand a handler woke, if it outranks the running one
/// ([`crate::sched::preempt_if_outranked`]).
pub fn handle_interrupt() {
    let Some(plic) = PLIC.get() else { return };
    let Some(context) = plic.context_of(crate::arch::hart::id()) else { return };
    let mut first = true;
    loop {
        let source = plic.claim(context);
        if source == 0 {
            if first {
                SPURIOUS.fetch_add(1, Ordering::Relaxed);
            }
            break;
        }
        first = false;
        CLAIMS.fetch_add(1, Ordering::Relaxed);
        // Copied out so that the handler runs without the table's lock.
        let handler = HANDLERS.lock().get(source as usize).copied().flatten();
        match handler {
            Some(handler) => handler(source),
            None => {
                UNHANDLED.fetch_add(1, Ordering::Relaxed);
            }
        }
        plic.complete(context, source);
        COMPLETIONS.fetch_add(1, Ordering::Relaxed);
    }
    // Every claimed source is complete, so switching strands leaves nothing claimed.
    crate::sched::preempt_if_outranked();
}

/// Counters since boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlicStats {
    /// Sources claimed (each claim is one interrupt taken).
    pub claims: u64,
    /// Sources completed (equals `claims` once every handler has returned).
    pub completions: u64,
    /// External interrupts whose first claim read 0.
    pub spurious: u64,
    /// Claimed sources with no handler (completed and otherwise ignored).
    pub unhandled: u64,
}

/// The counters since boot.
pub fn stats() -> PlicStats {
    PlicStats {
        claims: CLAIMS.load(Ordering::Relaxed),
        completions: COMPLETIONS.load(Ordering::Relaxed),
        spurious: SPURIOUS.load(Ordering::Relaxed),
        unhandled: UNHANDLED.load(Ordering::Relaxed),
    }
}
