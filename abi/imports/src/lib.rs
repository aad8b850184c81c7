//! `spindle-imports`: the kernel's service functions as a Wasm module imports them (module
//! `"spindle"`), each behind a safe function taking what an extension passes (`u64`,
//! `&[u8]`, `&mut [u8]`).
//!
//! Trusted glue, like `spindle-glue`: it declares foreign functions, which safe code cannot.
//! `spindle-abi` depends on it only with a `direct-<domain>` feature, which the trusted
//! builder's generated Wasm glue enables for the domains the extension's manifest names:
//! each of those domains' free functions (`spindle_abi::host::mm_lru_frame`, …) then calls
//! its import directly instead of through the domain's slot — one `call_indirect` and one
//! Wasm frame less per kernel-function call. Generated from
//! `spindle_functions::for_each_kernel_function!`; on other targets the crate is empty.

#![no_std]

// The declaration types the kernel-function list names.
#[cfg(target_arch = "wasm32")]
#[allow(unused_imports)]
use spindle_functions::{Bytes, BytesMut};

/// Generates the import declarations and their safe wrappers.
macro_rules! wasm_imports {
    (
        runtime { $($(#[doc = $runtime_doc:literal])* fn $runtime:ident($($runtime_argument:ident: $runtime_type:ty),*) $(-> $runtime_result:ty)?;)* }
        $(domain $domain:ident: $trait:ident {
            $($(#[doc = $doc:literal])* fn $name:ident($($argument:ident: $type:ty),*) $(-> $result:ty)?;)*
        })*
    ) => {
        /// The imports as declared (a byte range packed in one `i64`:
        /// `spindle_functions::pack_wasm_range`).
        #[cfg(target_arch = "wasm32")]
        mod raw {
            #[allow(unused_imports)]
            use spindle_functions::{Argument, Bytes, BytesMut};
            #[link(wasm_import_module = "spindle")]
            unsafe extern "C" {
                $($(
                    #[link_name = concat!("spindle_", stringify!($name))]
                    pub fn $name($($argument: <$type as Argument>::Wasm),*) $(-> $result)?;
                )*)*
            }
        }

        $($(
            $(#[doc = $doc])*
            #[cfg(target_arch = "wasm32")]
            #[inline(always)]
            pub fn $name($($argument: spindle_functions::Safe<'_, $type>),*) $(-> $result)? {
                #[allow(unused_imports)]
                use spindle_functions::{Argument, Bytes, BytesMut};
                // Each argument is an integer or the (offset, length) of a live slice of
                // linear memory borrowed for the whole call (shared for `Bytes`, exclusive
                // for `BytesMut`).
                // SAFETY: the ranges are borrowed for the call; the kernel bounds-checks
                // each against the module's memory and uses it only during the call.
                unsafe { raw::$name($(<$type as Argument>::to_wasm($argument)),*) }
            }
        )*)*
    };
}

spindle_functions::for_each_kernel_function!(wasm_imports);

#[cfg(test)]
mod tests {
    /// `spindle-abi` has a `direct-<domain>` feature for every domain of the list, and
    /// no other (its `__direct_call!` has an arm for each: a missing arm fails to compile).
    #[test]
    fn abi_has_a_direct_feature_for_every_domain() {
        let manifest = include_str!("../../Cargo.toml");
        let mut features = manifest.lines().filter_map(|line| line.strip_prefix("direct-")?.split_once(' ').map(|(name, _)| name));
        for domain in spindle_functions::DOMAINS {
            assert_eq!(features.next(), Some(*domain), "abi/Cargo.toml's direct-* features, in the kernel-function list's order");
        }
        assert_eq!(features.next(), None, "a direct-* feature for a domain the list does not have");
    }
}
