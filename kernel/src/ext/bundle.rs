//! The boot bundle handed over by QEMU as the initial RAM disk: the native and Wasm
//! extensions this boot image carries (a Wasm build is the entry `NAME.wasm`), and which
//! of them to load at boot.

use spin::Once;
use spindle_loader::bundle::{self, Bundle};

static BUNDLE: Once<Option<Bundle<'static>>> = Once::new();

/// Parses the bundle, if the device tree announces one; reports a malformed bundle and
/// carries on without it.
pub fn init() {
    BUNDLE.call_once(|| {
        let (start, end) = crate::devicetree::initrd_range()?;
        // SAFETY: the device tree's initrd range is reserved from the frame allocator and
        // mapped read-only by `mm::kernel_space`; nothing writes it for the life of the
        // kernel, so a 'static shared slice over it is sound.
        let bytes = unsafe { core::slice::from_raw_parts(start as *const u8, end - start) };
        match bundle::parse(bytes) {
            Ok(parsed) => Some(parsed),
            Err(error) => {
                crate::println!("[ext] boot bundle at {start:#x}..{end:#x} refused: {error}");
                None
            }
        }
    });
}

/// The bundle, if one was given and parsed.
pub fn get() -> Option<&'static Bundle<'static>> {
    BUNDLE.get().and_then(Option::as_ref)
}

/// The `.kext` bytes of the bundled extension called `name`.
pub fn payload(name: &str) -> Option<&'static [u8]> {
    get()?.entry(name).map(|entry| entry.payload)
}

/// Loads the bundle's boot list, reporting each result.
pub fn load_boot_list() {
    let Some(bundle) = get() else { return };
    for name in &bundle.boot {
        // A boot-list entry `NAME.wasm` is the Wasm build of NAME.
        let (name, preference) = match name.strip_suffix(super::WASM_ENTRY_SUFFIX) {
            Some(base) => (base, super::Preference::Wasm),
            None => (*name, super::Preference::Default),
        };
        match super::load(name, preference) {
            Ok(extension) => crate::println!("[ext] boot: loaded `{name}` ({}), {} binding(s)", extension.technology, extension.bindings.lock().len()),
            Err(error) => crate::println!("[ext] boot: `{name}` refused: {error}"),
        }
    }
}
