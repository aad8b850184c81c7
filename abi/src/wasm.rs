//! The Wasm contract between the kernel's Wasm runtime and an extension's Wasm glue.
//!
//! A Wasm extension is the same crate as its native build, wrapped by the trusted builder
//! (`cargo xtask ext build <crate> --wasm`) in a generated `#![no_std]` `cdylib` for
//! `wasm32-unknown-unknown`. It exports the three functions of [`crate::native`] with the
//! same meaning — pointers are offsets into the module's linear memory and `usize` is
//! 32 bits, so each becomes a Wasm `i32` — plus:
//!
//! | export | signature | meaning |
//! |---|---|---|
//! | [`EXCHANGE_SYMBOL`] | `() -> i32` | offset of a static [`EXCHANGE_SIZE`]-byte buffer the kernel passes records through |
//! | [`MEMORY_EXPORT`] | memory | the module's linear memory (the only one) |
//!
//! The kernel writes a binding's encoded arguments at [`ARGUMENTS_OFFSET`] inside the
//! exchange buffer, calls `invoke(index, exchange + ARGUMENTS_OFFSET, size,
//! exchange + RESULT_OFFSET, size)`, and reads the result back; `binding_info` writes its
//! [`BindingInfo`](crate::native::BindingInfo) at the start of the buffer (its `#[repr(C)]`
//! layout is the same on `wasm32` and `riscv64`: only fixed-width fields).
//!
//! Kernel functions are imported from module [`WASM_IMPORT_MODULE`] under their names in
//! [`KERNEL_FUNCTIONS`](crate::host::KERNEL_FUNCTIONS), generated from the same
//! `declare_kernel_functions!` as the native imports; the kernel links only those of the
//! domains the manifest names and the loader grants.
//!
//! Memory: a Wasm extension's heap is its own linear memory. `spindle_glue::WasmAllocator`
//! (the glue's global allocator) grows it with `memory.grow`; the kernel's resource limiter
//! refuses growth past the module's initial memory plus the manifest's quota, so the grow
//! returns -1, the allocation fails, and — unless the extension takes its own error path
//! (`Vec::try_reserve`) — Rust's allocation-error handler panics and the extension is
//! killed, exactly as a native extension whose arena is exhausted.

/// Module name of every kernel-function import.
pub const WASM_IMPORT_MODULE: &str = "spindle";
/// Exported function: offset of the exchange buffer.
pub const EXCHANGE_SYMBOL: &str = "spindle_extension_exchange";
/// Exported memory name (rust-lld's default for a `cdylib`).
pub const MEMORY_EXPORT: &str = "memory";
/// Size of the exchange buffer in bytes.
pub const EXCHANGE_SIZE: usize = 256;
/// Where the arguments go inside the exchange buffer.
pub const ARGUMENTS_OFFSET: usize = 0;
/// Where the result goes inside the exchange buffer (records are at most this large).
pub const RESULT_OFFSET: usize = 128;
/// Every function a Wasm extension exports.
pub const EXPORTED_FUNCTIONS: &[&str] =
    &[crate::native::BINDING_COUNT_SYMBOL, crate::native::BINDING_INFO_SYMBOL, crate::native::INVOKE_SYMBOL, EXCHANGE_SYMBOL];
/// Kernel functions a Wasm module may not import: they serve a native extension's arena,
/// and a Wasm module's heap is its own linear memory.
pub const NATIVE_ONLY_FUNCTIONS: &[&str] = &["spindle_extension_alloc", "spindle_extension_free"];
/// Size of a Wasm page: the unit of linear memory.
pub const WASM_PAGE_SIZE: usize = 64 * 1024;
/// Shadow-stack size the builder links Wasm extensions with (`-z stack-size`): the part of
/// the initial linear memory that holds Rust's stack frames (a recursion past it runs below
/// address 0 and traps on the first out-of-bounds access).
pub const WASM_STACK_SIZE: usize = 32 * 1024;

const _: () = assert!(core::mem::size_of::<crate::native::BindingInfo>() <= EXCHANGE_SIZE);
// Each half of the exchange buffer holds the largest record the kernel marshals (64 bytes).
const _: () = assert!(RESULT_OFFSET - ARGUMENTS_OFFSET >= 64 && EXCHANGE_SIZE - RESULT_OFFSET >= 64);


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_exports_the_native_functions_and_the_exchange() {
        assert_eq!(&EXPORTED_FUNCTIONS[..3], crate::native::EXPORTED_SYMBOLS);
        assert_eq!(EXPORTED_FUNCTIONS[3], EXCHANGE_SYMBOL);
    }
}
