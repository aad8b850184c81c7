//! What the kernel tells the host when it stops the machine: the exit status QEMU passes
//! on through the `sifive_test` finisher (`kernel/src/power.rs` writes it, `xtask` reads
//! it). One definition for both sides.

/// Exit statuses of the whole machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum MachineExit {
    /// Everything asked for succeeded.
    Success = 0,
    /// A console command or a kernel test failed.
    Failure = 1,
    /// The kernel panicked.
    Panic = 3,
    /// The kernel took a fault it could not recover from.
    FatalFault = 4,
}

impl MachineExit {
    /// The process exit code QEMU reports to the host.
    pub const fn code(self) -> i32 {
        self as u16 as i32
    }
}

#[cfg(test)]
mod tests {
    use super::MachineExit;

    #[test]
    fn codes_are_distinct_and_stable() {
        let codes = [MachineExit::Success, MachineExit::Failure, MachineExit::Panic, MachineExit::FatalFault].map(MachineExit::code);
        assert_eq!(codes, [0, 1, 3, 4]);
    }
}
