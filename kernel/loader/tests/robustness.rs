//! Property tests: random corruption of the real fixture ELF, of a signed `.kext` and of
//! manifest text never panics; corrupted signed files are always refused. Run as part of
//! plain `cargo test` (a few thousand cases, seconds). A failure prints a minimal case
//! that can be turned into an explicit test.

mod common;

use common::*;
use std::sync::LazyLock;

use proptest::prelude::*;
use spindle_loader::pack::{pack, verifying_key_bytes};
use spindle_loader::{Container, ElfObject, Kind, Manifest, Policy, load_into, open};

/// The fixture packed and signed once (signing in every case would dominate the run).
static SIGNED_KEXT: LazyLock<Vec<u8>> = LazyLock::new(|| {
    pack(
        Kind::Native,
        ABI,
        &fixture_manifest(),
        FIXTURE,
        Some(&builder_key()),
    )
    .unwrap()
});

/// The fixture's structures (headers, dynamic table, symbols, relocations, RELRO data)
/// all lie in its first 0x700 bytes; half of the mutations aim there.
const STRUCTURE_END: usize = 0x700;

/// One corruption: bytes to XOR at positions, then an optional truncation.
#[derive(Clone, Debug)]
struct Corruption {
    flips: Vec<(usize, u8)>,
    truncate_to: Option<usize>,
}

impl Corruption {
    fn apply(&self, original: &[u8]) -> Vec<u8> {
        let mut bytes = original.to_vec();
        for &(position, mask) in &self.flips {
            let position = position % bytes.len();
            bytes[position] ^= mask;
        }
        if let Some(length) = self.truncate_to {
            bytes.truncate(length % (original.len() + 1));
        }
        bytes
    }
}

/// Positions biased towards `hot_end`, masks non-zero so each flip changes its byte.
fn corruption(length: usize, hot_end: usize) -> impl Strategy<Value = Corruption> {
    let position = prop_oneof![0..hot_end.min(length), 0..length];
    let flips = prop::collection::vec((position, 1u8..=255), 1..6);
    let truncation = prop_oneof![4 => Just(None), 1 => (0..=length).prop_map(Some)];
    (flips, truncation).prop_map(|(flips, truncate_to)| Corruption { flips, truncate_to })
}

/// An ELF-aware mutation too: overwrite an aligned 8-byte word with an interesting value.
fn word_overwrite() -> impl Strategy<Value = (usize, u64)> {
    let value = prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(0x8000_0000_0000_0000),
        Just(0x1000),
        Just(0xffff_ffff),
        any::<u64>(),
        0u64..0x4000,
    ];
    (0..STRUCTURE_END / 8, value)
}

/// Parses and, if that succeeds, loads: must return, never panic.
fn parse_and_load(elf_bytes: &[u8]) {
    if let Ok(elf) = ElfObject::parse(elf_bytes, MAX_IMAGE) {
        assert!(elf.image_size() <= MAX_IMAGE);
        let mut image = vec![0; elf.image_size() as usize];
        let mut resolver = |name: &str| -> Result<u64, ()> {
            if name.len().is_multiple_of(2) {
                Ok(0xffff_ffc0_0000_0000)
            } else {
                Err(())
            }
        };
        let _ = load_into(&elf, &mut image, 0xffff_ffc0_4000_0000, &mut resolver);
        for mapping in elf.mappings() {
            assert!(!(mapping.permissions.write && mapping.permissions.execute));
            assert!(mapping.image_offset + mapping.size <= elf.image_size());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_elf_never_panics(corruption in corruption(FIXTURE.len(), STRUCTURE_END)) {
        parse_and_load(&corruption.apply(FIXTURE));
    }

    #[test]
    fn overwritten_elf_words_never_panic(overwrites in prop::collection::vec(word_overwrite(), 1..4)) {
        let mut elf = FIXTURE.to_vec();
        for (word, value) in overwrites {
            write_u64(&mut elf, word * 8, value);
        }
        parse_and_load(&elf);
    }

    #[test]
    fn corrupted_kext_layout_never_panics(corruption in corruption(SIGNED_KEXT.len(), 256)) {
        // Layout and manifest parsing only; the signature is checked below, with fewer cases.
        if let Ok(container) = Container::parse(&corruption.apply(&SIGNED_KEXT)) {
            let _ = container.manifest();
            prop_assert!(container.payload().len() <= SIGNED_KEXT.len());
        }
    }

    #[test]
    fn arbitrary_manifest_text_never_panics(text in "[a-z_ =,.0-9#\\n\\t]{0,200}") {
        let _ = Manifest::parse(&text);
    }

    #[test]
    fn arbitrary_manifest_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = Manifest::parse_bytes(&bytes);
    }
}

proptest! {
    // A case that reaches the signature check costs ~20 ms in a debug build: fewer cases.
    #![proptest_config(ProptestConfig { cases: 150, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_kext_is_always_refused(corruption in corruption(SIGNED_KEXT.len(), 256)) {
        let policy = Policy {
            verifying_key: verifying_key_bytes(&builder_key()),
            abi_fingerprint: ABI,
            allow_unsigned_wasm: true,
        };
        let corrupted = corruption.apply(&SIGNED_KEXT);
        prop_assume!(corrupted != *SIGNED_KEXT);
        prop_assert!(open(&corrupted, &policy).is_err());
    }
}
