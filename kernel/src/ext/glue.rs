//! The kernel's side of every kernel function, generated from the one declaration in
//! `spindle_abi::for_each_kernel_function!`.
//!
//! The kernel implements each domain trait of `spindle_abi::host::domains` once, on
//! [`KernelFunctions`] (the implementations live with their service: `console.rs`,
//! `time/clock.rs`, `services/frames.rs`, `services/blockpath.rs`). From the declaration this
//! file generates, for every service function:
//!
//! - **built-in**: [`install_builtin`] installs [`KERNEL`] in every domain slot, so a
//!   built-in extension's call is a direct (dynamic) call of the implementation;
//! - **native**: an `extern "C"` export under the declared symbol, which the loader links a
//!   native extension's import to ([`native_address`]); each byte range is checked against
//!   the kernel page table (mapped, readable or writable as declared, at most
//!   [`MAX_RANGE`] bytes, the ranges of one call not overlapping) and lent to the
//!   implementation without copying;
//! - **Wasm**: a `wasmi` host function ([`define_wasm`]); each range is an offset and length
//!   in the module's linear memory, bounds-checked, and lent without copying: the ranges of
//!   one call are carved from the memory as disjoint sub-slices ([`carve`]), so overlapping
//!   ranges are refused;
//! - **user level**: the decoding of a `kernel_function` system call during an upcall
//!   ([`call_user`]); each range is checked to be the extension's user memory and staged
//!   through a kernel copy (read in, and written back for `BytesMut`, so a range the
//!   implementation writes only in part keeps the rest, as with the other technologies).
//!
//! A declared function the kernel does not implement is a missing trait item — a compile
//! error — for every technology at once. A refused argument prints one line naming the
//! function, the argument and why, and the call returns 0 (nothing for a function without
//! a result): an extension's bad pointer never reaches an implementation.
//!
//! The `extension` domain's runtime functions (panic, the native arena) are each
//! technology's own runtime and are written by hand: `exports.rs`, `wasm.rs`, `user.rs`.

use alloc::vec::Vec;
use core::fmt;

use spindle_abi::host::{Argument, Bytes, BytesMut, RawBytes, RawBytesMut};
use spindle_abi::syscall::{Error, KERNEL_FUNCTION_WORDS};

use crate::proc::SpaceView;

/// The kernel's implementation of every domain (one `impl` per domain trait, next to its
/// service).
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelFunctions;

/// The one instance the slots and the generated exports use.
pub static KERNEL: KernelFunctions = KernelFunctions;

/// Longest byte range one argument may lend (a function may accept less).
pub const MAX_RANGE: usize = 64 * 1024;

/// Why an argument was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The range is longer than [`MAX_RANGE`].
    TooLong {
        /// Its length.
        length: usize,
    },
    /// Some page of the range is not mapped with the access needed (native), not inside
    /// linear memory (Wasm), or not the extension's memory with that access (user level).
    NotAccessible {
        /// Start (kernel address, linear-memory offset or user address).
        address: usize,
        /// Its length.
        length: usize,
    },
    /// Two ranges of the same call overlap, or a call has more than [`MAX_RANGES`].
    Overlapping,
    /// The call carries more words than the declaration needs, or fewer.
    BadWords,
}

impl fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::TooLong { length } => write!(formatter, "{length} bytes is longer than the {MAX_RANGE}-byte limit"),
            Refusal::NotAccessible { address, length } => {
                write!(formatter, "{length} bytes at {address:#x} are not the caller's memory with the access needed")
            }
            Refusal::Overlapping => formatter.write_str("it overlaps another range of the call"),
            Refusal::BadWords => formatter.write_str("the system call's words do not match the declaration"),
        }
    }
}

/// Prints why argument `argument` of `function` was refused (the call then returns 0).
fn refused(function: &str, argument: &str, refusal: Refusal) {
    crate::println!("[ext] spindle_{function} refused: argument `{argument}`: {refusal}");
}

/// The ranges of one native call: the ranges of a call must not overlap (as a Wasm call's,
/// which are carved from one memory: see [`carve`]).
#[derive(Default)]
pub struct Ranges {
    entries: [(usize, usize); MAX_RANGES],
    count: usize,
}

impl Ranges {
    /// Records `[start, start + length)`; refuses one overlapping a recorded range (an empty
    /// range overlaps nothing), or more than [`MAX_RANGES`].
    fn add(&mut self, start: usize, length: usize) -> Result<(), Refusal> {
        let end = start + length;
        let overlaps = length > 0 && self.entries[..self.count].iter().any(|&(other_start, other_end)| start < other_end && other_start < end);
        if overlaps || self.count == self.entries.len() {
            return Err(Refusal::Overlapping);
        }
        self.entries[self.count] = (start, end);
        self.count += 1;
        Ok(())
    }
}

/// Whether every page of `[start, start + length)` is mapped with `access` for the kernel.
pub(super) fn mapped_with(start: usize, length: usize, access: crate::arch::sv39::PteFlags) -> bool {
    let Some(end) = start.checked_add(length) else { return false };
    let Some(root) = crate::mm::kernel_space::root() else { return false };
    let page = crate::arch::PAGE_SIZE;
    (start / page..end.div_ceil(page)).all(|index| root.translate(index * page).is_some_and(|(_, flags)| flags.contains(access)))
}

/// Checks a native range: length, mapping, overlap.
fn check_native(start: usize, length: usize, written: bool, ranges: &mut Ranges) -> Result<(), Refusal> {
    if length > MAX_RANGE {
        return Err(Refusal::TooLong { length });
    }
    let access = if written { crate::arch::sv39::PteFlags::WRITE } else { crate::arch::sv39::PteFlags::READ };
    if length > 0 && (start == 0 || !mapped_with(start, length, access)) {
        return Err(Refusal::NotAccessible { address: start, length });
    }
    ranges.add(start, length)
}

/// How a native export turns an argument into what the implementation receives.
pub trait NativeArgument: Argument {
    /// Checks `raw` and lends it for the call (`'call` is the export's own call).
    fn lift<'call>(raw: Self::Native, ranges: &mut Ranges) -> Result<Self::Safe<'call>, Refusal>;
}

impl NativeArgument for u64 {
    fn lift<'call>(raw: u64, _: &mut Ranges) -> Result<Self::Safe<'call>, Refusal> {
        Ok(raw)
    }
}

impl NativeArgument for Bytes {
    fn lift<'call>(raw: RawBytes, ranges: &mut Ranges) -> Result<Self::Safe<'call>, Refusal> {
        check_native(raw.pointer as usize, raw.length, false, ranges)?;
        if raw.length == 0 {
            return Ok(&[]);
        }
        // The extension lent the range for this call (its safe wrapper passes a live shared
        // slice); the slice made here does not outlive the export's call ('call).
        // SAFETY: non-null, at most MAX_RANGE bytes, every page mapped readable in the kernel
        // page table (check_native), lent for the call, no other range overlaps (Ranges).
        Ok(unsafe { core::slice::from_raw_parts(raw.pointer, raw.length) })
    }
}

impl NativeArgument for BytesMut {
    fn lift<'call>(raw: RawBytesMut, ranges: &mut Ranges) -> Result<Self::Safe<'call>, Refusal> {
        check_native(raw.pointer as usize, raw.length, true, ranges)?;
        if raw.length == 0 {
            return Ok(&mut []);
        }
        // The extension lent the range exclusively for this call (its safe wrapper passes a
        // live `&mut [u8]`); the slice made here does not outlive the export's call ('call).
        // SAFETY: non-null, at most MAX_RANGE bytes, every page mapped writable in the kernel
        // page table (check_native), lent exclusively, overlapping no other range (Ranges).
        Ok(unsafe { core::slice::from_raw_parts_mut(raw.pointer, raw.length) })
    }
}

/// How a Wasm host function lends an argument: a range becomes a sub-slice of linear
/// memory, carved for the call by [`carve`].
pub trait WasmArgument: Argument {
    /// The range `raw` names in a linear memory of `memory_length` bytes; `None` for an
    /// integer.
    fn range(raw: Self::Wasm, memory_length: usize) -> Result<Option<core::ops::Range<usize>>, Refusal>;
    /// What the implementation receives: `raw` itself, or the next carved slice.
    fn lend<'m>(raw: Self::Wasm, slices: &mut core::slice::IterMut<'_, Option<&'m mut [u8]>>) -> Self::Safe<'m>;
}

impl WasmArgument for u64 {
    fn range(_: u64, _: usize) -> Result<Option<core::ops::Range<usize>>, Refusal> {
        Ok(None)
    }
    fn lend<'m>(raw: u64, _: &mut core::slice::IterMut<'_, Option<&'m mut [u8]>>) -> Self::Safe<'m> {
        raw
    }
}

impl WasmArgument for Bytes {
    fn range(raw: u64, memory_length: usize) -> Result<Option<core::ops::Range<usize>>, Refusal> {
        wasm_range(raw, memory_length).map(Some)
    }
    fn lend<'m>(_: u64, slices: &mut core::slice::IterMut<'_, Option<&'m mut [u8]>>) -> Self::Safe<'m> {
        slices.next().and_then(Option::take).map_or(&[], |slice| &*slice)
    }
}

impl WasmArgument for BytesMut {
    fn range(raw: u64, memory_length: usize) -> Result<Option<core::ops::Range<usize>>, Refusal> {
        wasm_range(raw, memory_length).map(Some)
    }
    fn lend<'m>(_: u64, slices: &mut core::slice::IterMut<'_, Option<&'m mut [u8]>>) -> Self::Safe<'m> {
        slices.next().and_then(Option::take).unwrap_or(&mut [])
    }
}

/// Most ranges one kernel function takes (the system call's words allow two).
pub const MAX_RANGES: usize = 4;

/// Carves the `ranges` of one call out of `memory` as disjoint sub-slices, returned in the
/// order given. Errors: more than [`MAX_RANGES`], or two ranges that overlap (they cannot be
/// lent at once; an empty range overlaps nothing).
pub fn carve<'m>(memory: &'m mut [u8], ranges: &[core::ops::Range<usize>]) -> Result<[Option<&'m mut [u8]>; MAX_RANGES], Refusal> {
    let mut slices: [Option<&'m mut [u8]>; MAX_RANGES] = Default::default();
    if ranges.len() > MAX_RANGES {
        return Err(Refusal::Overlapping);
    }
    let mut order: [usize; MAX_RANGES] = [0, 1, 2, 3];
    let order = &mut order[..ranges.len()];
    order.sort_unstable_by_key(|&index| (ranges[index].start, ranges[index].end));
    let mut rest = memory;
    let mut consumed = 0;
    for &index in order.iter() {
        let range = &ranges[index];
        if range.start < consumed && !range.is_empty() {
            return Err(Refusal::Overlapping);
        }
        let start = range.start.max(consumed);
        let (_, tail) = core::mem::take(&mut rest).split_at_mut(start - consumed);
        let (slice, tail) = tail.split_at_mut(range.end.max(start) - start);
        slices[index] = Some(slice);
        rest = tail;
        consumed = range.end.max(start);
    }
    Ok(slices)
}

/// How the user-level decoding stages an argument: a kernel copy of a range, read in before
/// the call and written back after it when the range is written.
pub trait StagedArgument: Argument {
    /// The kernel-side value.
    type Staged;
    /// Reads the user-level form from `words` (advanced past it) in `space`.
    fn stage_user(words: &mut &[usize], space: &UserSpace) -> Result<Self::Staged, Refusal>;
    /// What the implementation receives.
    fn view(staged: &mut Self::Staged) -> Self::Safe<'_>;
    /// Writes a written range back into user memory.
    fn commit_user(staged: Self::Staged, space: &UserSpace) -> Result<(), Refusal>;
}

/// The next word of a system call.
fn next_word(words: &mut &[usize]) -> Result<usize, Refusal> {
    let (&first, rest) = words.split_first().ok_or(Refusal::BadWords)?;
    *words = rest;
    Ok(first)
}

/// A range of linear memory, checked.
fn wasm_range(packed: u64, memory_length: usize) -> Result<core::ops::Range<usize>, Refusal> {
    let (offset, length) = spindle_abi::host::unpack_wasm_range(packed);
    if length > MAX_RANGE {
        return Err(Refusal::TooLong { length });
    }
    let end = offset.checked_add(length).filter(|&end| end <= memory_length).ok_or(Refusal::NotAccessible { address: offset, length })?;
    Ok(offset..end)
}

/// A staged range: its copy and where it came from.
pub struct StagedRange {
    bytes: Vec<u8>,
    address: usize,
}

impl StagedArgument for u64 {
    type Staged = u64;
    fn stage_user(words: &mut &[usize], _: &UserSpace) -> Result<u64, Refusal> {
        next_word(words).map(|word| word as u64)
    }
    fn view(staged: &mut u64) -> u64 {
        *staged
    }
    fn commit_user(_: u64, _: &UserSpace) -> Result<(), Refusal> {
        Ok(())
    }
}

impl StagedArgument for Bytes {
    type Staged = StagedRange;
    fn stage_user(words: &mut &[usize], space: &UserSpace) -> Result<StagedRange, Refusal> {
        let (address, length) = (next_word(words)?, next_word(words)?);
        space.read(address, length)
    }
    fn view(staged: &mut StagedRange) -> &[u8] {
        &staged.bytes
    }
    fn commit_user(_: StagedRange, _: &UserSpace) -> Result<(), Refusal> {
        Ok(())
    }
}

impl StagedArgument for BytesMut {
    type Staged = StagedRange;
    fn stage_user(words: &mut &[usize], space: &UserSpace) -> Result<StagedRange, Refusal> {
        Bytes::stage_user(words, space)
    }
    fn view(staged: &mut StagedRange) -> &mut [u8] {
        &mut staged.bytes
    }
    fn commit_user(staged: StagedRange, space: &UserSpace) -> Result<(), Refusal> {
        space.write(staged.address, &staged.bytes)
    }
}

/// The address space of the user-level extension an upcall runs in, pinned for the call.
pub struct UserSpace {
    view: SpaceView,
}

impl UserSpace {
    /// The space behind `view`.
    ///
    /// # Safety
    /// The process `view` belongs to is pinned (serving an upcall, see `proc::migrate`)
    /// for as long as the result is used: its space is alive and not being changed.
    pub unsafe fn new(view: SpaceView) -> UserSpace {
        UserSpace { view }
    }

    /// Copies `length` bytes of user memory at `address`.
    fn read(&self, address: usize, length: usize) -> Result<StagedRange, Refusal> {
        if length > MAX_RANGE {
            return Err(Refusal::TooLong { length });
        }
        let not_accessible = Refusal::NotAccessible { address, length };
        let range = spindle_process::user_range(address, length, MAX_RANGE).map_err(|_| not_accessible)?;
        let mut bytes = alloc::vec![0u8; length];
        // SAFETY: the space is pinned for this value's life (UserSpace::new's contract).
        unsafe { self.view.read(range.start, &mut bytes) }.map_err(|_| not_accessible)?;
        Ok(StagedRange { bytes, address })
    }

    /// Writes `bytes` back to user memory at `address`.
    fn write(&self, address: usize, bytes: &[u8]) -> Result<(), Refusal> {
        // SAFETY: the space is pinned for this value's life (UserSpace::new's contract), and
        // the range is user memory, which the kernel holds no reference into.
        unsafe { self.view.write(address, bytes) }.map_err(|_| Refusal::NotAccessible { address, length: bytes.len() })
    }
}

/// A result word from a function's result (`u64` or nothing).
pub trait IntoWord {
    /// The word returned to the caller.
    fn into_word(self) -> usize;
}

impl IntoWord for u64 {
    fn into_word(self) -> usize {
        self as usize
    }
}

impl IntoWord for () {
    fn into_word(self) -> usize {
        0
    }
}

/// Generates the exports, the Wasm definitions and the user-level decoding.
macro_rules! kernel_glue {
    (
        runtime { $($(#[doc = $runtime_doc:literal])* fn $runtime:ident($($runtime_argument:ident: $runtime_type:ty),*) $(-> $runtime_result:ty)?;)* }
        $(domain $domain:ident: $trait:ident {
            $($(#[doc = $doc:literal])* fn $name:ident($($argument:ident: $type:ty),*) $(-> $result:ty)?;)*
        })*
    ) => {
        /// Installs the kernel's implementation of every domain for the built-in
        /// extensions (once, at boot, before any extension runs).
        pub fn install_builtin() {
            $(spindle_abi::host::domains::$domain.install(&KERNEL);)*
        }

        /// The native exports: the declared symbols, each checking its arguments and
        /// calling the kernel's implementation.
        #[allow(clippy::not_unsafe_ptr_arg_deref)]
        pub mod exports {
            #[allow(unused_imports)]
            use super::{KERNEL, NativeArgument, Ranges, refused};
            #[allow(unused_imports)]
            use spindle_abi::host::{Argument, Bytes, BytesMut};
            $($(
                $(#[doc = $doc])*
                #[unsafe(export_name = concat!("spindle_", stringify!($name)))]
                pub extern "C" fn $name($($argument: <$type as Argument>::Native),*) $(-> $result)? {
                    #[allow(unused_mut, unused_variables)]
                    let mut ranges = Ranges::default();
                    $(
                        let $argument = match <$type as NativeArgument>::lift($argument, &mut ranges) {
                            Ok(value) => value,
                            Err(refusal) => {
                                refused(stringify!($name), stringify!($argument), refusal);
                                return Default::default();
                            }
                        };
                    )*
                    <super::KernelFunctions as spindle_abi::host::domains::$trait>::$name(&KERNEL, $($argument),*)
                }
            )*)*
        }

        /// Address of the native export of service function `name` (its symbol).
        pub fn native_address(name: &str) -> Option<usize> {
            match name {
                $($(concat!("spindle_", stringify!($name)) => Some(exports::$name as *const () as usize),)*)*
                _ => None,
            }
        }

        /// Defines service function `name` in `linker` for a Wasm module (whose memory is
        /// its export `memory`); `None` if `name` is not a service function. Each runs on
        /// the kernel heap: what an implementation keeps must outlive the extension's
        /// private heap.
        pub fn define_wasm<T: 'static>(linker: &mut wasmi::Linker<T>, name: &str) -> Option<Result<(), wasmi::Error>> {
            #[allow(unused_imports)]
            use spindle_abi::host::{Argument, ArgumentKind, Bytes, BytesMut};
            let module = spindle_abi::wasm::WASM_IMPORT_MODULE;
            let defined = match name {
                $($(concat!("spindle_", stringify!($name)) => linker.func_wrap(
                    module,
                    name,
                    #[allow(unused_mut, unused_variables)]
                    |mut caller: wasmi::Caller<'_, T>, $($argument: <$type as Argument>::Wasm),*| $(-> $result)? {
                        crate::mm::private_heap::on_kernel_heap(|| {
                            // A function of integers only needs no memory: skip looking it up.
                            const RANGES: usize = 0 $(+ matches!(<$type as Argument>::KIND, ArgumentKind::Bytes | ArgumentKind::BytesMut) as usize)*;
                            if RANGES == 0 {
                                #[allow(unused_mut, unused_variables)]
                                let mut slices = ([] as [Option<&mut [u8]>; 0]).iter_mut();
                                return <KernelFunctions as spindle_abi::host::domains::$trait>::$name(
                                    &KERNEL,
                                    $(<$type as WasmArgument>::lend($argument, &mut slices)),*
                                );
                            }
                            let memory = caller.get_export(spindle_abi::wasm::MEMORY_EXPORT).and_then(wasmi::Extern::into_memory);
                            let Some(memory) = memory else { return Default::default() };
                            let data = memory.data_mut(&mut caller);
                            let mut ranges: [core::ops::Range<usize>; MAX_RANGES] = Default::default();
                            #[allow(unused_mut)]
                            let mut count = 0;
                            $(
                                match <$type as WasmArgument>::range($argument, data.len()) {
                                    Ok(Some(range)) if count < MAX_RANGES => {
                                        ranges[count] = range;
                                        count += 1;
                                    }
                                    Ok(Some(_)) => {
                                        refused(stringify!($name), stringify!($argument), Refusal::Overlapping);
                                        return Default::default();
                                    }
                                    Ok(None) => {}
                                    Err(refusal) => {
                                        refused(stringify!($name), stringify!($argument), refusal);
                                        return Default::default();
                                    }
                                }
                            )*
                            let mut slices = match carve(data, &ranges[..count]) {
                                Ok(slices) => slices,
                                Err(refusal) => {
                                    refused(stringify!($name), "(ranges)", refusal);
                                    return Default::default();
                                }
                            };
                            #[allow(unused_mut, unused_variables)]
                            let mut slices = slices.iter_mut();
                            <KernelFunctions as spindle_abi::host::domains::$trait>::$name(
                                &KERNEL,
                                $(<$type as WasmArgument>::lend($argument, &mut slices)),*
                            )
                        })
                    },
                ),)*)*
                _ => return None,
            };
            Some(defined.map(drop).map_err(wasmi::Error::from))
        }

        /// Runs service function `index` of `spindle_abi::host::KERNEL_FUNCTIONS` for a
        /// user-level extension with its argument words; `None` if it is not a service
        /// function.
        pub fn call_user(name: &str, words: &[usize; KERNEL_FUNCTION_WORDS], space: &UserSpace) -> Option<Result<usize, Error>> {
            #[allow(unused_imports)]
            use spindle_abi::host::{Argument, Bytes, BytesMut};
            #[allow(unused_mut, unused_variables)]
            let mut rest: &[usize] = words;
            match name {
                $($(concat!("spindle_", stringify!($name)) => {
                    $(
                        #[allow(unused_mut)]
                        let mut $argument = match <$type as StagedArgument>::stage_user(&mut rest, space) {
                            Ok(staged) => staged,
                            Err(refusal) => {
                                refused(stringify!($name), stringify!($argument), refusal);
                                return Some(Err(Error::BadAddress));
                            }
                        };
                    )*
                    let result = <KernelFunctions as spindle_abi::host::domains::$trait>::$name(
                        &KERNEL,
                        $(<$type as StagedArgument>::view(&mut $argument)),*
                    );
                    $(
                        if let Err(refusal) = <$type as StagedArgument>::commit_user($argument, space) {
                            refused(stringify!($name), stringify!($argument), refusal);
                            return Some(Err(Error::BadAddress));
                        }
                    )*
                    Some(Ok(IntoWord::into_word(result)))
                })*)*
                _ => None,
            }
        }

        // Every function's arguments fit the `kernel_function` system call.
        $($(#[allow(unused_comparisons)] const _: () = assert!(
            0 $(+ <$type as Argument>::WORDS)* <= KERNEL_FUNCTION_WORDS,
            concat!("spindle_", stringify!($name), " takes more words than a kernel_function system call carries")
        );)*)*
    };
}

spindle_abi::for_each_kernel_function!(kernel_glue);
