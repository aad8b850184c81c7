//! Passes the kernel's linker script to the linker (the kernel is linked at 0x8020_0000,
//! where OpenSBI jumps).

/// The trusted builder's verifying key, hex-encoded, set by `cargo xtask` when it builds
/// the kernel. Without it the kernel refuses every native extension with a clear error.
const VERIFYING_KEY_VARIABLE: &str = "SPINDLE_VERIFYING_KEY";

fn main() {
    println!("cargo:rerun-if-env-changed={VERIFYING_KEY_VARIABLE}");
    let key = std::env::var(VERIFYING_KEY_VARIABLE).ok().map(|hex| {
        let hex = hex.trim();
        assert!(hex.len() == 64, "{VERIFYING_KEY_VARIABLE} must be 64 hex digits, got {} characters", hex.len());
        (0..32)
            .map(|index| u8::from_str_radix(&hex[2 * index..2 * index + 2], 16).unwrap_or_else(|_| panic!("{VERIFYING_KEY_VARIABLE} is not hex")))
            .collect::<Vec<u8>>()
    });
    let text = match key {
        Some(bytes) => format!("Some({bytes:?})"),
        None => String::from("None"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(
        out.join("verifying_key.rs"),
        format!("/// The trusted builder's Ed25519 verifying key, baked in by xtask.\npub const VERIFYING_KEY: Option<[u8; 32]> = {text};\n"),
    )
    .expect("write verifying_key.rs");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/arch/riscv64/kernel.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rustc-link-arg-bins=-T{}", script.display());
}
