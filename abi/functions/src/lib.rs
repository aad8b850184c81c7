//! `spindle-functions`: the one declaration of the kernel functions extensions may call,
//! and how each argument crosses a boundary.
//!
//! A leaf crate (`no_std`, `#![forbid(unsafe_code)]`, no dependencies) so that both
//! `spindle-abi` — which re-exports all of it as `spindle_abi::host::…` and
//! `spindle_abi::for_each_kernel_function!` — and the trusted `spindle-imports` (the Wasm
//! imports `spindle-abi` calls directly when the builder enables a domain's
//! `direct-<domain>` feature) can generate from the same list. Nothing here performs a
//! crossing.

#![no_std]
#![forbid(unsafe_code)]

/// How one argument of a kernel function crosses the boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgumentKind {
    /// A 64-bit integer, passed as is.
    U64,
    /// Bytes the kernel only reads ([`Bytes`]).
    Bytes,
    /// Bytes the kernel writes ([`BytesMut`]).
    BytesMut,
}

/// A read-only byte range lent to the kernel for one call (declaration type; an extension
/// passes `&[u8]`).
#[derive(Clone, Copy, Debug)]
pub struct Bytes;

/// A writable byte range lent to the kernel for one call (declaration type; an extension
/// passes `&mut [u8]`).
#[derive(Clone, Copy, Debug)]
pub struct BytesMut;

/// A byte range as the native C ABI passes it: two registers (RISC-V passes a two-word
/// `repr(C)` struct by value in two argument registers, exactly like two arguments).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawBytes {
    /// Address of the first byte.
    pub pointer: *const u8,
    /// Length in bytes.
    pub length: usize,
}

/// A writable byte range as the native C ABI passes it (see [`RawBytes`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawBytesMut {
    /// Address of the first byte.
    pub pointer: *mut u8,
    /// Length in bytes.
    pub length: usize,
}

/// How a declared argument type is passed by each technology. The glue of every
/// technology (the trusted glue crate for extensions, `kernel/src/ext/glue.rs` for the
/// kernel) is generated from the declarations with these types; nothing here is unsafe.
pub trait Argument {
    /// What the extension passes and the kernel's implementation receives.
    type Safe<'a>;
    /// The native (C ABI) form.
    type Native: Copy;
    /// The Wasm form: a byte range is one `i64`, offset in the low 32 bits and length in
    /// the high 32 bits (both are 32-bit on `wasm32`).
    type Wasm: Copy;
    /// How it is described in [`KernelFunction::parameters`].
    const KIND: ArgumentKind;
    /// Machine words it takes in a user-level `kernel_function` system call.
    const WORDS: usize;
    /// The native form of `value`.
    fn to_native(value: Self::Safe<'_>) -> Self::Native;
    /// The Wasm form of `value` (on `wasm32`, where addresses are 32 bits).
    fn to_wasm(value: Self::Safe<'_>) -> Self::Wasm;
}

/// The type an extension passes for a declared argument type.
pub type Safe<'a, T> = <T as Argument>::Safe<'a>;

impl Argument for u64 {
    type Safe<'a> = u64;
    type Native = u64;
    type Wasm = u64;
    const KIND: ArgumentKind = ArgumentKind::U64;
    const WORDS: usize = 1;
    fn to_native(value: u64) -> u64 {
        value
    }
    fn to_wasm(value: u64) -> u64 {
        value
    }
}

/// Packs a Wasm byte range: offset in the low 32 bits, length in the high 32 bits.
pub const fn pack_wasm_range(offset: usize, length: usize) -> u64 {
    (offset as u32 as u64) | ((length as u32 as u64) << 32)
}

/// Unpacks a Wasm byte range: `(offset, length)`.
pub const fn unpack_wasm_range(packed: u64) -> (usize, usize) {
    ((packed & 0xffff_ffff) as usize, (packed >> 32) as usize)
}

impl Argument for Bytes {
    type Safe<'a> = &'a [u8];
    type Native = RawBytes;
    type Wasm = u64;
    const KIND: ArgumentKind = ArgumentKind::Bytes;
    const WORDS: usize = 2;
    fn to_native(value: &[u8]) -> RawBytes {
        RawBytes { pointer: value.as_ptr(), length: value.len() }
    }
    fn to_wasm(value: &[u8]) -> u64 {
        pack_wasm_range(value.as_ptr() as usize, value.len())
    }
}

impl Argument for BytesMut {
    type Safe<'a> = &'a mut [u8];
    type Native = RawBytesMut;
    type Wasm = u64;
    const KIND: ArgumentKind = ArgumentKind::BytesMut;
    const WORDS: usize = 2;
    fn to_native(value: &mut [u8]) -> RawBytesMut {
        RawBytesMut { pointer: value.as_mut_ptr(), length: value.len() }
    }
    fn to_wasm(value: &mut [u8]) -> u64 {
        pack_wasm_range(value.as_mut_ptr() as usize, value.len())
    }
}

/// The one declaration of every kernel function: hands the list to `$callback!`, which
/// generates what its crate needs from it — in `spindle-abi` the table, the domain traits
/// and the extension-facing functions (`spindle_abi::declare_kernel_functions!`); in the
/// trusted glue (`spindle-glue`, `spindle-imports`) the imports; in the kernel the native exports, the Wasm linker entries and
/// the user-level decoding (`kernel/src/ext/glue.rs`).
///
/// `runtime` lists each technology's own support functions (raw C signatures, written by
/// hand in each runtime). Each `domain NAME: Trait { … }` lists service functions with
/// arguments of declaration types (`u64`, [`Bytes`], [`BytesMut`]) returning `u64` or
/// nothing; the symbol is `spindle_` + the method name.
#[macro_export]
macro_rules! for_each_kernel_function {
    ($($callback:tt)*) => {
        $($callback)*! {
            runtime {
                /// Reports a panic of the calling extension with a message; never returns
                /// (the kernel aborts the handler at its recovery point and keeps the reason).
                fn spindle_extension_panic(pointer: *const u8, length: usize) -> !;
                /// Allocates `size` bytes aligned to `align` (a power of two) from the calling
                /// native extension's arena; null when its quota is exhausted, the layout is
                /// invalid, or no native extension is running. Not zeroed. Native only.
                fn spindle_extension_alloc(size: usize, align: usize) -> *mut u8;
                /// Returns a block from `spindle_extension_alloc` with the same `size` and
                /// `align`; a pointer outside the caller's arena is ignored with a warning.
                fn spindle_extension_free(pointer: *mut u8, size: usize, align: usize);
            }
            domain console: Console {
                /// Writes UTF-8 text to the kernel console (invalid UTF-8 is shown replaced;
                /// at most 4,096 bytes a call, a longer or unreadable range prints a warning).
                fn console_write(text: Bytes);
            }
            domain clock: Clock {
                /// Timer ticks since boot.
                fn clock_ticks() -> u64;
                /// Guest time since boot in microseconds (exact instructions under `-icount`).
                fn clock_uptime_microseconds() -> u64;
            }
            domain mm: Mm {
                /// Frames in the calling owner's LRU queue.
                fn mm_lru_length() -> u64;
                /// The frame at `position` of the owner's LRU queue, head (least recently
                /// used) first; 0 past its end.
                fn mm_lru_frame(position: u64) -> u64;
            }
            domain disk: Disk {
                /// Copies the disk's request queue, oldest first, into `destination` as
                /// `spindle_abi::event::DiskQueueEntry` records (32 bytes each, as many as
                /// fit); returns how many were copied.
                fn disk_queue(destination: BytesMut) -> u64;
            }
            domain block: Block {
                /// Copies the bytes at `offset` of the active read request `request` into
                /// `destination`; returns how many were copied — 0 when the request is not
                /// active, the range lies outside it, or `destination` is longer than 4 KiB.
                fn block_read(request: u64, offset: u64, destination: BytesMut) -> u64;
            }
            domain cache: Cache {
                /// Copies the candidates of the `cache.Evict` raise being answered, in
                /// eviction order, into `destination` as `spindle_abi::event::CacheBlockEntry`
                /// records (40 bytes each, as many as fit); returns how many were copied.
                fn cache_candidates(destination: BytesMut) -> u64;
                /// Copies the dirty blocks offered by the `cache.Writeback` raise being
                /// answered, in offered order (bit `i` of the answer is entry `i`), into
                /// `destination` as `CacheBlockEntry` records; returns how many were copied.
                fn cache_offered(destination: BytesMut) -> u64;
                /// Exported state (Infokernel): the buffer cache's next victims, first to
                /// last, as they are at the call (during a `cache.*` raise, the raising
                /// cache's; otherwise the file system's cache if it is idle, else none), into
                /// `destination` as `CacheBlockEntry` records (at most 64); returns how many
                /// were copied.
                fn cache_victims(destination: BytesMut) -> u64;
                /// Exported state: the cache's counters (the same cache as
                /// `cache_victims`) as little-endian `u64`s in the order of
                /// `spindle_abi::event::CACHE_COUNTERS` (as many as fit); returns how many
                /// were copied (0: no cache to read).
                fn cache_counters(destination: BytesMut) -> u64;
                /// Exported state: the blocks of file `file` in the cache (the same cache
                /// as `cache_victims`): resident ones in the low 32 bits, dirty ones in the
                /// high 32 bits (0 with no cache to read).
                fn cache_file_blocks(file: u64) -> u64;
                /// The value an application set for hint `hint` (`spindle_abi::event::CacheHint`)
                /// of file `file`, or `CacheHint::UNSET` (`u64::MAX`) if none is set.
                fn cache_file_hint(file: u64, hint: u64) -> u64;
            }
            domain lock: Lock {
                /// Copies the candidates of the `lock.Grant` raise being answered into
                /// `destination` as `spindle_abi::event::LockCandidateEntry` records (56
                /// bytes each, as many as fit); returns how many were copied.
                fn lock_candidates(destination: BytesMut) -> u64;
            }
            domain vm: Vm {
                /// A zeroed frame for the fault of address space `space` whose
                /// `vm.PageNotPresent` raise is being answered, charged to that space; its
                /// frame number (what a MAP answer names), the same one for every call
                /// during one raise. 0 when no such raise is in progress or no frame is free.
                /// A granted frame the answer does not map is freed after the raise.
                fn vm_grant(space: u64) -> u64;
                /// Copies `bytes` to byte `offset` of the frame granted for `space`'s fault
                /// (the page's contents a pager supplies); returns how many were copied — 0
                /// without a grant or when the range leaves the page.
                fn vm_fill(space: u64, offset: u64, bytes: Bytes) -> u64;
                /// Appel & Li's `protN` (`protection` bits 1 read, 2 write, 4 execute) or,
                /// with `protection` `u64::MAX`, `unprotN` of `count` pages from `page` of
                /// address space `space`, queued while `space`'s `vm.PageNotPresent` or
                /// `vm.ProtectionFault` raise is being answered and applied right after the
                /// answer (checked as the system calls are; a refused change is counted and
                /// skipped). 1 if queued; 0 without such a raise, for bits that are not a
                /// protection, or when 8 changes are queued already.
                fn vm_protect(space: u64, page: u64, count: u64, protection: u64) -> u64;
                /// Appel & Li's `dirty` for in-kernel handlers: 1 if page `page` of address
                /// space `space` was written since it got its frame, 0 if not (or it has no
                /// frame), while `space`'s `vm.PageNotPresent` or `vm.ProtectionFault` raise
                /// is being answered; `u64::MAX` without such a raise, or for an address
                /// that is not a page of one of the space's `vm_map` regions.
                fn vm_dirty(space: u64, page: u64) -> u64;
                /// Pages in region `region` of address space `space`, while `space`'s
                /// `vm.PageNotPresent` or `vm.ProtectionFault` raise is being answered (the
                /// record's `region`); 0 without such a raise or for no such region.
                fn vm_region_pages(space: u64, region: u64) -> u64;
                /// Copies page `from` of address space `space` to its page `to` (both
                /// page-aligned, distinct, in the space's `vm_map` regions; `from` mapped,
                /// `to` mapped writable by the program), while `space`'s `vm.PageNotPresent`
                /// or `vm.ProtectionFault` raise is being answered — a copy-on-write
                /// checkpoint saves a page before the program's store goes on. 1 if copied;
                /// 0 without such a raise or when a page does not qualify.
                fn vm_copy_page(space: u64, from: u64, to: u64) -> u64;
            }
        }
    };
}


/// The domains of [`for_each_kernel_function!`]'s list, in order (for tests and tools).
macro_rules! domain_names {
    (
        runtime { $($runtime:tt)* }
        $(domain $domain:ident: $trait:ident { $($functions:tt)* })*
    ) => {
        /// Every domain of the list, in declaration order.
        pub const DOMAINS: &[&str] = &[$(stringify!($domain)),*];
    };
}

for_each_kernel_function!(domain_names);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasm_ranges_pack_offset_low_and_length_high() {
        assert_eq!(pack_wasm_range(0x1234, 0x56), 0x0000_0056_0000_1234);
        assert_eq!(unpack_wasm_range(pack_wasm_range(0xffff_fff0, 16)), (0xffff_fff0, 16));
    }

    #[test]
    fn each_domain_is_declared_once() {
        assert!(DOMAINS.contains(&"mm") && DOMAINS.contains(&"console"));
        for (index, domain) in DOMAINS.iter().enumerate() {
            assert!(!DOMAINS[index + 1..].contains(domain), "{domain} twice");
        }
    }
}
