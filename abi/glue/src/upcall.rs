//! User-level extensions: the user side of upcalls, the fourth technology.
//!
//! An extension crate built as a user program (`cargo xtask ext build <crate> --user`)
//! is wrapped by the trusted builder in a generated `main` that calls [`glue::serve`]:
//! it describes the bindings of the crate's `extension!` declaration
//! (`spindle_abi::native::BindingInfo`, exactly as the native glue does) and registers them
//! with `Syscall::UpcallServe`, which blocks while
//! the kernel serves the extension's events by *upcalls*: on each raise the kernel enters
//! this process's address space at the generated entry, which calls [`glue::handle`] —
//! decode the argument words, run the handler through
//! `BindingDecl::invoke_bytes`, return the result words with `Syscall::UpcallReturn`.
//! Records travel in registers (each record is at most
//! `UPCALL_RECORD_WORDS` words), so no memory is
//! shared between the kernel and the extension.
//!
//! With the `user-level` feature (only the generated user-level glue enables it) this
//! crate also defines the kernel functions of `spindle_abi::host` for a user program, as
//! system calls, so the same extension source links unchanged: `spindle_console_write`
//! is a `write` to the console, the others go through
//! `Syscall::KernelFunction`, which the
//! kernel answers only during an upcall and only for the extension's granted domains.

/// What the generated user-level glue calls (bare-metal RISC-V only).
pub mod glue {
    use crate::user::call;
    use spindle_abi::extension::{ExtensionDecl, RecordBuffer};
    use spindle_abi::native::{BindingInfo, ErrorCode, binding_info, invoke, invoke_words};
    use spindle_abi::syscall::{Error, KERNEL_FUNCTION_WORDS, MAX_UPCALL_BINDINGS, Syscall, UPCALL_RECORD_WORDS, UpcallRegistration};

    /// The signature of an upcall entry: binding index, argument size, result size and
    /// the argument record's words, as the kernel passes them in `a0`..`a6`.
    pub type UpcallEntry = extern "C" fn(usize, usize, usize, u64, u64, u64, u64) -> !;

    /// Bytes of a record passed in registers.
    const RECORD_BYTES: usize = UPCALL_RECORD_WORDS * 8;

    /// Registers `declaration` (with its builder-generated `manifest` text) and serves its
    /// upcalls at `entry` on the stack ending at `stack_top`; returns `Ok` when the
    /// extension is unloaded, or the kernel's error (`Contained` after a fault).
    pub fn serve(declaration: &ExtensionDecl, manifest: &str, entry: UpcallEntry, stack_top: usize) -> Result<(), Error> {
        let count = declaration.bindings.len();
        if count > MAX_UPCALL_BINDINGS {
            return Err(Error::TooMany);
        }
        let mut infos = [BindingInfo::default(); MAX_UPCALL_BINDINGS];
        for (index, info) in infos.iter_mut().enumerate().take(count) {
            *info = binding_info(declaration, index).map_err(|_| Error::BadArgument)?;
        }
        let registration = UpcallRegistration {
            manifest: manifest.as_ptr() as u64,
            manifest_length: manifest.len() as u64,
            bindings: infos.as_ptr() as u64,
            binding_count: count as u64,
            entry: entry as usize as u64,
            stack_top: stack_top as u64,
        };
        let pointer = &raw const registration as usize;
        // SAFETY: the kernel only reads the registration, the manifest and the binding
        // descriptions, which live (on this stack and in rodata) for the whole call.
        unsafe { call(Syscall::UpcallServe, [pointer, UpcallRegistration::SIZE, 0, 0, 0, 0]) }.map(|_| ())
    }

    /// Runs one upcall: binding `index` of `declaration` on the argument words, then
    /// returns the result words (or the failure code) to the kernel.
    pub fn handle(declaration: &ExtensionDecl, index: usize, argument_size: usize, result_size: usize, words: [u64; UPCALL_RECORD_WORDS]) -> ! {
        // The words are the records' little-endian bytes: a generated declaration decodes
        // and encodes them as they are (its record types say how many words they take, so
        // it gets all four either way); a hand-written one goes through bytes, cut to the
        // sizes the kernel passed.
        let mut out = [0u64; UPCALL_RECORD_WORDS];
        let outcome = match invoke_words(declaration, index, &words, &mut out) {
            Some(outcome) => outcome,
            None => invoke_bytes(declaration, index, argument_size, result_size, words, &mut out),
        };
        let code = match outcome {
            Ok(()) => 0,
            Err(error) => error as i32 as isize as usize,
        };
        upcall_return(code, out)
    }

    /// [`handle`]'s way for a declaration without [`invoke_words`]: through byte buffers.
    fn invoke_bytes(declaration: &ExtensionDecl, index: usize, argument_size: usize, result_size: usize, words: [u64; UPCALL_RECORD_WORDS], out: &mut [u64; UPCALL_RECORD_WORDS]) -> Result<(), ErrorCode> {
        let mut arguments = RecordBuffer::<RECORD_BYTES>::default();
        for (chunk, word) in arguments.0.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        let mut result = RecordBuffer::<RECORD_BYTES>::default();
        let outcome = invoke(declaration, index, &arguments.0[..argument_size.min(RECORD_BYTES)], &mut result.0[..result_size.min(RECORD_BYTES)]);
        for (word, chunk) in out.iter_mut().zip(result.0.chunks_exact(8)) {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(chunk);
            *word = u64::from_le_bytes(bytes);
        }
        outcome
    }

    /// Ends the running upcall with `code` (0: `words` hold the result record): the code
    /// and the words go straight from registers to the kernel (`a0`..`a4`), with none of a
    /// general system call's argument array.
    #[inline(always)]
    pub fn upcall_return(code: usize, words: [u64; UPCALL_RECORD_WORDS]) -> ! {
        // Outside an upcall the kernel answers `WrongState` in a0/a1 and preserves every
        // other register (the call convention of `crate::user`).
        // SAFETY: `ecall` traps to the kernel, which reads a0..a4 and a7 and, inside an
        // upcall, does not come back to this frame; the call touches no memory.
        unsafe {
            core::arch::asm!(
                "ecall",
                inlateout("a0") code => _,
                inlateout("a1") words[0] => _,
                in("a2") words[1],
                in("a3") words[2],
                in("a4") words[3],
                in("a7") Syscall::UpcallReturn.number(),
                options(nostack),
            );
        }
        // Reached only outside an upcall (`WrongState`): nothing sensible is left to do.
        crate::user::exit(1)
    }

    /// Calls kernel function `name` of `spindle_abi::host::KERNEL_FUNCTIONS` with its
    /// argument words through [`Syscall::KernelFunction`]; 0 if it is unknown or refused.
    ///
    /// # Safety
    /// A function that writes through a pointer argument (`spindle_block_read`) writes
    /// the caller's memory there, as its declaration says: the range must be writable
    /// memory nothing else refers to during the call.
    pub unsafe fn kernel_function(name: &str, arguments: [usize; KERNEL_FUNCTION_WORDS]) -> usize {
        let Some(index) = spindle_abi::host::KERNEL_FUNCTIONS.iter().position(|function| function.name == name) else { return 0 };
        let [a, b, c, d] = arguments;
        // SAFETY: forwarded from the caller.
        unsafe { call(Syscall::KernelFunction, [index, a, b, c, d, 0]) }.unwrap_or(0)
    }

    /// [`Syscall::ServiceRegister`]: offers `name`, served at `entry` (called with the
    /// argument in `a0`) on the stack ending at `stack_top`; returns only with an error.
    pub fn service_register(name: &str, entry: extern "C" fn(usize) -> !, stack_top: usize) -> Error {
        let arguments = [name.as_ptr() as usize, name.len(), entry as usize, stack_top, 0, 0];
        // SAFETY: the kernel only reads the name.
        match unsafe { call(Syscall::ServiceRegister, arguments) } {
            Ok(_) => Error::WrongState,
            Err(error) => error,
        }
    }

    /// [`Syscall::ServiceCall`]: calls service `name` with `argument`; returns its result.
    pub fn service_call(name: &str, argument: usize) -> Result<usize, Error> {
        // SAFETY: the kernel only reads the name; the service runs in its own space.
        unsafe { call(Syscall::ServiceCall, [name.as_ptr() as usize, name.len(), argument, 0, 0, 0]) }
    }

    /// [`Syscall::ServiceReturn`]: ends the running service call with `value`.
    pub fn service_return(value: usize) -> ! {
        // SAFETY: service_return reads only a register and does not return here.
        let _ = unsafe { call(Syscall::ServiceReturn, [value, 0, 0, 0, 0, 0]) };
        crate::user::exit(1)
    }
}

/// The runtime support of a user-level build (feature `user-level`, enabled only by the
/// generated user-level glue); its service functions are generated in [`crate::imports`].
#[cfg(feature = "user-level")]
pub mod user_level {
    use super::glue::upcall_return;
    use spindle_abi::syscall::CONSOLE;

    /// The failure code an extension panic returns (not a `native::ErrorCode`).
    const PANIC_CODE: usize = 101;

    /// Domain `extension`: prints the message and fails the upcall (the kernel then
    /// contains the extension, as for a native panic).
    #[inline(never)]
    #[unsafe(no_mangle)]
    pub extern "C" fn spindle_extension_panic(pointer: *const u8, length: usize) -> ! {
        let _ = crate::user::write_from_address(CONSOLE, pointer as usize, length);
        upcall_return(PANIC_CODE, [0; spindle_abi::syscall::UPCALL_RECORD_WORDS])
    }

    /// Reports a panic of the user-level build and ends the upcall (never returns).
    pub fn extension_panic(message: &str) -> ! {
        spindle_extension_panic(message.as_ptr(), message.len())
    }
}
