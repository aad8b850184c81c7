//! The global allocator of native extensions: memory from the extension's own arena.
//!
//! The trusted builder's glue crate declares
//! `#[global_allocator] static ALLOCATOR: ExtensionAllocator = ExtensionAllocator;`, so an
//! extension crate that says `extern crate alloc;` may use `Vec`, `Box` and friends. Every
//! allocation goes to the kernel's `spindle_extension_alloc` (domain `extension`, always
//! granted), which serves it from the calling extension's arena: a buddy heap over frames
//! mapped read-write (never executable) in the extension's slot, sized by its manifest's
//! `memory_quota_bytes`. When the quota is exhausted the kernel returns null, Rust's
//! default allocation-error handler panics ("memory allocation of N bytes failed"), the
//! glue's panic handler reports it, and the extension is killed — unless the extension
//! took its own error path first (`Vec::try_reserve`). When the extension
//! is unloaded the arena is freed whole; no destructor runs.
//!
//! Built-in extensions are linked into the kernel and share the kernel heap (a binary has
//! one global allocator): they have no per-extension quota. On the host (unit tests of
//! extension crates) `std`'s allocator is used and this type is inert.

/// The native glue's global allocator: forwards to the kernel's arena functions.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExtensionAllocator;

#[cfg(all(target_os = "none", not(feature = "user-level")))]
// SAFETY: the kernel's `spindle_extension_alloc` returns null or a block of at least
// `size` bytes aligned to `align`, inside the calling extension's arena, mapped
// read-write, and not handed out again until it is returned with
// `spindle_extension_free` — the `GlobalAlloc` contract. `dealloc` returns exactly the
// blocks and layouts `alloc` handed out (the caller's contract).
unsafe impl core::alloc::GlobalAlloc for ExtensionAllocator {
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        // SAFETY: the import takes two plain integers (a `Layout`'s size and power-of-two
        // alignment) and validates them; it touches no memory of the caller.
        let mut pointer = unsafe { crate::imports::spindle_extension_alloc(layout.size(), layout.align()) };
        // Never a tail call: the kernel finds the calling extension's arena from the return
        // address, which must lie in this image (a tail call could leave the kernel's there).
        // The result passes through an empty `asm!`, so the call cannot be the last thing.
        // SAFETY: the assembly is empty: it reads and writes nothing, `pointer` stays as is.
        unsafe { core::arch::asm!("/* {0} */", inout(reg) pointer, options(nostack, preserves_flags)) };
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: core::alloc::Layout) {
        // SAFETY: by `GlobalAlloc::dealloc`'s contract `pointer` was returned by `alloc`
        // above with this `layout` and is not used again; the kernel checks that it lies in
        // the caller's arena and ignores it otherwise.
        unsafe { crate::imports::spindle_extension_free(pointer, layout.size(), layout.align()) };
        // Never a tail call (see `alloc`): an empty `asm!` (with side effects, so kept and
        // not moved above the call) follows it.
        // SAFETY: the assembly is empty: it reads and writes nothing.
        unsafe { core::arch::asm!("", options(nomem, nostack, preserves_flags)) };
    }
}
