/*
 * The C reference of the `hotlist` graft (Small & Seltzer '96 §5.4: "the C graft
 * searches a linked list of structs"): the same algorithm as extensions/hotlist/src/lib.rs,
 * unprotected, compiled by clang for riscv64 and linked into the kernel by kernel/build.rs
 * (the benchmark's `c-reference` rows). Not an extension: it is kernel code, with no
 * containment, the paper's "unsafe C" baseline.
 */
#include <stdint.h>

#define SLOTS 64

uint64_t spindle_mm_lru_length(void);
uint64_t spindle_mm_lru_frame(uint64_t position);

struct node {
    uint64_t frame;
    struct node *next;
};

static struct node nodes[SLOTS];
static struct node *head;
static uint64_t linked;

void spindle_c_hotlist_clear(void) {
    head = 0;
    linked = 0;
}

void spindle_c_hotlist_set(uint64_t slot, uint64_t frame) {
    if (slot >= SLOTS)
        return;
    nodes[slot].frame = frame;
    if (!(linked & ((uint64_t)1 << slot))) {
        nodes[slot].next = head;
        head = &nodes[slot];
        linked |= (uint64_t)1 << slot;
    }
}

static int contains(uint64_t frame) {
    for (struct node *node = head; node; node = node->next)
        if (node->frame == frame)
            return 1;
    return 0;
}

uint64_t spindle_c_hotlist_reclaim(uint64_t candidate) {
    if (!contains(candidate))
        return candidate;
    uint64_t length = spindle_mm_lru_length();
    for (uint64_t position = 0; position < length; position++) {
        uint64_t frame = spindle_mm_lru_frame(position);
        if (!contains(frame))
            return frame;
    }
    return candidate;
}
