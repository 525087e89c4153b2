/*
 * gNMI over the gRPC C core: the only part of the driver that calls gRPC.
 *
 * One struct fs_gnmi_io owns N stream threads ("fs-gnmi-0" ...), each with its own
 * completion queue that it blocks in (gRPC delivers messages only while a thread waits in
 * grpc_completion_queue_next), so decoding a fleet's streams follows the cores. A stream
 * is given, when it starts, to the thread serving the fewest streams (ties: the lowest
 * index, so targets added together are dealt round-robin) and stays on it. Each
 * stream is one target's connection: a channel, then per attempt a Capabilities call
 * followed by the bidirectional Subscribe call. After any end or error the stream waits
 * (exponential backoff with jitter and a cap) and tries again; a stream that receives
 * nothing for stall_us is cancelled and retried the same way.
 *
 * A stream's callbacks run on its thread, one at a time, with decoded protobuf-c messages
 * that are valid only during the call (each thread decodes into its own arena). Callbacks
 * of streams on different threads run concurrently: whatever two streams' callbacks
 * share must be thread-safe. Credentials travel as call metadata and are never logged or
 * reported.
 *
 * Ownership: fs_gnmi_io_new/_free; a stream from fs_gnmi_stream_start is freed by
 * fs_gnmi_stream_stop, after which no callback of it runs. Options are copied.
 */
#ifndef FS_GNMI_GRPC_IO_H
#define FS_GNMI_GRPC_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gnmi.pb-c.h"
#include "store/sink.h"

struct fs_gnmi_io;
struct fs_gnmi_stream;

enum fs_gnmi_conn {
    FS_GNMI_CONN_CONNECTING = 0, /**< Capabilities / Subscribe started */
    FS_GNMI_CONN_STREAMING,      /**< the Subscribe call is open (first response seen) */
    FS_GNMI_CONN_DOWN,           /**< the attempt ended; a retry is scheduled */
    FS_GNMI_CONN_DONE,           /**< ONCE: the stream ended normally; reopened later */
};

struct fs_gnmi_stream_cb {
    /**
     * Builds the packed SubscribeRequest for this attempt; caps is the target's
     * CapabilityResponse, NULL if Capabilities failed or the target does not offer it. *out gets a
     * malloc'd buffer (the I/O layer frees it). Returns 0, or -1 to give the attempt up.
     */
    int (*subscribe_request)(void *arg, const Gnmi__CapabilityResponse *caps,
                             ProtobufCBinaryData *out);
    /** One SubscribeResponse, received at recv_us (CLOCK_REALTIME µs). */
    void (*response)(void *arg, const Gnmi__SubscribeResponse *r, int64_t recv_us);
    /** The connection changed state; r and msg say why when it went down. */
    void (*state)(void *arg, enum fs_gnmi_conn st, enum fs_poll_result r, const char *msg);
    /** Called about every 50 ms whatever the state (may be NULL): for periodic reports
     *  that must go on while the stream is down. now_mono_us is the monotonic clock. */
    void (*tick)(void *arg, int64_t now_mono_us);
};

struct fs_gnmi_stream_opts {
    const char *target;      /**< "host:port" */
    bool insecure;           /**< plaintext */
    const char *ca_pem;      /**< NULL: the system's roots */
    const char *cert_pem;    /**< client certificate chain (mTLS), or NULL */
    const char *key_pem;     /**< its key */
    const char *server_name; /**< name to check in the server certificate, or NULL */
    const char *username;    /**< NULL: no credentials metadata */
    const char *password;
    int64_t stall_us; /**< 0: no stall detection */
    /** stall_us was derived from what the subscriptions ask for, not configured: it then
     *  follows the cadence the target delivers (a target may clamp a short sample
     *  interval): until the first message after a sync, at least FS_GNMI_FIRST_GAP_US;
     *  then at least 3 x the largest gap between messages seen lately (at most
     *  FS_GNMI_STALL_MAX_US). A configured bound is kept as it is. */
    bool stall_adapt;
    int64_t backoff_min_us;    /**< first retry delay; 0: 1 s */
    int64_t backoff_max_us;    /**< cap; 0: 30 s */
    int64_t poll_us;           /**< POLL mode: send a Poll this often; 0: never */
    int64_t reopen_us;         /**< ONCE mode: reopen this long after a normal end */
    int64_t max_message_bytes; /**< largest message accepted; 0: 4 MiB. A decode may use at
                                    most 32 x the message + 1 MiB beyond the arena's chunk */
};

/** How long an adaptive stall bound waits for the first message after a sync (a device
 *  may clamp a requested interval to its minimum: 60 s covers the ones we know). */
#define FS_GNMI_FIRST_GAP_US (60LL * 1000000)
/** The most an adaptive stall bound grows to. */
#define FS_GNMI_STALL_MAX_US (600LL * 1000000)

/** The cadence a stream's target delivers: the largest gap between messages seen
 *  lately (0: none yet) and the stall bound in force (0: none), in µs. Any thread. */
void fs_gnmi_stream_cadence(const struct fs_gnmi_stream *s, int64_t *gap_us, int64_t *stall_us);

/** The most stream threads the automatic default takes (one a core up to this). */
#define FS_GNMI_THREADS_AUTO_MAX 8
/** The most stream threads fs_gnmi_io_new accepts. */
#define FS_GNMI_THREADS_MAX 64

/** The automatic thread count: the online CPUs, at least 1, at most
 *  FS_GNMI_THREADS_AUTO_MAX. */
unsigned fs_gnmi_io_default_threads(void);

/** Initialises gRPC and starts `threads` stream threads (0: fs_gnmi_io_default_threads();
 *  at most FS_GNMI_THREADS_MAX). Returns 0, or -1 with errbuf filled. */
int fs_gnmi_io_new(struct fs_gnmi_io **out, unsigned threads, char *errbuf, size_t errlen);

/** How many stream threads io runs. Any thread. */
unsigned fs_gnmi_io_threads(const struct fs_gnmi_io *io);

/** The index (0 ..) of the stream thread that serves s. Any thread. */
unsigned fs_gnmi_stream_thread(const struct fs_gnmi_stream *s);

/** Stops the threads and shuts gRPC down; every stream must have been stopped. */
void fs_gnmi_io_free(struct fs_gnmi_io *io);

/** Starts a stream (it connects at once). Returns 0, or -1 with errbuf filled. */
int fs_gnmi_stream_start(struct fs_gnmi_io *io, const struct fs_gnmi_stream_opts *o,
                         const struct fs_gnmi_stream_cb *cb, void *arg, struct fs_gnmi_stream **out,
                         char *errbuf, size_t errlen);

/** Cancels and frees a stream; returns once none of its callbacks can run any more. */
void fs_gnmi_stream_stop(struct fs_gnmi_io *io, struct fs_gnmi_stream *s);

#endif
