//! The architecture boundary. Portable kernel code uses only the names re-exported here;
//! nothing outside `arch/` contains `cfg(target_arch)` or inline assembly.

mod riscv64;

pub use riscv64::*;
