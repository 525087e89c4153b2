/*
 * Departures read from a Prometheus-compatible query API (analysis.history): the series
 * this instance does not hold (targets of other shards, or a time before its own data
 * began), as Prometheus stores them after a scrape of /metrics (job and instance added)
 * or after our remote_write (external labels added). Such extra labels are ignored;
 * a series stored more than once (HA replicas, both scraped and remote-written) is read
 * once. Metrics and their kinds are the ones fs_an_classify names.
 *
 * Resolution. The first reading takes each counter's largest rate between two stored
 * samples within each step (max_over_time of irate, at the scrape interval's resolution:
 * a 2 s surge of a busy port is a few percent of a minute's increase, but the whole of
 * one scrape interval's), gauges as max_over_time over each step (a short high
 * survives). The step is the configured one, coarsened so that series x points stays
 * within max_points and no series exceeds the API's 11,000 points. That first reading
 * only finds the series that depart: they are read again as the raw samples stored (a
 * range-vector selector, at most max_points per query), and their departures are found
 * on those, so onsets are placed to a sample and counter rates are taken between real
 * samples (a step finer than the scrape interval would repeat stale values). A baseline
 * window holds at least 24 steps.
 *
 * Time. A sample is placed where its information lies, with how well that is known as the
 * series' time uncertainty. A sample stored by a Prometheus that scraped fabricscope
 * (its series carry job or instance) is stamped at the scrape, up to one poll interval P
 * after the poll it shows: a counter's increase between two scrapes covers the device's
 * activity from up to P before the first to the second, so its rate is placed P/2
 * earlier, give or take P/2; a queue watermark covers the poll interval before its poll,
 * and its run the interval before its sample (fs_an_is_watermark), placed P/2 earlier
 * give or take P/2 too; an instantaneous gauge P/2 earlier give or take P/2.
 * Where that scrape also stored fabricscope_target_last_sample_timestamp_seconds (the
 * time of the poll its values come from; fabricscope exports it for every instance), the
 * raw samples of the second reading are placed by it instead: each value at its poll, a
 * scrape that showed the same poll again left out, a counter's rate taken over the
 * interval between two polls (never the scrape's, which holds one poll or two, a +-50%
 * swing), as if remote-written ("restamped"; a copy whose scrapes lack the poll time for
 * more than a tenth of its samples is placed as above). The first reading stays on the
 * scrape grid: dividing by the poll times there doubled the cost of a request over a
 * pod's eight hours and changed no answer of the evaluation.
 * A sample sent by remote_write carries its poll's own time (no job, no instance) and is
 * placed there, within half a sample interval. A value read at step S covers the step
 * before it: placed S/2 earlier too, give or take S/2.
 *
 * Threads: none inside; the client is used by the caller's thread.
 */
#ifndef FS_ANALYSIS_HISTORY_SCAN_H
#define FS_ANALYSIS_HISTORY_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis/incidents.h"
#include "history/prom_query.h"

/** The gauge fabricscope exports with the time of the poll its values come from. */
#define FS_HISTORY_POLL_TIME_METRIC "fabricscope_target_last_sample_timestamp_seconds"

/** What one scan read, for the answers that used it. */
struct fs_history_scan_info {
    int64_t step_us;         /**< the step every series was read at first */
    uint64_t refined;        /**< series that departed then, read again as raw samples */
    uint64_t restamped;      /**< of those, scraped copies placed by their stored poll times */
    uint64_t polls_stored;   /**< polls the copies whose poll times were read hold */
    uint64_t polls_unstored; /**< polls between those that no scrape stored (the scrape
                                  slower than the poll; outages of over 5 polls apart) */
    uint64_t series;         /**< distinct series read */
    uint64_t duplicates;     /**< series read again under other extra labels, ignored */
    uint64_t points;
    int64_t earliest_us;     /**< first point read (0: none) */
    int64_t cached_until_us; /**< set by the caller when what came before was not read
                                  again but taken from an earlier read (0: all read) */
    char error[256];         /**< "" when the whole scan succeeded */
};

/** How the history is read and placed (analysis.history). */
struct fs_history_read {
    int64_t step_us;            /**< the first reading's step (coarsened as above) */
    uint64_t max_points;        /**< the first reading's points, and each raw query's */
    int64_t scrape_interval_us; /**< of a Prometheus that scraped /metrics */
    int64_t poll_interval_us;   /**< of the fabricscope it scraped */
};

/** Whether a target is this instance's own; for its own, *poll_us gets the longest poll
 *  interval it polls the target at (a scraped sample of it is placed by that, not by
 *  fs_history_read.poll_interval_us). */
typedef bool (*fs_history_is_local)(void *arg, const char *target, int64_t *poll_us);

/**
 * Adds to d (not finished: the caller calls fs_departures_finish) the departures the
 * history shows over [start_us, end_us] (reading baseline_window before start): for a
 * target is_local names, only its samples before local_before_us; for the others, all.
 * With only_local, the other targets are left out (a restart's backfill of this
 * instance's own episodes). A series already in d keeps its index. Returns 0, or -1 with
 * info->error set (d then
 * holds what was read before the failure; memory failures are "out of memory").
 */
int fs_history_scan(struct fs_prom_client *c, const struct fs_history_read *rd,
                    struct fs_departures *d, int64_t start_us, int64_t end_us,
                    fs_history_is_local is_local, void *arg, int64_t local_before_us,
                    bool only_local, struct fs_history_scan_info *info);

#endif
