/*
 * The JSON query API behind the HTTP endpoint, kept apart from libmicrohttpd so request
 * parsing can be fuzzed and rendering tested without a socket.
 *
 *   /api/v1/raw?match[]=<selector>&start=<time>&end=<time>[&limit=<points>]
 *     match[] may repeat (ORed, at most FS_RAW_MAX_MATCH); times are unix seconds
 *     (decimal, microseconds kept exactly) or RFC 3339; end defaults to now and start
 *     to end - 5 minutes. More than `limit` points (default and maximum
 *     FS_RAW_MAX_POINTS) is an error, never a silent truncation.
 *   /api/v1/targets
 *
 * Ownership: a parsed struct fs_raw_query owns its selectors (fs_raw_query_free).
 * Renderers append to a caller-owned fs_buf; they hold store locks only inside the
 * store's foreach/read calls and never across I/O.
 */
#ifndef FS_API_H
#define FS_API_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "http/selector.h"
#include "store/store.h"

#define FS_RAW_MAX_MATCH 16
#define FS_RAW_MAX_POINTS 1000000
#define FS_RAW_DEFAULT_RANGE_US (5 * 60 * 1000000LL)
/* The compiled regexes of one request, estimated (see fs_selector_regex_bytes). */
#define FS_RAW_MAX_REGEX_BYTES (16 * 1024 * 1024)
/* A scan holds the store's read lock for at most this many series or about this long
 * (plus one series' matching), then lets writers in and resumes. */
#define FS_RAW_SCAN_CHUNK 4096
#define FS_RAW_SCAN_CHUNK_US 5000
#define FS_API_RAW_TOO_LARGE 1

/** One decoded query-string parameter. */
struct fs_query_arg {
    const char *key;
    const char *value; /**< NULL when the key had no '=' */
};

struct fs_raw_query {
    struct fs_selector *sel[FS_RAW_MAX_MATCH];
    size_t n_sel;
    int64_t start_us, end_us;
    uint64_t limit;
    int64_t deadline_mono_us; /**< fs_monotonic_us() past which the query gives up; 0: none */
};

/**
 * Validates the parameters of /api/v1/raw (unknown or repeated keys, bad selectors, bad
 * times, start > end, bad limit are errors). now_us supplies the default end.
 * @return 0 with *q filled (caller frees with fs_raw_query_free), or -1 with err set.
 */
int fs_raw_query_parse(const struct fs_query_arg *args, size_t n, int64_t now_us,
                       struct fs_raw_query *q, char *err, size_t errlen);

/** Splits and percent-decodes a raw query string ("a=1&b=%20") and calls the above. */
int fs_raw_query_parse_string(const char *qs, size_t len, int64_t now_us, struct fs_raw_query *q,
                              char *err, size_t errlen);

void fs_raw_query_free(struct fs_raw_query *q);

/** Parses unix seconds ("1733130000.123456") or RFC 3339 into µs; 0 or -1. */
int fs_api_parse_time(const char *s, int64_t *us);

/** Writes ts_us as an RFC 3339 UTC time with microseconds into out (>= 32 bytes). */
void fs_api_format_rfc3339(int64_t ts_us, char *out, size_t len);

/**
 * Runs a raw query and appends the Prometheus "matrix" JSON document to out (whose max
 * bounds the answer). The series scan runs in chunks of FS_RAW_SCAN_CHUNK, never
 * holding the store lock across the whole scan, and stops at q->deadline_mono_us.
 * @return 0, or an HTTP status (400 too many points, 503 over the deadline, 500 no
 * memory) or FS_API_RAW_TOO_LARGE (the answer does not fit in out->max; the caller
 * knows whether that is the client's fault or a momentary budget), with err set.
 */
int fs_api_raw(struct fs_store *st, const struct fs_raw_query *q, struct fs_buf *out, char *err,
               size_t errlen);

/** Appends {"status":"success","data":[ one object per target x driver ]}; 0 or -1. */
int fs_api_targets(struct fs_store *st, struct fs_buf *out);

/** Appends {"status":"error","error":msg}. */
void fs_api_error_json(struct fs_buf *out, const char *msg);

#endif
