/*
 * The episode log: every departure run the analysis found (series, start, end, onset,
 * peak, baseline, kind), kept compactly for days after the ring has dropped the samples,
 * so that a stall recurring every 30 minutes or every 6 hours is still seen recurring
 * when only the last hour of raw samples is in memory.
 *
 * Recording. fs_episode_log_record takes a finished fs_departures of a scan (usually the
 * ring's whole span, every refresh). Scans overlap, so each series' runs are reconciled
 * with what the log holds: a run that overlaps or continues (within merge_gap) the
 * series' latest logged run extends it; one that ends before it was logged already and is
 * skipped; a later one is appended.
 *
 * Bounds. Runs whose end is older than retention (relative to the now of the last
 * record call) are dropped, then the oldest runs while the log's bytes (runs and series
 * names, as counted by fs_episode_log_stats) exceed memory_limit; both are counted. A run
 * that ends more than a minute after now (a device clock ahead) is clamped to end then,
 * its other times no later, and counted: dated in the future it would never age out.
 *
 * Replay. fs_episode_log_replay adds the logged runs that start before `before_us` and
 * end at or after start_us to an unfinished fs_departures, reusing its series where they
 * are the same (same target, interface, tc, rule and metric), so runs from the ring and
 * from the log of one series form one series.
 *
 * Ownership: fs_episode_log_new returns an object freed with fs_episode_log_free; it copies
 * what it keeps. Threads: every call takes the log's own lock.
 */
#ifndef FS_ANALYSIS_EPISODE_LOG_H
#define FS_ANALYSIS_EPISODE_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/incidents.h"

struct fs_episode_log_opts {
    int64_t retention_us;  /**< default 7 days */
    uint64_t memory_limit; /**< bytes; default 64 MiB */
    int64_t merge_gap_us;  /**< runs of one series this close are one; default 2 s */
};

struct fs_episode_log_stats {
    size_t runs, series;
    uint64_t bytes, memory_limit;
    uint64_t evicted_retention, evicted_memory; /**< runs, since creation */
    uint64_t clamped_future;                    /**< runs dated past now, clamped (Bounds) */
    int64_t oldest_start_us;                    /**< INT64_MAX when empty */
};

struct fs_episode_log;

/** NULL opts: the defaults. NULL on no memory. */
struct fs_episode_log *fs_episode_log_new(const struct fs_episode_log_opts *o);
void fs_episode_log_free(struct fs_episode_log *l);
/** New bounds, applied at the next record call. */
void fs_episode_log_set_opts(struct fs_episode_log *l, const struct fs_episode_log_opts *o);

/** Records the runs of d (finished), then applies the bounds at now_us. 0 or -1 (no
 *  memory: the runs recorded so far stay, the log stays consistent). */
int fs_episode_log_record(struct fs_episode_log *l, const struct fs_departures *d, int64_t now_us);

/** Adds to d (not finished) the logged runs with start < before_us and end >= start_us.
 *  0 or -1 (no memory). */
int fs_episode_log_replay(struct fs_episode_log *l, struct fs_departures *d, int64_t start_us,
                          int64_t before_us);

void fs_episode_log_stats(struct fs_episode_log *l, struct fs_episode_log_stats *s);

#endif
