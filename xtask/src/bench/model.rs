//! The models that turn instruction counts into cycles and time: a cycle model priced
//! from published RISC-V hardware figures, and a disk model taken from Small & Seltzer
//! '96. Both exist only to compute the report's *modelled cycles* and break-even
//! columns; every constant names its source.
//!
//! Modelled cycles = instructions × [`CycleModel::cycles_per_instruction`], plus traps ×
//! [`CycleModel::trap_cycles`], plus `satp` writes × [`CycleModel::satp_write_cycles`], plus
//! `sfence.vma` × [`CycleModel::sfence_cycles`]. Time = modelled cycles ÷
//! [`CycleModel::clock_hz`].
//!
//! Known limitations: one CPI for all code (no caches, TLB refills or branch
//! mispredicts are modelled); no published per-instruction cost of a lone `satp` write or
//! `sfence.vma` on a SiFive U54/U74 was found, so both are priced at 0 extra cycles and a
//! trap round trip is priced at a whole seL4 IPC call, which already contains one
//! address-space switch (an upper-end estimate for a trap, see [`SOURCES`]).

use serde::{Deserialize, Serialize};

/// Hardware events one operation causes, per operation (from `bench hw` lines; absent = 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct HardwareCounts {
    /// Traps taken (entry into S-mode and its return).
    pub traps: f64,
    /// Writes of the `satp` CSR (address-space switches).
    pub satp_writes: f64,
    /// `sfence.vma` instructions executed.
    pub sfences: f64,
}

/// Prices for turning instructions and hardware events into cycles and time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CycleModel {
    /// Average cycles per instruction.
    pub cycles_per_instruction: f64,
    /// Extra cycles per trap round trip, beyond the instructions counted.
    pub trap_cycles: f64,
    /// Extra cycles per `satp` write, beyond the instruction counted.
    pub satp_write_cycles: f64,
    /// Extra cycles per `sfence.vma`, beyond the instruction counted.
    pub sfence_cycles: f64,
    /// Core clock in Hz, for converting cycles to time.
    pub clock_hz: f64,
}

impl CycleModel {
    /// Modelled cycles of one operation of `instructions` instructions causing `hardware`.
    pub fn cycles(&self, instructions: f64, hardware: HardwareCounts) -> f64 {
        instructions * self.cycles_per_instruction
            + hardware.traps * self.trap_cycles
            + hardware.satp_writes * self.satp_write_cycles
            + hardware.sfences * self.sfence_cycles
    }

    /// Seconds that `cycles` take at [`Self::clock_hz`].
    pub fn seconds(&self, cycles: f64) -> f64 {
        cycles / self.clock_hz
    }
}

/// Average cycles per instruction on a SiFive U54 — an **estimate**: the reciprocal of
/// the middle of the 0.35–0.59 instructions per cycle measured with `perf stat` on a
/// HiFive Unleashed (U54, 1 GHz) for JavaScript benchmarks ([`SOURCES`]: `v8-u54`); kernel
/// code with hot caches may run closer to the U54's peak of 1 instruction per cycle.
pub const CYCLES_PER_INSTRUCTION: f64 = 2.0;
/// The U54's clock on the HiFive Unleashed as run in the same measurement (`v8-u54`:
/// "Clock: 1G Hz"). The seL4 figures (`sel4-performance`) list the board at 1.5 GHz.
pub const CLOCK_HZ: f64 = 1.0e9;
/// Cycles charged per trap round trip — an **estimate, upper end**: one seL4 IPC call on
/// a U54 (HiFive Unleashed), hot cache, 472 cycles mean (`sel4-performance`). That call
/// is a trap from user mode, seL4's fastpath, one address-space switch and the return to
/// user mode; it includes work Spindle also counts as instructions. The hardware's own
/// part of a trap is far smaller: 4 cycles from the interrupt signal to the handler's
/// first fetch on a U54 (`u54-interrupt-latency`).
pub const TRAP_CYCLES: f64 = 472.0;
/// Extra cycles per `satp` write: 0, because no published measurement of a lone `satp`
/// write on a U54/U74 was found; the one address-space switch of a trap-and-switch is
/// inside [`TRAP_CYCLES`]. The counts are reported per row so they can be re-priced.
pub const SATP_WRITE_CYCLES: f64 = 0.0;
/// Extra cycles per `sfence.vma`: 0, for the same reason as [`SATP_WRITE_CYCLES`] (the
/// cost is mostly the TLB refills that follow, which depend on the workload).
pub const SFENCE_CYCLES: f64 = 0.0;

/// The cycle model the report uses.
pub const CYCLE_MODEL: CycleModel = CycleModel {
    cycles_per_instruction: CYCLES_PER_INSTRUCTION,
    trap_cycles: TRAP_CYCLES,
    satp_write_cycles: SATP_WRITE_CYCLES,
    sfence_cycles: SFENCE_CYCLES,
    clock_hz: CLOCK_HZ,
};

/// The disk whose timing the MD5 and logical-disk break-evens use.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DiskModel {
    /// Average seek, in seconds.
    pub seek_seconds: f64,
    /// Average rotational delay (half a revolution), in seconds.
    pub rotational_delay_seconds: f64,
    /// Sustained transfer rate, in bytes per second.
    pub transfer_bytes_per_second: f64,
}

impl DiskModel {
    /// Seconds to read `bytes` sequentially at the transfer rate (as Small & Seltzer §5.5
    /// estimated their 1 MB read time: from bandwidth alone).
    pub fn read_seconds(&self, bytes: f64) -> f64 {
        bytes / self.transfer_bytes_per_second
    }

    /// Seconds a random write spends positioning (seek plus average rotational delay):
    /// what a logical disk saves per write by appending to the current segment.
    pub fn positioning_seconds(&self) -> f64 {
        self.seek_seconds + self.rotational_delay_seconds
    }
}

/// Disk bandwidth, Small & Seltzer '96 §5.5, Table 4, Solaris row (SPARCstation 20,
/// lmbench): 3,126 KB/s, taken as KiB/s as the table's 1 MB access times are (the
/// platform on which every technology of Tables 2, 5 and 6 was measured).
pub const DISK_TRANSFER_BYTES_PER_SECOND: f64 = 3126.0 * 1024.0;
/// Average seek: Small & Seltzer '96 §5.6 compare per-write overhead with "a typical disk
/// seek" without giving a figure; their own statements (a sub-10 µs overhead is "on the
/// order of 1 %" of it, about 100 µs is "roughly 10 %") imply about 1 ms, used here.
pub const DISK_SEEK_SECONDS: f64 = 1.0e-3;
/// Spindle speed: the 7,200-RPM drives of Arpaci-Dusseau et al. '03 (§5.1 "Experimental
/// Environment", machines M1 and M3); Small & Seltzer give no rotation speed.
pub const DISK_RPM: f64 = 7200.0;
/// Average rotational delay: half a revolution at [`DISK_RPM`].
pub const DISK_ROTATIONAL_DELAY_SECONDS: f64 = 0.5 * 60.0 / DISK_RPM;

/// The disk model the report uses.
pub const DISK_MODEL: DiskModel = DiskModel {
    seek_seconds: DISK_SEEK_SECONDS,
    rotational_delay_seconds: DISK_ROTATIONAL_DELAY_SECONDS,
    transfer_bytes_per_second: DISK_TRANSFER_BYTES_PER_SECOND,
};

/// Bytes one MD5 operation digests (1 MiB, as the paper's 1 MB).
pub const MD5_BYTES: f64 = 1024.0 * 1024.0;

/// One external source of a constant.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Source {
    /// Short key used in doc comments and the report.
    pub key: &'static str,
    /// Title, authors or vendor, year.
    pub citation: &'static str,
    /// Where it can be read (URL or proceedings).
    pub location: &'static str,
    /// The figure taken and what it is used for.
    pub used_for: &'static str,
}

/// Every external source behind the models.
pub const SOURCES: &[Source] = &[
    Source {
        key: "small96",
        citation: "C. Small, M. Seltzer, \"A Comparison of OS Extension Technologies\", USENIX Annual Technical Conference, 1996",
        location: "Proceedings of the USENIX 1996 Annual Technical Conference, San Diego",
        used_for: "disk bandwidth 3,126 KB/s (§5.5, Table 4, Solaris); the seek implied by §5.6 (≈ 1 ms); the break-even definitions (§5.4–5.6); Tables 2, 5, 6",
    },
    Source {
        key: "infokernel03",
        citation: "A. C. Arpaci-Dusseau, R. H. Arpaci-Dusseau, N. C. Burnett, T. E. Denehy et al., \"Transforming Policies into Mechanisms with Infokernel\", SOSP 2003",
        location: "Proceedings of the 19th ACM SOSP, 2003",
        used_for: "7,200-RPM drives (§5.1 Experimental Environment, machines M1 and M3) → average rotational delay 4.17 ms",
    },
    Source {
        key: "v8-u54",
        citation: "Lu Yahan, \"Performance analysis between riscv64 and mips64\", riscv/v8 project wiki, 2020-10-29",
        location: "https://github.com/riscv/v8/wiki/media/Performance-analysis-between-riscv64-and-mips64.pdf",
        used_for: "HiFive Unleashed (SiFive U54) at 1 GHz, peak IPC 1, measured IPC 0.35–0.59 → CPI 2.0 (estimate) and clock 1 GHz",
    },
    Source {
        key: "sel4-performance",
        citation: "seL4 Foundation, \"Performance\" (sel4bench results, generated 2023-04-24 for sel4bench-manifest 0c297f3e)",
        location: "https://sel4.systems/performance.html",
        used_for: "U54-MC / SiFive Freedom U540 / HiFive Unleashed: IPC call 472 cycles (sd 7), IPC reply 629 (sd 8), hot cache → price of one trap round trip (estimate, upper end)",
    },
    Source {
        key: "u54-interrupt-latency",
        citation: "Microchip, \"PolarFire SoC MSS Technical Reference Manual\" (SiFive U54 cores), section \"Interrupt Latency\"",
        location: "https://onlinedocs.microchip.com/pr/GUID-0E320577-28E6-4365-9BB8-9E1416A0A6E4-en-US-6/GUID-E7EFC0C0-D002-4E35-829F-EAA7F2B34CA9.html",
        used_for: "4 cycles from interrupt signal to the handler's first fetch (best case): the hardware part of a trap, a lower bound next to the seL4 figure",
    },
];

/// How a graft's break-even point is computed (Small & Seltzer §5.4–§5.6).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BreakEvenRule {
    /// Page-fault cost ÷ graft cost, both measured in the same run (§5.4): how many
    /// graft runs one saved page fault pays for.
    PageFault {
        /// The row (same group) holding the page-fault cost.
        row: &'static str,
    },
    /// Time to read `bytes` from the disk model ÷ graft time (§5.5, inverted so that
    /// > 1 means the graft keeps up with the disk).
    DiskRead {
        /// Bytes one operation processes.
        bytes: f64,
    },
    /// Positioning time a batched write saves ÷ per-write graft time (§5.6): how many
    /// writes one saved seek pays for.
    SavedPositioning,
}

/// Break-even of a graft whose operation costs `graft_cycles` modelled cycles;
/// `reference_cycles` is the modelled cost of the rule's reference row, if it has one.
/// `None` when an input is missing or not positive.
pub fn break_even(rule: BreakEvenRule, graft_cycles: f64, reference_cycles: Option<f64>, cycles: &CycleModel, disk: &DiskModel) -> Option<f64> {
    if graft_cycles <= 0.0 {
        return None;
    }
    match rule {
        BreakEvenRule::PageFault { .. } => reference_cycles.filter(|&fault| fault > 0.0).map(|fault| fault / graft_cycles),
        BreakEvenRule::DiskRead { bytes } => Some(disk.read_seconds(bytes) / cycles.seconds(graft_cycles)),
        BreakEvenRule::SavedPositioning => Some(disk.positioning_seconds() / cycles.seconds(graft_cycles)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_MODEL: CycleModel = CycleModel { cycles_per_instruction: 2.0, trap_cycles: 100.0, satp_write_cycles: 10.0, sfence_cycles: 1.0, clock_hz: 1.0e9 };
    const TEST_DISK: DiskModel = DiskModel { seek_seconds: 0.001, rotational_delay_seconds: 0.004, transfer_bytes_per_second: 1.0e6 };

    #[test]
    fn modelled_cycles_add_each_event_at_its_price() {
        let counts = HardwareCounts { traps: 2.0, satp_writes: 3.0, sfences: 4.0 };
        assert_eq!(TEST_MODEL.cycles(1000.0, counts), 2000.0 + 200.0 + 30.0 + 4.0);
        assert_eq!(TEST_MODEL.cycles(1000.0, HardwareCounts::default()), 2000.0);
        assert!((TEST_MODEL.seconds(2000.0) - 2.0e-6).abs() < 1e-15);
    }

    #[test]
    fn published_model_prices_instructions_and_traps() {
        let counts = HardwareCounts { traps: 1.0, satp_writes: 2.0, sfences: 1.0 };
        assert_eq!(CYCLE_MODEL.cycles(276.0, counts), 276.0 * CYCLES_PER_INSTRUCTION + TRAP_CYCLES);
        assert!((DISK_ROTATIONAL_DELAY_SECONDS - 0.004_166_666).abs() < 1e-8);
        // 1 MiB at 3,126 KiB/s: the paper's Table 4 arithmetic (1,024 / 3,126 s).
        assert!((DISK_MODEL.read_seconds(MD5_BYTES) - 1024.0 / 3126.0).abs() < 1e-12);
    }

    #[test]
    fn page_fault_break_even_is_fault_over_graft() {
        let rule = BreakEvenRule::PageFault { row: "page-fault-caught" };
        assert_eq!(break_even(rule, 500.0, Some(2000.0), &TEST_MODEL, &TEST_DISK), Some(4.0));
        assert_eq!(break_even(rule, 500.0, None, &TEST_MODEL, &TEST_DISK), None);
        assert_eq!(break_even(rule, 0.0, Some(2000.0), &TEST_MODEL, &TEST_DISK), None);
    }

    #[test]
    fn disk_break_evens_use_time() {
        // 1,000,000 bytes at 1 MB/s = 1 s; 1e8 cycles at 1 GHz = 0.1 s: keeps up 10 times over.
        let read = break_even(BreakEvenRule::DiskRead { bytes: 1.0e6 }, 1.0e8, None, &TEST_MODEL, &TEST_DISK).expect("value");
        assert!((read - 10.0).abs() < 1e-9);
        // 5 ms of positioning saved against 5,000 cycles (5 µs) of overhead per write.
        let writes = break_even(BreakEvenRule::SavedPositioning, 5000.0, None, &TEST_MODEL, &TEST_DISK).expect("value");
        assert!((writes - 1000.0).abs() < 1e-9);
    }
}
