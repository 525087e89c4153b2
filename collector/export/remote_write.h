/*
 * Prometheus remote-write 1.0: the ring's full-resolution samples sent to receivers
 * (Prometheus, Mimir, Thanos Receive, VictoriaMetrics, Cortex) as snappy-compressed
 * protobuf WriteRequests over HTTP(S).
 *
 * One sender thread (one shard) per receiver. It walks the store incrementally: per
 * series it keeps the timestamp of the newest sample it has taken from the ring (its
 * high-water mark) and, every scan, reads the samples after it, oldest first, into a
 * bounded queue. A scan runs every 100 ms, or less often in a store so large that a walk
 * takes over 10 ms (a walk is then a tenth of the thread's time). Batches leave the
 * queue when max_samples_per_send are pending or the oldest pending sample has waited
 * batch_send_deadline. 5xx, 429 and transport errors are retried with exponential
 * backoff (min_backoff doubling up to max_backoff), each wait drawn at random between
 * half and all of it so that senders failing together do not retry together; a
 * Retry-After header (seconds or a date) replaces the wait. Any other 4xx drops the
 * batch (counted as failed). Samples of one series leave in timestamp order: a batch is
 * sent (or given up) before the next one is built. While a request is in flight (up to
 * remote_timeout) the ring is not walked: its samples wait in the ring, not the queue.
 *
 * The queue's horizon: while a receiver is down the scans go on filling the queue; it
 * holds `capacity` samples, so it absorbs an outage of capacity / (samples the collector
 * produces per second) without loss. That horizon is exported
 * (fabricscope_remote_write_queue_horizon_seconds, from the rate measured over the last
 * scans). Past it the oldest queued samples are dropped and counted
 * (fabricscope_remote_write_samples_dropped_total).
 *
 * Metadata (metadata). Each metric family's type and help, named as the /metrics
 * TYPE lines name it (a counter with _total), unit empty (/metrics writes none), go in
 * WriteRequests of their own (metadata only, never beside samples), at most
 * metadata_max_per_send entries each: for the families of the series this sender sends
 * (it has live series of them), when it meets a family its last metadata did not describe
 * (a start, a new kind of series: the metadata leaves before that family's first batch),
 * and send_interval after each round. A 5xx, 429 or transport error is retried with the
 * queue's backoff (or Retry-After) but never later than send_interval; a 4xx waits for the
 * next round. A metadata request is a round trip between two sample requests on the same
 * connection; while sample requests fail, metadata waits (the samples' retries probe the
 * receiver) and goes after the first batch accepted again: it never takes a sample
 * retry's turn, and samples never change order.
 *
 * Values. Remote write carries float64 values: a counter (exact uint64 in the ring) is
 * sent as (double)value * scale, exactly as /metrics exposes it. Above 2^53 a counter is
 * rounded to the nearest double by the wire format itself (a receiver cannot get the
 * exact integer back); rates over such counters keep their precision only to ~1 part
 * in 2^53.
 *
 * Threads. fs_remote_write_apply/free are called by one thread (the daemon's main
 * thread). fs_remote_write_foreach may be called from any thread at any time.
 *
 * Ownership. The manager copies nothing it does not own: it keeps its own copies of
 * the configurations it was given. The store must outlive the manager.
 */
#ifndef FS_EXPORT_REMOTE_WRITE_H
#define FS_EXPORT_REMOTE_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "store/store.h"

struct fs_remote_write;

/** Creates the manager (no sender yet); NULL with errbuf filled on failure. Caller frees. */
struct fs_remote_write *fs_remote_write_new(struct fs_store *st, char *errbuf, size_t errlen);

/**
 * Runs exactly the receivers in cfgs[0..n): an unchanged one keeps running, a changed one
 * is restarted (keeping its per-series high-water marks and its queue when its URL is the
 * same, so nothing is sent twice or skipped), a new one starts with the samples taken
 * from now on, a removed one stops (its queue is dropped). external labels (NULL/0: none)
 * are added to every series sent (a series' own label of the same name wins); a change of
 * them restarts every sender. Returns 0, or -1 with errbuf filled when a sender could not
 * start (the others run).
 */
int fs_remote_write_apply(struct fs_remote_write *rw, const struct fs_remote_write_cfg *cfgs,
                          size_t n, const struct fs_kv *external_labels, size_t n_external,
                          char *errbuf, size_t errlen);

/** Stops every sender (a last send of what is queued, 2 s at most) and frees; accepts NULL. */
void fs_remote_write_free(struct fs_remote_write *rw);

/** Counters of one sender (the fabricscope_remote_write_* self metrics). */
struct fs_remote_write_stats {
    uint64_t pending, sent, failed, retried, dropped, requests;
    uint64_t bytes_sent;      /**< compressed request bodies the receiver accepted (sample
                                   and metadata requests) */
    uint64_t metadata_sent;   /**< metadata entries the receiver accepted */
    uint64_t metadata_failed; /**< metadata entries of failed requests (every attempt) */
    int64_t highest_sent_ms;  /**< 0 before the first accepted sample */
};

/** One running sender as seen by the exposition. Strings valid during the callback only. */
struct fs_remote_write_info {
    const char *remote_name; /**< the configured name, else the URL (as url shows it) */
    const char *url;         /**< without its user:password@ (util/url.h) */
    uint64_t capacity;       /**< queue.capacity */
    double horizon_seconds;  /**< capacity / samples produced per second; +Inf until measured */
    struct fs_remote_write_stats stats;
};

typedef void (*fs_remote_write_cb)(void *arg, const struct fs_remote_write_info *in);

/**
 * Calls cb for every running sender of the process (all managers), under a lock that
 * starting and stopping senders take too: cb must only copy or format.
 */
void fs_remote_write_foreach(fs_remote_write_cb cb, void *arg);

/** Stats of the sender of url; -1 if none runs. */
int fs_remote_write_stats(struct fs_remote_write *rw, const char *url,
                          struct fs_remote_write_stats *out);

#endif
