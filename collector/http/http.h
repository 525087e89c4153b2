/*
 * The HTTP endpoint (libmicrohttpd): /metrics (Prometheus text 0.0.4, or OpenMetrics
 * 1.0 when the Accept header prefers it; gzip when accepted), /api/v1/raw,
 * /api/v1/targets, /healthz and the web view at / (files
 * embedded in the binary, see http/web/web_assets.h; served without the bearer token,
 * with an ETag and Cache-Control: no-cache, answered at once like /healthz); with an
 * analysis context (fs_http_opts.analysis, the service of analysis/service.h) also the
 * endpoints of http/analysis_api.h, which adapt requests to that service: POST
 * /api/v1/host-events, GET /api/v1/time, /api/v1/correlate, /api/v1/incidents and
 * /api/v1/export/trace (without one they answer 404), and its metrics in /metrics.
 * Bad requests get a 4xx with {"status":"error","error":"..."}; a wrong method 405 with
 * Allow.
 *
 * Authentication. bearer_token guards every request but /healthz, /api/v1/time (it
 * tells only the clock, and importers measure their offset with it), the web view's
 * files (/ and the files under /web/: no data in them; the page's script sends the token) and
 * /api/v1/host-events, which needs the host_events token of the analysis context
 * instead (403 when none is configured, 401 when missing or wrong: checked from the
 * request head, before any body is read).
 *
 * Threads. libmicrohttpd's own small thread pool does only I/O and cheap answers
 * (/healthz, errors), so /healthz keeps answering while queries run. /metrics,
 * /api/v1/raw and /api/v1/targets are suspended and handed to a separate pool of
 * query workers through a bounded queue (full: 503 with Retry-After). Handlers read the
 * store through its foreach calls, format into memory, and only then hand the buffer to
 * libmicrohttpd, so no store lock is ever held while a client socket is written.
 *
 * Bodies. Only POST /api/v1/host-events takes one, of at most FS_HOST_EVENTS_MAX_BODY
 * bytes (a larger Content-Length is refused before reading, 413; a chunked body is cut
 * off at the bound, 413); every other request's body is refused over 64 KiB and ignored.
 * /api/v1/time reads the clock when the request head has arrived (receive_ns) and again
 * when the answer is queued (send_ns), in the I/O thread, never behind a query.
 *
 * Hostile clients. Every request (head and any body) must arrive whole within
 * head_timeout_s of the connection's start (or of the previous response's end on a
 * kept-alive connection), however slowly it trickles; every response must be sent
 * within response_timeout_s.
 * A sweeper thread closes connections past either deadline. One address may hold a
 * quarter of the connections, and when the connections near max_connections the
 * oldest one still waiting for its request head is closed to make room for the
 * newcomer. /metrics renders at most one exposition at a time; scrapes that arrive
 * during a render (or within metrics_share_ms of one) share its immutable buffer, and
 * at most FS_HTTP_MAX_EXPOSITIONS buffers are alive: past that, slow scrapers holding
 * them, a scrape gets the latest render instead of a new one. Bodies of /api/v1/raw and of the
 * analysis GETs (incidents, correlate, export/trace), while rendered and until sent,
 * hold at most raw_inflight_bytes in all (past it: 503 with Retry-After), and a
 * query gives up after raw_time_limit_ms. Warnings from the HTTP layer are
 * rate-limited: a few lines, then one summary line per 10 s with counts.
 */
#ifndef FS_HTTP_H
#define FS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "store/store.h"

struct fs_http;
struct fs_analysis;
struct fs_topo;

struct fs_http_opts {
    const char *host;          /**< address to bind, e.g. "127.0.0.1" or "::1" */
    uint16_t port;             /**< 0: pick a free port (see fs_http_port) */
    const char *tls_cert_file; /**< both set: HTTPS */
    const char *tls_key_file;
    const char *bearer_token;      /**< if set, every request but /healthz needs it */
    unsigned max_connections;      /**< default 64 */
    unsigned connection_timeout_s; /**< idle timeout; default 10 */
    unsigned threads;              /**< I/O threads; default 2 */
    unsigned head_timeout_s;       /**< whole request (head, body); default 10 */
    unsigned response_timeout_s;   /**< whole response; default 60 */
    unsigned query_threads;        /**< query workers; default 2 (+1 for /metrics) */
    size_t raw_inflight_bytes;     /**< raw and analysis answer bodies in memory at once;
                                        default 256 MiB */
    unsigned raw_time_limit_ms;    /**< one /api/v1/raw query; default 10000 */
    int metrics_share_ms;          /**< also share a render this young; default 0: only
                                        scrapes that arrive during a render share it */
    struct fs_cluster *cluster;    /**< shard and external labels for /metrics and
                                        /api/v1/targets; not owned, outlives the endpoint;
                                        NULL: not sharded, no external labels */
    int64_t store_created_us;      /**< realtime µs the store began (OpenMetrics _created
                                        of its counters); 0: unknown */
    struct fs_analysis *analysis;  /**< borrowed (outlives the endpoint); NULL: no
                                        analysis endpoints, no analysis metrics */
    struct fs_topo *topology;      /**< borrowed (outlives the endpoint); NULL: no
                                        /api/v1/topology (404) */
};

/** /metrics buffers alive at once (the current one, ones still being sent). */
#define FS_HTTP_MAX_EXPOSITIONS 3

/** Starts serving; NULL with errbuf filled (e.g. address in use). Strings are copied. */
struct fs_http *fs_http_start(const struct fs_http_opts *o, struct fs_store *st, char *errbuf,
                              size_t errlen);

/** The bound port (useful with port 0). */
uint16_t fs_http_port(const struct fs_http *h);

/** Connections open right now (for tests and diagnostics). */
unsigned fs_http_open_connections(struct fs_http *h);

/** Whether an Accept header value asks for OpenMetrics over text 0.0.4: an
 *  application/openmetrics-text range with a q above 0 and at least text/plain's
 *  (or, text/plain unlisted, that of a wildcard range). NULL: no. */
bool fs_http_prefers_openmetrics(const char *accept);

/** Stops serving and frees; accepts NULL. */
void fs_http_stop(struct fs_http *h);

#endif
