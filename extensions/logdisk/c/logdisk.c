/*
 * The C reference of the `logdisk` graft (Small & Seltzer '96 §5.6, the paper's "unsafe
 * C" baseline): the same logical disk as extensions/logdisk/src/lib.rs — writes placed at
 * the log head, 16-block segments filled in order, a logical-to-physical map of u32
 * (physical + 1, 0 = unmapped), no cleaner — compiled by clang for riscv64 and linked
 * into the kernel by kernel/build.rs. Not an extension: kernel code with no containment.
 */
#include <stdint.h>

#define CAPACITY_BLOCKS 262144
#define NONE UINT64_MAX

static uint32_t map[CAPACITY_BLOCKS];
static uint64_t blocks = CAPACITY_BLOCKS;
static uint64_t segment_blocks = 16;
static uint64_t segment;
static uint64_t fill;

void spindle_c_logdisk_format(uint64_t disk_blocks, uint64_t disk_segment_blocks) {
    for (uint64_t index = 0; index < CAPACITY_BLOCKS; index++)
        map[index] = 0;
    blocks = disk_blocks < CAPACITY_BLOCKS ? disk_blocks : CAPACITY_BLOCKS;
    segment_blocks = disk_segment_blocks ? disk_segment_blocks : 1;
    segment = 0;
    fill = 0;
}

uint64_t spindle_c_logdisk_write(uint64_t logical) {
    if (logical >= blocks)
        return NONE;
    uint64_t next_segment = segment, next_fill = fill;
    if (next_fill == segment_blocks) {
        next_segment++;
        next_fill = 0;
    }
    uint64_t physical = next_segment * segment_blocks + next_fill;
    if (physical >= blocks)
        return NONE;
    segment = next_segment;
    fill = next_fill + 1;
    map[logical] = (uint32_t)physical + 1;
    return physical;
}

uint64_t spindle_c_logdisk_look_up(uint64_t logical) {
    if (logical >= CAPACITY_BLOCKS || map[logical] == 0)
        return NONE;
    return (uint64_t)map[logical] - 1;
}
