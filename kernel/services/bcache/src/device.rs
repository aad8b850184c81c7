//! A blocking cache over a block device: [`CachedDevice`] drives the [`Cache`] state
//! machine synchronously — every read or write the cache asks for is done at once on the
//! device. Host tests use it, and so can simple kernel callers that may block.

use core::fmt;

use alloc::vec::Vec;

use crate::cache::{Cache, CacheError, Config, ConfigError, Invalidated, Lookup, Owner, PrefetchOutcome, Run, Slot, WriteOutcome};
use crate::policy::{Policy, WritebackReason};
use crate::{BLOCK_SIZE, FileId};

/// A device of 4 KiB blocks.
pub trait BlockDevice {
    /// The device's error.
    type Error;

    /// Reads `block` into `buf`.
    fn read(&mut self, block: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), Self::Error>;

    /// Writes `buf` to `block`.
    fn write(&mut self, block: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), Self::Error>;

    /// Makes every completed write durable.
    fn flush(&mut self) -> Result<(), Self::Error>;

    /// Most consecutive blocks [`BlockDevice::write_run`] takes in one call; 1 (the
    /// default) means write-back writes block by block.
    fn max_run_blocks(&self) -> usize {
        1
    }

    /// Reads consecutive blocks from `start` into `buf` (`buf.len()` is a whole number of
    /// blocks, at most [`BlockDevice::max_run_blocks`]) in one request. The default reads
    /// them one by one.
    fn read_run(&mut self, start: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        for (offset, chunk) in buf.chunks_exact_mut(BLOCK_SIZE).enumerate() {
            let mut block = [0u8; BLOCK_SIZE];
            self.read(start + offset as u64, &mut block)?;
            chunk.copy_from_slice(&block);
        }
        Ok(())
    }

    /// Writes `blocks` (at most [`BlockDevice::max_run_blocks`]) to consecutive blocks
    /// from `start` in one request: for a device where each request costs much (a disk:
    /// the controller's overhead, the platter's rotation). On an error none of them counts
    /// as written. The default writes them one by one.
    fn write_run(&mut self, start: u64, blocks: &[&[u8; BLOCK_SIZE]]) -> Result<(), Self::Error> {
        for (offset, block) in blocks.iter().enumerate() {
            self.write(start + offset as u64, block)?;
        }
        Ok(())
    }
}

/// Why a [`CachedDevice`] call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachedError<E> {
    /// The cache refused (e.g. every buffer is pinned).
    Cache(CacheError),
    /// The device failed (a failed write leaves its block dirty in the cache).
    Device(E),
}

impl<E> From<CacheError> for CachedError<E> {
    fn from(error: CacheError) -> Self {
        CachedError::Cache(error)
    }
}

impl<E: fmt::Display> fmt::Display for CachedError<E> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CachedError::Cache(error) => write!(formatter, "buffer cache: {error}"),
            CachedError::Device(error) => write!(formatter, "block device: {error}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for CachedError<E> {}

/// A block device `D` behind a [`Cache`] whose decisions are made by `P`.
pub struct CachedDevice<D, P> {
    device: D,
    cache: Cache,
    policy: P,
}

impl<D: BlockDevice, P: Policy> CachedDevice<D, P> {
    /// `device` behind a new cache configured by `config`, decisions by `policy`.
    ///
    /// Errors: [`ConfigError`].
    pub fn new(device: D, config: Config, policy: P) -> Result<Self, ConfigError> {
        Ok(CachedDevice::with_cache(device, Cache::new(config)?, policy))
    }

    /// `device` behind `cache` (one built with [`Cache::with_buffers`]), decisions by `policy`.
    pub fn with_cache(device: D, cache: Cache, policy: P) -> Self {
        CachedDevice { device, cache, policy }
    }

    /// [`Cache::give_back`]: up to `wanted` clean or free buffers, keeping `floor`.
    pub fn give_back(&mut self, wanted: usize, floor: usize) -> alloc::vec::Vec<crate::Buffer> {
        self.cache.give_back(wanted, floor)
    }

    /// [`Cache::take_back`]: a buffer for a retired slot (`Err`: none is retired).
    pub fn take_back(&mut self, buffer: crate::Buffer) -> Result<(), crate::Buffer> {
        self.cache.take_back(buffer)
    }

    /// The cache (exported state, counters).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The device, to change it (tests inject faults this way).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// The policy.
    pub fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }

    /// The device and the policy back (dirty data not yet written is dropped: sync first).
    pub fn into_parts(self) -> (D, P) {
        (self.device, self.policy)
    }

    /// The most rounds a single call may need: every dirty victim written once, then a read.
    fn rounds(&self) -> usize {
        self.cache.capacity() + 2
    }

    /// Writes the dirty victim in `slot` to `block`.
    fn write_victim(&mut self, slot: Slot, block: u64) -> Result<(), CachedError<D::Error>> {
        let result = self.device.write(block, self.cache.data(slot)?);
        match result {
            Ok(()) => Ok(self.cache.complete_write(slot, Ok::<(), ()>(()))?),
            Err(error) => {
                self.cache.complete_write(slot, Err(()))?;
                Err(CachedError::Device(error))
            }
        }
    }

    /// Reads `block` from the device into the reading buffer `slot`.
    fn fill(&mut self, slot: Slot, block: u64) -> Result<(), CachedError<D::Error>> {
        let result = self.device.read(block, self.cache.read_buffer(slot)?);
        match result {
            Ok(()) => Ok(self.cache.complete_read(slot, Ok::<(), ()>(()))?),
            Err(error) => {
                self.cache.complete_read(slot, Err(()))?;
                Err(CachedError::Device(error))
            }
        }
    }

    /// Copies `buf.len()` bytes at `offset` of `block` (owned by `owner`) into `buf`.
    ///
    /// Errors: [`CacheError::BadRange`], [`CacheError::NoBuffer`], a device error.
    pub fn read(&mut self, block: u64, owner: Owner, offset: usize, buf: &mut [u8]) -> Result<(), CachedError<D::Error>> {
        let end =
            offset.checked_add(buf.len()).filter(|&end| end <= BLOCK_SIZE).ok_or(CacheError::BadRange { offset, length: buf.len() })?;
        for _ in 0..self.rounds() {
            match self.cache.get(block, owner, &mut self.policy)? {
                Lookup::Hit(slot) => {
                    buf.copy_from_slice(&self.cache.data(slot)?[offset..end]);
                    return Ok(());
                }
                Lookup::Read(slot) => {
                    self.fill(slot, block)?;
                    buf.copy_from_slice(&self.cache.data(slot)?[offset..end]);
                    return Ok(());
                }
                Lookup::WriteBackFirst { slot, block: victim } => self.write_victim(slot, victim)?,
                Lookup::InFlight => return Err(CacheError::InFlight { block }.into()),
            }
        }
        Err(CacheError::NoBuffer.into())
    }

    /// Writes `data` at `offset` of `block` (owned by `owner`) into the cache; under
    /// pressure, runs one pressure write-back round (whose write errors are counted and
    /// leave the blocks dirty; the write itself has succeeded).
    ///
    /// Errors: [`CacheError::BadRange`], [`CacheError::NoBuffer`], a device error (reading
    /// the block first, or writing a dirty victim).
    pub fn write(&mut self, block: u64, owner: Owner, offset: usize, data: &[u8]) -> Result<(), CachedError<D::Error>> {
        for _ in 0..self.rounds() {
            match self.cache.write(block, owner, offset, data, &mut self.policy)? {
                WriteOutcome::Written { pressure, .. } => {
                    if pressure {
                        let _ = self.writeback(WritebackReason::Pressure);
                    }
                    return Ok(());
                }
                WriteOutcome::Read(slot) => self.fill(slot, block)?,
                WriteOutcome::WriteBackFirst { slot, block: victim } => self.write_victim(slot, victim)?,
                WriteOutcome::InFlight => return Err(CacheError::InFlight { block }.into()),
            }
        }
        Err(CacheError::NoBuffer.into())
    }

    /// Prefetches `block`: reads it now unless it is resident or no clean buffer is to be
    /// had. Returns whether a read was done.
    ///
    /// Errors: a device error (the block is then not cached).
    pub fn prefetch(&mut self, block: u64, owner: Owner) -> Result<bool, CachedError<D::Error>> {
        match self.cache.prefetch(block, owner, &mut self.policy) {
            PrefetchOutcome::Read(slot) => self.fill(slot, block).map(|()| true),
            PrefetchOutcome::Resident | PrefetchOutcome::Skipped => Ok(false),
        }
    }

    /// Prefetches `blocks` (device block and owner each): the ones neither resident nor
    /// refused by the cache are read, consecutive device blocks together in requests of up
    /// to [`BlockDevice::max_run_blocks`] (a clustered read-ahead reaches the disk as one
    /// request per cluster, not one per block). Returns how many blocks were read.
    ///
    /// Errors: the first device error (those blocks are not cached; later runs were tried).
    pub fn prefetch_blocks(&mut self, blocks: &[(u64, Owner)]) -> Result<usize, CachedError<D::Error>> {
        let most = self.device.max_run_blocks().max(1);
        let mut reserved: Vec<(u64, Slot)> = Vec::new();
        for &(block, owner) in blocks {
            if let PrefetchOutcome::Read(slot) = self.cache.prefetch(block, owner, &mut self.policy) {
                reserved.push((block, slot));
            }
        }
        let mut first_error = None;
        let mut read = 0;
        let mut index = 0;
        while index < reserved.len() {
            let start = reserved[index].0;
            let mut end = index + 1;
            while end < reserved.len() && end - index < most && reserved[end].0 == start + (end - index) as u64 {
                end += 1;
            }
            let run = &reserved[index..end];
            let mut bytes = alloc::vec![0u8; run.len() * BLOCK_SIZE];
            let result = if run.len() == 1 {
                let mut block = [0u8; BLOCK_SIZE];
                let result = self.device.read(start, &mut block);
                bytes.copy_from_slice(&block);
                result
            } else {
                self.device.read_run(start, &mut bytes)
            };
            for (offset, &(_, slot)) in run.iter().enumerate() {
                if result.is_ok() {
                    self.cache.read_buffer(slot)?.copy_from_slice(&bytes[offset * BLOCK_SIZE..(offset + 1) * BLOCK_SIZE]);
                    self.cache.complete_read(slot, Ok::<(), ()>(()))?;
                    read += 1;
                } else {
                    self.cache.complete_read(slot, Err(()))?;
                }
            }
            if let Err(error) = result {
                first_error.get_or_insert(error);
            }
            index = end;
        }
        match first_error {
            None => Ok(read),
            Some(error) => Err(CachedError::Device(error)),
        }
    }

    /// Reads `buf.len()` bytes at `offset` of block `file_block` of `file` (a file of
    /// `file_blocks` blocks, block `file_block` at device block `map(file_block)`), then
    /// runs read-ahead: the blocks `cache.ReadAhead` chooses are prefetched (those `map`
    /// does not place are skipped). Returns how many prefetch reads were done.
    ///
    /// Errors: [`CacheError::NotResident`] if `map` does not place `file_block`, as
    /// [`CachedDevice::read`]; prefetch errors are ignored (the blocks are not cached).
    pub fn read_file(
        &mut self,
        file: FileId,
        file_block: u64,
        file_blocks: u64,
        mut map: impl FnMut(u64) -> Option<u64>,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<u32, CachedError<D::Error>> {
        let block = map(file_block).ok_or(CacheError::NotResident { block: file_block })?;
        self.read(block, Owner::of(file, file_block), offset, buf)?;
        let plan = self.cache.read_ahead(file, file_block, file_blocks, &mut self.policy);
        let mut done = 0;
        for ahead in plan.first..plan.first + u64::from(plan.count) {
            if let Some(block) = map(ahead)
                && let Ok(true) = self.prefetch(block, Owner::of(file, ahead))
            {
                done += 1;
            }
        }
        Ok(done)
    }

    /// The read-ahead decision after a read of `file_block` of `file` (of `file_blocks`
    /// blocks), by this device's policy (`cache.ReadAhead`): which file blocks to
    /// prefetch. For callers that map file blocks to device blocks only after deciding
    /// (a file system holding the map), then call [`CachedDevice::prefetch`] per block.
    pub fn read_ahead(&mut self, file: FileId, file_block: u64, file_blocks: u64) -> crate::Prefetch {
        self.cache.read_ahead(file, file_block, file_blocks, &mut self.policy)
    }

    /// The first half of [`CachedDevice::read_ahead`] ([`Cache::read_ahead_event`]): the
    /// detector's update and the event to decide.
    pub fn read_ahead_event(&mut self, file: FileId, file_block: u64, file_blocks: u64) -> crate::ReadAheadEvent {
        self.cache.read_ahead_event(file, file_block, file_blocks)
    }

    /// The second half ([`Cache::decide_read_ahead`]): this device's policy decides; the
    /// default's cluster from `first` is `cluster` blocks long (a caller that knows the
    /// layout counts the blocks lying one after the other on the disk).
    pub fn decide_read_ahead(&mut self, event: &crate::ReadAheadEvent, cluster: u32) -> crate::Prefetch {
        self.cache.decide_read_ahead(event, &mut self.policy, |_| cluster)
    }

    /// Writes runs taken from the cache; returns the first device error after trying all.
    fn write_runs(&mut self, runs: &[Run]) -> Result<usize, CachedError<D::Error>> {
        let mut first_error = None;
        let mut written = 0;
        let most = self.device.max_run_blocks().max(1);
        let pieces = runs.iter().flat_map(|run| run.slots.chunks(most).enumerate().map(move |(index, slots)| (run.start + (index * most) as u64, slots)));
        for (start, slots) in pieces {
            let result = if let [slot] = slots {
                self.device.write(start, self.cache.data(*slot)?)
            } else {
                let mut blocks = Vec::with_capacity(slots.len());
                for &slot in slots {
                    blocks.push(self.cache.data(slot)?);
                }
                self.device.write_run(start, &blocks)
            };
            let failed = result.is_err();
            for &slot in slots {
                if failed {
                    self.cache.complete_write(slot, Err(()))?;
                } else {
                    self.cache.complete_write(slot, Ok::<(), ()>(()))?;
                    written += 1;
                }
            }
            if let Err(error) = result {
                first_error.get_or_insert(error);
            }
        }
        match first_error {
            None => Ok(written),
            Some(error) => Err(CachedError::Device(error)),
        }
    }

    /// One `cache.Writeback` round for `reason` (a sync round walks every dirty block in
    /// batches). Returns how many blocks were written.
    ///
    /// Errors: the first device error (those blocks stay dirty; the rest were tried).
    pub fn writeback(&mut self, reason: WritebackReason) -> Result<usize, CachedError<D::Error>> {
        let mut from = 0;
        let mut written = 0;
        let mut first_error = None;
        loop {
            let batch = self.cache.take_writeback(reason, from, &mut self.policy);
            match self.write_runs(&batch.runs) {
                Ok(count) => written += count,
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
            match (reason, batch.next) {
                (WritebackReason::Sync, Some(next)) => from = next,
                _ => break,
            }
        }
        match first_error {
            None => Ok(written),
            Some(error) => Err(error),
        }
    }

    /// The durability barrier: writes every dirty block (ascending, in runs) and flushes
    /// the device.
    ///
    /// Errors: the first device error (failed blocks stay dirty; the flush is not done).
    pub fn sync(&mut self) -> Result<(), CachedError<D::Error>> {
        let runs = self.cache.take_all_dirty();
        self.write_runs(&runs)?;
        self.device.flush().map_err(CachedError::Device)
    }

    /// Pins `block` (see [`Cache::pin`]).
    ///
    /// Errors: [`CacheError::NotResident`], [`CacheError::InFlight`].
    pub fn pin(&mut self, block: u64) -> Result<Slot, CacheError> {
        self.cache.pin(block)
    }

    /// Releases a pin (see [`Cache::unpin`]).
    ///
    /// Errors: [`CacheError::BadSlot`], [`CacheError::WrongState`].
    pub fn unpin(&mut self, slot: Slot) -> Result<(), CacheError> {
        self.cache.unpin(slot)
    }

    /// See [`Cache::invalidate_file`].
    pub fn invalidate_file(&mut self, file: FileId, freed_from: u64) -> Invalidated {
        self.cache.invalidate_file(file, freed_from)
    }
}
