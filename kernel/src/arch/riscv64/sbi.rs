//! Calls into the SBI firmware (OpenSBI 1.x: TIME and SRST extensions), and the Sstc
//! shortcut for the timer.

use core::sync::atomic::{AtomicBool, Ordering};

/// `stimecmp` (Sstc): the supervisor timer compare register.
const CSR_STIMECMP: usize = 0x14d;

static SSTC_ENABLED: AtomicBool = AtomicBool::new(false);

fn write_stimecmp(deadline: u64) {
    // SAFETY: writing `stimecmp` only reprograms this hart's supervisor timer interrupt;
    // it is called only once `enable_sstc` has checked that the write does not trap.
    unsafe { core::arch::asm!("csrw {csr}, {value}", csr = const CSR_STIMECMP, value = in(reg) deadline, options(nostack)) };
}

/// Uses `stimecmp` directly from now on if the hart has Sstc and the firmware let S-mode
/// write it (`menvcfg.STCE`); otherwise keeps using the SBI call. A timer reprogrammed
/// by an SBI call costs an `ecall` into M-mode (hundreds of instructions); the CSR write
/// is one instruction. (Bounded calls program it only when no interrupt is due by their deadline.)
pub fn enable_sstc(isa: &str) -> bool {
    if !isa.split('_').any(|extension| extension == "sstc") {
        return false;
    }
    let probe = super::recovery::catch_faults(|| write_stimecmp(u64::MAX));
    let enabled = probe.is_ok();
    SSTC_ENABLED.store(enabled, Ordering::Relaxed);
    enabled
}

/// Programs the next timer interrupt at absolute `time` value `deadline`.
pub fn set_timer(deadline: u64) {
    super::hart::current().timer_armed_at.store(deadline, Ordering::Relaxed);
    if SSTC_ENABLED.load(Ordering::Relaxed) {
        write_stimecmp(deadline);
    } else {
        let _ = sbi_rt::set_timer(deadline);
    }
}

/// Asks the firmware to power the machine off (used when no `sifive_test` device exists;
/// SBI reset cannot report a failure status).
pub fn shutdown() -> ! {
    let _ = sbi_rt::system_reset(sbi_rt::Shutdown, sbi_rt::NoReason);
    loop {
        super::csr::wait_for_interrupt();
    }
}
