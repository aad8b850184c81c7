//! Passes the kernel's linker script to the linker (the kernel is linked at 0x8020_0000,
//! where OpenSBI jumps).
//!
//! Every path comes from cargo's environment when the script *runs* (`CARGO_MANIFEST_DIR`,
//! `OUT_DIR`), never from where the script was compiled, and what the linker reads is
//! copied into `OUT_DIR`: cargo rewrites `OUT_DIR` paths in a kept build-script output
//! when a checkout is copied or moved with its `target/`, so a copy links its own script.

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
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_directory = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    std::fs::write(
        out.join("verifying_key.rs"),
        format!("/// The trusted builder's Ed25519 verifying key, baked in by xtask.\npub const VERIFYING_KEY: Option<[u8; 32]> = {text};\n"),
    )
    .expect("write verifying_key.rs");
    let script = manifest_directory.join("src/arch/riscv64/kernel.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    let linked_script = out.join("kernel.ld");
    std::fs::copy(&script, &linked_script).unwrap_or_else(|error| panic!("cannot copy {} to {}: {error}", script.display(), linked_script.display()));
    println!("cargo:rustc-link-arg-bins=-T{}", linked_script.display());
    // `kernel/..`, not canonicalised: cargo stores a rerun-if-changed path that starts
    // with the package root relative to it, so a copied checkout watches its own sources.
    c_references(&out, &manifest_directory.join(".."));
}

/// Compiles the C references of the benchmark grafts (Small & Seltzer's "unsafe C"
/// baseline, e.g. `extensions/hotlist/c/hotlist.c`) with clang for the kernel's target
/// and links them as a static library — only with the `bench` feature; without clang the kernel builds without them
/// (cfg `spindle_no_c_reference`, and the benchmark says the rows are missing).
fn c_references(out: &std::path::Path, root: &std::path::Path) {
    println!("cargo:rustc-check-cfg=cfg(spindle_no_c_reference)");
    let sources = [root.join("extensions/hotlist/c/hotlist.c"), root.join("extensions/md5/c/md5.c"), root.join("extensions/logdisk/c/logdisk.c")];
    for source in &sources {
        println!("cargo:rerun-if-changed={}", source.display());
    }
    // Only the bench and test images carry the benchmarks (feature `bench`); the
    // production image links no C.
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("riscv64") || std::env::var_os("CARGO_FEATURE_BENCH").is_none() {
        println!("cargo:rustc-cfg=spindle_no_c_reference");
        return;
    }
    let clang = std::env::var("CLANG").unwrap_or_else(|_| String::from("clang"));
    let mut objects = Vec::new();
    for source in &sources {
        let object = out.join(format!("{}.o", source.file_stem().and_then(|stem| stem.to_str()).unwrap_or("c")));
        let status = std::process::Command::new(&clang)
            .args(["--target=riscv64-unknown-none-elf", "-march=rv64gc", "-mabi=lp64d", "-mcmodel=medany", "-mno-relax"])
            .args(["-O2", "-ffreestanding", "-fno-builtin", "-fno-pic", "-Wall", "-Werror", "-c"])
            .arg(source)
            .arg("-o")
            .arg(&object)
            .status();
        if !status.is_ok_and(|status| status.success()) {
            println!("cargo:warning=C references not built ({clang} failed on {}): the benchmark's c-reference rows will be missing", source.display());
            println!("cargo:rustc-cfg=spindle_no_c_reference");
            return;
        }
        objects.push(object);
    }
    let archive = out.join("libspindle_c_references.a");
    let _ = std::fs::remove_file(&archive);
    let ar = std::env::var("AR_RISCV").unwrap_or_else(|_| String::from("llvm-ar"));
    let status = std::process::Command::new(&ar).arg("crs").arg(&archive).args(&objects).status();
    if !status.is_ok_and(|status| status.success()) {
        println!("cargo:warning=C references not archived ({ar} failed): the benchmark's c-reference rows will be missing");
        println!("cargo:rustc-cfg=spindle_no_c_reference");
        return;
    }
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=spindle_c_references");
}
