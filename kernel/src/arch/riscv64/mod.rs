//! RISC-V 64 (RV64GC, S-mode under OpenSBI, Sv39) support.
//!
//! Exports a fixed set of names to the rest of the kernel: boot entry and per-hart
//! state ([`hart`]), control and status registers and counters ([`csr`]), the trap
//! vector and trap frames ([`trap`]), fault recovery points ([`recovery`]), Sv39 page
//! tables ([`sv39`]), SBI calls ([`sbi`]) and entering and leaving U-mode ([`user`]).

#[allow(unsafe_code)]
pub mod boot;
#[allow(unsafe_code)]
pub mod context;
#[allow(unsafe_code)]
pub mod csr;
#[allow(unsafe_code)]
pub mod hart;
#[allow(unsafe_code)]
pub mod recovery;
#[allow(unsafe_code)]
pub mod sbi;
#[allow(unsafe_code)]
pub mod sv39;
#[allow(unsafe_code)]
pub mod trap;
#[allow(unsafe_code)]
pub mod user;

/// Size of a base page and of a physical frame.
pub const PAGE_SIZE: usize = 4096;
