/*
 * Switch-side episodes without any host data: departures of each series from its own
 * baseline, merged across series into episodes, grouped when they recur, with the
 * period, its spread and the next expected time.
 *
 * Input. The caller pushes series one at a time (fs_departures_add) as arrays of
 * timestamps (collector-axis µs, ascending) and values; counters are given as rates
 * (fs_an_counter_rates converts raw samples). A series' arrays are only read during the
 * call, so a feeder can reuse one buffer for every series (e.g. reading the store series
 * by series with fs_store_read). Only series with departures are remembered (their
 * labels copied), so memory follows the number of departures, not of series.
 *
 * Baseline. Per series, the median and MAD of the samples in the trailing
 * baseline_window before each block of baseline_step (the first block uses the window
 * after it when nothing precedes it), from at most FS_AN_BASELINE_SAMPLES evenly strided
 * samples (64: the median and MAD to within ~15%, which the threshold of 6 absorbs). The scale is
 * max(1.4826 MAD, rel_floor * |median|, the series' abs_floor); a sample departs when (value -
 * median) / scale >= z_threshold (upward only: surges, high water, bursts, storms). A series whose
 * whole swing (max - min) is under z_threshold * abs_floor, or whose departure from one whole-range
 * baseline never reaches prefilter * z_threshold, is skipped without the block analysis (this is
 * what keeps 100,000 series within budget; a surge that is small against the whole
 * range's spread but large against a quiet stretch can be missed).
 *
 * Time. A rate sample covers (previous timestamp, timestamp]; a departure run of rates
 * starts at the previous sample's timestamp, and so does one of a watermark gauge (the
 * deepest since the previous sample). Other gauges are instants.
 *
 * Ownership. fs_departures_new returns an object the caller frees with
 * fs_departures_free; reports are freed with fs_incident_report_free. Strings in them
 * are owned by the departures object (keep it alive while using a report).
 * Threads: objects belong to one caller. fs_incidents_find fits the ports' episode
 * trains on up to 4 threads of its own (one an online CPU), joined before it returns;
 * the result does not depend on how many ran.
 */
#ifndef FS_ANALYSIS_INCIDENTS_H
#define FS_ANALYSIS_INCIDENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_AN_BASELINE_SAMPLES 64

/** What a series measures, for naming episodes. */
enum fs_an_kind {
    FS_AN_ECN = 0, /**< ECN-marked packets rate: "ECN surge" */
    FS_AN_QUEUE,   /**< queue depth / watermark: "queue high water" */
    FS_AN_DROP,    /**< drops and discards rate: "drop burst" */
    FS_AN_PFC,     /**< PFC pause frames / time, TX wait: "PFC storm" */
    FS_AN_OTHER,
    FS_AN_KIND_COUNT
};

/** "ECN surge", "queue high water", "drop burst", "PFC storm", "departure". */
const char *fs_an_kind_phrase(enum fs_an_kind k);
/** "ecn", "queue", "drop", "pfc", "other". */
const char *fs_an_kind_name(enum fs_an_kind k);

/**
 * Classifies a catalogue metric name: true for the metrics the analysis looks at, with
 * their kind, whether the series is a counter (analyse its rate) and a floor for the
 * scale (in the metric's unit per second for counters) so that a series that is flat
 * zero does not turn one stray packet into an infinite departure.
 */
bool fs_an_classify(const char *metric, enum fs_an_kind *kind, bool *counter, double *abs_floor);

/** True for a watermark gauge (the largest value since the previous sample, e.g.
 *  fabric_queue_depth_max_bytes): like a rate it covers the interval before its sample,
 *  and a departure run of it starts at the sample before. */
bool fs_an_is_watermark(const char *metric);

/** The i-th metric fs_an_classify knows (i from 0), NULL past the last. */
const char *fs_an_metric(size_t i);

/** One series handed to the analysis (all pointers the caller's, read during the call). */
struct fs_an_series {
    const char *target, *interface, *tc, *rule; /**< NULL when the series has none */
    const char *direction, *priority;           /**< "rx"/"tx" and the PFC priority, or NULL */
    const char *metric;
    enum fs_an_kind kind;
    bool is_rate; /**< v[i] is a rate over (ts[i-1], ts[i]] */
    const int64_t *ts_us;
    const double *v;
    size_t n;
    double abs_floor;            /**< scale floor (see above); <= 0 means tiny */
    int64_t time_uncertainty_us; /**< how well ts places a value on the collector axis */
};

/**
 * Turns raw counter samples (monotonic, as the store keeps them) into rates per second
 * times scale: out_ts[i] = ts[i+1], out_v[i] = (u[i+1] - u[i]) * scale / dt. Returns
 * n - 1 (0 when n < 2). Samples with dt <= 0 are skipped; a decrease gives rate 0.
 */
size_t fs_an_counter_rates(const int64_t *ts_us, const uint64_t *u, size_t n, double scale,
                           int64_t *out_ts, double *out_v);

/**
 * The step of a counter: a counter whose every increase is a whole multiple of one g > 1
 * (at least FS_AN_MIN_STEPS increases seen) moves in steps of g. That is a sampled
 * estimate (sFlow: each sample adds the sampling rate) or a coarse counter, and one
 * step per interval is the finest rate it can show: a series that sits at zero would
 * otherwise depart (z = rate / floor in the thousands) on a single sample. Feed the raw
 * increases with fs_an_step_add (0 is ignored; a decrease is a reset, not a step), then
 * fs_an_step_floor gives the floor to use for the series' rate: max(abs_floor,
 * g * scale per mean sample interval), or abs_floor when no step was established. An
 * exact counter reaches g = 1 after a few increases and keeps its floor.
 */
#define FS_AN_MIN_STEPS 4
struct fs_an_step {
    uint64_t g;   /**< gcd of the increases so far (0: none yet) */
    size_t n_inc; /**< increases seen */
};
void fs_an_step_add(struct fs_an_step *st, uint64_t inc);
/** ts_us[0], ts_us[n-1] and n give the mean interval; scale turns a raw step into the
 *  series' unit. */
double fs_an_step_floor(const struct fs_an_step *st, double abs_floor, int64_t first_us,
                        int64_t last_us, size_t n, double scale);

struct fs_an_opts {
    double z_threshold;         /**< default 6 */
    double prefilter;           /**< fraction of z_threshold, default 0.75 */
    double rel_floor;           /**< default 0.05 */
    int64_t baseline_window_us; /**< default 600 s */
    int64_t baseline_step_us;   /**< default 600 s */
    int64_t merge_gap_us;       /**< runs closer than this form one episode, default 2 s */
    double max_period_spread;   /**< recurring if spread <= this * period, default 0.1 */
    size_t min_occurrences;     /**< default 3 */
};

void fs_an_opts_default(struct fs_an_opts *o);

/** A remembered series (one that departed at least once). */
struct fs_an_series_ref {
    const char *target, *interface, *tc, *rule, *metric; /**< "" when absent */
    enum fs_an_kind kind;
    int64_t time_uncertainty_us;
    const char *direction, *priority; /**< "" when absent */
};

/**
 * How departing series rank, wherever switch series are named for a window or an
 * episode. By peak z up to FS_AN_Z_SURE: past it a departure is certain, and the size of
 * z only says how quiet the series was before (a counter that sat at zero gets
 * z = rate / floor, 20,000 for a surge), so comparing two such values ranks noise. Among
 * certain ones the most specific series comes first (fs_an_specificity), then the
 * larger z. Returns < 0 when (za, spec_a) ranks before (zb, spec_b), > 0 after, 0 tied.
 */
#define FS_AN_Z_SURE 100.0
int fs_an_rank_cmp(double za, int spec_a, double zb, int spec_b);
/** 3: port and traffic class (a queue), 2: a port, 1: a flow rule, 0: the switch. */
int fs_an_specificity(const struct fs_an_series_ref *s);
/** How answers name a series: "tor1 Eth1/49 tc3", "tor1 Eth1/49 rx priority 3", "tor1
 *  rule iperf" (target, then the interface, traffic class, flow rule, direction and
 *  priority it has). */
void fs_an_port_text(char *out, size_t len, const struct fs_an_series_ref *s);

/** A departure run of one series. */
struct fs_departure {
    uint32_t series; /**< index into fs_departures' series */
    int64_t start_us, end_us, peak_us;
    int64_t onset_us;  /**< best estimate of when it began: midway between the last
                            sample before it and its first sample (for recurrences) */
    double peak_z;     /**< (peak - baseline) / scale, capped at 1e9 */
    double peak_value; /**< the value at the peak (rate per second for counters) */
    double baseline;   /**< the median it departed from */
};

struct fs_departures {
    struct fs_an_opts opts;
    int64_t start_us, end_us;
    int64_t observed_start_us; /**< since when series were watched (>= start_us when the
                                    history is shorter than the range): the base of each
                                    series' episode rate when telling periodic from random */
    struct fs_an_series_ref *series;
    size_t n_series, cap_series;
    struct fs_departure *runs; /**< by start after fs_departures_finish */
    size_t n_runs, cap_runs;
    int64_t max_time_uncertainty_us; /**< largest of the remembered series' */
    int64_t max_run_us;              /**< longest run, for window look-ups */
    int64_t ring_scan_start_us;      /**< set by the caller: where its read of raw samples
                                          began (the runs before came from elsewhere) */
    size_t series_scanned, series_prefiltered;
    bool finished;
    int8_t *scratch; /**< the scan's own (per-sample flags), reused from series to series */
    size_t scratch_cap;
};

/** Creates an empty set for the range [start_us, end_us]; NULL on no memory. */
struct fs_departures *fs_departures_new(const struct fs_an_opts *o, int64_t start_us,
                                        int64_t end_us);
/** Scans one series (samples outside the range are used for the baseline only). 0 or -1. */
int fs_departures_add(struct fs_departures *d, const struct fs_an_series *s);
/**
 * The baseline a scan ending at at_us hands on to the next samples: the median and
 * scale (as above) of s's samples in [at_us - baseline_window, at_us). False when fewer
 * than 8 samples are there. Lets a caller scan only the samples after at_us later
 * (fs_departures_add_fixed) instead of reading the window again.
 */
bool fs_an_trailing_baseline(const struct fs_an_series *s, int64_t at_us,
                             const struct fs_an_opts *o, double *median, double *scale);
/**
 * Like fs_departures_add, with one baseline given for the whole range instead of one per
 * block (no whole-range prefilter: a series whose maximum stays under the threshold
 * against it is skipped). For the short range after a full scan. 0 or -1 (no memory).
 */
int fs_departures_add_fixed(struct fs_departures *d, const struct fs_an_series *s, double median,
                            double scale);

/**
 * Moves everything src found into dst (src is left empty; both must be unfinished and
 * cover the same range). Lets several threads scan disjoint sets of series, each into
 * its own object, and join the results. 0 or -1 (no memory; dst unchanged).
 */
int fs_departures_merge(struct fs_departures *dst, struct fs_departures *src);

/**
 * Adds runs found elsewhere (the episode log): fs_departures_add_ref remembers a series
 * (strings copied; *idx its index), fs_departures_push a run of a remembered series.
 * The caller keeps one index per series. Before fs_departures_finish; 0 or -1 (no memory).
 */
int fs_departures_add_ref(struct fs_departures *d, const struct fs_an_series_ref *s, uint32_t *idx);
int fs_departures_push(struct fs_departures *d, const struct fs_departure *run);

/** The analysis' identity of a series as a hash of metric, target, interface, tc, rule,
 *  direction and priority (equal series, equal keys; NULL fields read as ""). */
uint64_t fs_an_series_key(const char *metric, const char *target, const char *interface,
                          const char *tc, const char *rule, const char *direction,
                          const char *priority);

/** Index of the first run of d (finished: runs by start) starting after t. */
size_t fs_departures_runs_after(const struct fs_departures *d, int64_t t);

/**
 * Adds src's runs that end in [from_us, to_us) to dst (unfinished), with their series: a
 * series dst already has (same target, interface, tc, rule, metric, direction and
 * priority) keeps its index, others are added. src is not changed. 0 or -1 (no memory).
 */
int fs_departures_absorb(struct fs_departures *dst, const struct fs_departures *src,
                         int64_t from_us, int64_t to_us);
/** The same, of those runs only the ones starting at or before start_before_us. */
int fs_departures_absorb_span(struct fs_departures *dst, const struct fs_departures *src,
                              int64_t from_us, int64_t to_us, int64_t start_before_us);

/** Orders the runs by start; call once after the last add. 0 or -1 (no memory). */
int fs_departures_finish(struct fs_departures *d);

/**
 * Fills out[0..n) with 0..n-1 ordered by key (ascending, stable): an LSD radix sort, as
 * run and episode counts reach millions. 0 or -1 on no memory.
 */
int fs_an_order_by_key(const int64_t *key, size_t n, uint32_t *out);
void fs_departures_free(struct fs_departures *d);

/** One port (or flow rule) taking part in an episode. */
struct fs_episode_member {
    uint32_t series;
    double peak_z;
    int specificity; /**< fs_an_specificity of the series (ranking) */
    int64_t start_us, onset_us;
};

struct fs_episode {
    int64_t start_us, end_us;
    double peak_z;
    unsigned kinds;                    /**< bit (1 << fs_an_kind) per kind seen */
    struct fs_episode_member *members; /**< strongest first (fs_an_rank_cmp) */
    size_t n_members;
};

/** A recurring group: the ports (series) that depart together periodically. */
struct fs_recurrence {
    uint32_t *series; /**< the group's series, strongest first */
    size_t n_series;
    size_t occurrences; /**< episodes that fit the period */
    size_t *episodes;   /**< their indexes, ascending */
    double period_us;   /**< least-squares period over the occurrences */
    double spread_us;   /**< RMS distance of the occurrences from the fitted grid, after
                             stray bursts far off it were left out (a robust refit) */
    double confidence;  /**< 1 - the chance (times the periods tried and the series the
                             fabric offered to chance) that a random burst train at the
                             series' own rate fits as well, its slots empty since the
                             series' first episode as strong as the hits counted, and,
                             with slow host windows, meets as many of them */
    size_t host_hits;   /**< occurrences that met a slow host window (fs_incidents_find_hosts) */
    int64_t first_us, last_us;
    int64_t next_us; /**< first predicted occurrence after the range's end */
    unsigned kinds;
};

struct fs_incident_report {
    struct fs_episode *episodes; /**< by start */
    size_t n_episodes;
    struct fs_recurrence *groups; /**< most occurrences first */
    size_t n_groups;
    bool hosts_reporting; /**< slow host windows were given */
};

/**
 * Slow host windows (each already widened by its clock uncertainty) that the recurrence
 * search weighs: a train whose occurrences meet them is less likely chance (the chance
 * that random occurrences meet as many multiplies the timing's), which lets a stall be
 * reported at its third occurrence in a fabric of thousands of series. An occurrence
 * meets a window within margin_us.
 */
struct fs_incident_hosts {
    const int64_t *start_us, *end_us;
    size_t n;
    int64_t margin_us;
};

/**
 * Merges the departures into episodes and finds the recurring groups. now_us is the
 * time after which the next occurrence is predicted (usually the range's end).
 * Returns 0 with *out set (free with fs_incident_report_free), or -1 on no memory.
 */
int fs_incidents_find(const struct fs_departures *d, int64_t now_us,
                      struct fs_incident_report **out);
/** The same with slow host windows (NULL or none: as fs_incidents_find). */
int fs_incidents_find_hosts(const struct fs_departures *d, int64_t now_us,
                            const struct fs_incident_hosts *hosts, struct fs_incident_report **out);
void fs_incident_report_free(struct fs_incident_report *r);

/**
 * Host evidence for r's recurring groups. The n slow host windows [start_us[i],
 * end_us[i]] (any order; each already widened by its own clock uncertainty) are matched
 * to each group's occurrences (its episodes, widened by margin_us on both sides): for
 * group g, occ_with_slow[g] is how many of its occurrences overlap a window and
 * slow_during[g] how many windows overlap one of its occurrences. Then r's groups are
 * stably reordered by the share of their occurrences with a slow window, largest first,
 * and both arrays with them (each sized r->n_groups by the caller). Without windows
 * nothing moves.
 * Returns 0, or -1 on no memory.
 */
int fs_incidents_host_evidence(struct fs_incident_report *r, const int64_t *start_us,
                               const int64_t *end_us, size_t n, int64_t margin_us,
                               size_t *occ_with_slow, size_t *slow_during);

#endif
