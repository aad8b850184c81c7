//! The `.kext` container: header, manifest and payload, with an Ed25519 signature.
//!
//! Layout (all integers little-endian; byte offsets from the start of the file):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `SPNDLKXT` |
//! | 8 | 2 | format version ([`FORMAT_VERSION`]) |
//! | 10 | 1 | kind: 1 = native ELF, 2 = Wasm |
//! | 11 | 5 | reserved, zero |
//! | 16 | 8 | ABI fingerprint the extension was built against |
//! | 24 | 4 | manifest length `M` (at most [`MAX_MANIFEST_LEN`]) |
//! | 28 | 4 | reserved, zero |
//! | 32 | 8 | payload length `P` |
//! | 40 | 24 | reserved, zero |
//! | 64 | 64 | Ed25519 signature (all zeros: unsigned, accepted only for Wasm) |
//! | 128 | `M` | manifest (UTF-8 text, see [`crate::manifest`]) |
//! | 128+`M` | 0..8 | zero padding, so the payload starts 8-byte aligned |
//! | [`payload_offset`]`(M)` | `P` | payload (ELF shared object or Wasm module); ends the file |
//!
//! The signature is pure Ed25519 (RFC 8032), checked with `verify_strict`, over the
//! 80-byte message [`SIGNATURE_CONTEXT`] ‖ SHA-512(bytes 0..64 ‖ bytes 128..end): every
//! byte of the file except the signature field, hashed first so that verification needs
//! neither a copy of the file nor an allocation.

use core::fmt;

use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha512};

use crate::manifest::{Manifest, ManifestError};

/// The first eight bytes of every `.kext`.
pub const MAGIC: [u8; 8] = *b"SPNDLKXT";
/// The container format version this crate reads and writes.
pub const FORMAT_VERSION: u16 = 1;
/// Size of the fixed header, in bytes.
pub const HEADER_LEN: usize = 128;
/// Largest manifest accepted, in bytes.
pub const MAX_MANIFEST_LEN: usize = 4096;
/// Alignment of the payload within the file.
pub const PAYLOAD_ALIGNMENT: usize = 8;
/// Size of an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;
/// Size of an Ed25519 verifying (public) key.
pub const VERIFYING_KEY_LEN: usize = 32;
/// Domain-separation prefix of the signed message, so a signing key used for `.kext`
/// files cannot be tricked into signing something that verifies as anything else.
pub const SIGNATURE_CONTEXT: [u8; 16] = *b"spindle-kext-v1\0";

/// Offset of the format version (`u16`) in the header.
pub const VERSION_OFFSET: usize = 8;
/// Offset of the kind byte in the header.
pub const KIND_OFFSET: usize = 10;
/// Offset of the ABI fingerprint (`u64`) in the header.
pub const ABI_OFFSET: usize = 16;
/// Offset of the manifest length (`u32`) in the header.
pub const MANIFEST_LEN_OFFSET: usize = 24;
/// Offset of the payload length (`u64`) in the header.
pub const PAYLOAD_LEN_OFFSET: usize = 32;
// Reserved header bytes, zero in version 1 so later versions can give them meaning.
const RESERVED_AFTER_KIND: core::ops::Range<usize> = 11..16;
const RESERVED_AFTER_MANIFEST_LEN: core::ops::Range<usize> = 28..32;
const RESERVED_BEFORE_SIGNATURE: core::ops::Range<usize> = 40..64;
/// Offset of the signature field; it is the last field of the header.
pub const SIGNATURE_OFFSET: usize = 64;

/// What the payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A RISC-V ELF shared object, run natively in the kernel; must be signed.
    Native,
    /// A WebAssembly module, run under `wasmi`; may be unsigned.
    Wasm,
}

impl Kind {
    /// The header byte for this kind.
    pub const fn to_byte(self) -> u8 {
        match self {
            Kind::Native => 1,
            Kind::Wasm => 2,
        }
    }

    /// The kind a header byte names, if any.
    pub const fn from_byte(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::Native),
            2 => Some(Kind::Wasm),
            _ => None,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Kind::Native => "native",
            Kind::Wasm => "wasm",
        })
    }
}

/// Why a `.kext` was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainerError {
    /// The file ends before `what` does.
    Truncated {
        /// The part that is cut short.
        what: &'static str,
    },
    /// The first eight bytes are not [`MAGIC`].
    BadMagic,
    /// A format version this loader does not read.
    UnsupportedVersion {
        /// The version in the header.
        found: u16,
    },
    /// The kind byte names no [`Kind`].
    UnknownKind {
        /// The byte.
        found: u8,
    },
    /// A reserved header field or the padding is not zero.
    ReservedNotZero {
        /// Which one.
        what: &'static str,
    },
    /// The manifest is longer than [`MAX_MANIFEST_LEN`].
    ManifestTooLong {
        /// Its declared length.
        length: u64,
    },
    /// Bytes follow the payload.
    TrailingBytes {
        /// How many.
        count: u64,
    },
    /// The signature field is all zeros but a signature is required.
    Unsigned,
    /// The verifying key passed in is not a valid Ed25519 point.
    BadVerifyingKey,
    /// The signature does not verify under the key (tampered file, wrong key, or a
    /// malleable/small-order signature refused by strict verification).
    BadSignature,
    /// The extension was built against another ABI.
    AbiMismatch {
        /// The kernel's ABI fingerprint.
        expected: u64,
        /// The one in the header.
        found: u64,
    },
    /// The container holds a different kind of payload than the caller asked for.
    WrongKind {
        /// The kind the caller wanted.
        expected: Kind,
        /// The kind in the header.
        found: Kind,
    },
    /// The manifest is invalid.
    Manifest(ManifestError),
}

impl fmt::Display for ContainerError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContainerError::Truncated { what } => write!(formatter, "kext truncated in the {what}"),
            ContainerError::BadMagic => write!(formatter, "not a kext (bad magic)"),
            ContainerError::UnsupportedVersion { found } => {
                write!(
                    formatter,
                    "kext format version {found} is not supported (want {FORMAT_VERSION})"
                )
            }
            ContainerError::UnknownKind { found } => write!(formatter, "unknown kext kind {found}"),
            ContainerError::ReservedNotZero { what } => {
                write!(formatter, "kext {what} is not zero")
            }
            ContainerError::ManifestTooLong { length } => {
                write!(
                    formatter,
                    "kext manifest is {length} bytes, at most {MAX_MANIFEST_LEN} allowed"
                )
            }
            ContainerError::TrailingBytes { count } => {
                write!(formatter, "{count} bytes follow the kext payload")
            }
            ContainerError::Unsigned => write!(formatter, "kext is unsigned"),
            ContainerError::BadVerifyingKey => {
                write!(formatter, "the verifying key is not a valid Ed25519 key")
            }
            ContainerError::BadSignature => write!(formatter, "kext signature does not verify"),
            ContainerError::AbiMismatch { expected, found } => write!(
                formatter,
                "kext built for ABI {found:#018x}, kernel has {expected:#018x}"
            ),
            ContainerError::WrongKind { expected, found } => {
                write!(
                    formatter,
                    "kext holds a {found} payload, expected {expected}"
                )
            }
            ContainerError::Manifest(error) => write!(formatter, "{error}"),
        }
    }
}

impl core::error::Error for ContainerError {}

impl From<ManifestError> for ContainerError {
    fn from(error: ManifestError) -> ContainerError {
        ContainerError::Manifest(error)
    }
}

/// Where the payload starts for a manifest of `manifest_len` bytes.
pub const fn payload_offset(manifest_len: usize) -> usize {
    (HEADER_LEN + manifest_len).next_multiple_of(PAYLOAD_ALIGNMENT)
}

/// A structurally valid `.kext`, not yet verified: borrowed views of its parts.
#[derive(Clone, Copy, Debug)]
pub struct Container<'a> {
    bytes: &'a [u8],
    kind: Kind,
    abi_fingerprint: u64,
    manifest: &'a [u8],
    payload: &'a [u8],
    signature: [u8; SIGNATURE_LEN],
}

impl<'a> Container<'a> {
    /// Checks the layout: magic, version, kind, reserved fields, lengths, padding, no
    /// trailing bytes. Does not verify the signature nor parse the manifest.
    ///
    /// Errors: [`ContainerError::Truncated`] (header, manifest, padding or payload),
    /// [`ContainerError::BadMagic`], [`ContainerError::UnsupportedVersion`],
    /// [`ContainerError::UnknownKind`], [`ContainerError::ReservedNotZero`],
    /// [`ContainerError::ManifestTooLong`], [`ContainerError::TrailingBytes`].
    pub fn parse(bytes: &'a [u8]) -> Result<Container<'a>, ContainerError> {
        let header = bytes
            .get(..HEADER_LEN)
            .ok_or(ContainerError::Truncated { what: "header" })?;
        if header[..MAGIC.len()] != MAGIC {
            return Err(ContainerError::BadMagic);
        }
        let version = u16::from_le_bytes([header[VERSION_OFFSET], header[VERSION_OFFSET + 1]]);
        if version != FORMAT_VERSION {
            return Err(ContainerError::UnsupportedVersion { found: version });
        }
        let kind_byte = header[KIND_OFFSET];
        let kind =
            Kind::from_byte(kind_byte).ok_or(ContainerError::UnknownKind { found: kind_byte })?;
        let reserved_fields = [
            RESERVED_AFTER_KIND,
            RESERVED_AFTER_MANIFEST_LEN,
            RESERVED_BEFORE_SIGNATURE,
        ];
        if reserved_fields
            .into_iter()
            .any(|range| header[range].iter().any(|byte| *byte != 0))
        {
            return Err(ContainerError::ReservedNotZero {
                what: "reserved header field",
            });
        }
        let abi_fingerprint = read_u64(header, ABI_OFFSET);
        let manifest_len = u64::from(read_u32(header, MANIFEST_LEN_OFFSET));
        let payload_len = read_u64(header, PAYLOAD_LEN_OFFSET);
        let mut signature = [0; SIGNATURE_LEN];
        signature.copy_from_slice(&header[SIGNATURE_OFFSET..SIGNATURE_OFFSET + SIGNATURE_LEN]);

        if manifest_len > MAX_MANIFEST_LEN as u64 {
            return Err(ContainerError::ManifestTooLong {
                length: manifest_len,
            });
        }
        let manifest_len = manifest_len as usize; // at most MAX_MANIFEST_LEN
        let manifest_end = HEADER_LEN + manifest_len;
        let manifest = bytes
            .get(HEADER_LEN..manifest_end)
            .ok_or(ContainerError::Truncated { what: "manifest" })?;
        let payload_start = payload_offset(manifest_len);
        let padding = bytes
            .get(manifest_end..payload_start)
            .ok_or(ContainerError::Truncated { what: "padding" })?;
        if padding.iter().any(|byte| *byte != 0) {
            return Err(ContainerError::ReservedNotZero { what: "padding" });
        }
        let available = (bytes.len() - payload_start) as u64;
        if payload_len > available {
            return Err(ContainerError::Truncated { what: "payload" });
        }
        if payload_len < available {
            return Err(ContainerError::TrailingBytes {
                count: available - payload_len,
            });
        }
        Ok(Container {
            bytes,
            kind,
            abi_fingerprint,
            manifest,
            payload: &bytes[payload_start..],
            signature,
        })
    }

    /// The payload's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The ABI fingerprint from the header.
    pub fn abi_fingerprint(&self) -> u64 {
        self.abi_fingerprint
    }

    /// The raw manifest bytes (unparsed).
    pub fn manifest_bytes(&self) -> &'a [u8] {
        self.manifest
    }

    /// The payload (ELF or Wasm), unverified.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// Whether the signature field holds anything (all zeros means unsigned).
    pub fn is_signed(&self) -> bool {
        self.signature.iter().any(|byte| *byte != 0)
    }

    /// Checks the signature against `verifying_key`.
    ///
    /// Errors: [`ContainerError::Unsigned`] if the field is all zeros,
    /// [`ContainerError::BadVerifyingKey`], [`ContainerError::BadSignature`].
    pub fn verify_signature(
        &self,
        verifying_key: &[u8; VERIFYING_KEY_LEN],
    ) -> Result<(), ContainerError> {
        if !self.is_signed() {
            return Err(ContainerError::Unsigned);
        }
        let key =
            VerifyingKey::from_bytes(verifying_key).map_err(|_| ContainerError::BadVerifyingKey)?;
        let signature = Signature::from_bytes(&self.signature);
        key.verify_strict(&signed_message(self.bytes), &signature)
            .map_err(|_| ContainerError::BadSignature)
    }

    /// Checks the header's ABI fingerprint against the kernel's.
    ///
    /// Errors: [`ContainerError::AbiMismatch`].
    pub fn check_abi(&self, expected: u64) -> Result<(), ContainerError> {
        if self.abi_fingerprint == expected {
            Ok(())
        } else {
            Err(ContainerError::AbiMismatch {
                expected,
                found: self.abi_fingerprint,
            })
        }
    }

    /// Parses the manifest.
    ///
    /// Errors: [`ContainerError::Manifest`].
    pub fn manifest(&self) -> Result<Manifest, ContainerError> {
        Ok(Manifest::parse_bytes(self.manifest)?)
    }
}

/// What the kernel requires of an extension before it loads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The trusted builder's Ed25519 verifying key.
    pub verifying_key: [u8; VERIFYING_KEY_LEN],
    /// The kernel's ABI fingerprint (the name server's `abi_fingerprint()`).
    pub abi_fingerprint: u64,
    /// Whether an unsigned Wasm payload is acceptable (the sandbox contains it).
    /// Native payloads always need a valid signature.
    pub allow_unsigned_wasm: bool,
}

/// A `.kext` that passed every check of [`open`]. Only [`open`] makes one, so code that
/// holds a `VerifiedExtension` knows the signature was checked before any byte of the
/// payload is interpreted.
#[derive(Clone, Debug)]
pub struct VerifiedExtension<'a> {
    kind: Kind,
    signed: bool,
    manifest: Manifest,
    payload: &'a [u8],
}

impl<'a> VerifiedExtension<'a> {
    /// The payload's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Whether the container carried a (valid) signature; false only for unsigned Wasm.
    pub fn is_signed(&self) -> bool {
        self.signed
    }

    /// The parsed manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The payload: an ELF shared object for [`Kind::Native`], a Wasm module otherwise.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The payload, if it is of `kind`.
    ///
    /// Errors: [`ContainerError::WrongKind`].
    pub fn payload_of_kind(&self, kind: Kind) -> Result<&'a [u8], ContainerError> {
        if self.kind == kind {
            Ok(self.payload)
        } else {
            Err(ContainerError::WrongKind {
                expected: kind,
                found: self.kind,
            })
        }
    }
}

/// The kernel's one call: parse the layout, verify the signature (required for native,
/// optional for Wasm per [`Policy::allow_unsigned_wasm`]; a Wasm file that *is* signed must
/// verify), check the ABI fingerprint, then parse the manifest — in that order, so nothing
/// an unauthenticated file says is interpreted beyond its layout.
///
/// Errors: those of [`Container::parse`], [`Container::verify_signature`] (native, or
/// signed Wasm, or unsigned Wasm when not allowed: [`ContainerError::Unsigned`]),
/// [`Container::check_abi`] and [`Container::manifest`].
pub fn open<'a>(bytes: &'a [u8], policy: &Policy) -> Result<VerifiedExtension<'a>, ContainerError> {
    let container = Container::parse(bytes)?;
    let unsigned_allowed = container.kind == Kind::Wasm && policy.allow_unsigned_wasm;
    let signed = container.is_signed();
    if signed || !unsigned_allowed {
        container.verify_signature(&policy.verifying_key)?;
    }
    container.check_abi(policy.abi_fingerprint)?;
    let manifest = container.manifest()?;
    Ok(VerifiedExtension {
        kind: container.kind,
        signed,
        manifest,
        payload: container.payload,
    })
}

/// The message the signature covers for a file whose header is complete: the context
/// prefix, then SHA-512 of every byte except the signature field. Shared with the packer.
///
/// `bytes` must be at least [`HEADER_LEN`] long (callers parse the header first).
/// SHA-256 of a whole artifact (a `.kext` file or a user-level program), as `ext show`
/// reports it: the same digest `sha256sum` prints on the host for the same file.
pub fn artifact_digest(bytes: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(bytes).into()
}

pub(crate) fn signed_message(bytes: &[u8]) -> [u8; SIGNATURE_CONTEXT.len() + 64] {
    let mut hasher = Sha512::new();
    hasher.update(&bytes[..SIGNATURE_OFFSET]);
    hasher.update(&bytes[SIGNATURE_OFFSET + SIGNATURE_LEN..]);
    let digest = hasher.finalize();
    let mut message = [0; SIGNATURE_CONTEXT.len() + 64];
    message[..SIGNATURE_CONTEXT.len()].copy_from_slice(&SIGNATURE_CONTEXT);
    message[SIGNATURE_CONTEXT.len()..].copy_from_slice(&digest);
    message
}

fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    let mut field = [0; 4];
    field.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_le_bytes(field)
}

fn read_u64(bytes: &[u8], offset: usize) -> u64 {
    let mut field = [0; 8];
    field.copy_from_slice(&bytes[offset..offset + 8]);
    u64::from_le_bytes(field)
}

#[cfg(test)]
mod digest_tests {
    #[test]
    fn artifact_digest_is_sha256() {
        // FIPS 180-2's example "abc".
        let digest = super::artifact_digest(b"abc");
        assert_eq!(digest[..4], [0xba, 0x78, 0x16, 0xbf]);
        assert_eq!(digest[28..], [0xf2, 0x00, 0x15, 0xad]);
    }
}
