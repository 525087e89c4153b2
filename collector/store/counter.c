/* Counter arithmetic (see counter.h for the rules). */
#include "store/counter.h"

/* The margin over line rate a wrap may imply: timestamps are taken at arrival, so the
 * elapsed time between two reads can be short of the device's by the polling jitter. */
#define WRAP_SLACK 1.1

static uint64_t
add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

double
fs_counter_max_per_s(double octets_per_s, bool is_octets)
{
    if (!(octets_per_s > 0))
        return 0;
    return is_octets ? octets_per_s : octets_per_s / 64.0;
}

/* Whether a 32-bit drop from last to raw over elapsed_us is a plausible wrap. */
static bool
wrap_plausible(uint64_t increase, int64_t elapsed_us, double max_per_s)
{
    if (!(max_per_s > 0))
        return true; /* no bound known: unwrap as a 32-bit counter always could */
    if (elapsed_us <= 0)
        return false;
    double bound = WRAP_SLACK * max_per_s * ((double)elapsed_us / 1e6);
    return (double)increase <= bound;
}

uint64_t
fs_counter_update(struct fs_counter *c, uint64_t raw, unsigned bits, int64_t ts_us,
                  bool reset_declared, double max_per_s, enum fs_counter_event *ev)
{
    enum fs_counter_event e = FS_COUNTER_NONE;
    uint64_t inc = 0;
    if (bits != 32)
        bits = 64;
    if (c->last_bits == 0) {
        c->value = raw;
    } else if (bits != c->last_bits) {
        e = FS_COUNTER_WIDTH_CHANGE;
    } else if (raw >= c->last_raw) {
        inc = raw - c->last_raw;
    } else if (reset_declared) {
        e = FS_COUNTER_REBASED;
        inc = raw;
    } else if (bits == 32 && c->last_raw <= UINT32_MAX) {
        /* (a sum of 32-bit parts can pass 2^32 and is no 32-bit counter to unwrap) */
        uint64_t wrapped = ((uint64_t)1 << 32) - c->last_raw + raw;
        if (wrap_plausible(wrapped, ts_us - c->last_ts_us, max_per_s)) {
            e = FS_COUNTER_WRAPPED;
            inc = wrapped;
        } else {
            e = FS_COUNTER_CLEARED;
            inc = raw;
        }
    } else {
        e = FS_COUNTER_CLEARED;
        inc = raw;
    }
    c->value = add_sat(c->value, inc);
    c->last_raw = raw;
    c->last_bits = (uint8_t)bits;
    c->last_ts_us = ts_us;
    if (ev)
        *ev = e;
    return c->value;
}
