//! A [`BlockStore`] in memory, for tests (the crate's and its users').

use alloc::vec;
use alloc::vec::Vec;

use crate::{BLOCK_BYTES, BlockStore, IoError, Usage};

/// A store of zeroed blocks in a `Vec`; counts writes and syncs.
#[derive(Clone, Debug)]
pub struct MemoryStore {
    bytes: Vec<u8>,
    /// Blocks written so far.
    pub writes: u64,
    /// Calls of `sync` so far.
    pub syncs: u64,
}

impl MemoryStore {
    /// A store of `blocks` zeroed blocks.
    pub fn new(blocks: usize) -> MemoryStore {
        MemoryStore { bytes: vec![0; blocks * BLOCK_BYTES], writes: 0, syncs: 0 }
    }

    /// The whole store's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The whole store's bytes, to corrupt them in tests.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    fn range(&self, block: u64) -> Result<core::ops::Range<usize>, IoError> {
        let start = usize::try_from(block).ok().and_then(|block| block.checked_mul(BLOCK_BYTES)).ok_or(IoError::OutOfRange { block })?;
        match start.checked_add(BLOCK_BYTES) {
            Some(end) if end <= self.bytes.len() => Ok(start..end),
            _ => Err(IoError::OutOfRange { block }),
        }
    }
}

impl BlockStore for MemoryStore {
    fn read(&mut self, block: u64, _usage: Usage, buf: &mut [u8; BLOCK_BYTES]) -> Result<(), IoError> {
        let range = self.range(block)?;
        buf.copy_from_slice(&self.bytes[range]);
        Ok(())
    }

    fn write(&mut self, block: u64, _usage: Usage, buf: &[u8; BLOCK_BYTES]) -> Result<(), IoError> {
        let range = self.range(block)?;
        self.bytes[range].copy_from_slice(buf);
        self.writes += 1;
        Ok(())
    }

    fn sync(&mut self) -> Result<(), IoError> {
        self.syncs += 1;
        Ok(())
    }
}
