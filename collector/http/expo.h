/*
 * Prometheus text exposition (format 0.0.4) of everything the store exports plus
 * fabricscope's own metrics, into a caller-supplied buffer. No timestamps are written.
 * Allocation-free per series once the buffer has grown to size.
 */
#ifndef FS_EXPO_H
#define FS_EXPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "store/store.h"

/** Renders /metrics into out (appending). Returns 0, or -1 if out overflowed its max. */
int fs_expo_render(struct fs_store *st, struct fs_buf *out);

/** One fabricscope_http_requests_total{handler,code} sample (the HTTP side counts them). */
struct fs_expo_http_count {
    const char *handler;
    unsigned code;
    uint64_t n;
};

/** fs_expo_render() plus the HTTP request counts (entries with n == 0 are skipped). */
int fs_expo_render_ex(struct fs_store *st, struct fs_buf *out, const struct fs_expo_http_count *hc,
                      size_t n_hc);

/** Content types of the two formats. */
#define FS_EXPO_TEXT_CTYPE "text/plain; version=0.0.4; charset=utf-8"
#define FS_EXPO_OPENMETRICS_CTYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"

/** How to render. Zeroed: text 0.0.4, no external labels, no HTTP counts. */
struct fs_expo_opts {
    const struct fs_expo_http_count *hc; /**< HTTP request counts (n == 0 skipped) */
    size_t n_hc;
    const char *external_labels; /**< `a="x",b="y"` (escaped) added to every sample, or NULL */
    bool openmetrics;            /**< OpenMetrics 1.0: counter families named without
                                      _total, _created where known, # EOF at the end */
    int64_t store_created_us;    /**< realtime µs the store began (the _created of the
                                      ring's counters); 0: unknown, no _created */
    int64_t http_created_us;     /**< the same for fabricscope_http_requests_total */
    bool have_inflight;          /**< render the two gauges below (the HTTP server's) */
    uint64_t inflight_bytes;     /**< fabricscope_http_inflight_bytes */
    uint64_t inflight_limit;     /**< fabricscope_http_inflight_limit_bytes */
    bool no_eof;                 /**< leave out OpenMetrics' # EOF: more families follow (see
                                      fs_expo_adapt_text()), then fs_expo_end() */
};

/**
 * Renders /metrics into out (appending) as o says. Counters of switches and of
 * targets have no _created (when they began is not known); fabricscope's process
 * counters have one when o gives their start. Returns 0, or -1 if out overflowed.
 */
int fs_expo_render_opts(struct fs_store *st, struct fs_buf *out, const struct fs_expo_opts *o);

/**
 * Appends families that another part of fabricscope rendered as text 0.0.4 (one family
 * after another, HELP before TYPE, no timestamps: e.g. fs_analysis_metrics()) in the
 * format o asks for, with o's external labels on every sample. Returns 0 or -1 (overflow).
 */
int fs_expo_adapt_text(const char *text, size_t len, const struct fs_expo_opts *o,
                       struct fs_buf *out);

/** Ends an exposition rendered with no_eof: # EOF for OpenMetrics. 0 or -1 (overflow). */
int fs_expo_end(struct fs_buf *out, const struct fs_expo_opts *o);

/**
 * Formats a gauge value as Prometheus spells it (NaN, +Inf, -Inf, else the shortest
 * text that reads back to the same double). out needs 32 bytes; returns the length.
 */
size_t fs_expo_format_double(char *out, double d);

/** Formats v in decimal into out (needs 21 bytes); returns the length. */
size_t fs_expo_format_u64(char *out, uint64_t v);

/**
 * Formats a counter kept in a finer unit: u * scale. Exact decimal when 1/scale is a
 * power of ten (1234 with scale 1e-3 is "1.234"), else the double. out needs 32 bytes.
 */
size_t fs_expo_format_scaled(char *out, uint64_t u, double scale);

#endif
