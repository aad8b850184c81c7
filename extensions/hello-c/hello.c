/* hello-c: a Spindle extension written in C, built only as Wasm.
 *
 * `cargo xtask ext build hello-c --wasm` compiles this file with clang for
 * wasm32-unknown-unknown against target/spindle/include/spindle.h, which xtask generates
 * from abi/ (kernel functions as imports from module "spindle", event records, ids and
 * fingerprints), so C and Rust cannot disagree about a type. The manifest is
 * extension.toml. The file implements the Wasm contract of spindle_abi::wasm by hand:
 * binding count, binding descriptions, invoke, and the exchange buffer.
 *
 * Bindings:
 *   0. console.Line when command_fingerprint == fingerprint_of("hello-c"): greets, claims.
 *   1. bench.Probe when key == 8: answers value * 3.
 */
#include <spindle.h>

#define PROBE_KEY 8u
#define CLAIM_TAG 0xc0u
#define BINDINGS 2

static uint8_t exchange[SPINDLE_EXCHANGE_SIZE] __attribute__((aligned(8)));
static uint64_t greetings;

static void write_text(const char *text) {
    size_t length = 0;
    while (text[length]) {
        length++;
    }
    spindle_console_write((const uint8_t *)text, length);
}

/* Decimal digits of `value` into `buffer` (at least 21 bytes), NUL-terminated. */
static const char *decimal(uint64_t value, char *buffer) {
    char *end = buffer + 20;
    *end = 0;
    do {
        *--end = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    return end;
}

uint8_t *spindle_extension_exchange(void) {
    return exchange;
}

size_t spindle_extension_binding_count(void) {
    return BINDINGS;
}

int32_t spindle_extension_binding_info(size_t index, struct spindle_binding_info *out) {
    if (!out) {
        return SPINDLE_ERROR_NULL_POINTER;
    }
    struct spindle_binding_info info = {0};
    info.guard_count = 1;
    info.guards[0].kind = SPINDLE_GUARD_EQUALS;
    switch (index) {
    case 0:
        info.event_id = SPINDLE_EVENT_CONSOLE_LINE_ID;
        info.event_fingerprint = SPINDLE_EVENT_CONSOLE_LINE_FINGERPRINT;
        info.arguments_size = SPINDLE_EVENT_CONSOLE_LINE_ARGUMENTS_SIZE;
        info.result_size = SPINDLE_EVENT_CONSOLE_LINE_RESULT_SIZE;
        info.guards[0].field = SPINDLE_FIELD_CONSOLE_LINE_COMMAND_FINGERPRINT;
        info.guards[0].a = spindle_fingerprint_of("hello-c");
        break;
    case 1:
        info.event_id = SPINDLE_EVENT_BENCH_PROBE_ID;
        info.event_fingerprint = SPINDLE_EVENT_BENCH_PROBE_FINGERPRINT;
        info.arguments_size = SPINDLE_EVENT_BENCH_PROBE_ARGUMENTS_SIZE;
        info.result_size = SPINDLE_EVENT_BENCH_PROBE_RESULT_SIZE;
        info.guards[0].field = SPINDLE_FIELD_PROBE_KEY;
        info.guards[0].a = PROBE_KEY;
        break;
    default:
        return SPINDLE_ERROR_NO_SUCH_BINDING;
    }
    *out = info;
    return 0;
}

int32_t spindle_extension_invoke(size_t index, const uint8_t *arguments, size_t arguments_length, uint8_t *result,
                                 size_t result_length) {
    if (!arguments || !result) {
        return SPINDLE_ERROR_NULL_POINTER;
    }
    switch (index) {
    case 0: {
        if (arguments_length < sizeof(struct spindle_console_line) || result_length < sizeof(struct spindle_console_verdict)) {
            return SPINDLE_ERROR_BUFFER_TOO_SMALL;
        }
        const struct spindle_console_line *line = (const struct spindle_console_line *)arguments;
        char digits[21];
        greetings++;
        write_text("hello from C: greeting #");
        write_text(decimal(greetings, digits));
        write_text(", console line #");
        write_text(decimal(line->sequence, digits));
        write_text("\n");
        ((struct spindle_console_verdict *)result)->claimed = CLAIM_TAG;
        return 0;
    }
    case 1: {
        if (arguments_length < sizeof(struct spindle_probe) || result_length < sizeof(struct spindle_probe_result)) {
            return SPINDLE_ERROR_BUFFER_TOO_SMALL;
        }
        const struct spindle_probe *probe = (const struct spindle_probe *)arguments;
        ((struct spindle_probe_result *)result)->value = probe->value * 3;
        return 0;
    }
    default:
        return SPINDLE_ERROR_NO_SUCH_BINDING;
    }
}
