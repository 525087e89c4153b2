/*
 * libFuzzer target for the counter arithmetic (collector/store/counter.c): any sequence
 * of raw values, widths, declared resets, line rates and sample times. The input is a
 * list of 12-byte steps:
 *   byte 0      flags: bit 0 width (0: 64, 1: 32), bit 1 a reset is declared, bits 2-3
 *               the rate (0 unknown, 1 10 Mb/s, 2 10 Gb/s, 3 400 Gb/s), bit 4 octet
 *               counter (else packets), bits 5-7 how raw is made (see below)
 *   bytes 1-3   time elapsed since the previous step, µs (little endian; 0 included)
 *   bytes 4-11  a value (little endian), read per bits 5-7 as: the raw value itself; an
 *               increment; a decrement; the value mod 2^32
 * Invariant: the exposed value never decreases, and grows by no more than the rules
 * allow: raw - previous when raw did not go down, 0 at a width change, raw after a
 * declared reset or a clear, and a wrap only where 2^32 - previous + raw is within
 * 1.1 x bound x elapsed (or no bound is known).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/counter.h"

static uint64_t
le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const double rates[4] = {0, 1.25e6, 1.25e9, 5e10};
    struct fs_counter c;
    memset(&c, 0, sizeof c);
    int64_t ts = 0;
    uint64_t raw = 0;
    for (size_t off = 0; off + 12 <= size; off += 12) {
        const uint8_t *p = data + off;
        unsigned flags = p[0];
        unsigned bits = (flags & 1) ? 32 : 64;
        bool reset = flags & 2;
        bool octets = flags & 16;
        double max = fs_counter_max_per_s(rates[(flags >> 2) & 3], octets);
        int64_t elapsed = (int64_t)le(p + 1, 3);
        uint64_t x = le(p + 4, 8);
        switch (flags >> 5 & 3) {
        case 0:
            raw = x;
            break;
        case 1:
            raw += x >> (x & 63);
            break;
        case 2:
            raw -= x >> (x & 63);
            break;
        default:
            raw = x & 0xffffffffu;
            break;
        }
        if (flags & 128)
            raw &= 0xffffffffu; /* mostly a real 32-bit counter */
        ts += elapsed;

        struct fs_counter before = c;
        enum fs_counter_event ev;
        uint64_t v = fs_counter_update(&c, raw, bits, ts, reset, max, &ev);
        if (v != c.value)
            abort();
        if (before.last_bits == 0) {
            if (v != raw || ev != FS_COUNTER_NONE)
                abort();
            continue;
        }
        if (v < before.value)
            abort(); /* never decreases */
        uint64_t delta = v - before.value;
        bool saturated = v == UINT64_MAX;
        uint64_t allowed;
        switch (ev) {
        case FS_COUNTER_NONE:
            if (raw < before.last_raw || bits != before.last_bits)
                abort();
            allowed = raw - before.last_raw;
            break;
        case FS_COUNTER_WIDTH_CHANGE:
            if (bits == before.last_bits)
                abort();
            allowed = 0;
            break;
        case FS_COUNTER_REBASED:
            if (!reset || raw >= before.last_raw || bits != before.last_bits)
                abort();
            allowed = raw;
            break;
        case FS_COUNTER_CLEARED:
            if (reset || raw >= before.last_raw || bits != before.last_bits)
                abort();
            allowed = raw;
            break;
        case FS_COUNTER_WRAPPED: {
            if (reset || bits != 32 || raw >= before.last_raw || before.last_raw > 0xffffffffu)
                abort();
            allowed = (1ULL << 32) - before.last_raw + raw;
            /* plausible for the bound and the time elapsed */
            if (max > 0 && (double)allowed > 1.1 * max * ((double)elapsed / 1e6) * (1 + 1e-12))
                abort();
            break;
        }
        default:
            abort();
        }
        if (delta != allowed && !(saturated && delta < allowed))
            abort();
    }
    return 0;
}
