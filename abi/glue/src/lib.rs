//! `spindle-glue`: the trusted half of the interface between Spindle and its extensions.
//!
//! `spindle-abi` says what crosses a boundary and is `#![forbid(unsafe_code)]`; this crate
//! does the crossing, and is the only `unsafe` code linked into an extension. Extension
//! crates never depend on it: the trusted builder's generated crates (`cargo xtask ext
//! build`) and user programs do. It holds
//!
//! - the kernel-function imports of a native, Wasm or user-level build, generated from
//!   `spindle_abi::for_each_kernel_function!` ([`imports`]), and [`Imported`], which
//!   implements every domain trait of `spindle_abi::host::domains` by calling them; the
//!   generated glue installs it ([`install`]) only for the domains the manifest names, so a
//!   build imports nothing else;
//! - the global allocators ([`ExtensionAllocator`] for native builds, [`WasmAllocator`]);
//! - [`extension_panic`], which the generated panic handlers call;
//! - the user-level runtime: system calls ([`user`]) and upcall serving ([`upcall`]).

#![no_std]

pub mod allocator;
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub mod upcall;
#[cfg(all(target_arch = "riscv64", target_os = "none"))]
pub mod user;
pub mod wasm_allocator;

pub use allocator::ExtensionAllocator;
// The declaration types the kernel-function list names.
#[allow(unused_imports)]
use spindle_abi::host::{Bytes, BytesMut};
pub use wasm_allocator::WasmAllocator;

/// What each technology's glue does with argument values before calling an import.
pub mod lower {
    use spindle_abi::host::{RawBytes, RawBytesMut};

    /// Machine words of an argument in a user-level `kernel_function` system call.
    pub trait Words: Copy {
        /// Appends this argument's words at `words[*used..]`; `false` if they do not fit.
        fn push(self, words: &mut [usize], used: &mut usize) -> bool;
    }

    impl Words for u64 {
        fn push(self, words: &mut [usize], used: &mut usize) -> bool {
            push_all(words, used, &[self as usize])
        }
    }

    impl Words for RawBytes {
        fn push(self, words: &mut [usize], used: &mut usize) -> bool {
            push_all(words, used, &[self.pointer as usize, self.length])
        }
    }

    impl Words for RawBytesMut {
        fn push(self, words: &mut [usize], used: &mut usize) -> bool {
            push_all(words, used, &[self.pointer as usize, self.length])
        }
    }

    fn push_all(words: &mut [usize], used: &mut usize, values: &[usize]) -> bool {
        match words.get_mut(*used..*used + values.len()) {
            Some(slots) => {
                slots.copy_from_slice(values);
                *used += values.len();
                true
            }
            None => false,
        }
    }

    /// A kernel function's result from the system call's word: `u64` or nothing.
    pub trait FromWord {
        /// Converts the returned word.
        fn from_word(word: usize) -> Self;
    }

    impl FromWord for u64 {
        fn from_word(word: usize) -> u64 {
            word as u64
        }
    }

    impl FromWord for () {
        fn from_word(_: usize) {}
    }
}

/// Generates the imports, [`Imported`] and [`install`] from the kernel-function list.
macro_rules! glue_for_kernel_functions {
    (
        runtime { $($(#[doc = $runtime_doc:literal])* fn $runtime:ident($($runtime_argument:ident: $runtime_type:ty),*) $(-> $runtime_result:ty)?;)* }
        $(domain $domain:ident: $trait:ident {
            $($(#[doc = $doc:literal])* fn $name:ident($($argument:ident: $type:ty),*) $(-> $result:ty)?;)*
        })*
    ) => {
        /// The kernel functions as a native build imports them (resolved by the kernel's
        /// loader through the domains its manifest was granted).
        #[cfg(all(target_os = "none", not(feature = "user-level")))]
        #[allow(missing_docs)]
        pub mod imports {
            #[allow(unused_imports)]
            use spindle_abi::host::{Argument, Bytes, BytesMut};
            unsafe extern "C" {
                $($(#[doc = $runtime_doc])* pub fn $runtime($($runtime_argument: $runtime_type),*) $(-> $runtime_result)?;)*
                $($(
                    $(#[doc = $doc])*
                    #[link_name = concat!("spindle_", stringify!($name))]
                    pub fn $name($($argument: <$type as Argument>::Native),*) $(-> $result)?;
                )*)*
            }
        }

        /// The kernel functions as a Wasm module imports them: module `"spindle"`, a byte
        /// range packed in one `i64` (`spindle_abi::host::pack_wasm_range`).
        #[cfg(target_arch = "wasm32")]
        #[allow(missing_docs)]
        pub mod imports {
            #[allow(unused_imports)]
            use spindle_abi::host::{Argument, Bytes, BytesMut};
            #[link(wasm_import_module = "spindle")]
            unsafe extern "C" {
                $($(#[doc = $runtime_doc])* pub fn $runtime($($runtime_argument: $runtime_type),*) $(-> $runtime_result)?;)*
                $($(
                    $(#[doc = $doc])*
                    #[link_name = concat!("spindle_", stringify!($name))]
                    pub fn $name($($argument: <$type as Argument>::Wasm),*) $(-> $result)?;
                )*)*
            }
        }

        /// The service functions of a user-level build: each a `kernel_function` system
        /// call, which the kernel answers only during an upcall and only for the
        /// extension's granted domains. Each is `#[inline(never)]` under its symbol name,
        /// so the program keeps the symbol of every function it calls — and only those
        /// (the linker drops the rest): the trusted builder reads the symbol table to check
        /// them against the manifest's domains (`xtask/src/ext/domains.rs`).
        #[cfg(all(feature = "user-level", target_os = "none"))]
        #[allow(missing_docs)]
        pub mod imports {
            #[allow(unused_imports)]
            use spindle_abi::host::{Argument, Bytes, BytesMut};
            pub use crate::upcall::user_level::spindle_extension_panic;
            $($(
                $(#[doc = $doc])*
                ///
                /// # Safety
                /// Every range is valid for the access its declaration type says (read for
                /// `Bytes`, write for `BytesMut`) and nothing else refers to a written range
                /// during the call.
                #[inline(never)]
                #[unsafe(export_name = concat!("spindle_", stringify!($name)))]
                pub unsafe extern "C" fn $name($($argument: <$type as Argument>::Native),*) $(-> $result)? {
                    #[allow(unused_mut)]
                    let mut words = [0usize; spindle_abi::syscall::KERNEL_FUNCTION_WORDS];
                    #[allow(unused_mut, unused_variables)]
                    let mut used = 0;
                    let fits = true $(&& crate::lower::Words::push($argument, &mut words, &mut used))*;
                    // SAFETY: forwarded from the caller; the kernel checks every range is this
                    // process's memory with the access needed before it touches it.
                    let word = if fits { unsafe { crate::upcall::glue::kernel_function(concat!("spindle_", stringify!($name)), words) } } else { 0 };
                    crate::lower::FromWord::from_word(word)
                }
            )*)*
        }

        /// Implements every domain trait by calling [`imports`].
        #[derive(Clone, Copy, Debug, Default)]
        pub struct Imported;

        $(
            #[cfg(any(target_os = "none", target_arch = "wasm32"))]
            impl spindle_abi::host::domains::$trait for Imported {
                $(
                    #[inline]
                    fn $name(&self, $($argument: spindle_abi::host::Safe<'_, $type>),*) $(-> $result)? {
                        // Each argument is the native form of what the extension passed: an
                        // integer, or a range of a live slice borrowed for the whole call.
                        #[cfg(not(target_arch = "wasm32"))]
                        // SAFETY: each range is borrowed for the call (shared for `Bytes`,
                        // exclusive for `BytesMut`); the kernel checks it, uses it only then.
                        unsafe { imports::$name($(<$type as spindle_abi::host::Argument>::to_native($argument)),*) }
                        #[cfg(target_arch = "wasm32")]
                        // SAFETY: each range (offset, length) is of a live slice of linear memory
                        // borrowed for the call; the kernel bounds-checks it, uses it only then.
                        unsafe { imports::$name($(<$type as spindle_abi::host::Argument>::to_wasm($argument)),*) }
                    }
                )*
            }
        )*

        /// Installs [`Imported`] as one domain's implementation: the generated glue calls
        /// the function of each domain its manifest names (and no other, so nothing else is
        /// imported), after [`install::runtime`].
        pub mod install {
            /// Installs the build's runtime (`spindle_abi::host::RUNTIME`): a call of a
            /// domain the manifest does not name then panics with that reason.
            #[cfg(any(target_os = "none", target_arch = "wasm32"))]
            pub fn runtime() {
                spindle_abi::host::RUNTIME.install(&super::Imported);
            }

            $(
                #[doc = concat!("Installs the imports of domain `", stringify!($domain), "`.")]
                #[cfg(any(target_os = "none", target_arch = "wasm32"))]
                pub fn $domain() {
                    spindle_abi::host::domains::$domain.install(&super::Imported);
                }
            )*

            /// Installs the domain called `name`; `false` if there is none.
            #[cfg(any(target_os = "none", target_arch = "wasm32"))]
            pub fn by_name(name: &str) -> bool {
                match name {
                    $(stringify!($domain) => $domain(),)*
                    _ => return false,
                }
                true
            }
        }
    };
}

spindle_abi::for_each_kernel_function!(glue_for_kernel_functions);

#[cfg(any(target_os = "none", target_arch = "wasm32"))]
impl spindle_abi::host::Runtime for Imported {
    fn missing_domain(&self, function: &'static str, domain: &'static str) -> ! {
        let mut message = [0u8; 160];
        let mut length = 0;
        for part in ["called ", function, " of domain `", domain, "`, which the manifest does not name"] {
            let take = part.len().min(message.len() - length);
            message[length..length + take].copy_from_slice(&part.as_bytes()[..take]);
            length += take;
        }
        let text = core::str::from_utf8(&message[..length]).unwrap_or("called a kernel function of a domain the manifest does not name");
        #[cfg(not(feature = "user-level"))]
        extension_panic(text);
        #[cfg(feature = "user-level")]
        upcall::user_level::extension_panic(text)
    }
}

/// Reports a panic to the kernel and never returns (the generated panic handlers call it).
#[cfg(all(any(target_os = "none", target_arch = "wasm32"), not(feature = "user-level")))]
pub fn extension_panic(message: &str) -> ! {
    // SAFETY: the pointer and length describe `message` for the whole call; the kernel
    // copies what it keeps and does not return.
    unsafe { imports::spindle_extension_panic(message.as_ptr(), message.len()) }
}

/// The layout `BindingInfo::from_bytes` reads is the `repr(C)` struct's in memory.
#[cfg(test)]
mod tests {
    use spindle_abi::native::{BindingInfo, RawGuard, guard_kind};

    #[test]
    fn binding_info_reads_back_from_bytes() {
        let mut info = BindingInfo { event_id: 1000, guard_count: 2, event_fingerprint: 0x1122_3344_5566_7788, arguments_size: 16, result_size: 8, ..BindingInfo::default() };
        info.guards[0] = RawGuard { kind: guard_kind::EQUALS, field: 0, a: 7, b: 0 };
        info.guards[7] = RawGuard { kind: guard_kind::MASK, field: 3, a: u64::MAX, b: 1 };
        let mut bytes = [0u8; BindingInfo::SIZE];
        // SAFETY: `bytes` has exactly the size of `BindingInfo`, which is plain data
        // (integers only); `write_unaligned` needs no alignment.
        unsafe { bytes.as_mut_ptr().cast::<BindingInfo>().write_unaligned(info) };
        assert_eq!(BindingInfo::from_bytes(&bytes), Some(info));
        assert_eq!(BindingInfo::from_bytes(&bytes[..BindingInfo::SIZE - 1]), None);
    }
}
