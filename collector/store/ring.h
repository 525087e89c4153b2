/*
 * The ring time-series: a compressed, bounded, in-memory history per series.
 *
 * Model. A *group* is a timeline shared by the series that are sampled together (one
 * target's driver): each batch appended to a group gets one timestamp (microseconds,
 * CLOCK_REALTIME), stored once for the whole batch. A *series* belongs to one group and
 * is either a counter (exact uint64) or a gauge (double). A series' sample refers to the
 * batch it came in, so timestamps cost nearly nothing per sample.
 *
 * Bounds. memory_limit caps all memory the ring holds (chunks, live heads, timelines,
 * indexes and headers); retention caps age. When either is exceeded the oldest closed
 * chunks go first; a series' live head chunk is never evicted. When evicting every
 * closed chunk is not enough (the live heads alone pass the limit), new series and
 * batches are refused until it is met again, and counted (stats.refused_memory).
 *
 * Threads. One writer at a time (the core serializes fs_ring_append calls); any number of
 * readers concurrently with it. Readers never see a torn or half-written sample and
 * never block the writer for longer than a short copy.
 *
 * Ownership. The ring owns all its memory; fs_ring_free() releases it. Readers receive
 * decoded samples in caller-supplied buffers.
 */
#ifndef FS_RING_H
#define FS_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fs_ring;

enum fs_ring_kind { FS_RING_COUNTER = 0, FS_RING_GAUGE = 1 };

struct fs_ring_opts {
    uint64_t memory_limit; /**< bytes, > 0 */
    int64_t retention_us;  /**< > 0 */
};

/** One sample of a batch: the series and its value (u for counters, d for gauges). */
struct fs_ring_point {
    uint32_t series;
    union {
        uint64_t u;
        double d;
    } v;
};

/** A decoded sample. */
struct fs_ring_sample {
    int64_t ts_us;
    union {
        uint64_t u;
        double d;
    } v;
};

struct fs_ring_stats {
    uint64_t bytes;             /**< all memory held, headers and indexes included */
    uint64_t samples;           /**< samples held */
    uint64_t series;            /**< live series */
    uint64_t evicted_memory;    /**< samples dropped for the memory limit, since creation */
    uint64_t evicted_retention; /**< samples dropped for age, since creation */
    uint64_t refused_memory;    /**< samples refused (or whose new series was refused)
                                     because the live heads alone passed memory_limit */
    int64_t oldest_ts_us;       /**< oldest sample held; 0 if none */
    int64_t newest_ts_us;
};

/** Creates a ring; NULL with errbuf filled on bad options or no memory. */
struct fs_ring *fs_ring_new(const struct fs_ring_opts *opts, char *errbuf, size_t errlen);

/** Frees the ring; accepts NULL. No reader or writer may be running. */
void fs_ring_free(struct fs_ring *r);

/** Changes the bounds (on reload); eviction applies from the next append. */
void fs_ring_set_opts(struct fs_ring *r, const struct fs_ring_opts *opts);

/** Creates a group (timeline). Returns its id (>= 0) or -1 on no memory. */
int32_t fs_ring_group_new(struct fs_ring *r);

/**
 * Creates a series in a group. Returns its id (>= 0) or -1 (no memory, memory_limit
 * reached, sealed group). Ids are reused after delete; each use of an id has a new
 * generation (fs_ring_series_gen), so a reader holding an old (id, generation) pair
 * can tell (fs_ring_read_gen).
 */
int32_t fs_ring_series_new(struct fs_ring *r, int32_t group, enum fs_ring_kind kind);

/** The generation of series id's current use (>= 1), or 0 if id is not in use. */
uint32_t fs_ring_series_gen(struct fs_ring *r, uint32_t id);

/** Samples held for the series (head included), or -1 if id is not in use. */
long fs_ring_series_samples(struct fs_ring *r, uint32_t id);

/**
 * Seals a group whose producer is gone: closes the live heads of its series listed in
 * series[0..n) (so that retention and memory_limit can evict them like any closed
 * chunk; ids of other groups are ignored) and refuses later appends and new series in
 * it. Its history stays readable until evicted or deleted.
 */
void fs_ring_group_seal(struct fs_ring *r, int32_t group, const uint32_t *series, size_t n);

/** Undoes fs_ring_group_seal (its producer is back): appends and new series go in again,
 * each series opening a new head chunk at its next sample. */
void fs_ring_group_reopen(struct fs_ring *r, int32_t group);

/** Deletes a series and its history. */
void fs_ring_series_delete(struct fs_ring *r, uint32_t series);

/** Deletes a group; all its series must have been deleted. */
void fs_ring_group_delete(struct fs_ring *r, int32_t group);

/**
 * Appends one batch: n samples of series of `group`, all taken at ts_us. Timestamps of a
 * group must not go backwards (a batch older than the group's last is refused: -1).
 * A sample that cannot be stored (no memory) is skipped whole (-1): its series' chunk
 * is left exactly as before it.
 * A series appears at most once per batch. Evicts as needed to stay within the bounds.
 * Returns 0 or -1. A point naming an unknown series, another group's series or a series
 * already in this batch is skipped (-1), the batch's other points are still appended.
 * Gauges are stored as the bits of v.d, so every double (NaN payloads, -0.0) comes back
 * as it went in.
 */
int fs_ring_append(struct fs_ring *r, int32_t group, int64_t ts_us, const struct fs_ring_point *pts,
                   size_t n);

/**
 * Reads the samples of a series with start_us <= ts <= end_us, oldest first, into out
 * (at most max). Returns the number written, or -1 if the series does not exist. If
 * more than max match, *truncated is set (may be NULL).
 */
long fs_ring_read(struct fs_ring *r, uint32_t series, int64_t start_us, int64_t end_us,
                  struct fs_ring_sample *out, size_t max, bool *truncated);

/** Like fs_ring_read, but -1 also when the id's current generation is not gen. */
long fs_ring_read_gen(struct fs_ring *r, uint32_t series, uint32_t gen, int64_t start_us,
                      int64_t end_us, struct fs_ring_sample *out, size_t max, bool *truncated);

/**
 * Test hook: after `after` more successful allocations, every allocation of the ring
 * fails (as if out of memory) until called again with after < 0.
 */
void fs_ring_test_fail_allocs(struct fs_ring *r, long after);

/** Fills the statistics (consistent snapshot). */
void fs_ring_stats(struct fs_ring *r, struct fs_ring_stats *st);

#endif
