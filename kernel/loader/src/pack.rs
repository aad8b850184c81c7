//! The trusted builder's side (feature `pack`, host only): writing and signing `.kext`
//! files and handling keys. It writes exactly the layout [`crate::container`] reads, from
//! the same constants, and signs the same message [`crate::Container::verify_signature`]
//! checks, so the two cannot diverge.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use ed25519_dalek::Signer as _;
pub use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::container::{
    ABI_OFFSET, FORMAT_VERSION, HEADER_LEN, KIND_OFFSET, Kind, MAGIC, MANIFEST_LEN_OFFSET,
    MAX_MANIFEST_LEN, PAYLOAD_LEN_OFFSET, SIGNATURE_LEN, SIGNATURE_OFFSET, VERIFYING_KEY_LEN,
    VERSION_OFFSET, payload_offset, signed_message,
};
use crate::manifest::{Manifest, ManifestError};

/// Size of an Ed25519 signing-key seed.
pub const SIGNING_KEY_LEN: usize = 32;

/// Why packing or key handling failed.
#[derive(Debug)]
pub enum PackError {
    /// The manifest does not validate (its canonical text was re-parsed).
    Manifest(ManifestError),
    /// The manifest text is longer than [`MAX_MANIFEST_LEN`].
    ManifestTooLong {
        /// Its length.
        length: usize,
    },
    /// The operating system's random source failed.
    Random(getrandom::Error),
    /// A hex key string has the wrong length or a non-hex character.
    BadHexKey,
}

impl fmt::Display for PackError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackError::Manifest(error) => write!(formatter, "{error}"),
            PackError::ManifestTooLong { length } => {
                write!(
                    formatter,
                    "manifest is {length} bytes, at most {MAX_MANIFEST_LEN} allowed"
                )
            }
            PackError::Random(error) => write!(formatter, "random source failed: {error}"),
            PackError::BadHexKey => write!(formatter, "key is not {SIGNING_KEY_LEN} bytes of hex"),
        }
    }
}

impl core::error::Error for PackError {}

/// Writes a `.kext`: header, the manifest's canonical text, padding, payload; signed with
/// `signing_key` when given (an unsigned native extension packs, but no kernel loads it).
///
/// Errors: [`PackError::Manifest`] if the manifest does not validate,
/// [`PackError::ManifestTooLong`].
pub fn pack(
    kind: Kind,
    abi_fingerprint: u64,
    manifest: &Manifest,
    payload: &[u8],
    signing_key: Option<&SigningKey>,
) -> Result<Vec<u8>, PackError> {
    let text = manifest.to_text();
    Manifest::parse(&text).map_err(PackError::Manifest)?;
    pack_manifest_bytes(kind, abi_fingerprint, text.as_bytes(), payload, signing_key)
}

/// Like [`pack`], but writes `manifest` bytes as given, without validating them: for
/// tests and tools that need a container around an invalid manifest.
///
/// Errors: [`PackError::ManifestTooLong`].
pub fn pack_manifest_bytes(
    kind: Kind,
    abi_fingerprint: u64,
    manifest: &[u8],
    payload: &[u8],
    signing_key: Option<&SigningKey>,
) -> Result<Vec<u8>, PackError> {
    if manifest.len() > MAX_MANIFEST_LEN {
        return Err(PackError::ManifestTooLong {
            length: manifest.len(),
        });
    }
    let payload_start = payload_offset(manifest.len());
    let mut bytes = Vec::with_capacity(payload_start + payload.len());
    bytes.resize(HEADER_LEN, 0);
    bytes[..MAGIC.len()].copy_from_slice(&MAGIC);
    bytes[VERSION_OFFSET..VERSION_OFFSET + 2].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes[KIND_OFFSET] = kind.to_byte();
    bytes[ABI_OFFSET..ABI_OFFSET + 8].copy_from_slice(&abi_fingerprint.to_le_bytes());
    let manifest_len = manifest.len() as u32; // at most MAX_MANIFEST_LEN
    bytes[MANIFEST_LEN_OFFSET..MANIFEST_LEN_OFFSET + 4]
        .copy_from_slice(&manifest_len.to_le_bytes());
    let payload_len = payload.len() as u64;
    bytes[PAYLOAD_LEN_OFFSET..PAYLOAD_LEN_OFFSET + 8].copy_from_slice(&payload_len.to_le_bytes());
    bytes.extend_from_slice(manifest);
    bytes.resize(payload_start, 0);
    bytes.extend_from_slice(payload);
    if let Some(signing_key) = signing_key {
        sign_in_place(&mut bytes, signing_key);
    }
    Ok(bytes)
}

/// (Re)signs a complete `.kext` in place: computes the signed message over everything but
/// the signature field and writes the signature. `bytes` shorter than a header are left
/// unchanged.
pub fn sign_in_place(bytes: &mut [u8], signing_key: &SigningKey) {
    if bytes.len() < HEADER_LEN {
        return;
    }
    let signature = signing_key.sign(&signed_message(bytes));
    bytes[SIGNATURE_OFFSET..SIGNATURE_OFFSET + SIGNATURE_LEN]
        .copy_from_slice(&signature.to_bytes());
}

/// A fresh signing key from the operating system's random source.
///
/// Errors: [`PackError::Random`].
pub fn generate_signing_key() -> Result<SigningKey, PackError> {
    let mut seed = [0u8; SIGNING_KEY_LEN];
    getrandom::fill(&mut seed).map_err(PackError::Random)?;
    let key = SigningKey::from_bytes(&seed);
    seed.fill(0);
    Ok(key)
}

/// The signing key for a 32-byte seed (deterministic; for tests and stored keys).
pub fn signing_key_from_seed(seed: &[u8; SIGNING_KEY_LEN]) -> SigningKey {
    SigningKey::from_bytes(seed)
}

/// The 32-byte verifying key to build into the kernel for `signing_key`.
pub fn verifying_key_bytes(signing_key: &SigningKey) -> [u8; VERIFYING_KEY_LEN] {
    signing_key.verifying_key().to_bytes()
}

/// Lowercase hex of a 32-byte key (for key files and generated kernel constants).
pub fn key_to_hex(key: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(64);
    for byte in key {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    text
}

/// Parses 64 hex digits (surrounding whitespace ignored) into a 32-byte key.
///
/// Errors: [`PackError::BadHexKey`].
pub fn key_from_hex(text: &str) -> Result<[u8; 32], PackError> {
    let digits = text.trim().as_bytes();
    if digits.len() != 64 {
        return Err(PackError::BadHexKey);
    }
    let nibble = |digit: u8| {
        char::from(digit)
            .to_digit(16)
            .map(|value| value as u8)
            .ok_or(PackError::BadHexKey)
    };
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::{Container, ContainerError, Policy, open};

    fn manifest() -> Manifest {
        Manifest {
            name: "demo".into(),
            version: "0.1.0".into(),
            entry: "demo_init".into(),
            events: vec!["mm.Reclaim".into()],
            domains: vec!["mm".into()],
            budget_microseconds: 100,
            memory_quota_bytes: 65536,
        }
    }

    #[test]
    fn packed_files_open() {
        let key = signing_key_from_seed(&[7; 32]);
        let bytes = pack(Kind::Wasm, 42, &manifest(), b"\0asm\x01\0\0\0", Some(&key)).unwrap();
        let policy = Policy {
            verifying_key: verifying_key_bytes(&key),
            abi_fingerprint: 42,
            allow_unsigned_wasm: false,
        };
        let extension = open(&bytes, &policy).unwrap();
        assert_eq!(extension.manifest(), &manifest());
        assert_eq!(extension.payload(), b"\0asm\x01\0\0\0");
        assert!(extension.is_signed());
    }

    #[test]
    fn invalid_manifests_do_not_pack() {
        let mut bad = manifest();
        bad.name = "Not Valid".into();
        assert!(matches!(
            pack(Kind::Wasm, 0, &bad, b"", None),
            Err(PackError::Manifest(_))
        ));
        let long = vec![b'#'; MAX_MANIFEST_LEN + 1];
        assert!(matches!(
            pack_manifest_bytes(Kind::Wasm, 0, &long, b"", None),
            Err(PackError::ManifestTooLong { length }) if length == MAX_MANIFEST_LEN + 1
        ));
    }

    #[test]
    fn unsigned_packs_have_a_zero_signature() {
        let bytes = pack(Kind::Native, 1, &manifest(), b"x", None).unwrap();
        let container = Container::parse(&bytes).unwrap();
        assert!(!container.is_signed());
        assert_eq!(
            container.verify_signature(&[1; 32]),
            Err(ContainerError::Unsigned)
        );
    }

    #[test]
    fn generated_keys_differ_and_hex_round_trips() {
        let first = generate_signing_key().unwrap();
        let second = generate_signing_key().unwrap();
        assert_ne!(first.to_bytes(), second.to_bytes());
        let public = verifying_key_bytes(&first);
        assert_eq!(key_from_hex(&key_to_hex(&public)).unwrap(), public);
        assert_eq!(key_to_hex(&[0xab; 32]), "ab".repeat(32));
        assert!(matches!(key_from_hex("abc"), Err(PackError::BadHexKey)));
        assert!(matches!(
            key_from_hex(&"zz".repeat(32)),
            Err(PackError::BadHexKey)
        ));
    }
}
