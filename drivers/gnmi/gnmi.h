/*
 * The gNMI driver: `const struct fs_driver fs_driver_gnmi` (kind FS_DRIVER_STREAM, block
 * "gnmi", listed in drivers/registry.c) wraps the entry points below, which tools and
 * tests also call directly (with a tap that sees every sample).
 *
 * A target's stream reports through its sink: one batch per Notification (stamped with
 * the arrival time; the device timestamp goes to fs_sink_clock), fs_sink_done(OK,
 * "synced") at each sync_response, fs_sink_done(OK, NULL) after each Notification once
 * synced (so the target's last poll in /api/v1/targets is the last update received),
 * and fs_sink_done(<kind>, reason) whenever the stream goes down (then it reconnects
 * with backoff). No sample is invented across a gap.
 * The sink is marked streaming by the daemon, so a stream's end stales its series at
 * once. The stream's own health goes through the sink too, as catalogue samples:
 * fabricscope_stream_state{state} (at each state change and every interval, at most 1 s
 * apart, also while the stream is down) and fabricscope_stream_updates_total{kind}.
 * A delete retires the deleted paths' series at once (fs_sink_retire).
 *
 * Ownership: the driver copies what it needs from cfg, address and name; the sink must
 * stay valid until fs_gnmi_target_remove() returns. Secrets (password file/env, TLS key)
 * and PEMs are read at target_add, with the core's non-blocking reader (fs_file_read,
 * fs_secret_read: a FIFO is refused, never waited on), and never logged.
 */
#ifndef FS_GNMI_H
#define FS_GNMI_H

#include <stddef.h>
#include <stdint.h>

#include "gnmi_config.h"
#include "map.h"
#include "store/sink.h"

/** Starts the driver: its stream threads (grpc_io.h), as many as the environment variable
 *  FS_GNMI_THREADS says (1 to 64; the driver has no configuration block of its own),
 *  else one an online CPU up to 8. -1 with errbuf on a bad FS_GNMI_THREADS. */
int fs_gnmi_init(void **state, char *errbuf, size_t errlen);
/** How many stream threads the driver runs. */
unsigned fs_gnmi_threads(void *state);
void fs_gnmi_shutdown(void *state);

/**
 * Adds a target and starts its stream at once. tap (may be NULL) receives every sample
 * as well, on the target's stream thread: for tests and diagnostics.
 */
int fs_gnmi_target_add(void *state, const char *name, const char *address,
                       const struct fs_gnmi_cfg *cfg, struct fs_sink *sink,
                       const struct fs_gnmi_emit *tap, void *tap_arg, void **tstate, char *errbuf,
                       size_t errlen);

/** Stops the target's stream; no callback for it runs after return. */
void fs_gnmi_target_remove(void *state, void *tstate);

/** JSON members (no braces) describing the stream (stream_thread: the index of the
 *  stream thread serving it); the driver also publishes them as the sink's detail
 *  (/api/v1/targets) at each state change, sync, and once a second while updates flow. */
size_t fs_gnmi_target_describe(void *state, void *tstate, char *buf, size_t len);

/** A consistent copy of a target's counts. */
struct fs_gnmi_target_stats {
    int conn; /**< enum fs_gnmi_conn of grpc_io.h */
    bool synced;
    const char *encoding;
    uint64_t attempts, downs, syncs;
    struct fs_gnmi_map_stats map;
    char last_error[512];
};
void fs_gnmi_target_get_stats(void *tstate, struct fs_gnmi_target_stats *out);

#endif
