/*
 * A client of the Prometheus HTTP query API (Prometheus, Mimir, Thanos Query,
 * VictoriaMetrics all serve it): range queries whose matrix answer is parsed as it
 * arrives (yajl, a streaming JSON parser), one series at a time, so memory follows the
 * largest series, not the answer.
 *
 *   fs_prom_parser_*   the answer's parser alone (fed by the client; fuzzed on its own)
 *   fs_prom_client_*   GET <url>/api/v1/query_range and /api/v1/query over libcurl, with
 *                      bearer token or basic auth, TLS and extra headers (analysis.history)
 *
 * Ownership. Series handed to a callback (labels, timestamps, values) are the parser's,
 * valid during the call only. fs_prom_client_new copies its configuration; the caller
 * frees the client with fs_prom_client_free. Threads: a client is used by one thread at a
 * time (it has one connection; fs_prom_client_conn gives more); the parser has no shared state.
 */
#ifndef FS_HISTORY_PROM_QUERY_H
#define FS_HISTORY_PROM_QUERY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

struct fs_prom_label {
    const char *name, *value;
};

/** One series of a matrix answer (or the one point of a vector element). */
struct fs_prom_series {
    const struct fs_prom_label *labels; /**< as the server sent them, __name__ included */
    size_t n_labels;
    const int64_t *ts_us; /**< ascending as the server sent them; unix µs */
    const double *v;      /**< NaN where the server said "NaN" */
    size_t n;
};

/** Called per series; a non-zero return stops the parse (and the query) with that code. */
typedef int (*fs_prom_series_cb)(void *arg, const struct fs_prom_series *s);

/** Bounds a parser enforces: an answer past them is an error, never an allocation. */
#define FS_PROM_MAX_LABELS 64
#define FS_PROM_MAX_STRING 4096
#define FS_PROM_MAX_DEPTH 8

struct fs_prom_parser;

/**
 * A parser of one answer: {"status":"success","data":{"resultType":"matrix"|"vector",
 * "result":[{"metric":{...},"values":[[t,"v"],...]} or "value":[t,"v"]]}} or
 * {"status":"error","errorType":..,"error":..}. max_points bounds the points of the whole
 * answer (0: none). NULL when out of memory.
 */
struct fs_prom_parser *fs_prom_parser_new(fs_prom_series_cb cb, void *arg, uint64_t max_points);
void fs_prom_parser_free(struct fs_prom_parser *p);
/** Feeds the next bytes; 0, or -1 once the answer is malformed, over a bound, or the
 *  callback stopped it (then stop feeding and call fs_prom_parser_finish). */
int fs_prom_parser_feed(struct fs_prom_parser *p, const char *buf, size_t len);
/**
 * Ends the answer: 0 for a complete success document, otherwise -1 with the reason in err
 * (the server's own error text for a status "error" document, the callback's code as
 * "stopped (N)", or what was malformed). Points and series seen so far in *points and
 * *series when not NULL.
 */
int fs_prom_parser_finish(struct fs_prom_parser *p, uint64_t *points, uint64_t *series, char *err,
                          size_t errlen);
/** The callback's non-zero code when it stopped the parse, else 0. */
int fs_prom_parser_stopped(const struct fs_prom_parser *p);

struct fs_prom_client;

/** The host[:port] of url, for messages, logs and answers: never its userinfo
 *  (user:password@), path or query. Truncated to len. */
void fs_prom_url_host(const char *url, char *out, size_t len);

/** A client for cfg's URL (copied; secrets are read at each query). NULL with err. */
struct fs_prom_client *fs_prom_client_new(const struct fs_history_cfg *cfg, char *err,
                                          size_t errlen);
/** Frees c and the connections fs_prom_client_conn made for it. */
void fs_prom_client_free(struct fs_prom_client *c);

/**
 * Reads of c and of its connections (those made before and after) stop, within about a
 * second, once *cancel is true: a query in progress and any later one fail with "read
 * cancelled". cancel is the caller's and outlives c; NULL (the default): never.
 * Set before c's queries run (not thread-safe against them).
 */
void fs_prom_client_set_cancel(struct fs_prom_client *c, const atomic_bool *cancel);

/** Connections a client can have open at once (see fs_prom_client_conn). */
#define FS_PROM_CONNS 4

/**
 * Connection i (0 <= i < FS_PROM_CONNS) of c: c itself for 0, else a client of c's
 * configuration made on first use and kept with c (owned by c: never freed by the
 * caller), so that independent queries can run at once, each connection on its own
 * thread. Made and handed out by c's user alone (not thread-safe against itself); NULL
 * with err when out of memory.
 */
struct fs_prom_client *fs_prom_client_conn(struct fs_prom_client *c, size_t i, char *err,
                                           size_t errlen);

/**
 * GET /api/v1/query_range?query=..&start=..&end=..&step=.. and hands each series of the
 * answer to cb. max_points as for the parser. 0, or -1 with err naming the URL's host
 * part of the failure (transport, HTTP status and the server's error text, malformed
 * answer, or the callback's stop).
 */
int fs_prom_query_range(struct fs_prom_client *c, const char *query, int64_t start_us,
                        int64_t end_us, int64_t step_us, uint64_t max_points, fs_prom_series_cb cb,
                        void *arg, char *err, size_t errlen);

/** GET /api/v1/query?query=..&time=..: each element of a vector answer as a one-point
 *  series, of a matrix answer (a range-vector selector: raw samples) as a series. Same
 *  returns and max_points as fs_prom_query_range. */
int fs_prom_query_instant(struct fs_prom_client *c, const char *query, int64_t at_us,
                          uint64_t max_points, fs_prom_series_cb cb, void *arg, char *err,
                          size_t errlen);

#endif
