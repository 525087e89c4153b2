/*
 * Clock offsets with honest error bars: a device's (or a host's) clock against the
 * collector's CLOCK_REALTIME.
 *
 * Model. A measurement says: the device's clock read `device_us` at some instant while
 * the collector's clock was between local_lo_us and local_hi_us (the request was sent at
 * lo and the answer arrived at hi). A device clock of resolution r truncates, so its true
 * time at that instant was in [device_us, device_us + r). Hence
 *
 *     device_us - local_hi_us  <=  offset  <=  device_us + r - local_lo_us
 *
 * where offset = device clock minus collector clock. One measurement alone gives the
 * request/response midpoint (offset = device - midpoint, uncertainty = half the round
 * trip plus the resolution). Several measurements of an unchanged offset all hold, so
 * the filter keeps the intersection of their intervals over a window:
 *   - fine clocks (gNMI ns timestamps, ONYX `show clock` with sub-seconds): the
 *     intersection is bounded by the minimum-delay measurements (minimum-delay filter);
 *   - 1 s clocks (ONYX `show clock` without fraction, SNMP hrSystemDate): two polls
 *     that straddle a device-second change bound the offset to the time between them
 *     (second-edge detection); the intersection keeps the tightest such bound.
 * Clocks drift: each interval is widened by max_drift_ppm times its age (relative to the
 * newest measurement), and when a new measurement contradicts the old ones (a clock
 * step) the filter starts over from it alone: the step happened somewhere among the old
 * ones, and any of them kept could mix the two clocks. The estimate is the intersection's
 * midpoint and the uncertainty its half width, so the true offset lies within estimate ±
 * uncertainty as long as the device answered between lo and hi and drifts less than
 * max_drift_ppm.
 *
 * Hosts (importers) use an NTP-style exchange instead: client send t1, server receive t2,
 * server send t3, client receive t4; the same interval reasoning over a few rounds.
 *
 * Threads: none; a filter belongs to one caller (e.g. a sink, under its lock).
 * Ownership: plain structs, no allocation.
 */
#ifndef FS_ANALYSIS_CLOCK_H
#define FS_ANALYSIS_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Measurements a filter remembers (the window is also bounded in time). */
#define FS_CLOCK_WINDOW 256

struct fs_clock_meas {
    int64_t device_us;
    int64_t local_lo_us;
    int64_t local_hi_us;
};

struct fs_clock_filter {
    int64_t resolution_us; /**< device clock resolution: 1 (µs or finer) .. 1000000 (1 s);
                                0 = guess it (see fs_clock_filter_init) */
    int64_t window_us;     /**< measurements older than this (vs the newest) are dropped */
    double max_drift_ppm;  /**< allowance for drift between device and collector */
    struct fs_clock_meas m[FS_CLOCK_WINDOW];
    size_t n, head; /**< ring of the last n measurements; head = next slot */
};

struct fs_clock_estimate {
    bool known;
    int64_t offset_us;      /**< device minus collector, rounded to µs */
    int64_t uncertainty_us; /**< half width of the bound; >= 1 when known */
    size_t used;            /**< measurements that contributed to the bound */
};

/**
 * Prepares a filter (resolution_us >= 0, window_us > 0, max_drift_ppm >= 0). With
 * resolution_us 0 the resolution is guessed from the readings: the coarsest of 1 s,
 * 100 ms, 10 ms and 1 ms that divides every device reading in the window, else 1 µs.
 * A wrong guess can only be too coarse (a fine clock that happened to read round
 * values), which widens the bound but keeps it honest.
 */
void fs_clock_filter_init(struct fs_clock_filter *f, int64_t resolution_us, int64_t window_us,
                          double max_drift_ppm);

/**
 * Adds a measurement; when it contradicts the window's intersection, the older ones are
 * dropped (the filter starts over from it). Returns -1 (and keeps nothing) when lo > hi
 * or the measurement is older than the newest one kept; 0 otherwise.
 */
int fs_clock_filter_add(struct fs_clock_filter *f, const struct fs_clock_meas *m);

/** The current estimate (known == false when there is no measurement). */
void fs_clock_filter_estimate(const struct fs_clock_filter *f, struct fs_clock_estimate *e);

/** One NTP-style round, all in ns: t1/t4 on the client's clock, t2/t3 on the server's. */
struct fs_ntp_round {
    int64_t t1, t2, t3, t4;
};

struct fs_ntp_result {
    int64_t offset_ns;      /**< client (host) clock minus server (collector) clock */
    int64_t delay_ns;       /**< round trip minus the server's processing time */
    int64_t uncertainty_ns; /**< delay / 2 plus the clocks' resolution */
};

/**
 * Computes the offset from the round with the smallest delay among n (>= 1) rounds.
 * resolution_ns is the coarser of the two clocks' resolutions (>= 0). Returns -1 with
 * errbuf filled when no round is consistent (t4 < t1 or t3 < t2, or a negative delay).
 */
int fs_ntp_best(const struct fs_ntp_round *r, size_t n, int64_t resolution_ns,
                struct fs_ntp_result *out, char *errbuf, size_t errlen);

#endif
