//! `md5`: the stream graft of Small & Seltzer '96 (§3.2, §5.5): an MD5 fingerprint
//! (RFC 1321) of the data on the block read path.
//!
//! The block service raises `block.ReadFilter { request, offset, length }` for every block
//! (up to 4 KiB) of a read request, in order; the handler copies the block into its own
//! memory with the `block` domain's `spindle_block_read` (a stack buffer: the kernel's
//! stack for built-in and native, the shadow stack in linear memory for Wasm) and feeds it
//! to the digest. `block.ReadDone { request, length }` answers the fingerprint as a
//! [`Digest`] record (16 bytes in two little-endian words).
//!
//! The algorithm is [`Md5`], written from RFC 1321 and tested on the host with the RFC's
//! seven test vectors. The extension keeps one stream at a time ([`Stream`]): a block at
//! offset 0 starts a new fingerprint, a block out of order (another request, a gap) or
//! one the kernel would not copy abandons it, and `block.ReadDone` for a request other than
//! the one in progress answers no digest. State lives in atomics (relaxed), which give a
//! `static` interior mutability without `unsafe`; raises of one extension do not run
//! concurrently in practice, and a torn update would only spoil the digest, which the
//! kernel compares with what it expects.
//!
//! [`workload`] generates the benchmark's 1 MiB of deterministic bytes (used by the kernel
//! harness and by `cargo xtask test`, which compares the kernel's digest with the host's
//! `md5sum`).

#![no_std]
#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use spindle_abi::event::{BLOCK_READ_DONE, BLOCK_READ_FILTER, Digest, FilterVerdict, ReadBlock, ReadDone};

spindle_abi::extension! {
    name: "md5",
    version: "0.1.0",
    budget_microseconds: 20_000,
    memory_quota_bytes: 64 * 1024,
    domains: ["block"],
    bindings: [
        BLOCK_READ_FILTER => filter_block,
        BLOCK_READ_DONE => finish_request,
    ],
}

/// Bytes MD5 compresses at a time.
pub const BLOCK_BYTES: usize = 64;
/// Largest block `block.ReadFilter` carries (4 KiB).
pub const READ_BLOCK_BYTES: usize = ReadBlock::MAX_LENGTH as usize;

/// The initial chaining values A, B, C, D (RFC 1321 §3.3).
const INITIAL_STATE: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// `T[i] = floor(2^32 · |sin(i + 1)|)` (RFC 1321 §3.4), checked against that formula by a
/// host test.
const SINES: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501, //
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821, //
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8, //
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, //
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, //
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, //
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1, //
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// Left-rotation amounts of each round's four steps (RFC 1321 §3.4).
const SHIFTS: [[u32; 4]; 4] = [[7, 12, 17, 22], [5, 9, 14, 20], [4, 11, 16, 23], [6, 10, 15, 21]];

/// One MD5 step: `a = b + ((a + f + x + t) <<< s)`, then the registers rotate (the new `a`
/// becomes `b`, and `b, c, d` move one place on).
#[inline(always)]
fn step(registers: &mut [u32; 4], mixed: u32, word: u32, sine: u32, shift: u32) {
    let [a, b, c, d] = *registers;
    let rotated = a.wrapping_add(mixed).wrapping_add(word).wrapping_add(sine).rotate_left(shift);
    *registers = [d, b.wrapping_add(rotated), b, c];
}

/// The message word each step of each round reads (RFC 1321 §3.4: `i`, `5i + 1`, `3i + 5`,
/// `7i`, modulo 16).
const WORD_ORDER: [[usize; 16]; 4] = {
    let mut order = [[0; 16]; 4];
    let mut index = 0;
    while index < 16 {
        order[0][index] = index;
        order[1][index] = (5 * index + 1) % 16;
        order[2][index] = (3 * index + 5) % 16;
        order[3][index] = (7 * index) % 16;
        index += 1;
    }
    order
};

/// The auxiliary functions F, G, H, I of the four rounds (RFC 1321 §3.4).
#[inline(always)]
fn mix(round: usize, b: u32, c: u32, d: u32) -> u32 {
    match round {
        0 => (b & c) | (!b & d),
        1 => (b & d) | (c & !d),
        2 => b ^ c ^ d,
        _ => c ^ (b | !d),
    }
}

/// Emits the 16 steps of one round with literal indices, so every table lookup and the
/// choice of auxiliary function fold to constants (a loop here measured ~2,300
/// instructions per block on rv64gc; unrolled, as RFC 1321's own code is, well under half).
macro_rules! round {
    ($registers:ident, $words:ident, $round:literal, [$($step:literal)*]) => {$(
        let [_, b, c, d] = $registers;
        step(&mut $registers, mix($round, b, c, d), $words[WORD_ORDER[$round][$step]], SINES[16 * $round + $step], SHIFTS[$round][$step % 4]);
    )*};
}

/// Compresses one 64-byte block into `state` (RFC 1321 §3.4: four rounds of 16 steps).
fn compress(state: &mut [u32; 4], block: &[u8; BLOCK_BYTES]) {
    let mut words = [0u32; 16];
    for (word, bytes) in words.iter_mut().zip(block.chunks_exact(4)) {
        *word = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    }
    let mut registers = *state;
    round!(registers, words, 0, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
    round!(registers, words, 1, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
    round!(registers, words, 2, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
    round!(registers, words, 3, [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]);
    for (value, added) in state.iter_mut().zip(registers) {
        *value = value.wrapping_add(added);
    }
}

/// An MD5 computation in progress (RFC 1321): feed bytes with [`update`](Md5::update),
/// get the 16-byte fingerprint with [`finish`](Md5::finish).
#[derive(Clone, Debug)]
pub struct Md5 {
    state: [u32; 4],
    /// Bytes fed so far (the message length, modulo 2^64).
    length: u64,
    /// The incomplete block: its first `length % 64` bytes are meaningful.
    pending: [u8; BLOCK_BYTES],
}

impl Default for Md5 {
    fn default() -> Self {
        Self::new()
    }
}

impl Md5 {
    /// A fresh computation (the empty message).
    pub const fn new() -> Self {
        Md5 { state: INITIAL_STATE, length: 0, pending: [0; BLOCK_BYTES] }
    }

    /// Bytes fed so far.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// Feeds `data`.
    pub fn update(&mut self, mut data: &[u8]) {
        let filled = (self.length % BLOCK_BYTES as u64) as usize;
        self.length = self.length.wrapping_add(data.len() as u64);
        if filled > 0 {
            let taken = data.len().min(BLOCK_BYTES - filled);
            self.pending[filled..filled + taken].copy_from_slice(&data[..taken]);
            data = &data[taken..];
            if filled + taken < BLOCK_BYTES {
                return;
            }
            let block = self.pending;
            compress(&mut self.state, &block);
        }
        let mut blocks = data.chunks_exact(BLOCK_BYTES);
        for block in &mut blocks {
            let mut whole = [0u8; BLOCK_BYTES];
            whole.copy_from_slice(block);
            compress(&mut self.state, &whole);
        }
        let rest = blocks.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
    }

    /// Pads the message (a 1 bit, zeros, the 64-bit bit length; RFC 1321 §3.1–3.2) and
    /// returns the fingerprint: A, B, C, D as little-endian bytes (§3.5).
    pub fn finish(mut self) -> [u8; 16] {
        let bits = self.length.wrapping_mul(8);
        let filled = (self.length % BLOCK_BYTES as u64) as usize;
        let mut tail = [0u8; 2 * BLOCK_BYTES];
        tail[..filled].copy_from_slice(&self.pending[..filled]);
        tail[filled] = 0x80;
        let tail_length = if filled < BLOCK_BYTES - 8 { BLOCK_BYTES } else { 2 * BLOCK_BYTES };
        tail[tail_length - 8..tail_length].copy_from_slice(&bits.to_le_bytes());
        for block in tail[..tail_length].chunks_exact(BLOCK_BYTES) {
            let mut whole = [0u8; BLOCK_BYTES];
            whole.copy_from_slice(block);
            compress(&mut self.state, &whole);
        }
        let mut digest = [0u8; 16];
        for (bytes, word) in digest.chunks_exact_mut(4).zip(self.state) {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
        digest
    }

    /// The fingerprint of `data` in one call.
    pub fn digest(data: &[u8]) -> [u8; 16] {
        let mut md5 = Md5::new();
        md5.update(data);
        md5.finish()
    }
}

/// The extension's one stream in progress, kept between raises.
pub struct Stream {
    /// The request being fingerprinted; 0: none (idle or abandoned).
    request: AtomicU64,
    state: [AtomicU32; 4],
    length: AtomicU64,
    /// The incomplete block, 8 bytes per word (read only when `length % 64 != 0`).
    pending: [AtomicU64; BLOCK_BYTES / 8],
}

impl Default for Stream {
    fn default() -> Self {
        Self::new()
    }
}

impl Stream {
    /// An idle stream.
    pub const fn new() -> Self {
        Stream {
            request: AtomicU64::new(0),
            state: [const { AtomicU32::new(0) }; 4],
            length: AtomicU64::new(0),
            pending: [const { AtomicU64::new(0) }; BLOCK_BYTES / 8],
        }
    }

    fn load(&self) -> Md5 {
        let mut md5 = Md5::new();
        for (value, stored) in md5.state.iter_mut().zip(&self.state) {
            *value = stored.load(Ordering::Relaxed);
        }
        md5.length = self.length.load(Ordering::Relaxed);
        if !md5.length.is_multiple_of(BLOCK_BYTES as u64) {
            for (bytes, stored) in md5.pending.chunks_exact_mut(8).zip(&self.pending) {
                bytes.copy_from_slice(&stored.load(Ordering::Relaxed).to_le_bytes());
            }
        }
        md5
    }

    fn store(&self, md5: &Md5) {
        for (stored, value) in self.state.iter().zip(md5.state) {
            stored.store(value, Ordering::Relaxed);
        }
        self.length.store(md5.length, Ordering::Relaxed);
        if !md5.length.is_multiple_of(BLOCK_BYTES as u64) {
            for (stored, bytes) in self.pending.iter().zip(md5.pending.chunks_exact(8)) {
                stored.store(u64::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]]), Ordering::Relaxed);
            }
        }
    }

    /// One block of a request: `read(request, offset, buffer)` copies it (the kernel
    /// function, or a closure in host tests) and returns the bytes copied. Returns the
    /// bytes consumed (0: the block was not taken, and the stream is abandoned unless the
    /// block belongs to no stream at all).
    pub fn filter(&self, block: &ReadBlock, read: impl FnOnce(u64, u64, &mut [u8]) -> u64) -> u64 {
        if block.request == 0 || block.length > ReadBlock::MAX_LENGTH {
            return 0;
        }
        let mut md5 = if block.offset == 0 {
            Md5::new()
        } else if self.request.load(Ordering::Relaxed) == block.request && self.length.load(Ordering::Relaxed) == block.offset {
            self.load()
        } else {
            // Out of order: this stream can no longer be right.
            self.request.store(0, Ordering::Relaxed);
            return 0;
        };
        let length = block.length as usize;
        let mut buffer = [0u8; READ_BLOCK_BYTES];
        let copied = read(block.request, block.offset, &mut buffer[..length]);
        if copied != length as u64 {
            self.request.store(0, Ordering::Relaxed);
            return 0;
        }
        md5.update(&buffer[..length]);
        self.store(&md5);
        self.request.store(block.request, Ordering::Relaxed);
        block.length
    }

    /// The fingerprint of `done.request` if it is the stream in progress (the stream then
    /// becomes idle); no digest (request 0) otherwise.
    pub fn finish(&self, done: &ReadDone) -> Digest {
        if done.request == 0 || self.request.load(Ordering::Relaxed) != done.request {
            return Digest::default();
        }
        self.request.store(0, Ordering::Relaxed);
        let md5 = self.load();
        let bytes = md5.length();
        let (first, second) = Digest::words(&md5.finish());
        Digest { request: done.request, bytes, first, second }
    }
}

/// This extension instance's stream.
static STREAM: Stream = Stream::new();

/// `block.ReadFilter`: copy the block through the `block` domain and fingerprint it.
pub fn filter_block(block: &ReadBlock) -> FilterVerdict {
    FilterVerdict { consumed: STREAM.filter(block, spindle_abi::host::block_read) }
}

/// `block.ReadDone`: the fingerprint of the request that completed.
pub fn finish_request(done: &ReadDone) -> Digest {
    STREAM.finish(done)
}

/// The benchmark's workload: 1 MiB of deterministic bytes, read as 4 KiB blocks.
pub mod workload {
    /// Bytes in the workload (1 MiB, Small & Seltzer §5.5).
    pub const BYTES: usize = 1 << 20;
    /// The generator's fixed seed.
    pub const SEED: u64 = 0x5350_494e_444c_4535;

    /// SplitMix64's output function: a bijective mix of a 64-bit counter.
    fn mix(counter: u64) -> u64 {
        let mut value = counter.wrapping_add(0x9e37_79b9_7f4a_7c15);
        value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        value ^ (value >> 31)
    }

    /// Fills `buffer` with the workload's bytes starting at byte `offset` (any offset and
    /// length; word `i` of the stream is `mix(SEED + i)`, little-endian).
    pub fn fill(offset: u64, buffer: &mut [u8]) {
        for (index, byte) in buffer.iter_mut().enumerate() {
            let position = offset + index as u64;
            *byte = mix(SEED.wrapping_add(position / 8)).to_le_bytes()[(position % 8) as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    fn hex(digest: [u8; 16]) -> std::string::String {
        digest.iter().map(|byte| std::format!("{byte:02x}")).collect()
    }

    /// RFC 1321 appendix A.5, all seven.
    const VECTORS: [(&str, &str); 7] = [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
        ("12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57edf4a22be3c955ac49da2e2107b67a"),
    ];

    #[test]
    fn rfc_1321_test_suite() {
        for (message, expected) in VECTORS {
            assert_eq!(hex(Md5::digest(message.as_bytes())), expected, "MD5({message:?})");
        }
    }

    #[test]
    fn split_updates_match_one_update() {
        for (message, expected) in VECTORS {
            for split in 0..message.len() {
                let mut md5 = Md5::new();
                md5.update(&message.as_bytes()[..split]);
                md5.update(&message.as_bytes()[split..]);
                assert_eq!(hex(md5.finish()), expected, "MD5({message:?}) split at {split}");
            }
        }
    }

    #[test]
    fn sine_table_follows_the_formula() {
        for (index, &value) in SINES.iter().enumerate() {
            let exact = ((index as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u64;
            assert_eq!(u64::from(value), exact, "T[{}]", index + 1);
        }
    }

    fn workload() -> Vec<u8> {
        let mut bytes = std::vec![0u8; workload::BYTES];
        workload::fill(0, &mut bytes);
        bytes
    }

    #[test]
    fn stream_fingerprints_blocks_in_order_and_refuses_gaps() {
        let data = workload();
        let read = |request: u64, offset: u64, buffer: &mut [u8]| {
            assert_eq!(request, 7);
            buffer.copy_from_slice(&data[offset as usize..offset as usize + buffer.len()]);
            buffer.len() as u64
        };
        let stream = Stream::new();
        // Odd-sized blocks exercise the pending block kept between raises.
        let mut offset = 0u64;
        for length in [100u64, 4096, 1, 63, 4000].into_iter().cycle() {
            let length = length.min(data.len() as u64 - offset);
            if length == 0 {
                break;
            }
            assert_eq!(stream.filter(&ReadBlock { request: 7, offset, length }, read), length);
            offset += length;
        }
        let digest = stream.finish(&ReadDone { request: 7, length: offset });
        assert_eq!(digest.bytes, data.len() as u64);
        assert_eq!(digest.bytes(), Md5::digest(&data));
        assert_eq!(stream.finish(&ReadDone { request: 7, length: offset }), Digest::default(), "a finished stream is idle");

        assert_eq!(stream.filter(&ReadBlock { request: 7, offset: 0, length: 4096 }, read), 4096);
        assert_eq!(stream.filter(&ReadBlock { request: 7, offset: 8192, length: 4096 }, read), 0, "a gap abandons the stream");
        assert_eq!(stream.finish(&ReadDone { request: 7, length: 4096 }), Digest::default());
        assert_eq!(stream.filter(&ReadBlock { request: 7, offset: 0, length: 4097 }, read), 0, "longer than a block");
        let short = |_: u64, _: u64, _: &mut [u8]| 0;
        assert_eq!(stream.filter(&ReadBlock { request: 8, offset: 0, length: 16 }, short), 0, "a refused copy is not fingerprinted");
    }

    #[test]
    fn handlers_on_the_host_read_nothing() {
        // The kernel function answers 0 on the host: the block is not consumed.
        assert_eq!(filter_block(&ReadBlock { request: 1, offset: 0, length: 64 }).consumed, 0);
        assert_eq!(finish_request(&ReadDone { request: 1, length: 64 }), Digest::default());
        assert_eq!(spindle_extension().bindings.len(), 2);
    }

    #[test]
    fn workload_is_deterministic_and_random_access() {
        let data = workload();
        let mut middle = [0u8; 13];
        workload::fill(4093, &mut middle);
        assert_eq!(&middle, &data[4093..4106]);
        assert_ne!(&data[..64], &data[64..128]);
    }
}
