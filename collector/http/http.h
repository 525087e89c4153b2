/*
 * The HTTP endpoint (libmicrohttpd): /metrics (Prometheus text 0.0.4, gzip when
 * accepted), /api/v1/raw, /api/v1/targets, /healthz and the HTML index at /.
 * Bad requests get a 4xx with {"status":"error","error":"..."}.
 *
 * Threads. libmicrohttpd runs its own bounded thread pool; handlers read the store
 * through its foreach calls, format into memory, and only then hand the buffer to
 * libmicrohttpd, so no store lock is ever held while a client socket is written.
 */
#ifndef FS_HTTP_H
#define FS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct fs_http;

struct fs_http_opts {
    const char *host;          /**< address to bind, e.g. "127.0.0.1" or "::1" */
    uint16_t port;             /**< 0: pick a free port (see fs_http_port) */
    const char *tls_cert_file; /**< both set: HTTPS */
    const char *tls_key_file;
    const char *bearer_token;      /**< if set, every request but /healthz needs it */
    unsigned max_connections;      /**< default 64 */
    unsigned connection_timeout_s; /**< default 10 */
    unsigned threads;              /**< default 2 */
};

/** Starts serving; NULL with errbuf filled (e.g. address in use). Strings are copied. */
struct fs_http *fs_http_start(const struct fs_http_opts *o, struct fs_store *st, char *errbuf,
                              size_t errlen);

/** The bound port (useful with port 0). */
uint16_t fs_http_port(const struct fs_http *h);

/** Stops serving and frees; accepts NULL. */
void fs_http_stop(struct fs_http *h);

#endif
