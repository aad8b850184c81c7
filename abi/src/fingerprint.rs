//! Signature fingerprints.
//!
//! A fingerprint is a 64-bit FNV-1a hash of a declaration's canonical text (its name and
//! the stringified Rust types of its arguments and result). Symbols and events carry one
//! so that a binary built against a different declaration fails to link instead of
//! running with the wrong types. FNV-1a is not cryptographic: it protects against
//! mistakes, not attackers (signatures do that, see the loader).

/// A 64-bit fingerprint of a declaration's canonical text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub u64);

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Fingerprint of `text`, usable in `const` context.
pub const fn fingerprint_of(text: &str) -> Fingerprint {
    let bytes = text.as_bytes();
    let mut hash = FNV_OFFSET_BASIS;
    let mut index = 0;
    while index < bytes.len() {
        hash ^= bytes[index] as u64;
        hash = hash.wrapping_mul(FNV_PRIME);
        index += 1;
    }
    Fingerprint(hash)
}

impl Fingerprint {
    /// Combines two fingerprints in an order-sensitive way (used to fingerprint the whole ABI).
    pub const fn combine(self, other: Fingerprint) -> Fingerprint {
        let mut hash = self.0 ^ FNV_OFFSET_BASIS;
        let mut shift = 0;
        while shift < 64 {
            hash ^= (other.0 >> shift) & 0xff;
            hash = hash.wrapping_mul(FNV_PRIME);
            shift += 8;
        }
        Fingerprint(hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_fnv1a_vectors() {
        // Published FNV-1a 64-bit test vectors.
        assert_eq!(fingerprint_of("").0, 0xcbf2_9ce4_8422_2325);
        assert_eq!(fingerprint_of("a").0, 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fingerprint_of("foobar").0, 0x8594_4171_f739_67e8);
    }

    #[test]
    fn different_signatures_differ() {
        assert_ne!(fingerprint_of("fn(u32) -> u64"), fingerprint_of("fn(u64) -> u64"));
    }

    #[test]
    fn combine_is_order_sensitive() {
        let a = fingerprint_of("a");
        let b = fingerprint_of("b");
        assert_ne!(a.combine(b), b.combine(a));
    }
}
