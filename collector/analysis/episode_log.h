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
 * record call) are dropped, then the oldest runs while what the log really holds exceeds
 * memory_limit (the arrays at their capacity, the hash table, the series' names, each
 * allocation as malloc rounds it; fs_episode_log_stats' bytes); both are counted. A run
 * that ends more than a minute after now (a device clock ahead) is clamped to end then,
 * its other times no later, and counted: dated in the future it would never age out.
 *
 * Replay. fs_episode_log_replay adds the logged runs that start before `before_us` and
 * end at or after start_us to an unfinished fs_departures, reusing its series where they
 * are the same (same target, interface, tc, rule and metric), so runs from the ring and
 * from the log of one series form one series.
 *
 * Snapshot. fs_episode_log_snapshot writes the log (its live runs, the series they belong
 * to with each series' latest logged extent) in a versioned binary layout with a CRC-32;
 * fs_episode_log_restore replaces the log's content by a snapshot's only when the whole
 * snapshot is valid (else the log is unchanged and err says what is wrong), then clamps
 * and bounds it as a record call at now_us would. fs_episode_log_save / _load do the same
 * with a file (written beside and renamed over, see util/file.h; read only when a regular
 * file within twice the memory limit). _load returns 1 when there is no file.
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
    uint64_t generation;                        /**< changes whenever the content does */
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

struct fs_buf;
/** Appends the snapshot to out; *generation (may be NULL): the content's generation it
 *  holds. 0, or -1 (no memory, or out's maximum). */
int fs_episode_log_snapshot(struct fs_episode_log *l, int64_t now_us, struct fs_buf *out,
                            uint64_t *generation);
/** 0, or -1 with err (the log unchanged). */
int fs_episode_log_restore(struct fs_episode_log *l, const void *data, size_t len, int64_t now_us,
                           char *err, size_t errlen);
/** 0, or -1 with err (the file at path unchanged). */
int fs_episode_log_save(struct fs_episode_log *l, const char *path, int64_t now_us, char *err,
                        size_t errlen, uint64_t *generation);
/** 0 restored, 1 no file, -1 with err (the log unchanged). */
int fs_episode_log_load(struct fs_episode_log *l, const char *path, int64_t now_us, char *err,
                        size_t errlen);

#endif
