//! Memory-mapped device registers, behind a bounds-checked safe wrapper.

/// A window of device registers at a fixed physical (= virtual) address.
#[derive(Clone, Copy, Debug)]
pub struct MmioRegion {
    base: usize,
    length: usize,
}

impl MmioRegion {
    /// Creates a register window.
    ///
    /// # Safety
    /// `[base, base + length)` must be device memory that is mapped for the kernel, not
    /// RAM that Rust code uses, for as long as the region is used.
    pub const unsafe fn new(base: usize, length: usize) -> MmioRegion {
        MmioRegion { base, length }
    }

    /// Base address.
    pub fn base(&self) -> usize {
        self.base
    }

    fn checked_address(&self, offset: usize, width: usize) -> usize {
        assert!(offset + width <= self.length && offset.is_multiple_of(width), "MMIO access outside the device window");
        self.base + offset
    }

    /// Reads an 8-bit register.
    pub fn read_u8(&self, offset: usize) -> u8 {
        let address = self.checked_address(offset, 1);
        // SAFETY: `new`'s contract makes the window valid device memory; the offset was
        // bounds- and alignment-checked above.
        unsafe { (address as *const u8).read_volatile() }
    }

    /// Writes an 8-bit register.
    pub fn write_u8(&self, offset: usize, value: u8) {
        let address = self.checked_address(offset, 1);
        // SAFETY: `new`'s contract makes the window valid device memory; the offset was
        // bounds- and alignment-checked above.
        unsafe { (address as *mut u8).write_volatile(value) }
    }

    /// Reads a 32-bit register.
    pub fn read_u32(&self, offset: usize) -> u32 {
        let address = self.checked_address(offset, 4);
        // SAFETY: `new`'s contract makes the window valid device memory; the offset was
        // bounds- and alignment-checked above.
        unsafe { (address as *const u32).read_volatile() }
    }

    /// Writes a 32-bit register.
    pub fn write_u32(&self, offset: usize, value: u32) {
        let address = self.checked_address(offset, 4);
        // SAFETY: `new`'s contract makes the window valid device memory; the offset was
        // bounds- and alignment-checked above.
        unsafe { (address as *mut u32).write_volatile(value) }
    }
}
