/* gNMI over the gRPC C core (see grpc_io.h). Every gRPC call of the driver is here. */
#include "grpc_io.h"

#include "arena.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"

#define TICK_MS 50                       /* timers (backoff, stall, poll) are checked this often */
#define CAPS_TIMEOUT_US 10000000         /* a Capabilities answer must come within this */
#define MAX_RECV_BYTES_DEFAULT (4 << 20) /* largest SubscribeResponse accepted by default */

enum op_kind { OP_CAPS = 0, OP_START, OP_STATUS, OP_RECV, OP_SEND, OP_COUNT };

struct op {
    struct fs_gnmi_stream *s;
    enum op_kind kind;
    bool pending;
};

enum phase { PH_IDLE = 0, PH_CAPS, PH_SUBSCRIBE };

struct fs_gnmi_stream {
    struct fs_gnmi_io *io;
    struct io_thread *th;        /* the stream thread that serves it, for its whole life */
    struct fs_gnmi_stream *next; /* th->streams (its thread) or th->incoming */
    struct fs_gnmi_stream_cb cb;
    void *arg;
    char *target;
    int64_t stall_us, backoff_min_us, backoff_max_us, poll_us, reopen_us;
    int64_t max_message; /* bytes: the channel's receive limit */
    grpc_channel *ch;
    grpc_metadata md[2];
    size_t n_md;

    /* the current call (its thread only) */
    enum phase phase;
    grpc_call *call;
    struct op ops[OP_COUNT];
    int n_pending;
    grpc_metadata_array md_init, md_trailing;
    grpc_byte_buffer *send_buf, *recv_buf, *poll_buf;
    grpc_status_code status;
    grpc_slice status_details;
    const char *error_string;
    bool status_done, streaming, cancelled;
    const char *cancel_reason; /* why we cancelled (stall, stop) */

    int64_t next_attempt_mono; /* PH_IDLE: when to connect; 0: not scheduled */
    int64_t last_rx_mono, next_poll_mono, backoff_us;
    /* the delivered cadence (its thread; kept across attempts: the device's doing) */
    bool stall_adapt, after_sync, cadence_seen, slow_logged;
    bool tls, client_cert; /* for the error's wording */
    int64_t gap_cur_us, gap_prev_us, gap_win_mono;
    _Atomic int64_t shown_gap_us, shown_stall_us; /* for fs_gnmi_stream_cadence */
    uint64_t rng;

    /* removal (stop_req, stopped under th->lock; stopping: its thread) */
    bool stop_req, stopped, stopping;
};

/* One stream thread: its completion queue, its streams and its decode arena. A stream's
 * callbacks, timers and decoding all run here, so nothing of a stream is shared between
 * stream threads. */
struct io_thread {
    unsigned index; /* "fs-gnmi-<index>" */
    grpc_completion_queue *cq;
    pthread_t thread;
    bool running; /* created (fs_gnmi_io_new/_free only) */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    size_t load;                     /* streams assigned to it (under io->lock) */
    struct fs_gnmi_stream *incoming; /* started, not yet seen by the thread */
    struct fs_gnmi_stream *streams;  /* this thread only */
    struct fs_gnmi_arena arena;      /* this thread only: received messages are unpacked here */
};

struct fs_gnmi_io {
    pthread_mutex_t lock; /* the threads' load */
    unsigned n_threads;
    struct io_thread *threads;
};

/* ---- gRPC's own log ---- */

static void
grpc_log_route(gpr_log_func_args *a)
{
    enum fs_log_level l = a->severity == GPR_LOG_SEVERITY_ERROR  ? FS_LOG_ERROR
                          : a->severity == GPR_LOG_SEVERITY_INFO ? FS_LOG_INFO
                                                                 : FS_LOG_DEBUG;
    fs_log(l, "grpc", "%s", a->message);
}

/* ---- helpers ---- */

static char *
dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static enum fs_poll_result
status_result(grpc_status_code c)
{
    switch (c) {
    case GRPC_STATUS_UNAUTHENTICATED:
    case GRPC_STATUS_PERMISSION_DENIED:
        return FS_POLL_AUTH;
    case GRPC_STATUS_DEADLINE_EXCEEDED:
        return FS_POLL_TIMEOUT;
    default:
        return FS_POLL_PROTOCOL;
    }
}

static const char *
status_name(grpc_status_code c)
{
    static const char *const names[] = {"OK",
                                        "CANCELLED",
                                        "UNKNOWN",
                                        "INVALID_ARGUMENT",
                                        "DEADLINE_EXCEEDED",
                                        "NOT_FOUND",
                                        "ALREADY_EXISTS",
                                        "PERMISSION_DENIED",
                                        "RESOURCE_EXHAUSTED",
                                        "FAILED_PRECONDITION",
                                        "ABORTED",
                                        "OUT_OF_RANGE",
                                        "UNIMPLEMENTED",
                                        "INTERNAL",
                                        "UNAVAILABLE",
                                        "DATA_LOSS",
                                        "UNAUTHENTICATED"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "UNKNOWN";
}

/* The status as "UNAVAILABLE: details" (printable ASCII only, bounded). */
static void
status_text(const struct fs_gnmi_stream *s, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "%s", status_name(s->status));
    size_t dl = GRPC_SLICE_LENGTH(s->status_details);
    const unsigned char *d = GRPC_SLICE_START_PTR(s->status_details);
    if (dl && o + 3 < len) {
        buf[o++] = ':';
        buf[o++] = ' ';
        for (size_t i = 0; i < dl && o + 1 < len; i++)
            buf[o++] = d[i] >= 0x20 && d[i] < 0x7f ? (char)d[i] : '?';
        buf[o] = '\0';
    }
}

/*
 * A TLS 1.3 server that refuses the client's certificate (or its absence) checks it after
 * the client has finished its side of the handshake, so gRPC only sees the connection
 * closed ("Socket closed"). Says what that most likely means; worded as a likelihood,
 * since a server going away at that moment looks the same.
 */
static void
tls_hint(const struct fs_gnmi_stream *s, char *msg, size_t len)
{
    if (!s->tls || s->streaming || s->status != GRPC_STATUS_UNAVAILABLE ||
        !strstr(msg, "Socket closed"))
        return;
    size_t o = strlen(msg);
    snprintf(msg + o, len - o, " (closed during TLS set-up: the target %s)",
             s->client_cert ? "may not accept this client certificate (tls.cert_file)"
                            : "may require a client certificate (tls.cert_file, tls.key_file)");
}

static gpr_timespec
deadline_in_us(int64_t us)
{
    if (us <= 0)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_micros(us, GPR_TIMESPAN));
}

static uint64_t
next_rand(struct fs_gnmi_stream *s)
{
    /* xorshift64*: jitter only, no security role. */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 2685821657736338717ull;
}

/* Schedules the next attempt: the current backoff +-20 %, then doubles it up to the cap. */
static void
schedule_retry(struct fs_gnmi_stream *s, int64_t now, int64_t delay_us)
{
    if (delay_us <= 0) {
        int64_t b = s->backoff_us;
        int64_t jitter = (int64_t)(next_rand(s) % (uint64_t)(b / 5 * 2 + 1)) - b / 5;
        delay_us = b + jitter;
        s->backoff_us = b * 2 > s->backoff_max_us ? s->backoff_max_us : b * 2;
    }
    s->next_attempt_mono = now + delay_us;
}

/* ---- calls ---- */

static bool
start_batch(struct fs_gnmi_stream *s, enum op_kind k, const grpc_op *ops, size_t n)
{
    struct op *o = &s->ops[k];
    o->pending = true;
    s->n_pending++;
    grpc_call_error e = grpc_call_start_batch(s->call, ops, n, o, NULL);
    if (e != GRPC_CALL_OK) {
        o->pending = false;
        s->n_pending--;
        fs_log(FS_LOG_ERROR, "gnmi", "%s: grpc_call_start_batch failed (%d)", s->target, (int)e);
        return false;
    }
    return true;
}

static void
call_reset(struct fs_gnmi_stream *s)
{
    grpc_metadata_array_init(&s->md_init);
    grpc_metadata_array_init(&s->md_trailing);
    s->status = GRPC_STATUS_OK;
    s->status_details = grpc_empty_slice();
    s->error_string = NULL;
    s->status_done = false;
    s->streaming = false;
    s->after_sync = false;
    s->cancelled = false;
    s->cancel_reason = NULL;
    s->recv_buf = NULL;
}

static void
call_release(struct fs_gnmi_stream *s)
{
    if (s->call)
        grpc_call_unref(s->call);
    s->call = NULL;
    grpc_metadata_array_destroy(&s->md_init);
    grpc_metadata_array_destroy(&s->md_trailing);
    grpc_slice_unref(s->status_details);
    s->status_details = grpc_empty_slice();
    if (s->error_string)
        gpr_free((void *)s->error_string);
    s->error_string = NULL;
    if (s->send_buf)
        grpc_byte_buffer_destroy(s->send_buf);
    if (s->recv_buf)
        grpc_byte_buffer_destroy(s->recv_buf);
    if (s->poll_buf)
        grpc_byte_buffer_destroy(s->poll_buf);
    s->send_buf = s->recv_buf = s->poll_buf = NULL;
    s->phase = PH_IDLE;
}

static void
fail_attempt(struct fs_gnmi_stream *s, enum fs_poll_result r, const char *msg)
{
    int64_t now = fs_monotonic_us();
    schedule_retry(s, now, 0);
    if (s->cb.state)
        s->cb.state(s->arg, FS_GNMI_CONN_DOWN, r, msg);
}

static grpc_call *
new_call(struct fs_gnmi_stream *s, const char *method, int64_t timeout_us)
{
    grpc_slice m = grpc_slice_from_static_string(method);
    grpc_call *c = grpc_channel_create_call(s->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->th->cq, m,
                                            NULL, deadline_in_us(timeout_us), NULL);
    grpc_slice_unref(m);
    return c;
}

static void
start_caps(struct fs_gnmi_stream *s)
{
    call_reset(s);
    s->call = new_call(s, "/gnmi.gNMI/Capabilities", CAPS_TIMEOUT_US);
    if (!s->call) {
        call_release(s);
        fail_attempt(s, FS_POLL_PROTOCOL, "cannot create a call");
        return;
    }
    s->phase = PH_CAPS;
    s->last_rx_mono = fs_monotonic_us();
    Gnmi__CapabilityRequest req = GNMI__CAPABILITY_REQUEST__INIT;
    uint8_t buf[16];
    size_t n = gnmi__capability_request__pack(&req, buf);
    grpc_slice sl = grpc_slice_from_copied_buffer((const char *)buf, n);
    s->send_buf = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = s->n_md;
    ops[0].data.send_initial_metadata.metadata = s->n_md ? s->md : NULL;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send_buf;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->md_init;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &s->recv_buf;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &s->md_trailing;
    ops[5].data.recv_status_on_client.status = &s->status;
    ops[5].data.recv_status_on_client.status_details = &s->status_details;
    ops[5].data.recv_status_on_client.error_string = &s->error_string;
    if (!start_batch(s, OP_CAPS, ops, 6)) {
        call_release(s);
        fail_attempt(s, FS_POLL_PROTOCOL, "cannot start Capabilities");
    }
}

static bool
arm_recv(struct fs_gnmi_stream *s)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv_buf;
    return start_batch(s, OP_RECV, &op, 1);
}

static void
start_subscribe(struct fs_gnmi_stream *s, const Gnmi__CapabilityResponse *caps)
{
    ProtobufCBinaryData req = {0, NULL};
    if (s->cb.subscribe_request(s->arg, caps, &req) != 0) {
        free(req.data);
        fail_attempt(s, FS_POLL_PROTOCOL, "no subscription could be built");
        return;
    }
    call_reset(s);
    s->call = new_call(s, "/gnmi.gNMI/Subscribe", 0);
    if (!s->call) {
        free(req.data);
        call_release(s);
        fail_attempt(s, FS_POLL_PROTOCOL, "cannot create a call");
        return;
    }
    s->phase = PH_SUBSCRIBE;
    s->last_rx_mono = fs_monotonic_us();
    s->next_poll_mono = s->poll_us > 0 ? s->last_rx_mono + s->poll_us : 0;
    grpc_slice sl = grpc_slice_from_copied_buffer((const char *)req.data, req.len);
    free(req.data);
    s->send_buf = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);

    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = s->n_md;
    ops[0].data.send_initial_metadata.metadata = s->n_md ? s->md : NULL;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send_buf;
    ops[2].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[2].data.recv_initial_metadata.recv_initial_metadata = &s->md_init;
    bool ok = start_batch(s, OP_START, ops, 3);
    /* The status is armed up front so that every failure surfaces. */
    grpc_op st;
    memset(&st, 0, sizeof st);
    st.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st.data.recv_status_on_client.trailing_metadata = &s->md_trailing;
    st.data.recv_status_on_client.status = &s->status;
    st.data.recv_status_on_client.status_details = &s->status_details;
    st.data.recv_status_on_client.error_string = &s->error_string;
    ok = ok && start_batch(s, OP_STATUS, &st, 1);
    ok = ok && arm_recv(s);
    if (!ok) {
        grpc_call_cancel(s->call, NULL);
        s->cancelled = true;
        s->cancel_reason = "cannot start Subscribe";
    }
}

static void
send_poll(struct fs_gnmi_stream *s)
{
    if (s->ops[OP_SEND].pending || s->ops[OP_START].pending || s->status_done || s->cancelled)
        return; /* one send at a time; a slow target just gets fewer polls */
    Gnmi__SubscribeRequest req = GNMI__SUBSCRIBE_REQUEST__INIT;
    Gnmi__Poll poll = GNMI__POLL__INIT;
    req.request_case = GNMI__SUBSCRIBE_REQUEST__REQUEST_POLL;
    req.poll = &poll;
    uint8_t buf[16];
    size_t n = gnmi__subscribe_request__pack(&req, buf);
    grpc_slice sl = grpc_slice_from_copied_buffer((const char *)buf, n);
    if (s->poll_buf)
        grpc_byte_buffer_destroy(s->poll_buf);
    s->poll_buf = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = s->poll_buf;
    start_batch(s, OP_SEND, &op, 1);
}

/* ---- the delivered cadence ---- */

/* The stall bound in force (see stall_adapt in grpc_io.h). Its thread. */
static int64_t
stall_bound(const struct fs_gnmi_stream *s)
{
    if (s->stall_us <= 0 || !s->stall_adapt)
        return s->stall_us;
    int64_t b = s->stall_us;
    if (!s->cadence_seen) {
        if (b < FS_GNMI_FIRST_GAP_US)
            b = FS_GNMI_FIRST_GAP_US;
    } else {
        int64_t gap = s->gap_cur_us > s->gap_prev_us ? s->gap_cur_us : s->gap_prev_us;
        if (3 * gap > b)
            b = 3 * gap;
    }
    return b < FS_GNMI_STALL_MAX_US ? b : FS_GNMI_STALL_MAX_US;
}

static void
show_cadence(struct fs_gnmi_stream *s)
{
    int64_t gap = s->gap_cur_us > s->gap_prev_us ? s->gap_cur_us : s->gap_prev_us;
    atomic_store(&s->shown_gap_us, gap);
    atomic_store(&s->shown_stall_us, stall_bound(s));
}

/* A message came gap_us after the previous one of the same stream. The largest gaps of
 * two windows are kept (a window lasts at least 4 of them, so the last gap is always
 * remembered); the first message after a sync shows the target's own cadence. */
static void
note_gap(struct fs_gnmi_stream *s, int64_t gap_us)
{
    if (s->after_sync)
        s->cadence_seen = true;
    if (gap_us > s->gap_cur_us)
        s->gap_cur_us = gap_us;
    /* stall_us is 3 x the promised period (or 1 s): say so past 1.5 x that period */
    if (s->stall_adapt && !s->slow_logged && s->cadence_seen && 2 * gap_us > s->stall_us) {
        s->slow_logged = true;
        fs_log(FS_LOG_INFO, "gnmi",
               "%s: the target delivers every %.1f s, slower than subscribed: the stall "
               "bound follows it (now %.1f s)",
               s->target, gap_us / 1e6, stall_bound(s) / 1e6);
    }
    show_cadence(s);
}

/* Rolls the gap windows (its thread, each tick). */
static void
roll_gaps(struct fs_gnmi_stream *s, int64_t now)
{
    int64_t gap = s->gap_cur_us > s->gap_prev_us ? s->gap_cur_us : s->gap_prev_us;
    int64_t win = 4 * gap > 30000000 ? 4 * gap : 30000000;
    if (s->gap_win_mono == 0)
        s->gap_win_mono = now;
    if (now - s->gap_win_mono >= win) {
        s->gap_prev_us = s->gap_cur_us;
        s->gap_cur_us = 0;
        s->gap_win_mono = now;
        show_cadence(s);
    }
}

void
fs_gnmi_stream_cadence(const struct fs_gnmi_stream *s, int64_t *gap_us, int64_t *stall_us)
{
    *gap_us = atomic_load(&((struct fs_gnmi_stream *)s)->shown_gap_us);
    *stall_us = atomic_load(&((struct fs_gnmi_stream *)s)->shown_stall_us);
}

/* Reads a received buffer into one contiguous slice (caller unrefs). */
static grpc_slice
read_all(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return grpc_empty_slice();
    grpc_slice sl = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    return sl;
}

/* Copies a received message into the thread's decode arena (*len: its size), where it
 * goes with the decoded message at the next reset: the copy needs no malloc of its own,
 * which for a notification of hundreds of KB left a hole in the thread's malloc arena.
 * NULL when it cannot be read. */
static const uint8_t *
arena_copy(struct fs_gnmi_arena *a, grpc_byte_buffer *bb, size_t *len)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return NULL;
    size_t n = grpc_byte_buffer_length(r.buffer_out); /* decompressed, when it was */
    uint8_t *buf = fs_gnmi_arena_alloc(a, n), *p = buf;
    grpc_slice sl;
    while (buf && grpc_byte_buffer_reader_next(&r, &sl) != 0) {
        size_t l = GRPC_SLICE_LENGTH(sl);
        if (l > n - (size_t)(p - buf)) { /* not reached: the length said so */
            grpc_slice_unref(sl);
            buf = NULL;
            break;
        }
        memcpy(p, GRPC_SLICE_START_PTR(sl), l);
        p += l;
        grpc_slice_unref(sl);
    }
    grpc_byte_buffer_reader_destroy(&r);
    *len = buf ? (size_t)(p - buf) : 0;
    return buf;
}

/* The call ended and no batch is outstanding: report and schedule the next attempt. */
static void
finish_call(struct fs_gnmi_stream *s)
{
    char msg[512];
    enum fs_poll_result r;
    int64_t now = fs_monotonic_us();
    bool normal_once = s->phase == PH_SUBSCRIBE && s->status == GRPC_STATUS_OK &&
                       s->reopen_us > 0 && !s->cancel_reason;
    if (s->cancel_reason) {
        snprintf(msg, sizeof msg, "%s", s->cancel_reason);
        r = strstr(s->cancel_reason, "stall") ? FS_POLL_TIMEOUT : FS_POLL_PROTOCOL;
    } else if (s->status == GRPC_STATUS_OK) {
        snprintf(msg, sizeof msg, "stream ended by the target");
        r = FS_POLL_PROTOCOL;
    } else {
        status_text(s, msg, sizeof msg);
        tls_hint(s, msg, sizeof msg);
        r = status_result(s->status);
    }
    call_release(s);
    if (s->stopping)
        return; /* removal: nothing to report, nothing to retry */
    if (normal_once) {
        schedule_retry(s, now, s->reopen_us);
        if (s->cb.state)
            s->cb.state(s->arg, FS_GNMI_CONN_DONE, FS_POLL_OK, "snapshot complete");
        return;
    }
    fail_attempt(s, r, msg);
}

static void
on_caps_done(struct fs_gnmi_stream *s, bool ok)
{
    Gnmi__CapabilityResponse *caps = NULL;
    if (ok && s->status == GRPC_STATUS_OK && s->recv_buf) {
        grpc_slice sl = read_all(s->recv_buf);
        caps = gnmi__capability_response__unpack(NULL, GRPC_SLICE_LENGTH(sl),
                                                 GRPC_SLICE_START_PTR(sl));
        grpc_slice_unref(sl);
    }
    grpc_status_code st = ok ? s->status : GRPC_STATUS_UNKNOWN;
    if (s->stopping) {
        call_release(s);
    } else if (st == GRPC_STATUS_OK || st == GRPC_STATUS_UNIMPLEMENTED) {
        /* Capabilities is optional for a target that streams: go on without it. */
        call_release(s);
        start_subscribe(s, caps);
    } else {
        finish_call(s);
    }
    if (caps)
        gnmi__capability_response__free_unpacked(caps, NULL);
}

static void
on_recv(struct fs_gnmi_stream *s, bool ok)
{
    if (!ok || !s->recv_buf)
        return; /* the stream is over; the status says why */
    int64_t recv_us = fs_realtime_us();
    int64_t now = fs_monotonic_us();
    if (s->streaming) /* gaps within the stream; Capabilities and set-up are not cadence */
        note_gap(s, now - s->last_rx_mono);
    s->last_rx_mono = now;
    struct fs_gnmi_arena *arena = &s->th->arena;
    size_t wire = 0;
    arena->overflow_limit = 0; /* the message itself is never refused; its decoding is */
    const uint8_t *bytes = arena_copy(arena, s->recv_buf, &wire);
    grpc_byte_buffer_destroy(s->recv_buf);
    s->recv_buf = NULL;
    /* A message of many tiny fields decodes to far more than its size: bounded, so one
     * target cannot make the thread that serves many allocate without limit. */
    arena->overflow_limit = arena->overflow_bytes + 32 * wire + (1u << 20);
    Gnmi__SubscribeResponse *r =
        bytes ? gnmi__subscribe_response__unpack(&arena->pa, wire, bytes) : NULL;
    bool over = arena->overflow_refused;
    if (!s->streaming) {
        s->streaming = true;
        s->backoff_us = s->backoff_min_us; /* the target answered: start backoff afresh */
        if (s->cb.state)
            s->cb.state(s->arg, FS_GNMI_CONN_STREAMING, FS_POLL_OK, NULL);
    }
    if (!r) {
        fs_gnmi_arena_reset(arena);
        grpc_call_cancel(s->call, NULL);
        s->cancelled = true;
        s->cancel_reason = over ? "a SubscribeResponse that decodes to more than 32 times its "
                                  "size (memory bound)"
                                : "undecodable SubscribeResponse";
        return;
    }
    if (r->response_case == GNMI__SUBSCRIBE_RESPONSE__RESPONSE_SYNC_RESPONSE)
        s->after_sync = true;
    s->cb.response(s->arg, r, recv_us);
    fs_gnmi_arena_reset(arena); /* drops r whole */
    if (!s->cancelled && !s->status_done)
        arm_recv(s);
}

static void
on_event(struct fs_gnmi_stream *s, struct op *o, bool ok)
{
    o->pending = false;
    s->n_pending--;
    switch (o->kind) {
    case OP_CAPS:
        s->status_done = true;
        on_caps_done(s, ok);
        return;
    case OP_START:
        if (s->send_buf)
            grpc_byte_buffer_destroy(s->send_buf);
        s->send_buf = NULL;
        break;
    case OP_STATUS:
        s->status_done = true;
        break;
    case OP_RECV:
        on_recv(s, ok);
        break;
    case OP_SEND:
        break;
    case OP_COUNT:
        break;
    }
    if (s->phase == PH_SUBSCRIBE && s->status_done && s->n_pending == 0)
        finish_call(s);
}

/* ---- streams ---- */

static bool
connect_channel(struct fs_gnmi_stream *s, const struct fs_gnmi_stream_opts *o, char *errbuf,
                size_t errlen)
{
    grpc_channel_credentials *creds;
    if (o->insecure) {
        creds = grpc_insecure_credentials_create();
    } else {
        grpc_ssl_pem_key_cert_pair kp = {o->key_pem, o->cert_pem};
        creds = grpc_ssl_credentials_create(o->ca_pem, o->cert_pem ? &kp : NULL, NULL, NULL);
    }
    if (!creds) {
        snprintf(errbuf, errlen, "cannot create channel credentials");
        return false;
    }
    grpc_arg args[4];
    size_t n_args = 0;
    args[n_args].type = GRPC_ARG_INTEGER;
    args[n_args].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[n_args++].value.integer = (int)s->max_message;
    /* No BDP probing: on loopback or a LAN it widens the flow-control window, and gRPC
     * then reads ahead and holds more of each target's stream in its buffers (fleet
     * bench: its read buffers 597 KB a target with probing, 285 KB without). The window
     * stays at HTTP/2's 64 KiB, so a stream carries at most 64 KiB a round trip (1.3 MB/s
     * at 50 ms), above the ~470 KB/s of a 3,401-leaf target sampled every second with
     * full paths; a collector catching up drains its targets more slowly. */
    args[n_args].type = GRPC_ARG_INTEGER;
    args[n_args].key = (char *)GRPC_ARG_HTTP2_BDP_PROBE;
    args[n_args++].value.integer = 0;
    /* One connection per target: a stall or reset of one never touches another. */
    args[n_args].type = GRPC_ARG_INTEGER;
    args[n_args].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
    args[n_args++].value.integer = 1;
    if (o->server_name && !o->insecure) {
        args[n_args].type = GRPC_ARG_STRING;
        args[n_args].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[n_args++].value.string = (char *)o->server_name;
    }
    grpc_channel_args ca = {n_args, args};
    s->ch = grpc_channel_create(o->target, creds, &ca);
    grpc_channel_credentials_release(creds);
    if (!s->ch) {
        snprintf(errbuf, errlen, "cannot create a channel to %s", o->target);
        return false;
    }
    return true;
}

static void
stream_free(struct fs_gnmi_stream *s)
{
    if (s->ch)
        grpc_channel_destroy(s->ch);
    for (size_t i = 0; i < s->n_md; i++) {
        grpc_slice_unref(s->md[i].key);
        grpc_slice_unref(s->md[i].value);
    }
    free(s->target);
    free(s);
}

int
fs_gnmi_stream_start(struct fs_gnmi_io *io, const struct fs_gnmi_stream_opts *o,
                     const struct fs_gnmi_stream_cb *cb, void *arg, struct fs_gnmi_stream **out,
                     char *errbuf, size_t errlen)
{
    *out = NULL;
    struct fs_gnmi_stream *s = calloc(1, sizeof *s);
    if (!s || !(s->target = dup_or_null(o->target))) {
        free(s);
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    s->io = io;
    s->cb = *cb;
    s->arg = arg;
    s->stall_us = o->stall_us;
    s->stall_adapt = o->stall_adapt;
    s->tls = !o->insecure;
    s->client_cert = o->cert_pem != NULL;
    s->backoff_min_us = o->backoff_min_us > 0 ? o->backoff_min_us : 1000000;
    s->max_message = o->max_message_bytes > 0 && o->max_message_bytes <= INT32_MAX
                         ? o->max_message_bytes
                         : MAX_RECV_BYTES_DEFAULT;
    s->backoff_max_us = o->backoff_max_us > 0 ? o->backoff_max_us : 30000000;
    if (s->backoff_max_us < s->backoff_min_us)
        s->backoff_max_us = s->backoff_min_us;
    s->backoff_us = s->backoff_min_us;
    s->poll_us = o->poll_us;
    s->reopen_us = o->reopen_us;
    s->rng = (uint64_t)fs_realtime_us() ^ (uint64_t)(uintptr_t)s;
    if (!s->rng)
        s->rng = 1;
    for (int k = 0; k < OP_COUNT; k++)
        s->ops[k] = (struct op){s, (enum op_kind)k, false};
    s->status_details = grpc_empty_slice();
    if (o->username) {
        s->md[0].key = grpc_slice_from_static_string("username");
        s->md[0].value = grpc_slice_from_copied_string(o->username);
        s->md[1].key = grpc_slice_from_static_string("password");
        s->md[1].value = grpc_slice_from_copied_string(o->password ? o->password : "");
        s->n_md = 2;
    }
    if (!connect_channel(s, o, errbuf, errlen)) {
        stream_free(s);
        return -1;
    }
    show_cadence(s);
    s->next_attempt_mono = fs_monotonic_us(); /* connect at once */
    /* The least loaded thread (ties: the lowest index, so a fleet added at once is dealt
     * round-robin). Load is counted in streams: a target's message rate is not known yet. */
    pthread_mutex_lock(&io->lock);
    struct io_thread *th = &io->threads[0];
    for (unsigned i = 1; i < io->n_threads; i++)
        if (io->threads[i].load < th->load)
            th = &io->threads[i];
    th->load++;
    pthread_mutex_unlock(&io->lock);
    s->th = th;
    *out = s; /* before its thread sees it: its callbacks may look at *out */
    pthread_mutex_lock(&th->lock);
    s->next = th->incoming;
    th->incoming = s;
    pthread_mutex_unlock(&th->lock);
    return 0;
}

void
fs_gnmi_stream_stop(struct fs_gnmi_io *io, struct fs_gnmi_stream *s)
{
    if (!s)
        return;
    struct io_thread *th = s->th;
    pthread_mutex_lock(&th->lock);
    s->stop_req = true;
    while (!s->stopped)
        pthread_cond_wait(&th->cond, &th->lock);
    pthread_mutex_unlock(&th->lock);
    pthread_mutex_lock(&io->lock);
    th->load--;
    pthread_mutex_unlock(&io->lock);
    stream_free(s);
}

unsigned
fs_gnmi_stream_thread(const struct fs_gnmi_stream *s)
{
    return s->th->index;
}

unsigned
fs_gnmi_io_threads(const struct fs_gnmi_io *io)
{
    return io->n_threads;
}

unsigned
fs_gnmi_io_default_threads(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        return 1;
    return cpus > FS_GNMI_THREADS_AUTO_MAX ? FS_GNMI_THREADS_AUTO_MAX : (unsigned)cpus;
}

/* Timers and removals of every stream of one thread (that thread). */
static void
tick(struct io_thread *th)
{
    pthread_mutex_lock(&th->lock);
    while (th->incoming) {
        struct fs_gnmi_stream *s = th->incoming;
        th->incoming = s->next;
        s->next = th->streams;
        th->streams = s;
    }
    bool signal = false;
    int64_t now = fs_monotonic_us();
    for (struct fs_gnmi_stream **pp = &th->streams; *pp;) {
        struct fs_gnmi_stream *s = *pp;
        if (s->stop_req || th->stop) {
            s->stopping = true;
            if (s->call && !s->cancelled) {
                grpc_call_cancel(s->call, NULL);
                s->cancelled = true;
                s->cancel_reason = "stopped";
            }
            if (!s->call && s->n_pending == 0) {
                *pp = s->next;
                s->stopped = true;
                signal = true;
                continue;
            }
        } else if (s->phase == PH_IDLE && s->next_attempt_mono && now >= s->next_attempt_mono) {
            s->next_attempt_mono = 0;
            pthread_mutex_unlock(&th->lock);
            if (s->cb.state)
                s->cb.state(s->arg, FS_GNMI_CONN_CONNECTING, FS_POLL_OK, NULL);
            start_caps(s);
            pthread_mutex_lock(&th->lock);
        } else if (s->phase == PH_SUBSCRIBE && s->call && !s->cancelled) {
            roll_gaps(s, now);
            int64_t bound = stall_bound(s);
            if (bound > 0 && now - s->last_rx_mono > bound) {
                grpc_call_cancel(s->call, NULL);
                s->cancelled = true;
                s->cancel_reason = "stalled: no update and no heartbeat in time";
            } else if (s->poll_us > 0 && s->streaming && now >= s->next_poll_mono) {
                s->next_poll_mono = now + s->poll_us;
                send_poll(s);
            }
        }
        if (s->cb.tick && !s->stopping) {
            pthread_mutex_unlock(&th->lock);
            s->cb.tick(s->arg, now);
            pthread_mutex_lock(&th->lock);
        }
        pp = &s->next;
    }
    if (signal)
        pthread_cond_broadcast(&th->cond);
    pthread_mutex_unlock(&th->lock);
}

static void *
io_thread(void *arg)
{
    struct io_thread *th = arg;
    char name[16];
    snprintf(name, sizeof name, "fs-gnmi-%u", th->index);
    pthread_setname_np(pthread_self(), name); /* in top and perf, per thread */
    int64_t last_tick = 0;
    for (;;) {
        gpr_timespec dl =
            gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(TICK_MS, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(th->cq, dl, NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            struct op *o = ev.tag;
            on_event(o->s, o, ev.success != 0);
        } else if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            break;
        }
        int64_t now = fs_monotonic_us();
        if (now - last_tick >= TICK_MS * 1000 || ev.type == GRPC_QUEUE_TIMEOUT) {
            last_tick = now;
            tick(th);
            pthread_mutex_lock(&th->lock);
            bool done = th->stop && !th->streams && !th->incoming;
            pthread_mutex_unlock(&th->lock);
            if (done)
                grpc_completion_queue_shutdown(th->cq); /* drains to GRPC_QUEUE_SHUTDOWN */
        }
    }
    return NULL;
}

/* Stops and frees the threads that were started (every stream stopped), then gRPC. */
static void
io_teardown(struct fs_gnmi_io *io)
{
    for (unsigned i = 0; i < io->n_threads; i++) {
        struct io_thread *th = &io->threads[i];
        if (!th->running)
            continue;
        pthread_mutex_lock(&th->lock);
        th->stop = true;
        pthread_mutex_unlock(&th->lock);
    }
    for (unsigned i = 0; i < io->n_threads; i++) {
        struct io_thread *th = &io->threads[i];
        if (th->running)
            pthread_join(th->thread, NULL);
        if (th->cq)
            grpc_completion_queue_destroy(th->cq);
        fs_gnmi_arena_fini(&th->arena);
        pthread_mutex_destroy(&th->lock);
        pthread_cond_destroy(&th->cond);
    }
    free(io->threads);
    pthread_mutex_destroy(&io->lock);
    free(io);
    grpc_shutdown();
}

int
fs_gnmi_io_new(struct fs_gnmi_io **out, unsigned threads, char *errbuf, size_t errlen)
{
    *out = NULL;
    if (threads == 0)
        threads = fs_gnmi_io_default_threads();
    if (threads > FS_GNMI_THREADS_MAX) {
        snprintf(errbuf, errlen, "%u gNMI stream threads: at most %u", threads,
                 FS_GNMI_THREADS_MAX);
        return -1;
    }
    struct fs_gnmi_io *io = calloc(1, sizeof *io);
    struct io_thread *ths = calloc(threads, sizeof *ths);
    if (!io || !ths) {
        free(io);
        free(ths);
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    gpr_set_log_function(grpc_log_route);
    grpc_init();
    pthread_mutex_init(&io->lock, NULL);
    io->threads = ths;
    io->n_threads = threads;
    for (unsigned i = 0; i < threads; i++) {
        struct io_thread *th = &ths[i];
        th->index = i;
        th->cq = grpc_completion_queue_create_for_next(NULL);
        fs_gnmi_arena_init(&th->arena, 256 << 10, 16 << 20);
        pthread_mutex_init(&th->lock, NULL);
        pthread_cond_init(&th->cond, NULL);
    }
    for (unsigned i = 0; i < threads; i++) {
        struct io_thread *th = &ths[i];
        if (!th->cq || pthread_create(&th->thread, NULL, io_thread, th) != 0) {
            snprintf(errbuf, errlen, "cannot start gRPC stream thread %u of %u", i + 1, threads);
            io_teardown(io);
            return -1;
        }
        th->running = true;
    }
    *out = io;
    return 0;
}

void
fs_gnmi_io_free(struct fs_gnmi_io *io)
{
    if (io)
        io_teardown(io);
}
