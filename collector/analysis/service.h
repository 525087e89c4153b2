/*
 * The analysis service: what lines the switch side up with the hosts' and diagnoses a
 * stall, with the state that outlives a request. It holds the host-event store, the
 * episode log, the analysis settings, the baselines of the last full scan of the ring,
 * the flow rules, the host-event token and the incident metrics of the last refresh, and
 * it answers with C results (the HTTP adapter, http/analysis_api.h, parses requests and
 * writes them as JSON).
 *
 * Sources. Departures of a range come from the ring for what it holds (analysis/
 * ring_scan.h), from the episode log for what it no longer holds (analysis/
 * episode_log.h), and from analysis.history for what this instance never held (other
 * shards' targets, the time before its data began; analysis/history_scan.h). A request
 * reaching the present scans only the ring's samples after the last refresh's full scan
 * when its baselines can be trusted (recent, the episode log whole, the same settings):
 * the log holds every run before. The periodic refresh (fs_analysis_refresh) records
 * each scan in the log and recomputes the incident metrics.
 *
 * Time. Every switch series read from the store is placed on the collector's axis
 * already (samples are stamped with the collector's clock on arrival); its time
 * uncertainty is taken as the larger of the target's measured clock uncertainty and
 * half its last poll duration. Host events carry their own offset and uncertainty.
 *
 * Threads. Every function may be called from any thread concurrently. The heavy ones
 * (correlate, incidents, trace, refresh) run one at a time (a mutex that also guards
 * the settings, the baselines and the history client), except the refresh's own scan
 * of the ring, which runs outside it so requests are not held up. Store locks are held
 * only inside the store's foreach/read calls; the host-event store and the episode log
 * take their own locks.
 *
 * Ownership. fs_analysis_new returns an object the caller frees with fs_analysis_free; it
 * owns the host-event store and the episode log. Strings and arrays passed in are copied
 * when kept. Each run call's result has one owner, the caller, who frees it with the
 * matching _free function; the strings in it are the result's own.
 */
#ifndef FS_ANALYSIS_SERVICE_H
#define FS_ANALYSIS_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/correlate.h"
#include "analysis/episode_log.h"
#include "analysis/history_scan.h"
#include "analysis/host_events.h"
#include "analysis/incidents.h"
#include "config/config.h"
#include "store/store.h"
#include "util/buf.h"

/** The most windows one correlation explains (explicit ones, or the slowest events). */
#define FS_ANALYSIS_MAX_WINDOWS 1000

struct fs_analysis;

/** Creates the analysis context with its host-event store; NULL with err on failure. */
struct fs_analysis *fs_analysis_new(const struct fs_host_events_opts *o, char *err, size_t errlen);
void fs_analysis_free(struct fs_analysis *a);

/** The analysis settings (config `analysis:`): departures, episodes and recurrences, the
 *  default window of incidents, the episode log's bounds. */
struct fs_analysis_opts {
    struct fs_an_opts an;           /**< thresholds, baseline, merge gap, recurrence */
    int64_t horizon_us;             /**< default and metrics window of incidents; 24 h */
    int64_t request_wait_us;        /**< how long a request waits for another analysis; 30 s */
    struct fs_episode_log_opts log; /**< retention 7 d, 64 MiB (merge gap taken from an) */
};
void fs_analysis_opts_default(struct fs_analysis_opts *o);
/** Applies o (copied) from the next analysis on. Thread-safe. */
void fs_analysis_set_opts(struct fs_analysis *a, const struct fs_analysis_opts *o);
/** The settings in force (copied out). Thread-safe. */
void fs_analysis_get_opts(struct fs_analysis *a, struct fs_analysis_opts *o);
/** opts' horizon and episode retention alone, without waiting for a running analysis
 * (fs_analysis_get_opts does). Thread-safe. */
void fs_analysis_get_range_limits(struct fs_analysis *a, int64_t *horizon_us,
                                  int64_t *retention_us);
/**
 * Sets (cfg copied) or removes (NULL) the history that incidents and correlations also
 * read (analysis.history; see analysis/history_scan.h): what the ring and the episode
 * log do not hold, i.e. the targets this instance does not poll and the time before its
 * own data began. The periodic refresh of the incident metrics does not read it (each
 * shard exports its own targets' incidents). 0, or -1 with err. Thread-safe.
 */
int fs_analysis_set_history(struct fs_analysis *a, const struct fs_history_cfg *cfg, char *err,
                            size_t errlen);
/** The episode log (owned by the context). */
struct fs_episode_log *fs_analysis_episode_log(struct fs_analysis *a);

/** The host-event store (owned by the context; for posts and reload of its bounds). */
struct fs_host_events *fs_analysis_host_events(struct fs_analysis *a);

/**
 * The fabric's links (topology/topology.h) that correlation traces congestion along: a
 * received pause is its link partner's, and each window lists the origin's propagation
 * tree. NULL (the default): no links known. Not owned: topo outlives a, or is set back
 * to NULL first. Set before requests are served (not synchronised with them).
 */
struct fs_topo;
void fs_analysis_set_topology(struct fs_analysis *a, struct fs_topo *topo);

/**
 * Sets the bearer token that posting host events requires (copied); NULL or "" disables
 * posting. 0 or -1 (no memory). Thread-safe.
 */
int fs_analysis_set_token(struct fs_analysis *a, const char *token);

/** A per-host token of host_events.tokens. */
struct fs_analysis_token {
    const char *name;  /**< 1..FS_HOST_EVENTS_MAX_POSTER bytes */
    const char *token; /**< the secret */
    const char *hosts; /**< fnmatch(3) pattern of the host names it may post for */
    uint64_t quota;    /**< bytes of events it may hold; 0: the store's limit only */
};
/** Sets the shared token (NULL or "": none) and the per-host tokens (copied; n 0: none).
 *  0 or -1 (no memory: the previous ones stay). */
int fs_analysis_set_tokens(struct fs_analysis *a, const char *shared,
                           const struct fs_analysis_token *tokens, size_t n);

/** Who a matching token says posts: name "" for the shared token (hosts "" and quota 0:
 *  any host, the store's limit only). */
struct fs_analysis_poster {
    char name[FS_HOST_EVENTS_MAX_POSTER + 1];
    char hosts[FS_HOST_EVENTS_MAX_STR + 1];
    uint64_t quota;
};

/** What fs_analysis_check_token found. */
enum fs_analysis_auth {
    FS_ANALYSIS_AUTH_OK,       /**< the token matches */
    FS_ANALYSIS_AUTH_NO_TOKEN, /**< no token is configured: posting is disabled */
    FS_ANALYSIS_AUTH_WRONG,    /**< missing, not "Bearer <token>", or another token */
};
/** Checks an Authorization header value (NULL: none) against the token, in constant
 *  time. Thread-safe. */
enum fs_analysis_auth fs_analysis_check_token(struct fs_analysis *a, const char *authorization);
/** The same, comparing with every token (each in constant time, all of them whatever
 *  matches), and filling *who (may be NULL) when one does. */
enum fs_analysis_auth fs_analysis_check_poster(struct fs_analysis *a, const char *authorization,
                                               struct fs_analysis_poster *who);

/** A flow rule as the analysis needs it (the daemon copies these from the config). */
struct fs_analysis_flow_rule {
    const char *name;
    int protocol;            /**< 0 any, 1 TCP, 2 UDP (enum fs_proto) */
    uint16_t src_lo, src_hi; /**< both 0: any */
    uint16_t dst_lo, dst_hi; /**< both 0: any */
};

/**
 * Sets the flow rules (copied) that host events with sport/dport attrs (perf
 * retransmits, drops) are matched to (fs_analysis_foreach_other_event). 0 or -1 (no
 * memory). Thread-safe.
 */
int fs_analysis_set_flow_rules(struct fs_analysis *a, const struct fs_analysis_flow_rule *rules,
                               size_t n);

/** The flow rules a host event falls under (its sport/dport attrs, the protocol from its
 *  kind: "tcp" or "udp" in it). */
struct fs_analysis_flow_match {
    bool has_ports;           /**< it has a sport or dport attr (else it falls under none) */
    const char *const *names; /**< the rules' names, in the configured order */
    size_t n;
};

/** Called per event; return non-zero to stop. m is valid during the call only. */
typedef int (*fs_analysis_other_event_cb)(void *arg, const struct fs_host_event *e,
                                          const struct fs_analysis_flow_match *m);

/**
 * Calls cb for every host event overlapping [start_us, end_us] (collector axis) whose
 * kind does not match kind (fs_host_event_kind_matches: the events beside the ones a
 * correlation explains), in post order, with the flow rules it falls under. cb runs
 * under the host-event store's read lock and the flow rules' lock. Thread-safe.
 */
void fs_analysis_foreach_other_event(struct fs_analysis *a, int64_t start_us, int64_t end_us,
                                     const char *kind, fs_analysis_other_event_cb cb, void *arg);

/**
 * A device-stamped event (fs_store_set_device_event_listener's callback, arg: the
 * context): kept with the host events, host = the target's name, its clock offset and
 * uncertainty as measured (so it lands on the collector's axis like a host's), attrs
 * plus "source". Stored once however often it is reported. 0, or -1 (logged by the
 * caller's count) when the event is invalid or no memory.
 */
int fs_analysis_device_event(void *a, const struct fs_device_event *e);

/** What analysis.history added to an answer. */
struct fs_analysis_history_use {
    bool used;        /**< it is configured and was read */
    char server[128]; /**< its host[:port] */
    struct fs_history_scan_info info;
};

/** One host event a correlation considered (a copy: strings owned by the correlation). */
struct fs_analysis_event {
    char *host, *kind, *name;
    char *poster;                       /**< the host token that posted it ("": shared) */
    int64_t start_ns, end_ns;           /**< collector axis */
    int64_t host_offset_ns;             /**< host minus collector, as posted */
    int64_t host_offset_uncertainty_ns; /**< that offset's uncertainty */
    size_t group;                       /**< index of its (kind, name) among the events */
};

/** What to correlate. */
struct fs_analysis_correlate_req {
    int64_t start_us, end_us; /**< the range (already covering any explicit window) */
    /** Explicit windows (copied; ref the caller's index), at most FS_ANALYSIS_MAX_WINDOWS;
     *  none: the slow host events of the range are explained. */
    const struct fs_corr_window *windows;
    size_t n_windows;
    const char *kind;   /**< host event kind prefix ("nccl") */
    const char *name;   /**< exact event name, or NULL: any */
    double pct, factor; /**< slow: above the pct-th percentile of its (kind, name)'s
                             durations, or, factor > 0, above factor times their median
                             (fs_corr_mark_slow) */
    bool dump_time;     /**< also events placed at their log's dump time (placement attr) */
    struct fs_corr_opts co;
};

/** A correlation: the switch departures of the range widened by co's lead and lag, and
 *  for each window the series that departed in it, ranked. */
struct fs_analysis_correlation {
    struct fs_departures *departures; /**< owned; the report's series indexes refer to it */
    struct fs_corr_report *report;    /**< owned; results in window order */
    struct fs_corr_window *windows;   /**< owned; the windows explained (without explicit
                                           ones: the slowest events, at most
                                           FS_ANALYSIS_MAX_WINDOWS, in event order, ref the
                                           index into events) */
    size_t n_windows;
    struct fs_analysis_event *events; /**< owned; without explicit windows, every event of
                                           kind (and name) in the range that has a duration */
    size_t n_events;
    size_t left_out_dump_time;              /**< events left out for their placement */
    struct fs_analysis_history_use history; /**< what analysis.history added */
    /** Owned, per window (NULL with explicit windows): its slow ranks, the distinct hosts
     *  of the slow events that overlap it; the window's n_path says how many ports their
     *  paths have (its path pointer is cleared: the ports were the topology's). */
    size_t *slow_ranks;
};

/**
 * Correlates slow host events (or req's windows) with switch departures. now_us is the
 * present (what the ring and the log hold is judged against it). 0 with *out set (free
 * with fs_analysis_correlation_free), or -1 with err ("out of memory"), or FS_ANALYSIS_BUSY.
 */
int fs_analysis_run_correlate(struct fs_analysis *a, struct fs_store *st,
                              const struct fs_analysis_correlate_req *req, int64_t now_us,
                              struct fs_analysis_correlation **out, char *err, size_t errlen);
/** Accepts NULL. */
void fs_analysis_correlation_free(struct fs_analysis_correlation *c);

/** The recurring incidents of a range. */
struct fs_analysis_incidents_req {
    int64_t start_us, end_us;
    const char *kind;   /**< host event kind prefix of the host side */
    double pct, factor; /**< slow host events, as in fs_analysis_correlate_req */
};

/** What the hosts saw during recurring incidents: the host events of a kind in the range,
 *  those past the slow threshold of their (kind, name) (dump-time placements left out),
 *  each widened by its offset's uncertainty, matched to the groups' occurrences
 *  (fs_incidents_host_evidence). */
struct fs_analysis_host_match {
    size_t considered, n_slow, left_out; /**< events of the kind, slow ones, dump-time ones */
    size_t *occ_with_slow, *slow_during; /**< owned; one per group of the report */
};

/** The incidents of a range and what the hosts saw during them. */
struct fs_analysis_incident_findings {
    struct fs_departures *departures;  /**< owned; the report's series indexes refer to it */
    struct fs_incident_report *report; /**< owned; groups ordered by host evidence */
    struct fs_analysis_host_match host;
    struct fs_analysis_history_use history;
    struct fs_episode_log_stats log; /**< the episode log after the run */
};

/**
 * Finds the incidents of [start_us, end_us]: the part the ring holds scanned from it,
 * the part before replayed from the episode log (and analysis.history). A range reaching
 * now_us (within a minute) also records its scan in the log and, when the history was
 * not read, updates the incident metrics (fs_analysis_metrics). The next occurrence is
 * predicted after the range's end, or now_us if that is later. 0 with *out set (free
 * with fs_analysis_incident_findings_free), or -1 with err ("out of memory"), or FS_ANALYSIS_BUSY.
 */
int fs_analysis_run_incidents(struct fs_analysis *a, struct fs_store *st,
                              const struct fs_analysis_incidents_req *req, int64_t now_us,
                              struct fs_analysis_incident_findings **out, char *err, size_t errlen);
/** Accepts NULL. */
void fs_analysis_incident_findings_free(struct fs_analysis_incident_findings *f);

/** What a trace export holds. */
struct fs_analysis_trace_req {
    int64_t start_us, end_us;
    /** The series of the counter tracks; NULL: the analysed metrics (ECN marks, queue
     *  depth, drops, PFC). Called under the store's read lock. */
    bool (*match)(void *arg, const struct fs_series_info *s);
    void *match_arg;
};

/** fs_analysis_run_trace's result when the document outgrew out's maximum. */
#define FS_ANALYSIS_TOO_LARGE (-2)
/** A request waited opts.request_wait_us for another analysis to end and gave up; err
 *  says so (answered 503). fs_analysis_run_correlate, _incidents and _trace return it. */
#define FS_ANALYSIS_BUSY (-3)

/**
 * Writes the Chrome Trace Event JSON of a range (analysis/trace.h) into out (reset
 * first): the chosen series as counter tracks, the departures of the analysed ones in
 * their episodes as instants on their switches, host events as slices (instants for
 * zero-length ones) in start order. 0; -1 with err ("out of memory"); or
 * FS_ANALYSIS_TOO_LARGE (out's content is then incomplete), or FS_ANALYSIS_BUSY.
 */
int fs_analysis_run_trace(struct fs_analysis *a, struct fs_store *st,
                          const struct fs_analysis_trace_req *req, struct fs_buf *out, char *err,
                          size_t errlen);

/**
 * Scans the ring into the episode log and recomputes the incidents of the last horizon
 * for the metrics (the daemon calls this every 30 s from a thread of its own). 0 or -1.
 */
int fs_analysis_refresh(struct fs_analysis *a, struct fs_store *st, int64_t now_us);

/**
 * Keeps the history's departures over the last analysis.horizon (and 10 minutes before)
 * read ahead of requests, when analysis.history.prefetch is on: one call reads at most
 * two hours past what is kept (*more: call again for the rest), then, once it reaches
 * now_us, what came since (from 5 minutes before the kept end, as a request would) when
 * the kept end is 2 minutes old or more.
 * A request whose range starts inside what is kept then reads only its last minutes.
 * Holds the history lock for one read (a request waits for it as for another request's
 * read). The daemon calls it after each refresh (after the first, so that this instance's
 * own data start is known), from a thread of its own so that a slow history never holds
 * the refresh back. 0 (also when there is no history or no prefetch), or -1 when the read
 * failed (logged; nothing kept from it).
 */
int fs_analysis_prefetch_history(struct fs_analysis *a, struct fs_store *st, int64_t now_us,
                                 bool *more);

/**
 * Stops every read of analysis.history, the one in progress within about a second and
 * all later ones ("read cancelled"; requests are answered from local data with that
 * error, as when the history fails), for good: called at shutdown, before the threads that
 * may be reading are joined, so that a hung TSDB does not hold the stop for its
 * remote_timeout. Thread-safe.
 */
void fs_analysis_cancel_history(struct fs_analysis *a);

/** What the last successful refresh scanned: the ring from *scanned_from_us to its now;
 *  *full says whether that was the ring's whole span (else only the minutes since the
 *  refresh before, the episode log giving the rest). */
void fs_analysis_last_refresh(struct fs_analysis *a, int64_t *scanned_from_us, bool *full);

/**
 * The episode log kept on disk (state_dir). fs_analysis_log_restore names the file and
 * reads it (0 restored, 1 none there yet, -1 unreadable or invalid: err says why, the file
 * is renamed to PATH.bad for inspection and the log starts empty). fs_analysis_log_persist
 * writes it when it changed since the last write and a minute has passed, or at once when
 * final (at shutdown); failures are logged and counted, the last good file stays.
 */
int fs_analysis_log_restore(struct fs_analysis *a, const char *path, int64_t now_us, char *err,
                            size_t errlen);
void fs_analysis_log_persist(struct fs_analysis *a, int64_t now_us, bool final);

/**
 * Appends Prometheus text (HELP/TYPE included) for:
 *   fabricscope_host_events, fabricscope_host_events_bytes,
 *   fabricscope_host_events_limit_bytes, fabricscope_host_events_ingested_total,
 *   fabricscope_host_events_rejected_posts_total, fabricscope_host_events_duplicates_total,
 *   fabricscope_host_events_evicted_total{reason="memory"|"retention"},
 *   fabricscope_analysis_last_refresh_timestamp_seconds,
 *   fabricscope_analysis_history_cached_timestamp_seconds{edge="start"|"end"} (while kept),
 *   fabricscope_episode_log_episodes, fabricscope_episode_log_bytes,
 *   fabricscope_episode_log_evicted_total{reason="memory"|"retention"},
 *   fabricscope_episode_log_last_save_timestamp_seconds (after a write),
 *   fabricscope_episode_log_save_errors_total (with a state file),
 *   fabricscope_incident_period_seconds{target,interface,tc,rule,metric},
 *   fabricscope_incident_period_spread_seconds{...},
 *   fabricscope_incident_next_expected_timestamp_seconds{...}
 * (one series per port of each recurring group of the last refresh). 0 or -1 (overflow).
 */
int fs_analysis_metrics(struct fs_analysis *a, struct fs_buf *out);

/*
 * Answers kept for a while. Clients looping the same query (dashboards, scripts, the host
 * agents) cost one analysis per period per distinct request: the caller names a request
 * by a key (its endpoint and arguments as sent) and stores a successful answer's body
 * with how long to keep it (FS_ANALYSIS_CACHE_US, a refresh period, for a range in the
 * past; FS_ANALYSIS_CACHE_LIVE_US for one reaching into the last minute, whose answer
 * changes as samples come); a later request with the same key gets it back while the
 * entry is younger than that, no host event was accepted or dropped since, and the
 * options, the history and the flow rules are the same. At most FS_ANALYSIS_CACHE_ENTRIES
 * entries and FS_ANALYSIS_CACHE_BYTES of bodies (the oldest go first; a body over a
 * quarter of that is not kept). Thread-safe; copies in and out.
 */
#define FS_ANALYSIS_CACHE_US (30 * 1000000LL)
#define FS_ANALYSIS_CACHE_LIVE_US (2 * 1000000LL)
#define FS_ANALYSIS_CACHE_ENTRIES 32
#define FS_ANALYSIS_CACHE_BYTES (32u << 20)

/** What the cache's entries must match: read before computing an answer, given to
 *  fs_analysis_cache_put with it (an answer computed while things changed is not kept). */
struct fs_analysis_cache_stamp {
    uint64_t gen, events_in, events_out;
};
void fs_analysis_cache_stamp(struct fs_analysis *a, struct fs_analysis_cache_stamp *s);
/** true with out holding the kept body (reset first) when key has a valid entry at now_us;
 *  false (out untouched) otherwise. */
bool fs_analysis_cache_get(struct fs_analysis *a, const char *key, int64_t now_us,
                           struct fs_buf *out);
/** Keeps body for key from now_us for keep_us (a copy), unless things changed since
 *  stamp s. */
void fs_analysis_cache_put(struct fs_analysis *a, const char *key, int64_t now_us, int64_t keep_us,
                           const struct fs_analysis_cache_stamp *s, const char *body, size_t len);

#endif
