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

pub use spindle_functions::{Argument, ArgumentKind, Bytes, BytesMut, RawBytes, RawBytesMut, Safe, pack_wasm_range, unpack_wasm_range};

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
            #[allow(unreachable_code)]
            pub fn $name($($argument: $crate::host::Safe<'_, $type>),*) $(-> $result)? {
                $crate::__direct_call!($domain, $name($($argument),*));
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

/// With feature `direct-<domain>` on wasm32, returns from the calling free function with the
/// direct call of its Wasm import (`spindle-imports`); otherwise expands to nothing and the
/// free function goes through the domain's slot (a helper of `declare_kernel_functions!`).
/// One arm per domain, since a `cfg` names its feature literally: a domain added to
/// `for_each_kernel_function!` without an arm here is a compile error, and xtask checks
/// that `abi/Cargo.toml` has the matching feature.
#[doc(hidden)]
#[macro_export]
macro_rules! __direct_call {
    (console, $name:ident($($argument:ident),*)) => {
        #[cfg(all(target_arch = "wasm32", feature = "direct-console"))]
        {
            return ::spindle_imports::$name($($argument),*);
        }
    };
    (clock, $name:ident($($argument:ident),*)) => {
        #[cfg(all(target_arch = "wasm32", feature = "direct-clock"))]
        {
            return ::spindle_imports::$name($($argument),*);
        }
    };
    (mm, $name:ident($($argument:ident),*)) => {
        #[cfg(all(target_arch = "wasm32", feature = "direct-mm"))]
        {
            return ::spindle_imports::$name($($argument),*);
        }
    };
    (disk, $name:ident($($argument:ident),*)) => {
        #[cfg(all(target_arch = "wasm32", feature = "direct-disk"))]
        {
            return ::spindle_imports::$name($($argument),*);
        }
    };
    (block, $name:ident($($argument:ident),*)) => {
        #[cfg(all(target_arch = "wasm32", feature = "direct-block"))]
        {
            return ::spindle_imports::$name($($argument),*);
        }
    };
    (cache, $name:ident($($argument:ident),*)) => {
        #[cfg(all(target_arch = "wasm32", feature = "direct-cache"))]
        {
            return ::spindle_imports::$name($($argument),*);
        }
    };
    (lock, $name:ident($($argument:ident),*)) => {
        #[cfg(all(target_arch = "wasm32", feature = "direct-lock"))]
        {
            return ::spindle_imports::$name($($argument),*);
        }
    };
    (vm, $name:ident($($argument:ident),*)) => {
        #[cfg(all(target_arch = "wasm32", feature = "direct-vm"))]
        {
            return ::spindle_imports::$name($($argument),*);
        }
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
