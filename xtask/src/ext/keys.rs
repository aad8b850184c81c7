//! The trusted builder's Ed25519 signing key: where it lives, and creating it on first use.
//!
//! The key is a 32-byte seed stored as 64 hex digits in `extension-signing.key`, in
//! `$SPINDLE_KEY_DIR` if set, else `$XDG_CONFIG_HOME/spindle/`, else
//! `~/.config/spindle/`. It is created with mode 0600 (its directory 0700) and a notice
//! the first time it is needed, and refused if it lies inside the repository (it must never
//! be committed) or is readable by group or others. The kernel trusts the matching
//! verifying key, which the kernel build bakes in (see [`verifying_key_hex`]).
//!
//! Limitations: no rotation or revocation; the hex text read from the file is not wiped
//! from memory (the `SigningKey` itself is, on drop).

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use spindle_loader::pack::{self, SigningKey};

use crate::Result;
use crate::kernel_build::workspace_root;

/// File name of the signing key inside the key directory.
pub const KEY_FILE_NAME: &str = "extension-signing.key";
/// Environment variable naming the key directory (overrides the default).
pub const KEY_DIRECTORY_VARIABLE: &str = "SPINDLE_KEY_DIR";
/// Permission bits of the key file: owner read/write only.
const KEY_FILE_MODE: u32 = 0o600;
/// Permission bits of a key directory the builder creates.
const KEY_DIRECTORY_MODE: u32 = 0o700;
/// Permission bits that must be clear on an existing key file (group and others).
const FOREIGN_ACCESS_BITS: u32 = 0o077;

/// Where the signing key lives (see the module documentation for the order).
///
/// Errors: none of the variables is set (no home directory).
pub fn key_path() -> Result<PathBuf> {
    let variable = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    if let Some(directory) = variable(KEY_DIRECTORY_VARIABLE) {
        // Relative to where xtask was started, made absolute so the repository check holds.
        let current = std::env::current_dir().map_err(|error| format!("cannot read the current directory: {error}"))?;
        return Ok(current.join(directory).join(KEY_FILE_NAME));
    }
    let config = variable("XDG_CONFIG_HOME")
        .filter(|path| path.is_absolute())
        .or_else(|| variable("HOME").map(|home| home.join(".config")))
        .ok_or_else(|| format!("cannot place the signing key: set ${KEY_DIRECTORY_VARIABLE}, $XDG_CONFIG_HOME or $HOME"))?;
    Ok(config.join("spindle").join(KEY_FILE_NAME))
}

/// The signing key, created on first use.
///
/// Errors: the key would be inside the repository, the file is readable by others, it
/// cannot be read, created or parsed.
pub fn signing_key() -> Result<SigningKey> {
    let path = key_path()?;
    refuse_inside_repository(&path)?;
    match fs::read_to_string(&path) {
        Ok(text) => {
            let mode = fs::metadata(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?.permissions().mode();
            if mode & FOREIGN_ACCESS_BITS != 0 {
                return Err(format!(
                    "the signing key {} is accessible to other users (mode {:o}); run `chmod 600 {}`",
                    path.display(),
                    mode & 0o777,
                    path.display()
                ));
            }
            let seed = pack::key_from_hex(&text).map_err(|error| format!("{}: {error}", path.display()))?;
            Ok(pack::signing_key_from_seed(&seed))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => create_signing_key(&path),
        Err(error) => Err(format!("cannot read the signing key {}: {error}", path.display())),
    }
}

/// The verifying key matching [`signing_key`] as 64 hex digits (creating the signing key
/// if needed), for the kernel build to bake in. Also writes it to
/// `target/spindle/verifying-key.hex` (only when it changed, so builds that depend on the
/// file are not redone needlessly).
///
/// Errors: those of [`signing_key`]; the file cannot be written.
pub fn verifying_key_hex() -> Result<String> {
    let hex = pack::key_to_hex(&pack::verifying_key_bytes(&signing_key()?));
    let path = verifying_key_file();
    super::write_if_changed(&path, hex.as_bytes())?;
    Ok(hex)
}

/// `target/spindle/verifying-key.hex`.
pub fn verifying_key_file() -> PathBuf {
    workspace_root().join("target/spindle/verifying-key.hex")
}

/// Refuses a key path inside the repository, where it could be committed or packaged.
fn refuse_inside_repository(path: &Path) -> Result<()> {
    // Compare the nearest existing ancestor, canonicalised (the key may not exist yet).
    let existing = path.ancestors().find(|ancestor| ancestor.exists()).unwrap_or(Path::new("/"));
    let resolved = existing.canonicalize().unwrap_or_else(|_| existing.to_path_buf());
    let repository = workspace_root().canonicalize().unwrap_or_else(|_| workspace_root());
    if resolved.starts_with(&repository) {
        return Err(format!(
            "the signing key path {} is inside the repository {}; set ${KEY_DIRECTORY_VARIABLE} to a directory outside it",
            path.display(),
            repository.display()
        ));
    }
    Ok(())
}

/// Generates a key and writes it, failing rather than overwriting an existing file.
fn create_signing_key(path: &Path) -> Result<SigningKey> {
    let directory = path.parent().ok_or_else(|| format!("{} has no directory", path.display()))?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(KEY_DIRECTORY_MODE)
        .create(directory)
        .map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
    let key = pack::generate_signing_key().map_err(|error| error.to_string())?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(KEY_FILE_MODE)
        .open(path)
        .map_err(|error| format!("cannot create the signing key {}: {error}", path.display()))?;
    writeln!(file, "{}", pack::key_to_hex(&key.to_bytes()))
        .and_then(|()| file.sync_all())
        .map_err(|error| format!("cannot write the signing key {}: {error}", path.display()))?;
    eprintln!(
        "xtask: created a new extension signing key {} (mode 600). Kernels trust only extensions signed with it; \
         keep it, and keep it out of the repository.",
        path.display()
    );
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_inside_the_repository_is_refused() {
        let inside = workspace_root().join("target/keys").join(KEY_FILE_NAME);
        let error = refuse_inside_repository(&inside).unwrap_err();
        assert!(error.contains("inside the repository"), "{error}");
        assert!(refuse_inside_repository(Path::new("/nonexistent-spindle-keys/extension-signing.key")).is_ok());
    }

    #[test]
    fn created_keys_are_private_and_read_back() {
        let directory = std::env::temp_dir().join(format!("spindle-key-test-{}", std::process::id()));
        let path = directory.join("nested").join(KEY_FILE_NAME);
        let created = create_signing_key(&path).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, KEY_FILE_MODE);
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(pack::signing_key_from_seed(&pack::key_from_hex(&text).unwrap()).to_bytes(), created.to_bytes());
        // Never overwritten.
        assert!(create_signing_key(&path).is_err());
        fs::remove_dir_all(&directory).unwrap();
    }
}
