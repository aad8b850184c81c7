//! The `.kext` container end to end: pack with the builder's code, open with the kernel's,
//! and every refusal.

mod common;

use common::*;
use spindle_loader::container::{
    ABI_OFFSET, FORMAT_VERSION, HEADER_LEN, KIND_OFFSET, MANIFEST_LEN_OFFSET, MAX_MANIFEST_LEN,
    PAYLOAD_ALIGNMENT, PAYLOAD_LEN_OFFSET, SIGNATURE_OFFSET, VERSION_OFFSET, payload_offset,
};
use spindle_loader::pack::{pack, pack_manifest_bytes, sign_in_place, verifying_key_bytes};
use spindle_loader::{
    Container, ContainerError, ElfObject, Kind, ManifestError, Policy, load_into, open,
};

fn policy() -> Policy {
    Policy {
        verifying_key: verifying_key_bytes(&builder_key()),
        abi_fingerprint: ABI,
        allow_unsigned_wasm: false,
    }
}

fn signed_native() -> Vec<u8> {
    pack(
        Kind::Native,
        ABI,
        &fixture_manifest(),
        FIXTURE,
        Some(&builder_key()),
    )
    .unwrap()
}

/// A tiny Wasm module header (the loader does not look inside Wasm payloads).
const WASM: &[u8] = b"\0asm\x01\0\0\0";

#[test]
fn a_signed_native_extension_opens_and_loads() {
    let bytes = signed_native();
    let extension = open(&bytes, &policy()).unwrap();
    assert_eq!(extension.kind(), Kind::Native);
    assert!(extension.is_signed());
    assert_eq!(extension.manifest(), &fixture_manifest());
    let payload = extension.payload_of_kind(Kind::Native).unwrap();
    assert_eq!(payload, FIXTURE);

    let elf = ElfObject::parse(payload, MAX_IMAGE).unwrap();
    let mut image = vec![0; elf.image_size() as usize];
    let loaded = load_into(&elf, &mut image, 0x8100_0000, &mut host_resolver).unwrap();
    assert!(loaded.function(&extension.manifest().entry).is_ok());
}

#[test]
fn layout_is_as_documented() {
    let bytes = signed_native();
    let manifest_len = fixture_manifest().to_text().len();
    assert_eq!(&bytes[..8], b"SPNDLKXT");
    assert_eq!(read_u16(&bytes, VERSION_OFFSET), FORMAT_VERSION);
    assert_eq!(bytes[KIND_OFFSET], 1);
    assert_eq!(read_u64(&bytes, ABI_OFFSET), ABI);
    assert_eq!(read_u32(&bytes, MANIFEST_LEN_OFFSET) as usize, manifest_len);
    assert_eq!(read_u64(&bytes, PAYLOAD_LEN_OFFSET) as usize, FIXTURE.len());
    let payload_start = payload_offset(manifest_len);
    assert_eq!(payload_start % PAYLOAD_ALIGNMENT, 0);
    assert_eq!(
        &bytes[HEADER_LEN..HEADER_LEN + manifest_len],
        fixture_manifest().to_text().as_bytes()
    );
    assert_eq!(&bytes[payload_start..], FIXTURE);
}

#[test]
fn any_tampered_byte_breaks_the_signature() {
    let bytes = signed_native();
    let manifest_len = fixture_manifest().to_text().len();
    let payload_start = payload_offset(manifest_len);
    // ABI field, a manifest byte, a payload byte, the last byte, and the signature itself.
    let positions = [
        ABI_OFFSET,
        HEADER_LEN + 3,
        payload_start + 100,
        bytes.len() - 1,
        SIGNATURE_OFFSET + 5,
    ];
    for position in positions {
        let mut tampered = bytes.clone();
        tampered[position] ^= 0x01;
        assert_eq!(
            open(&tampered, &policy()).unwrap_err(),
            ContainerError::BadSignature,
            "byte {position}"
        );
    }
}

#[test]
fn the_wrong_key_is_refused() {
    let bytes = signed_native();
    let wrong = Policy {
        verifying_key: verifying_key_bytes(&other_key()),
        ..policy()
    };
    assert_eq!(
        open(&bytes, &wrong).unwrap_err(),
        ContainerError::BadSignature
    );
    // 32 bytes that are not a curve point.
    let mut not_a_point = [0; 32];
    not_a_point[0] = 2;
    let invalid = Policy {
        verifying_key: not_a_point,
        ..policy()
    };
    assert_eq!(
        open(&bytes, &invalid).unwrap_err(),
        ContainerError::BadVerifyingKey
    );
}

#[test]
fn the_wrong_abi_fingerprint_is_refused() {
    let bytes = pack(
        Kind::Native,
        ABI ^ 1,
        &fixture_manifest(),
        FIXTURE,
        Some(&builder_key()),
    )
    .unwrap();
    let error = open(&bytes, &policy()).unwrap_err();
    assert_eq!(
        error,
        ContainerError::AbiMismatch {
            expected: ABI,
            found: ABI ^ 1
        }
    );
    assert!(
        error.to_string().contains("kernel has 0x5350494e444c4531"),
        "{error}"
    );
}

#[test]
fn native_extensions_must_be_signed() {
    let unsigned = pack(Kind::Native, ABI, &fixture_manifest(), FIXTURE, None).unwrap();
    assert_eq!(
        open(&unsigned, &policy()).unwrap_err(),
        ContainerError::Unsigned
    );
    let lenient = Policy {
        allow_unsigned_wasm: true,
        ..policy()
    };
    assert_eq!(
        open(&unsigned, &lenient).unwrap_err(),
        ContainerError::Unsigned
    );
}

#[test]
fn unsigned_wasm_only_when_allowed_and_signed_wasm_must_verify() {
    let unsigned = pack(Kind::Wasm, ABI, &fixture_manifest(), WASM, None).unwrap();
    assert_eq!(
        open(&unsigned, &policy()).unwrap_err(),
        ContainerError::Unsigned
    );
    let lenient = Policy {
        allow_unsigned_wasm: true,
        ..policy()
    };
    let extension = open(&unsigned, &lenient).unwrap();
    assert!(!extension.is_signed());
    assert_eq!(extension.payload_of_kind(Kind::Wasm).unwrap(), WASM);
    assert_eq!(
        extension.payload_of_kind(Kind::Native).unwrap_err(),
        ContainerError::WrongKind {
            expected: Kind::Native,
            found: Kind::Wasm
        }
    );
    // The ABI is still checked for unsigned Wasm.
    let stale = pack(Kind::Wasm, 7, &fixture_manifest(), WASM, None).unwrap();
    assert_eq!(
        open(&stale, &lenient).unwrap_err(),
        ContainerError::AbiMismatch {
            expected: ABI,
            found: 7
        }
    );
    // A signature that is present must verify, even when unsigned would do.
    let mut signed = pack(
        Kind::Wasm,
        ABI,
        &fixture_manifest(),
        WASM,
        Some(&other_key()),
    )
    .unwrap();
    assert_eq!(
        open(&signed, &lenient).unwrap_err(),
        ContainerError::BadSignature
    );
    sign_in_place(&mut signed, &builder_key());
    assert!(open(&signed, &lenient).unwrap().is_signed());
}

#[test]
fn manifest_errors_surface_after_the_signature_check() {
    let bad = b"name = fixture\ncolour = blue\n";
    let bytes = pack_manifest_bytes(Kind::Native, ABI, bad, FIXTURE, Some(&builder_key())).unwrap();
    assert_eq!(
        open(&bytes, &policy()).unwrap_err(),
        ContainerError::Manifest(ManifestError::UnknownKey {
            line: 2,
            key: "colour".into()
        })
    );
    let missing = b"name = fixture\n";
    let bytes =
        pack_manifest_bytes(Kind::Native, ABI, missing, FIXTURE, Some(&builder_key())).unwrap();
    assert_eq!(
        open(&bytes, &policy()).unwrap_err(),
        ContainerError::Manifest(ManifestError::MissingKey { key: "version" })
    );
    let not_utf8 = b"name = \xff\n";
    let bytes =
        pack_manifest_bytes(Kind::Native, ABI, not_utf8, FIXTURE, Some(&builder_key())).unwrap();
    assert_eq!(
        open(&bytes, &policy()).unwrap_err(),
        ContainerError::Manifest(ManifestError::NotUtf8)
    );
    // Unsigned, the same file is refused before its manifest is read.
    let bytes = pack_manifest_bytes(Kind::Native, ABI, bad, FIXTURE, None).unwrap();
    assert_eq!(
        open(&bytes, &policy()).unwrap_err(),
        ContainerError::Unsigned
    );
}

fn patched(patch: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = signed_native();
    patch(&mut bytes);
    bytes
}

#[test]
fn layout_errors() {
    assert_eq!(
        Container::parse(b"SPNDLKXT").unwrap_err(),
        ContainerError::Truncated { what: "header" }
    );
    assert_eq!(
        Container::parse(&patched(|bytes| bytes[0] = b'X')).unwrap_err(),
        ContainerError::BadMagic
    );
    assert_eq!(
        Container::parse(&patched(|bytes| bytes[VERSION_OFFSET] = 2)).unwrap_err(),
        ContainerError::UnsupportedVersion { found: 2 }
    );
    assert_eq!(
        Container::parse(&patched(|bytes| bytes[KIND_OFFSET] = 9)).unwrap_err(),
        ContainerError::UnknownKind { found: 9 }
    );
    for reserved in [11, 15, 28, 40, 63] {
        assert_eq!(
            Container::parse(&patched(|bytes| bytes[reserved] = 1)).unwrap_err(),
            ContainerError::ReservedNotZero {
                what: "reserved header field"
            },
            "byte {reserved}"
        );
    }
    let too_long = (MAX_MANIFEST_LEN + 1) as u32;
    assert_eq!(
        Container::parse(&patched(|bytes| write_u32(
            bytes,
            MANIFEST_LEN_OFFSET,
            too_long
        )))
        .unwrap_err(),
        ContainerError::ManifestTooLong {
            length: u64::from(too_long)
        }
    );
    let bytes = signed_native();
    assert_eq!(
        Container::parse(&bytes[..HEADER_LEN + 5]).unwrap_err(),
        ContainerError::Truncated { what: "manifest" }
    );
    assert_eq!(
        Container::parse(&bytes[..bytes.len() - 1]).unwrap_err(),
        ContainerError::Truncated { what: "payload" }
    );
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0, 0, 0]);
    assert_eq!(
        Container::parse(&longer).unwrap_err(),
        ContainerError::TrailingBytes { count: 3 }
    );
    let huge_payload = patched(|bytes| write_u64(bytes, PAYLOAD_LEN_OFFSET, u64::MAX));
    assert_eq!(
        Container::parse(&huge_payload).unwrap_err(),
        ContainerError::Truncated { what: "payload" }
    );
}

#[test]
fn padding_must_be_zero_and_present() {
    // A 3-byte manifest leaves 5 bytes of padding before the payload.
    let bytes = pack_manifest_bytes(Kind::Wasm, ABI, b"#\n\n", WASM, None).unwrap();
    assert_eq!(payload_offset(3), HEADER_LEN + 8);
    assert!(Container::parse(&bytes).is_ok());
    let mut dirty = bytes.clone();
    dirty[HEADER_LEN + 4] = 1;
    assert_eq!(
        Container::parse(&dirty).unwrap_err(),
        ContainerError::ReservedNotZero { what: "padding" }
    );
    assert_eq!(
        Container::parse(&bytes[..HEADER_LEN + 5]).unwrap_err(),
        ContainerError::Truncated { what: "padding" }
    );
}

#[test]
fn every_prefix_is_refused() {
    let bytes = pack(
        Kind::Wasm,
        ABI,
        &fixture_manifest(),
        WASM,
        Some(&builder_key()),
    )
    .unwrap();
    for length in 0..bytes.len() {
        assert!(
            Container::parse(&bytes[..length]).is_err(),
            "prefix of {length} bytes"
        );
    }
    assert!(Container::parse(&bytes).is_ok());
}
