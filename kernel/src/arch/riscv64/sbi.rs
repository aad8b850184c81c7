//! Calls into the SBI firmware (OpenSBI 1.x: TIME and SRST extensions).

/// Programs the next timer interrupt at absolute `time` value `deadline`.
pub fn set_timer(deadline: u64) {
    let _ = sbi_rt::set_timer(deadline);
}

/// Asks the firmware to power the machine off (used when no `sifive_test` device exists;
/// SBI reset cannot report a failure status).
pub fn shutdown() -> ! {
    let _ = sbi_rt::system_reset(sbi_rt::Shutdown, sbi_rt::NoReason);
    loop {
        super::csr::wait_for_interrupt();
    }
}
