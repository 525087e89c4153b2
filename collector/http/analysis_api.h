/*
 * The analysis endpoints: an adapter from HTTP requests to the analysis service
 * (analysis/service.h, which holds the state and does the analysis). Each takes parsed
 * request parameters (and the body for POST) plus the store, checks and parses them,
 * calls the service, appends the answer as a JSON document to a caller-owned fs_buf and
 * returns the HTTP status to answer with. Errors are {"status":"error","error":"..."}
 * documents; successes {"status":"success","data":...}.
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
 *        selectors for the counter tracks, http/selector.h; default the analysed
 *        metrics: ECN marks, queue depth, drops, PFC).
 * The Prometheus text for /metrics is the service's (fs_analysis_metrics).
 *
 * Threads. All functions may be called from HTTP worker threads concurrently; the
 * service runs the heavy ones (correlate, incidents, export) one at a time. Store locks
 * are held only inside the store's foreach/read calls, and never while writing to a
 * socket: out is memory the server sends afterwards.
 *
 * Ownership. The context is the service's (fs_analysis_new/fs_analysis_free); these
 * functions borrow it and the store, and keep nothing of a request.
 */
#ifndef FS_ANALYSIS_API_H
#define FS_ANALYSIS_API_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/service.h"
#include "store/store.h"
#include "util/buf.h"

/** One decoded query-string parameter (same shape as the HTTP layer's). */
struct fs_analysis_arg {
    const char *key;
    const char *value; /**< NULL when the key had no '=' */
};

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

enum fs_analysis_get {
    FS_ANALYSIS_GET_CORRELATE,
    FS_ANALYSIS_GET_INCIDENTS,
    FS_ANALYSIS_GET_TRACE
};

/**
 * The parameter and range checks of a GET above alone, without the store: 0 when the
 * request would be run, else its error status with the error document in out. A server
 * calls it when the request arrives, so that a refusal does not wait for a worker, and
 * then runs the request with the same now_us (the range checked is the range run).
 */
int fs_analysis_check_get(struct fs_analysis *a, enum fs_analysis_get which,
                          const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                          struct fs_buf *out);

#endif
