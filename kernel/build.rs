//! Passes the kernel's linker script to the linker (the kernel is linked at 0x8020_0000,
//! where OpenSBI jumps).

fn main() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/arch/riscv64/kernel.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rustc-link-arg-bins=-T{}", script.display());
}
