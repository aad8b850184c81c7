/*
 * The C reference of the `md5` graft (Small & Seltzer '96 §5.5, the paper's "unsafe C"
 * baseline): the same stream filter as extensions/md5/src/lib.rs — RFC 1321 MD5 over the
 * blocks of a read request, copied in with the kernel's `spindle_block_read` — compiled
 * by clang for riscv64 and linked into the kernel by kernel/build.rs. Not an extension:
 * kernel code with no containment.
 */
#include <stdint.h>

#define BLOCK_BYTES 64
#define READ_BLOCK_BYTES 4096

uint64_t spindle_block_read(uint64_t request, uint64_t offset, uint8_t *destination, uint64_t length);

/* T[i] = floor(2^32 * |sin(i + 1)|), RFC 1321 section 3.4. */
static const uint32_t sines[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

static const uint32_t shifts[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

static uint32_t rotate_left(uint32_t value, uint32_t shift) {
    return (value << shift) | (value >> (32 - shift));
}

/* One step: a = b + ((a + f + x + t) <<< s), then the registers rotate. */
#define STEP(mixed, word, sine, shift)                                              \
    do {                                                                            \
        uint32_t rotated = rotate_left(a + (mixed) + (word) + (sine), (shift));     \
        a = d;                                                                      \
        d = c;                                                                      \
        c = b;                                                                      \
        b = b + rotated;                                                            \
    } while (0)

static void compress(uint32_t state[4], const uint8_t block[BLOCK_BYTES]) {
    uint32_t words[16];
    for (int index = 0; index < 16; index++)
        words[index] = (uint32_t)block[4 * index] | (uint32_t)block[4 * index + 1] << 8 |
                       (uint32_t)block[4 * index + 2] << 16 | (uint32_t)block[4 * index + 3] << 24;
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    /* Fully unrolled, as the Rust graft's rounds are (RFC 1321's own code is too). */
#pragma clang loop unroll(full)
    for (int index = 0; index < 16; index++)
        STEP((b & c) | (~b & d), words[index], sines[index], shifts[0][index % 4]);
#pragma clang loop unroll(full)
    for (int index = 0; index < 16; index++)
        STEP((b & d) | (c & ~d), words[(5 * index + 1) % 16], sines[16 + index], shifts[1][index % 4]);
#pragma clang loop unroll(full)
    for (int index = 0; index < 16; index++)
        STEP(b ^ c ^ d, words[(3 * index + 5) % 16], sines[32 + index], shifts[2][index % 4]);
#pragma clang loop unroll(full)
    for (int index = 0; index < 16; index++)
        STEP(c ^ (b | ~d), words[(7 * index) % 16], sines[48 + index], shifts[3][index % 4]);
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
}

/* The one stream in progress. */
static uint64_t stream_request;
static uint32_t stream_state[4];
static uint64_t stream_length;
static uint8_t stream_pending[BLOCK_BYTES];

static void update(const uint8_t *data, uint64_t length) {
    uint64_t filled = stream_length % BLOCK_BYTES;
    stream_length += length;
    if (filled) {
        uint64_t taken = length < BLOCK_BYTES - filled ? length : BLOCK_BYTES - filled;
        for (uint64_t index = 0; index < taken; index++)
            stream_pending[filled + index] = data[index];
        data += taken;
        length -= taken;
        if (filled + taken < BLOCK_BYTES)
            return;
        compress(stream_state, stream_pending);
    }
    for (; length >= BLOCK_BYTES; data += BLOCK_BYTES, length -= BLOCK_BYTES)
        compress(stream_state, data);
    for (uint64_t index = 0; index < length; index++)
        stream_pending[index] = data[index];
}

/* block.ReadFilter: the bytes consumed (0: not taken; the stream is abandoned). */
uint64_t spindle_c_md5_filter(uint64_t request, uint64_t offset, uint64_t length) {
    if (request == 0 || length > READ_BLOCK_BYTES)
        return 0;
    if (offset == 0) {
        stream_state[0] = 0x67452301;
        stream_state[1] = 0xefcdab89;
        stream_state[2] = 0x98badcfe;
        stream_state[3] = 0x10325476;
        stream_length = 0;
    } else if (stream_request != request || stream_length != offset) {
        stream_request = 0;
        return 0;
    }
    uint8_t buffer[READ_BLOCK_BYTES];
    if (spindle_block_read(request, offset, buffer, length) != length) {
        stream_request = 0;
        return 0;
    }
    update(buffer, length);
    stream_request = request;
    return length;
}

/* block.ReadDone: writes the digest words and returns the bytes covered; 0 (no digest)
 * for a request that is not the stream in progress. */
uint64_t spindle_c_md5_done(uint64_t request, uint64_t *first, uint64_t *second) {
    if (request == 0 || stream_request != request)
        return 0;
    stream_request = 0;
    uint64_t bits = stream_length * 8;
    uint64_t filled = stream_length % BLOCK_BYTES;
    uint8_t tail[2 * BLOCK_BYTES] = {0};
    for (uint64_t index = 0; index < filled; index++)
        tail[index] = stream_pending[index];
    tail[filled] = 0x80;
    uint64_t tail_length = filled < BLOCK_BYTES - 8 ? BLOCK_BYTES : 2 * BLOCK_BYTES;
    for (int index = 0; index < 8; index++)
        tail[tail_length - 8 + index] = (uint8_t)(bits >> (8 * index));
    compress(stream_state, tail);
    if (tail_length > BLOCK_BYTES)
        compress(stream_state, tail + BLOCK_BYTES);
    *first = (uint64_t)stream_state[0] | (uint64_t)stream_state[1] << 32;
    *second = (uint64_t)stream_state[2] | (uint64_t)stream_state[3] << 32;
    return stream_length;
}
