//! RISC-V 64 (RV64GC, S-mode under OpenSBI, Sv39) support.
//!
//! Exports a fixed set of names to the rest of the kernel: boot entry and per-hart
//! state ([`hart`]), control and status registers and counters ([`csr`]), the trap
//! vector and trap frames ([`trap`]), fault recovery points ([`recovery`]), Sv39 page
//! tables ([`sv39`]), SBI calls ([`sbi`]) and entering and leaving U-mode ([`user`]).

pub mod boot;
pub mod context;
pub mod csr;
pub mod hart;
pub mod recovery;
pub mod sbi;
pub mod sv39;
pub mod trap;
pub mod user;

/// Size of a base page and of a physical frame.
pub const PAGE_SIZE: usize = 4096;
