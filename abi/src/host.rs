//! Kernel functions an extension may call, grouped in domains, declared once.
//!
//! [`for_each_kernel_function!`](crate::for_each_kernel_function) is the one declaration:
//! name, domain, typed signature and documentation of each function. Every crate that needs
//! glue generates it from that list with a macro of its own, so a function declared and not
//! implemented fails to compile for every technology:
//!
//! - here ([`declare_kernel_functions!`](crate::declare_kernel_functions)):
//!   [`KERNEL_FUNCTIONS`] (name, domain, signature, fingerprint — the kernel builds its
//!   domains from it, so an extension imports only what its manifest's domains grant), one
//!   trait per domain in [`domains`], and one free function per service function
//!   ([`console_write`], [`clock_ticks`], [`block_read`], …) that extensions call;
//! - in the kernel (`kernel/src/ext/glue.rs`): the native exports (`extern "C"`, every
//!   pointer checked against the kernel page table), the Wasm linker entries (ranges in the
//!   module's linear memory) and the user-level decoding (ranges in the extension's address
//!   space), each calling the kernel's one implementation of the domain trait;
//! - in the trusted glue (`spindle-glue`): the imports of a native, Wasm or user-level build,
//!   and an implementation of each domain trait that calls them, installed only for the
//!   domains the manifest names;
//! - in the builder (`xtask/src/ext/c.rs`): the C header.
//!
//! A built-in extension shares the kernel's copy of this crate; the kernel installs its
//! implementations at boot. In host unit tests nothing is installed unless a test installs
//! a fake: the free functions then do nothing and return 0.
//!
//! This crate is `#![forbid(unsafe_code)]`: it describes how arguments cross (see
//! [`Argument`]) but performs no crossing itself.

use core::fmt;

use crate::fingerprint::{Fingerprint, fingerprint_of};

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

/// One declared argument of a kernel function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parameter {
    /// Its name in the declaration.
    pub name: &'static str,
    /// How it is passed.
    pub kind: ArgumentKind,
}

/// One kernel function extensions may import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelFunction {
    /// Symbol name (also the ELF and Wasm import name): `spindle_` + the method name.
    pub name: &'static str,
    /// Domain that exports it.
    pub domain: &'static str,
    /// Its signature, as declared.
    pub signature: &'static str,
    /// `fingerprint_of(name ++ signature)`.
    pub fingerprint: Fingerprint,
    /// A technology's own runtime support (`domain "extension"`: panic, the native arena),
    /// implemented by each technology's runtime; otherwise a service function, whose glue
    /// is generated for every technology from the declaration.
    pub runtime: bool,
    /// The arguments of a service function (empty for runtime functions: see `signature`).
    pub parameters: &'static [Parameter],
    /// Whether a service function returns a `u64` (otherwise nothing).
    pub returns_value: bool,
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

/// Where one domain's implementation is installed for the extensions of this image: the
/// kernel installs its own for built-in extensions at boot; the trusted glue of a native,
/// Wasm or user-level build installs one that calls the kernel's imports, only for the
/// domains its manifest names. An extension calls the free functions below, which reach
/// the installed implementation; with none installed (host unit tests, or a domain the
/// manifest does not name) they do nothing and return 0.
pub struct Slot<T: ?Sized + 'static>(spin::Once<&'static T>);

impl<T: ?Sized + 'static> Slot<T> {
    /// An empty slot.
    pub const fn new() -> Self {
        Slot(spin::Once::new())
    }

    /// Installs `implementation` (the first installation wins).
    pub fn install(&self, implementation: &'static T) {
        self.0.call_once(|| implementation);
    }

    /// The installed implementation, if any.
    #[inline]
    pub fn get(&self) -> Option<&'static T> {
        self.0.get().copied()
    }
}

impl<T: ?Sized + 'static> Default for Slot<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// What the trusted glue of a loaded build provides besides the domains.
pub trait Runtime: Sync {
    /// The extension called `function` of `domain`, which its manifest does not name (so
    /// the glue installed nothing for it): ends the call as a panic with that reason.
    fn missing_domain(&self, function: &'static str, domain: &'static str) -> !;
}

/// The runtime of a native, Wasm or user-level build (installed by its glue). In host unit
/// tests there is none, and a call of a domain nobody installed quietly returns 0.
pub static RUNTIME: Slot<dyn Runtime> = Slot::new();

/// The one declaration of every kernel function: hands the list to `$callback!`, which
/// generates what its crate needs from it — here the table, the domain traits and the
/// extension-facing functions ([`declare_kernel_functions!`](crate::declare_kernel_functions)); in the
/// trusted glue the imports; in the kernel the native exports, the Wasm linker entries and
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
            }
        }
    };
}

/// Generates, from [`for_each_kernel_function!`](crate::for_each_kernel_function)'s list:
/// [`KERNEL_FUNCTIONS`], one trait per domain in [`domains`] (what the kernel implements
/// once and every technology's glue calls or implements), a [`Slot`] per domain, and one
/// free function per service function for extensions to call. A free function whose
/// domain is not installed returns 0 in host tests, and in a loaded build (whose glue
/// installed a [`RUNTIME`]) panics naming the function and the undeclared domain.
#[macro_export]
macro_rules! declare_kernel_functions {
    (
        runtime { $($(#[doc = $runtime_doc:literal])* fn $runtime:ident($($runtime_argument:ident: $runtime_type:ty),*) $(-> $runtime_result:ty)?;)* }
        $(domain $domain:ident: $trait:ident {
            $($(#[doc = $doc:literal])* fn $name:ident($($argument:ident: $type:ty),*) $(-> $result:ty)?;)*
        })*
    ) => {
        /// Every kernel function extensions may import: runtime support first, then each
        /// domain's service functions in declaration order.
        pub const KERNEL_FUNCTIONS: &[$crate::host::KernelFunction] = &[
            $($crate::host::KernelFunction {
                name: stringify!($runtime),
                domain: "extension",
                signature: stringify!(fn($($runtime_argument: $runtime_type),*) $(-> $runtime_result)?),
                fingerprint: $crate::fingerprint::fingerprint_of(concat!(
                    stringify!($runtime), stringify!(fn($($runtime_argument: $runtime_type),*) $(-> $runtime_result)?)
                )),
                runtime: true,
                parameters: &[],
                returns_value: false,
            },)*
            $($($crate::host::KernelFunction {
                name: concat!("spindle_", stringify!($name)),
                domain: stringify!($domain),
                signature: stringify!(fn($($argument: $type),*) $(-> $result)?),
                fingerprint: $crate::fingerprint::fingerprint_of(concat!(
                    "spindle_", stringify!($name), stringify!(fn($($argument: $type),*) $(-> $result)?)
                )),
                runtime: false,
                parameters: &[$($crate::host::Parameter {
                    name: stringify!($argument),
                    kind: <$type as $crate::host::Argument>::KIND,
                }),*],
                returns_value: $crate::__returns_value!($($result)?),
            },)*)*
        ];

        /// One trait per domain: the kernel implements each once; the glue of every
        /// technology is generated from them.
        #[allow(non_upper_case_globals)]
        pub mod domains {
            #[allow(unused_imports)]
            use $crate::host::{Bytes, BytesMut, Safe};
            $(
                #[doc = concat!("Domain `", stringify!($domain), "`.")]
                pub trait $trait: Sync {
                    $($(#[doc = $doc])* fn $name(&self, $($argument: Safe<'_, $type>),*) $(-> $result)?;)*
                }
                #[doc = concat!("The installed implementation of domain `", stringify!($domain), "`.")]
                pub static $domain: $crate::host::Slot<dyn $trait> = $crate::host::Slot::new();
            )*
        }

        $($(
            $(#[doc = $doc])*
            #[doc = ""]
            #[doc = concat!("Domain `", stringify!($domain), "`; does nothing and returns 0 when the domain is not installed.")]
            #[inline]
            pub fn $name($($argument: $crate::host::Safe<'_, $type>),*) $(-> $result)? {
                match domains::$domain.get() {
                    Some(domain) => domain.$name($($argument),*),
                    None => {
                        $(let _ = $argument;)*
                        if let Some(runtime) = RUNTIME.get() {
                            runtime.missing_domain(concat!("spindle_", stringify!($name)), stringify!($domain));
                        }
                        Default::default()
                    }
                }
            }
        )*)*
    };
}

/// Whether a declared result type is present (a helper of `declare_kernel_functions!`).
#[doc(hidden)]
#[macro_export]
macro_rules! __returns_value {
    () => {
        false
    };
    ($result:ty) => {
        true
    };
}

crate::for_each_kernel_function!(crate::declare_kernel_functions);

/// Fingerprint of the whole kernel-function table (part of the ABI fingerprint).
pub fn kernel_functions_fingerprint() -> Fingerprint {
    KERNEL_FUNCTIONS.iter().fold(fingerprint_of("kernel-functions"), |all, function| all.combine(function.fingerprint))
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
        console_write(&self.buffer[..self.length]);
        self.length = 0;
    }
}

impl fmt::Write for ConsoleWriter {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        if self.length + text.len() > self.buffer.len() {
            self.flush();
        }
        if text.len() > self.buffer.len() {
            console_write(text.as_bytes());
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
    use core::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn table_lists_every_function_with_a_fingerprint() {
        let write = KERNEL_FUNCTIONS.iter().find(|function| function.name == "spindle_console_write").unwrap();
        assert_eq!(write.domain, "console");
        assert!(!write.runtime);
        assert_eq!(write.parameters, &[Parameter { name: "text", kind: ArgumentKind::Bytes }]);
        assert!(!write.returns_value);
        // The fingerprint covers the name and the signature text exactly as declared.
        let mut text = [0u8; 128];
        let joined = write.name.len() + write.signature.len();
        text[..write.name.len()].copy_from_slice(write.name.as_bytes());
        text[write.name.len()..joined].copy_from_slice(write.signature.as_bytes());
        assert_eq!(write.fingerprint, fingerprint_of(core::str::from_utf8(&text[..joined]).unwrap()));
        assert!(write.signature.contains("Bytes"), "{}", write.signature);
        let read = KERNEL_FUNCTIONS.iter().find(|function| function.name == "spindle_block_read").unwrap();
        assert_eq!(read.domain, "block");
        assert!(read.returns_value);
        assert_eq!(read.parameters.iter().map(|parameter| parameter.kind).collect::<alloc_free::Kinds>().0, [ArgumentKind::U64, ArgumentKind::U64, ArgumentKind::BytesMut]);
        let panic = KERNEL_FUNCTIONS.iter().find(|function| function.name == "spindle_extension_panic").unwrap();
        assert!(panic.runtime && panic.domain == "extension");
        for (index, function) in KERNEL_FUNCTIONS.iter().enumerate() {
            assert!(function.name.starts_with("spindle_"), "{}", function.name);
            assert!(KERNEL_FUNCTIONS[index + 1..].iter().all(|other| other.fingerprint != function.fingerprint && other.name != function.name));
        }
    }

    /// Collects three kinds without an allocator.
    mod alloc_free {
        pub struct Kinds(pub [super::ArgumentKind; 3]);
        impl FromIterator<super::ArgumentKind> for Kinds {
            fn from_iter<I: IntoIterator<Item = super::ArgumentKind>>(iter: I) -> Self {
                let mut kinds = [super::ArgumentKind::U64; 3];
                let mut count = 0;
                for (slot, kind) in kinds.iter_mut().zip(iter) {
                    *slot = kind;
                    count += 1;
                }
                assert_eq!(count, 3);
                Kinds(kinds)
            }
        }
    }

    #[test]
    fn wasm_ranges_pack_offset_low_and_length_high() {
        assert_eq!(pack_wasm_range(0x1234, 0x56), 0x0000_0056_0000_1234);
        assert_eq!(unpack_wasm_range(pack_wasm_range(0xffff_fff0, 16)), (0xffff_fff0, 16));
    }

    /// A fake console domain counting what it is given.
    struct FakeConsole(AtomicUsize);

    impl domains::Console for FakeConsole {
        fn console_write(&self, text: &[u8]) {
            self.0.fetch_add(text.len(), Ordering::Relaxed);
        }
    }

    static CONSOLE: FakeConsole = FakeConsole(AtomicUsize::new(0));

    #[test]
    fn calls_reach_the_installed_domain_and_the_writer_flushes_long_text() {
        // Nothing installed for `mm`: the call does nothing and answers 0.
        assert_eq!(mm_lru_frame(3), 0);
        domains::console.install(&CONSOLE);
        let line = "a line longer than one hundred and twenty-eight bytes, so that the writer has to flush its buffer part of the way through writing it out";
        crate::ext_println!("{line}");
        assert_eq!(CONSOLE.0.load(Ordering::Relaxed), line.len() + 1);
    }
}
