/*
 * The importers' side of the collector's HTTP API:
 *
 *   GET  /api/v1/time         -> {"receive_ns":<int>,"send_ns":<int>}: the collector's
 *                                CLOCK_REALTIME when the request arrived and when the
 *                                answer was written (ns since the epoch)
 *   POST /api/v1/host-events  <- the body of analysis/host_events.h
 * Every request carries "Authorization: Bearer <token>" when a token is configured.
 *
 * The host offset is measured with an NTP-style exchange over FS_IMP_TIME_ROUNDS
 * requests on one kept-alive connection (t1/t4 from this host's CLOCK_REALTIME), the
 * minimum-delay round kept (clock/clock.h). Events are posted in batches of
 * FS_IMP_BATCH events; a refused batch stops the import with the server's error.
 *
 * Ownership: a client owns its curl handle and copies of the URL and token
 * (fs_imp_client_close). Threads: one client per thread.
 */
#ifndef FS_IMP_CLIENT_H
#define FS_IMP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "importers/events.h"

#define FS_IMP_TIME_ROUNDS 8
#define FS_IMP_BATCH 5000

struct fs_imp_client {
    void *curl;
    char *base_url; /**< without a trailing '/' */
    char *auth_header;
    long timeout_s;         /**< per request; 0: 60 s */
    long connect_timeout_s; /**< 0: curl's default (300 s) */
};

/**
 * Prepares a client for base_url ("http://host:port"). The bearer token comes from
 * token_file when not NULL, else from the FABRICSCOPE_TOKEN environment variable, else
 * none (the collector then refuses the post with its own error). A token longer than
 * FS_IMP_TOKEN_MAX bytes is refused. 0 or -1 with err.
 */
int fs_imp_client_open(struct fs_imp_client *c, const char *base_url, const char *token_file,
                       char *err, size_t errlen);
/** A token longer than this (after trimming) is refused, not cut. */
#define FS_IMP_TOKEN_MAX 511
/** The same with env_token (NULL: none) standing for FABRICSCOPE_TOKEN: for a caller that
 *  took it out of its environment. */
int fs_imp_client_open_token(struct fs_imp_client *c, const char *base_url, const char *token_file,
                             const char *env_token, char *err, size_t errlen);
void fs_imp_client_close(struct fs_imp_client *c);

/**
 * GET base_url + path (path includes the query string, already escaped); the body goes
 * to resp (caller-owned), the HTTP status to *status. 0, or -1 with err on a transport
 * failure.
 */
int fs_imp_client_get(struct fs_imp_client *c, const char *path, struct fs_buf *resp, long *status,
                      char *err, size_t errlen);

/** Measures this host's clock minus the collector's. 0 or -1 with err. */
int fs_imp_client_offset(struct fs_imp_client *c, int64_t *offset_ns, int64_t *uncertainty_ns,
                         char *err, size_t errlen);

/** The same over `rounds` rounds (1..64). */
int fs_imp_client_offset_rounds(struct fs_imp_client *c, int rounds, int64_t *offset_ns,
                                int64_t *uncertainty_ns, char *err, size_t errlen);

struct fs_imp_post_result {
    size_t posted;     /**< events the collector accepted */
    size_t stored;     /**< of them stored (the rest were held already: a repeated import) */
    size_t duplicates; /**< held already */
    size_t evicted;    /**< stored, then dropped again for the collector's memory limit
                            before the import ended */
};

/** Each post's id and what it stored, for the eviction check at an import's end. */
struct fs_imp_post_log {
    int64_t *ids, oldest;
    size_t *kept, n, cap;
};

/**
 * Posts all events of b in batches (with the given offset). 0 or -1 with err (including
 * the collector's error text); res says what became of them (so far, on failure).
 */
int fs_imp_client_post(struct fs_imp_client *c, const struct fs_imp_batch *b, int64_t offset_ns,
                       int64_t uncertainty_ns, struct fs_imp_post_result *res, char *err,
                       size_t errlen);

/**
 * Posts one body made by fs_imp_body (n_events events). 0 with *status set (for a 2xx,
 * res says what the collector stored; otherwise err holds its answer), or -1 with err on
 * a transport failure (collector unreachable).
 */
int fs_imp_client_post_body(struct fs_imp_client *c, const char *body, size_t len, size_t n_events,
                            long *status, struct fs_imp_post_result *res, char *err, size_t errlen);

struct fs_imp_args;

/**
 * The usual end of an importer: the offset at capture time (given, from an offset file,
 * or measured now; a capture that ended more than FS_IMP_STALE_CAPTURE_NS ago is refused
 * without one of the first two unless a->offset_now), post, print a one-line summary to
 * out. Returns the process exit code: 0, or 1 with the reason on err_out, including when
 * the collector dropped part of what was stored (its memory limit).
 */
int fs_imp_client_run(const struct fs_imp_args *a, const struct fs_imp_batch *b, const char *what,
                      FILE *out, FILE *err_out);

/** An offset file as `fabricscope clock-offset --out FILE` writes it. */
struct fs_imp_offset {
    int64_t offset_ns, uncertainty_ns, measured_at_ns;
    char host[256];
};

/** Reads an offset file. 0, or -1 with err naming the file and what is wrong. */
int fs_imp_offset_read(const char *path, struct fs_imp_offset *o, char *err, size_t errlen);

/**
 * An import posted as it is read, so that its memory stays bounded whatever the input's
 * size: the importer adds events to a batch and hands it to fs_imp_stream_flush every
 * FS_IMP_STREAM_EVENTS events (the batch comes back empty), then to fs_imp_stream_finish.
 * The offset is settled at the first flush as fs_imp_client_run settles it; when it is to
 * be measured now, the capture's age must be known first: batches are held (not posted,
 * not emptied) while every event so far is older than FS_IMP_STALE_CAPTURE_NS, up to
 * FS_IMP_STREAM_HOLD events, past which the import is refused as an old capture.
 * Ownership: the stream borrows a, what and the FILEs; it owns its client and tables,
 * released by fs_imp_stream_finish. Threads: one.
 */
#define FS_IMP_STREAM_EVENTS 20000
#define FS_IMP_STREAM_HOLD 200000
struct fs_imp_stream {
    const struct fs_imp_args *a;
    const char *what;
    FILE *o, *e;
    struct fs_imp_client c;
    bool open, failed;
    int64_t off, unc, end;
    char how[600];
    struct fs_imp_offset file;
    struct fs_imp_post_result pr;
    struct fs_imp_post_log log;
    size_t scanned, next_try; /* of the batch being held: events looked at, next attempt */
};
int fs_imp_stream_init(struct fs_imp_stream *s, const struct fs_imp_args *a, const char *what,
                       FILE *out, FILE *err_out);
/** Posts b's events (final: the last call; nothing may be held back) and empties b; or
 *  holds them (see above). 0, or -1 after reporting on err_out (the stream is failed). */
int fs_imp_stream_flush(struct fs_imp_stream *s, struct fs_imp_batch *b, bool final);
/** Flushes b (final), prints the summary line and releases the stream: the exit code
 *  as fs_imp_client_run's. */
int fs_imp_stream_finish(struct fs_imp_stream *s, struct fs_imp_batch *b);

/**
 * For a reader that has just added to b: flushes b once it holds FS_IMP_STREAM_EVENTS
 * (fs_imp_stream_flush, not final). s NULL: nothing (b keeps every event, the caller
 * posts or inspects it whole). 0, or -1 when the stream failed (it has said why).
 */
int fs_imp_stream_feed(struct fs_imp_stream *s, struct fs_imp_batch *b);

/**
 * The end of a streamed import. read_rc/why: how reading the input ended; on -1, why is
 * printed with what was posted before it once events were read (an import run again
 * stores nothing twice), unless the stream itself had failed and said why. events: how
 * many the input gave (so far); 0 with read_rc 0 prints `empty` (the reason nothing was
 * found) and posts nothing. Otherwise
 * fs_imp_stream_finish. Releases the stream in every case (b stays the caller's);
 * returns the exit code (0, 1).
 */
int fs_imp_stream_end(struct fs_imp_stream *s, struct fs_imp_batch *b, int read_rc, const char *why,
                      size_t events, const char *empty);

/** `fabricscope clock-offset --url URL [--out FILE] [--host NAME]`: exit code. */
int fs_imp_clock_offset_main(int argc, char **argv);

#endif
