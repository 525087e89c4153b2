/*
 * The ring as the analysis reads it: the departures of every analysed series of a range
 * (fs_ring_scan), and any chosen series read as values and rates (fs_ring_scan_read, for
 * the trace export's counter tracks).
 *
 * What is analysed. The series whose metric fs_an_classify names (analysis/incidents.h),
 * counters as rates (their scale applied), each with a time uncertainty per (target,
 * source): the larger of half the instance's last poll duration and its measured clock
 * uncertainty (a series without a known source gets its target's worst). A counter's
 * floor is raised to its step (fs_an_step_floor) from the samples read.
 *
 * Baselines. A full scan can hand on each series' trailing baseline at its end
 * (base_out); a later scan given those (tail) reads only the samples after their time
 * against them (fs_departures_add_fixed), the runs before being the caller's to supply
 * (the episode log). Series without enough samples for a baseline are left out of it.
 *
 * Threads. fs_ring_scan reads on up to FS_RING_SCAN_THREADS threads of its own (series
 * are independent and the store allows concurrent readers), joined before it returns; the
 * parts are joined in order, so the result does not depend on how many ran. Store locks
 * are held only inside the store's foreach and read calls.
 *
 * Ownership. fs_ring_scan returns a finished fs_departures the caller frees with
 * fs_departures_free; base_out's array is the caller's (fs_ring_scan_baselines_clear).
 * Series handed to callbacks are valid during the callback only.
 */
#ifndef FS_ANALYSIS_RING_SCAN_H
#define FS_ANALYSIS_RING_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/incidents.h"
#include "store/store.h"

#define FS_RING_SCAN_THREADS 4

/** One series as the scans read it. */
struct fs_ring_scan_series {
    uint32_t id, gen; /**< the (id, generation) pair fs_store_read() takes */
    const char *target, *interface, *tc, *rule, *metric, *source; /**< "" when absent */
    const char *direction, *priority; /**< pause frames: "rx"/"tx", the PFC priority; "" */
    enum fs_an_kind kind; /**< FS_AN_OTHER for a series the analysis does not classify */
    bool counter;         /**< read as rates */
    double scale;         /**< the store's scale of the counter (1 when it has none) */
    double floor;         /**< fs_an_classify's scale floor */
};

/** A series' baseline handed on by a full scan (fs_an_trailing_baseline). */
struct fs_ring_scan_baseline {
    uint32_t id, gen; /**< the store's series */
    double med, scale;
};

/** Every series' trailing baseline at the end of a full scan. */
struct fs_ring_scan_baselines {
    int64_t at_us;                   /**< the full scan's end; 0: none */
    struct fs_ring_scan_baseline *b; /**< sorted by (id, gen); owned */
    size_t n;
};

/** Frees the array and empties bl (at_us 0). */
void fs_ring_scan_baselines_clear(struct fs_ring_scan_baselines *bl);

/**
 * The departures of every analysed series over [start_us, end_us] (finished), read with
 * the baseline window before start_us; with tail, only the samples after its at_us
 * against its baselines for the series it holds. With base_out (a full scan), each
 * series' trailing baseline at end_us is handed out there (tail and base_out are not
 * used together). NULL with err ("out of memory") on failure.
 */
struct fs_departures *fs_ring_scan(struct fs_store *st, const struct fs_an_opts *opts,
                                   int64_t start_us, int64_t end_us,
                                   const struct fs_ring_scan_baselines *tail,
                                   struct fs_ring_scan_baselines *base_out, char *err,
                                   size_t errlen);

/** Chooses the series fs_ring_scan_read reads (s as fs_store_foreach_series gives it). */
typedef bool (*fs_ring_scan_match)(void *arg, const struct fs_series_info *s);

/** One series read: n samples (epoch µs, value; counters as rates per second times scale). */
typedef int (*fs_ring_scan_series_cb)(void *arg, const struct fs_ring_scan_series *s,
                                      const int64_t *ts_us, const double *v, size_t n);

/**
 * Reads the series match chooses (with match NULL, the analysed ones; a chosen series is
 * read as a counter when the store keeps it as one) over [start_us, end_us] and calls cb
 * for each with samples there, in the store's order; cb returns non-zero to stop. 0 (all
 * read, or cb stopped), or -1 with err ("out of memory").
 */
int fs_ring_scan_read(struct fs_store *st, int64_t start_us, int64_t end_us,
                      fs_ring_scan_match match, void *match_arg, fs_ring_scan_series_cb cb,
                      void *arg, char *err, size_t errlen);

#endif
