//! Kernel functions an extension may call, grouped in domains, declared once.
//!
//! [`declare_kernel_functions!`](crate::declare_kernel_functions) turns each declaration
//! into an entry of [`KERNEL_FUNCTIONS`] (name, domain, signature text and fingerprint —
//! the kernel builds its domains from this table, so an extension can import only what
//! its manifest's domains grant) and, on bare-metal targets, into a C import. The kernel
//! defines each function under the same name: a built-in extension links to it
//! statically, a native one is linked to it by the loader.
//!
//! On `wasm32` the same declarations become imports from module `"spindle"` (pointers
//! are offsets into the module's linear memory); see [`crate::wasm`].
//!
//! Extensions call the safe wrappers below ([`console_write`], [`ticks`], the
//! [`ext_println!`](crate::ext_println) macro) and `alloc` (through the native glue's
//! [`ExtensionAllocator`](crate::allocator::ExtensionAllocator)), never the imports. On the host (unit
//! tests of extension crates) the wrappers only count what they would have done.

use core::fmt;

use crate::fingerprint::{Fingerprint, fingerprint_of};

/// One kernel function extensions may import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelFunction {
    /// Symbol name (also the ELF import name).
    pub name: &'static str,
    /// Domain that exports it.
    pub domain: &'static str,
    /// Its C signature, as declared.
    pub signature: &'static str,
    /// `fingerprint_of(name ++ signature)`.
    pub fingerprint: Fingerprint,
}

/// Declares the kernel's exported functions (used once, below).
#[macro_export]
macro_rules! declare_kernel_functions {
    ($($(#[doc = $doc:literal])* domain $domain:literal fn $name:ident($($argument:ident: $type:ty),*) $(-> $result:ty)?;)*) => {
        /// Every kernel function extensions may import.
        pub const KERNEL_FUNCTIONS: &[$crate::host::KernelFunction] = &[$(
            $crate::host::KernelFunction {
                name: stringify!($name),
                domain: $domain,
                signature: stringify!(fn($($argument: $type),*) $(-> $result)?),
                fingerprint: $crate::fingerprint::fingerprint_of(concat!(
                    stringify!($name), stringify!(fn($($argument: $type),*) $(-> $result)?)
                )),
            }
        ),*];

        /// The C imports (resolved statically for built-in extensions and by the loader
        /// for native ones).
        #[cfg(target_os = "none")]
        pub mod imports {
            unsafe extern "C" {
                $($(#[doc = $doc])* pub fn $name($($argument: $type),*) $(-> $result)?;)*
            }
        }

        /// The Wasm imports: module [`WASM_IMPORT_MODULE`](crate::wasm::WASM_IMPORT_MODULE)
        /// (`"spindle"`), one function per declaration under the same name. Pointer and
        /// `usize` arguments become `i32` offsets into the module's linear memory, which
        /// the kernel bounds-checks; `u64` becomes `i64`.
        #[cfg(target_arch = "wasm32")]
        pub mod imports {
            #[link(wasm_import_module = "spindle")]
            unsafe extern "C" {
                $($(#[doc = $doc])* pub fn $name($($argument: $type),*) $(-> $result)?;)*
            }
        }
    };
}

declare_kernel_functions! {
    /// Writes `length` UTF-8 bytes at `pointer` to the kernel console.
    domain "console" fn spindle_console_write(pointer: *const u8, length: usize);
    /// Timer ticks since boot.
    domain "clock" fn spindle_clock_ticks() -> u64;
    /// Reports a panic of the calling extension with a message; never returns (the
    /// kernel aborts the handler at its recovery point and keeps the reason).
    domain "extension" fn spindle_extension_panic(pointer: *const u8, length: usize) -> !;
    /// Allocates `size` bytes aligned to `align` (a power of two) from the calling native
    /// extension's arena; null when its quota is exhausted, the layout is invalid, or no
    /// native extension is running. The memory is not zeroed. Called by
    /// [`ExtensionAllocator`](crate::allocator::ExtensionAllocator), never directly.
    domain "extension" fn spindle_extension_alloc(size: usize, align: usize) -> *mut u8;
    /// Returns a block from `spindle_extension_alloc` with the same `size` and `align`; a
    /// pointer outside the caller's arena is ignored (the kernel prints a warning).
    domain "extension" fn spindle_extension_free(pointer: *mut u8, size: usize, align: usize);
    /// Frames in the calling owner's LRU queue (domain `mm`).
    domain "mm" fn spindle_mm_lru_length() -> u64;
    /// The frame at `position` of the owner's LRU queue, head (least recently used) first;
    /// 0 past its end.
    domain "mm" fn spindle_mm_lru_frame(position: u64) -> u64;
    /// Copies `length` bytes at `offset` of the active read request `request` into
    /// `destination` (the caller's memory: a native extension's writable memory, a Wasm
    /// module's linear memory, bounds-checked); returns the bytes copied — 0 when the
    /// request is not active, the range is outside it, or `destination` is not writable.
    domain "block" fn spindle_block_read(request: u64, offset: u64, destination: *mut u8, length: usize) -> u64;
}

/// Fingerprint of the whole kernel-function table (part of the ABI fingerprint).
pub fn kernel_functions_fingerprint() -> Fingerprint {
    KERNEL_FUNCTIONS.iter().fold(fingerprint_of("kernel-functions"), |all, function| all.combine(function.fingerprint))
}

#[cfg(not(any(target_os = "none", target_arch = "wasm32")))]
static HOST_BYTES_WRITTEN: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Writes text to the kernel console (domain `console`).
pub fn console_write(text: &str) {
    #[cfg(any(target_os = "none", target_arch = "wasm32"))]
    // SAFETY: the pointer and length describe `text`, a live UTF-8 slice, for the whole
    // call; the kernel only reads it.
    unsafe {
        imports::spindle_console_write(text.as_ptr(), text.len())
    }
    #[cfg(not(any(target_os = "none", target_arch = "wasm32")))]
    HOST_BYTES_WRITTEN.fetch_add(text.len(), core::sync::atomic::Ordering::Relaxed);
}

/// Bytes "written" by [`console_write`] in host unit tests.
#[cfg(not(any(target_os = "none", target_arch = "wasm32")))]
pub fn host_bytes_written() -> usize {
    HOST_BYTES_WRITTEN.load(core::sync::atomic::Ordering::Relaxed)
}

/// Timer ticks since boot (domain `clock`); 0 in host unit tests.
pub fn ticks() -> u64 {
    #[cfg(any(target_os = "none", target_arch = "wasm32"))]
    // SAFETY: takes no arguments and only reads a kernel counter.
    unsafe {
        imports::spindle_clock_ticks()
    }
    #[cfg(not(any(target_os = "none", target_arch = "wasm32")))]
    0
}

/// Frames in the owner's LRU queue (domain `mm`); 0 in host unit tests.
pub fn mm_lru_length() -> u64 {
    #[cfg(any(target_os = "none", target_arch = "wasm32"))]
    // SAFETY: takes no arguments and only reads kernel state.
    unsafe {
        imports::spindle_mm_lru_length()
    }
    #[cfg(not(any(target_os = "none", target_arch = "wasm32")))]
    0
}

/// The frame at `position` of the owner's LRU queue, head first (domain `mm`); 0 past its
/// end and in host unit tests.
pub fn mm_lru_frame(position: u64) -> u64 {
    #[cfg(any(target_os = "none", target_arch = "wasm32"))]
    // SAFETY: takes an integer and only reads kernel state.
    unsafe {
        imports::spindle_mm_lru_frame(position)
    }
    #[cfg(not(any(target_os = "none", target_arch = "wasm32")))]
    {
        let _ = position;
        0
    }
}

/// Copies the bytes at `offset` of read request `request` into `destination` (domain
/// `block`); returns how many were copied: 0 when the request is not active or the range
/// lies outside it, and always 0 in host unit tests.
pub fn block_read(request: u64, offset: u64, destination: &mut [u8]) -> usize {
    #[cfg(any(target_os = "none", target_arch = "wasm32"))]
    // SAFETY: the pointer and length describe `destination`, a live, exclusively borrowed
    // slice, for the whole call; the kernel writes at most `destination.len()` bytes.
    unsafe {
        imports::spindle_block_read(request, offset, destination.as_mut_ptr(), destination.len()) as usize
    }
    #[cfg(not(any(target_os = "none", target_arch = "wasm32")))]
    {
        let _ = (request, offset, destination);
        0
    }
}

/// Reports a panic to the kernel and never returns (used by the native glue's panic
/// handler; a built-in extension's panic is the kernel's own).
#[cfg(any(target_os = "none", target_arch = "wasm32"))]
pub fn extension_panic(message: &str) -> ! {
    // SAFETY: the pointer and length describe `message` for the whole call; the kernel
    // copies what it keeps and does not return.
    unsafe { imports::spindle_extension_panic(message.as_ptr(), message.len()) }
}

/// A small stack buffer that formats text and flushes it to the console in pieces.
pub struct ConsoleWriter {
    buffer: [u8; 128],
    length: usize,
}

impl Default for ConsoleWriter {
    fn default() -> Self {
        ConsoleWriter { buffer: [0; 128], length: 0 }
    }
}

impl ConsoleWriter {
    /// Writes out what is buffered.
    pub fn flush(&mut self) {
        // Only whole UTF-8 text is ever buffered (see write_str), so this cannot fail.
        if let Ok(text) = core::str::from_utf8(&self.buffer[..self.length]) {
            console_write(text);
        }
        self.length = 0;
    }
}

impl fmt::Write for ConsoleWriter {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        if self.length + text.len() > self.buffer.len() {
            self.flush();
        }
        if text.len() > self.buffer.len() {
            console_write(text);
        } else {
            self.buffer[self.length..self.length + text.len()].copy_from_slice(text.as_bytes());
            self.length += text.len();
        }
        Ok(())
    }
}

/// Prints a line to the kernel console from an extension (no allocation).
#[macro_export]
macro_rules! ext_println {
    ($($argument:tt)*) => {{
        let mut writer = $crate::host::ConsoleWriter::default();
        let _ = ::core::fmt::Write::write_fmt(&mut writer, format_args!("{}\n", format_args!($($argument)*)));
        writer.flush();
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_every_function_with_a_fingerprint() {
        assert_eq!(KERNEL_FUNCTIONS.len(), 8);
        let write = KERNEL_FUNCTIONS.iter().find(|function| function.name == "spindle_console_write").unwrap();
        assert_eq!(write.domain, "console");
        // The fingerprint covers the name and the signature text exactly as declared.
        let mut text = [0u8; 128];
        let joined = write.name.len() + write.signature.len();
        text[..write.name.len()].copy_from_slice(write.name.as_bytes());
        text[write.name.len()..joined].copy_from_slice(write.signature.as_bytes());
        assert_eq!(write.fingerprint, fingerprint_of(core::str::from_utf8(&text[..joined]).unwrap()));
        assert!(write.signature.contains("const u8") && write.signature.contains("usize"), "{}", write.signature);
        assert_ne!(KERNEL_FUNCTIONS[0].fingerprint, KERNEL_FUNCTIONS[1].fingerprint);
    }

    #[test]
    fn writer_flushes_long_text() {
        let before = host_bytes_written();
        crate::ext_println!("{}", "x".repeat_free());
        assert!(host_bytes_written() > before);
    }

    trait RepeatFree {
        fn repeat_free(&self) -> &'static str;
    }
    impl RepeatFree for str {
        fn repeat_free(&self) -> &'static str {
            "a line longer than one hundred and twenty-eight bytes, so that the writer has to flush its buffer part of the way through writing it out"
        }
    }
}
