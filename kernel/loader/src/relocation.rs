//! The RISC-V dynamic relocations the loader applies, as small pure functions.
//!
//! Notation from the RISC-V ELF psABI: `B` is the load bias (runtime address minus
//! link-time address), `S` the symbol's runtime address, `A` the addend. All three
//! relocations write one little-endian 64-bit word. Arithmetic is modulo 2^64, as in the
//! psABI; the loader checks where a value is *written*, not where it points.

use core::fmt;

/// `R_RISCV_NONE`: no relocation (emitted for dropped entries); the loader skips it.
pub const R_RISCV_NONE: u32 = 0;
/// `R_RISCV_64`: word = `S + A`.
pub const R_RISCV_64: u32 = 2;
/// `R_RISCV_RELATIVE`: word = `B + A`.
pub const R_RISCV_RELATIVE: u32 = 3;
/// `R_RISCV_JUMP_SLOT`: word = `S` (a PLT slot, bound eagerly).
pub const R_RISCV_JUMP_SLOT: u32 = 5;
/// Size of the word every supported relocation writes.
pub const WORD_SIZE: u64 = 8;

/// A relocation type the loader supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelocationKind {
    /// `R_RISCV_NONE`: nothing to do.
    None,
    /// `R_RISCV_RELATIVE`: `B + A`, no symbol.
    Relative,
    /// `R_RISCV_64`: `S + A` (symbol 0 means `S = 0`).
    Absolute64,
    /// `R_RISCV_JUMP_SLOT`: `S`.
    JumpSlot,
}

impl RelocationKind {
    /// The supported kind for an `r_type`, or `None` when the loader cannot apply it.
    pub const fn from_type(relocation_type: u32) -> Option<RelocationKind> {
        match relocation_type {
            R_RISCV_NONE => Some(RelocationKind::None),
            R_RISCV_64 => Some(RelocationKind::Absolute64),
            R_RISCV_RELATIVE => Some(RelocationKind::Relative),
            R_RISCV_JUMP_SLOT => Some(RelocationKind::JumpSlot),
            _ => None,
        }
    }

    /// Whether the relocation needs a symbol's address.
    pub const fn uses_symbol(self) -> bool {
        matches!(self, RelocationKind::Absolute64 | RelocationKind::JumpSlot)
    }
}

/// `R_RISCV_RELATIVE`: `B + A`.
pub const fn relative(load_bias: u64, addend: i64) -> u64 {
    load_bias.wrapping_add_signed(addend)
}

/// `R_RISCV_64`: `S + A`.
pub const fn absolute64(symbol_address: u64, addend: i64) -> u64 {
    symbol_address.wrapping_add_signed(addend)
}

/// `R_RISCV_JUMP_SLOT`: `S` (the psABI defines no addend for it).
pub const fn jump_slot(symbol_address: u64) -> u64 {
    symbol_address
}

/// The load bias `B`: what to add to a link-time address to get the runtime address,
/// for an image whose first byte (link-time `image_start`) is placed at `load_base`.
pub const fn load_bias(load_base: u64, image_start: u64) -> u64 {
    load_base.wrapping_sub(image_start)
}

/// The word a relocation of `kind` writes; `symbol_address` is ignored by kinds that
/// use no symbol. `None` for [`RelocationKind::None`], which writes nothing.
pub const fn value(
    kind: RelocationKind,
    load_bias: u64,
    symbol_address: u64,
    addend: i64,
) -> Option<u64> {
    match kind {
        RelocationKind::None => None,
        RelocationKind::Relative => Some(relative(load_bias, addend)),
        RelocationKind::Absolute64 => Some(absolute64(symbol_address, addend)),
        RelocationKind::JumpSlot => Some(jump_slot(symbol_address)),
    }
}

/// A write that would not fit inside the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfImage {
    /// The image offset of the attempted write.
    pub offset: u64,
}

impl fmt::Display for OutOfImage {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "relocation write at image offset {:#x} is outside the image",
            self.offset
        )
    }
}

/// Whether a word written at `offset` lies entirely inside `image_len` bytes.
pub const fn word_fits(offset: u64, image_len: u64) -> bool {
    match offset.checked_add(WORD_SIZE) {
        Some(end) => end <= image_len,
        None => false,
    }
}

/// Writes `value` little-endian at `offset` of `image`, refusing writes that would not
/// fit. Offsets need no alignment (the psABI does not require it of data words).
pub fn write_word(image: &mut [u8], offset: u64, value: u64) -> Result<(), OutOfImage> {
    if !word_fits(offset, image.len() as u64) {
        return Err(OutOfImage { offset });
    }
    let start = offset as usize; // fits: offset + 8 <= image.len()
    image[start..start + WORD_SIZE as usize].copy_from_slice(&value.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_types() {
        assert_eq!(RelocationKind::from_type(0), Some(RelocationKind::None));
        assert_eq!(
            RelocationKind::from_type(2),
            Some(RelocationKind::Absolute64)
        );
        assert_eq!(RelocationKind::from_type(3), Some(RelocationKind::Relative));
        assert_eq!(RelocationKind::from_type(5), Some(RelocationKind::JumpSlot));
        // R_RISCV_32, R_RISCV_COPY, TLS, IRELATIVE: refused.
        for unsupported in [1, 4, 6, 7, 11, 58, 0xffff_ffff] {
            assert_eq!(RelocationKind::from_type(unsupported), None);
        }
        assert!(RelocationKind::JumpSlot.uses_symbol());
        assert!(!RelocationKind::Relative.uses_symbol());
    }

    #[test]
    fn relative_adds_the_bias() {
        assert_eq!(relative(0x8040_0000, 0x460), 0x8040_0460);
        assert_eq!(relative(0x1000, -0x10), 0xff0);
        // Modulo 2^64, like the hardware.
        assert_eq!(relative(u64::MAX, 2), 1);
    }

    #[test]
    fn absolute64_adds_the_addend_to_the_symbol() {
        assert_eq!(absolute64(0xffff_ffc0_0020_0000, 0), 0xffff_ffc0_0020_0000);
        assert_eq!(absolute64(0x1000, 8), 0x1008);
        assert_eq!(absolute64(0x1000, -8), 0xff8);
    }

    #[test]
    fn jump_slot_is_the_symbol() {
        assert_eq!(jump_slot(0xdead_beef), 0xdead_beef);
        assert_eq!(
            value(RelocationKind::JumpSlot, 0x1000, 0xdead_beef, 99),
            Some(0xdead_beef)
        );
        assert_eq!(value(RelocationKind::None, 1, 2, 3), None);
    }

    #[test]
    fn bias_from_base_and_image_start() {
        assert_eq!(load_bias(0x8040_0000, 0), 0x8040_0000);
        assert_eq!(load_bias(0x8040_0000, 0x1_0000), 0x803f_0000);
        assert_eq!(relative(load_bias(0x5000, 0x1000), 0x1234), 0x5234);
    }

    #[test]
    fn writes_are_bounds_checked() {
        let mut image = [0u8; 16];
        write_word(&mut image, 8, 0x0102_0304_0506_0708).unwrap();
        assert_eq!(image[8..], [8, 7, 6, 5, 4, 3, 2, 1]);
        write_word(&mut image, 3, u64::MAX).unwrap();
        assert_eq!(write_word(&mut image, 9, 0), Err(OutOfImage { offset: 9 }));
        assert_eq!(
            write_word(&mut image, u64::MAX - 3, 0),
            Err(OutOfImage {
                offset: u64::MAX - 3
            })
        );
        assert!(word_fits(0, 8));
        assert!(!word_fits(1, 8));
    }
}
