/*
 * The analysis endpoints, kept apart from the HTTP server: each takes parsed request
 * parameters (and the body for POST) plus the store, appends a JSON document to a
 * caller-owned fs_buf and returns the HTTP status to answer with. Errors are
 * {"status":"error","error":"..."} documents; successes {"status":"success","data":...}.
 *
 *   POST /api/v1/host-events          fs_analysis_post_host_events
 *        Authorization: Bearer <token> (see fs_analysis_set_token). 200, 400 invalid
 *        (names the item), 401 missing or wrong token (answer with
 *        "WWW-Authenticate: Bearer"), 403 no token configured, 413 too large, 500.
 *   GET  /api/v1/time                 fs_analysis_time
 *        {"receive_ns":<int>,"send_ns":<int>}: receive_ns must be read by the server
 *        when the request arrived (first access-handler call), send_ns is read here.
 *   GET  /api/v1/correlate            fs_analysis_correlate
 *        start, end (unix seconds or RFC 3339; default the last 15 min), kind (host
 *        event kind prefix, default "nccl"), name (exact event name, optional),
 *        slow (pNN = above the NNth percentile of its (kind, name) durations, default
 *        p99; or Nx = above N times the median; the slowest 1,000 at most), window
 *        (repeatable "START,END": explain these windows instead of slow host events),
 *        top (1..5, default 5),
 *        limit (events listed, default 200; the summary counts all). Switch departures
 *        come from the ring, and from the episode log for what the ring no longer holds.
 *   GET  /api/v1/incidents            fs_analysis_incidents
 *        start, end (default the last analysis horizon, 24 h; at most the episode
 *        retention), limit (episodes listed, default 200). The part of the window the
 *        ring holds is scanned from it; the part before comes from the episode log.
 *   GET  /api/v1/export/trace         fs_analysis_export_trace
 *        start, end (default the last 5 min, at most 6 h), match[] (repeatable series
 *        selectors for the counter tracks; default the analysed metrics: ECN marks,
 *        queue depth, drops, PFC).
 *   Prometheus text for /metrics      fs_analysis_metrics
 *
 * Every switch series read from the store is placed on the collector's axis already
 * (samples are stamped with the collector's clock on arrival); its time uncertainty is
 * taken as the larger of the target's measured clock uncertainty and half its last poll
 * duration. Host events carry their own offset and uncertainty.
 *
 * Threads. All functions may be called from HTTP worker threads concurrently; the
 * heavy ones (correlate, incidents, export) run one at a time (a mutex) since each
 * scans every series of the range. They hold store locks only inside the store's
 * foreach/read calls and never while writing to a socket.
 *
 * Ownership. fs_analysis_new returns an object the caller frees with fs_analysis_free;
 * it owns the host-event store. Strings passed in are copied when kept.
 */
#ifndef FS_ANALYSIS_API_H
#define FS_ANALYSIS_API_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/episode_log.h"
#include "analysis/host_events.h"
#include "analysis/incidents.h"
#include "config/config.h"
#include "store/store.h"
#include "util/buf.h"

/** One decoded query-string parameter (same shape as the HTTP layer's). */
struct fs_analysis_arg {
    const char *key;
    const char *value; /**< NULL when the key had no '=' */
};

struct fs_analysis;

/** Creates the analysis context with its host-event store; NULL with err on failure. */
struct fs_analysis *fs_analysis_new(const struct fs_host_events_opts *o, char *err, size_t errlen);
void fs_analysis_free(struct fs_analysis *a);

/** The analysis settings (config `analysis:`): departures, episodes and recurrences, the
 *  default window of incidents, the episode log's bounds. */
struct fs_analysis_opts {
    struct fs_an_opts an;           /**< thresholds, baseline, merge gap, recurrence */
    int64_t horizon_us;             /**< default and metrics window of incidents; 24 h */
    struct fs_episode_log_opts log; /**< retention 7 d, 64 MiB (merge gap taken from an) */
};
void fs_analysis_opts_default(struct fs_analysis_opts *o);
/** Applies o (copied) from the next analysis on. Thread-safe. */
void fs_analysis_set_opts(struct fs_analysis *a, const struct fs_analysis_opts *o);
/**
 * Sets (cfg copied) or removes (NULL) the history that /api/v1/incidents and
 * /api/v1/correlate also read (analysis.history; see analysis/history_scan.h): what the
 * ring and the episode log do not hold, i.e. the targets this instance does not poll and
 * the time before its own data began. The periodic refresh of the incident metrics does
 * not read it (each shard exports its own targets' incidents). 0, or -1 with err.
 * Thread-safe.
 */
int fs_analysis_set_history(struct fs_analysis *a, const struct fs_history_cfg *cfg, char *err,
                            size_t errlen);
/** The episode log (owned by the context). */
struct fs_episode_log *fs_analysis_episode_log(struct fs_analysis *a);

/** The host-event store (for reload of its bounds). */
struct fs_host_events *fs_analysis_host_events(struct fs_analysis *a);

/**
 * Sets the bearer token that POST /api/v1/host-events requires (copied); NULL or ""
 * disables posting (403). Thread-safe.
 */
int fs_analysis_set_token(struct fs_analysis *a, const char *token);

/** A flow rule as the analysis needs it (the daemon copies these from the config). */
struct fs_analysis_flow_rule {
    const char *name;
    int protocol;            /**< 0 any, 1 TCP, 2 UDP (enum fs_proto) */
    uint16_t src_lo, src_hi; /**< both 0: any */
    uint16_t dst_lo, dst_hi; /**< both 0: any */
};

/**
 * Sets the flow rules (copied) that host events with sport/dport attrs (perf
 * retransmits, drops) are matched to in /api/v1/correlate's other_host_events: each
 * such event lists the rules it falls under in "flow_rules". 0 or -1 (no memory).
 * Thread-safe.
 */
int fs_analysis_set_flow_rules(struct fs_analysis *a, const struct fs_analysis_flow_rule *rules,
                               size_t n);

/**
 * The token check of POST /api/v1/host-events alone, so a server can refuse an
 * unauthenticated post before reading its body: 0 (allowed), or 401/403 with the error
 * document in out.
 */
int fs_analysis_authorize_post(struct fs_analysis *a, const char *authorization,
                               struct fs_buf *out);

/** POST /api/v1/host-events. authorization is the request's header value or NULL. */
int fs_analysis_post_host_events(struct fs_analysis *a, const char *authorization, const char *body,
                                 size_t len, int64_t now_us, struct fs_buf *out);

/**
 * A device-stamped event (fs_store_set_device_event_listener's callback, arg: the
 * context): kept with the host events, host = the target's name, its clock offset and
 * uncertainty as measured (so it lands on the collector's axis like a host's), attrs
 * plus "source". Stored once however often it is reported. 0, or -1 (logged by the
 * caller's count) when the event is invalid or no memory.
 */
int fs_analysis_device_event(void *a, const struct fs_device_event *e);

/** GET /api/v1/time. */
int fs_analysis_time(int64_t receive_ns, struct fs_buf *out);

/** GET /api/v1/correlate. now_us supplies the default end. */
int fs_analysis_correlate(struct fs_analysis *a, struct fs_store *st,
                          const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                          struct fs_buf *out);

/** GET /api/v1/incidents. Also refreshes what fs_analysis_metrics reports. */
int fs_analysis_incidents(struct fs_analysis *a, struct fs_store *st,
                          const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                          struct fs_buf *out);

/** GET /api/v1/export/trace (Chrome Trace Event JSON, see analysis/trace.h). */
int fs_analysis_export_trace(struct fs_analysis *a, struct fs_store *st,
                             const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                             struct fs_buf *out);

/**
 * Scans the ring into the episode log and recomputes the incidents of the last horizon
 * for the metrics (the daemon calls this every 30 s from a thread of its own). 0 or -1.
 */
int fs_analysis_refresh(struct fs_analysis *a, struct fs_store *st, int64_t now_us);

/** What the last successful refresh scanned: the ring from *scanned_from_us to its now;
 *  *full says whether that was the ring's whole span (else only the minutes since the
 *  refresh before, the episode log giving the rest). */
void fs_analysis_last_refresh(struct fs_analysis *a, int64_t *scanned_from_us, bool *full);

/**
 * Appends Prometheus text (HELP/TYPE included) for:
 *   fabricscope_host_events, fabricscope_host_events_bytes,
 *   fabricscope_host_events_limit_bytes, fabricscope_host_events_ingested_total,
 *   fabricscope_host_events_rejected_posts_total,
 *   fabricscope_host_events_evicted_total{reason="memory"|"retention"},
 *   fabricscope_episode_log_episodes, fabricscope_episode_log_bytes,
 *   fabricscope_episode_log_evicted_total{reason="memory"|"retention"},
 *   fabricscope_incident_period_seconds{target,interface,tc,rule,metric},
 *   fabricscope_incident_period_spread_seconds{...},
 *   fabricscope_incident_next_expected_timestamp_seconds{...}
 * (one series per port of each recurring group of the last refresh). 0 or -1 (overflow).
 */
int fs_analysis_metrics(struct fs_analysis *a, struct fs_buf *out);

#endif
