/*
 * gnmi-load: many gNMI targets in one lean process, for fleet benchmarks (test code,
 * never shipped). gRPC C core server + protobuf-c, plaintext on loopback.
 *
 *   gnmi-load --targets N [--port-file F] [--threads K] [--messages sample|group]
 *             [--bind ADDR]
 *
 * One grpc_server listens on N ports (chosen by the kernel); target i is the i-th port,
 * told apart by the port in the call's :authority (the client dials 127.0.0.1:PORT).
 * The ports are written, comma-separated on one line, to F (atomically) once listening.
 * K threads (default 2) each poll their own completion queue; a call lives on the queue
 * of the thread that accepted it, so a stream's state is never shared between threads.
 *
 * Serves Capabilities (PROTO encoding only) and Subscribe STREAM with SAMPLE (or
 * TARGET_DEFINED, served as SAMPLE; ON_CHANGE: the first round only, as nothing changes)
 * subscriptions, PROTO encoding, over the leaves
 * gnmi_sim.py --bench-replay serves for these paths: per port Eth1/1..Eth1/64 the interface
 * leaves (state/counters/{in-octets,out-octets,in-pkts,out-pkts,ecn-marked-pkts},
 * state/oper-status) and, per queue 0..7, output/queues/queue[name=Q]/state/
 * {transmit-pkts,transmit-octets,ecn-marked-pkts,wred-dropped-pkts,
 * no-buffer-uc-dropped-pkts,instant-queue-len}. Leaf index L = (port - 1) * 54 + j, j < 6
 * the interface leaves in that order, j = 6 + 6 * queue + k the queue's. Every leaf but
 * oper-status ("UP") is a uint_val of (target + 1) * 1000000 + L, the same every round:
 * a checker knows what each target must deliver.
 *
 * Each subscription's notifications are encoded once when the stream starts, without a
 * timestamp, and re-sent every sample interval behind a small per-message header
 * (SubscribeResponse.update's tag and length, Notification.timestamp as a fixed 10-byte
 * varint of the wall clock at send): the body bytes are shared by reference (a grpc_slice)
 * and never copied or re-encoded. --messages sample: one Notification a subscription a
 * round, full paths; group: one a group (an interface's state, or one queue's state),
 * prefix and relative paths, as devices send (64 + 512 messages a round for the bench's
 * two paths). sync_response follows the first round. One message is in flight per
 * stream: a round due while the last one is still being sent (the client does not read
 * fast enough: HTTP/2 flow control) is skipped and counted late, never burst.
 *
 * On SIGTERM/SIGINT: every call is cancelled, the server shut down, and one line printed
 * to stderr: "stats streams=.. rounds=.. late=.. messages=.. cpu_ms=..". Log lines:
 * "listening N ports", "subscribe target=I subs=S leaves=U", "stream-end target=I".
 */
#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "gnmi.pb-c.h"

#define PORTS 64
#define LEAVES_PER_PORT 54
#define N_LEAVES (PORTS * LEAVES_PER_PORT)
#define MAX_SUBS 8
#define MAX_ELEMS 8
#define REQ_PER_THREAD 32 /* calls requested ahead on each queue */

static const char *const if_leaf[6] = {"in-octets", "out-octets",      "in-pkts",
                                       "out-pkts",  "ecn-marked-pkts", "oper-status"};
static const char *const q_leaf[6] = {
    "transmit-pkts",     "transmit-octets",           "ecn-marked-pkts",
    "wred-dropped-pkts", "no-buffer-uc-dropped-pkts", "instant-queue-len"};

/* One path element: a name and at most one key (all this tree needs). */
struct elem {
    const char *name, *key, *val;
};

/* A leaf's full path and where its group's prefix ends. */
struct leaf {
    struct elem e[MAX_ELEMS];
    int n, n_prefix, group;
    bool str;
};

static struct leaf leaves[N_LEAVES];
static char port_names[PORTS][16];
static const char *const q_names[8] = {"0", "1", "2", "3", "4", "5", "6", "7"};

static void
build_leaves(void)
{
    for (int p = 0; p < PORTS; p++) {
        snprintf(port_names[p], sizeof port_names[p], "Eth1/%d", p + 1);
        for (int j = 0; j < LEAVES_PER_PORT; j++) {
            struct leaf *l = &leaves[p * LEAVES_PER_PORT + j];
            int n = 0;
            if (j < 6) {
                l->e[n++] = (struct elem){"interfaces", NULL, NULL};
                l->e[n++] = (struct elem){"interface", "name", port_names[p]};
                l->e[n++] = (struct elem){"state", NULL, NULL};
                l->n_prefix = n;
                if (j < 5)
                    l->e[n++] = (struct elem){"counters", NULL, NULL};
                l->e[n++] = (struct elem){if_leaf[j], NULL, NULL};
                l->group = p * 9;
                l->str = j == 5;
            } else {
                int q = (j - 6) / 6, k = (j - 6) % 6;
                l->e[n++] = (struct elem){"qos", NULL, NULL};
                l->e[n++] = (struct elem){"interfaces", NULL, NULL};
                l->e[n++] = (struct elem){"interface", "interface-id", port_names[p]};
                l->e[n++] = (struct elem){"output", NULL, NULL};
                l->e[n++] = (struct elem){"queues", NULL, NULL};
                l->e[n++] = (struct elem){"queue", "name", q_names[q]};
                l->e[n++] = (struct elem){"state", NULL, NULL};
                l->n_prefix = n;
                l->e[n++] = (struct elem){q_leaf[k], NULL, NULL};
                l->group = p * 9 + 1 + q;
            }
            l->n = n;
        }
    }
}

/* A subscription path (prefix + path) selects the leaves under it; "*" keys match all. */
static bool
path_selects(const Gnmi__Path *const *parts, size_t n_parts, const struct leaf *l)
{
    int i = 0;
    for (size_t p = 0; p < n_parts; p++) {
        if (!parts[p])
            continue;
        for (size_t k = 0; k < parts[p]->n_elem; k++, i++) {
            const Gnmi__PathElem *e = parts[p]->elem[k];
            if (i >= l->n)
                return false;
            const char *name = strchr(e->name, ':') ? strchr(e->name, ':') + 1 : e->name;
            if (strcmp(name, "*") != 0 && strcmp(name, l->e[i].name) != 0)
                return false;
            for (size_t q = 0; q < e->n_key; q++) {
                const char *v = e->key[q]->value;
                if (strcmp(v, "*") == 0)
                    continue;
                if (!l->e[i].key || strcmp(e->key[q]->key, l->e[i].key) != 0 ||
                    strcmp(v, l->e[i].val) != 0)
                    return false;
            }
        }
    }
    return true;
}

/* ---- encoding (once a stream) ---- */

/* Fills path from elements [from, to) of l; storage from the caller's arrays. */
static void
fill_path(Gnmi__Path *path, const struct leaf *l, int from, int to, Gnmi__PathElem *pe,
          Gnmi__PathElem **pp, Gnmi__PathElem__KeyEntry *ke, Gnmi__PathElem__KeyEntry **kp)
{
    gnmi__path__init(path);
    path->n_elem = (size_t)(to - from);
    path->elem = pp;
    for (int i = from; i < to; i++) {
        Gnmi__PathElem *e = &pe[i - from];
        gnmi__path_elem__init(e);
        e->name = (char *)l->e[i].name;
        if (l->e[i].key) {
            gnmi__path_elem__key_entry__init(&ke[i - from]);
            ke[i - from].key = (char *)l->e[i].key;
            ke[i - from].value = (char *)l->e[i].val;
            kp[i - from] = &ke[i - from];
            e->n_key = 1;
            e->key = &kp[i - from];
        }
        pp[i - from] = e;
    }
}

/* One Notification (no timestamp: the header carries it) of the n leaves sel[], relative
 * to their common group prefix if grouped; returned as a refcounted slice. */
static int
encode_notification(const int *sel, size_t n, bool grouped, int target, grpc_slice *out)
{
    int rc = -1;
    size_t slots = (n + 1) * MAX_ELEMS;
    Gnmi__Update *u = calloc(n, sizeof *u);
    Gnmi__Update **up = calloc(n, sizeof *up);
    Gnmi__Path *paths = calloc(n + 1, sizeof *paths);
    Gnmi__TypedValue *tv = calloc(n, sizeof *tv);
    Gnmi__PathElem *pe = calloc(slots, sizeof *pe);
    Gnmi__PathElem **pp = calloc(slots, sizeof *pp);
    Gnmi__PathElem__KeyEntry *ke = calloc(slots, sizeof *ke);
    Gnmi__PathElem__KeyEntry **kp = calloc(slots, sizeof *kp);
    uint8_t *buf = NULL;
    if (!u || !up || !paths || !tv || !pe || !pp || !ke || !kp)
        goto out;
    Gnmi__Notification no = GNMI__NOTIFICATION__INIT;
    if (grouped) {
        const struct leaf *l0 = &leaves[sel[0]];
        fill_path(&paths[n], l0, 0, l0->n_prefix, pe + n * MAX_ELEMS, pp + n * MAX_ELEMS,
                  ke + n * MAX_ELEMS, kp + n * MAX_ELEMS);
        no.prefix = &paths[n];
    }
    for (size_t i = 0; i < n; i++) {
        const struct leaf *l = &leaves[sel[i]];
        gnmi__update__init(&u[i]);
        fill_path(&paths[i], l, grouped ? l->n_prefix : 0, l->n, pe + i * MAX_ELEMS,
                  pp + i * MAX_ELEMS, ke + i * MAX_ELEMS, kp + i * MAX_ELEMS);
        u[i].path = &paths[i];
        gnmi__typed_value__init(&tv[i]);
        if (l->str) {
            tv[i].value_case = GNMI__TYPED_VALUE__VALUE_STRING_VAL;
            tv[i].string_val = "UP";
        } else {
            tv[i].value_case = GNMI__TYPED_VALUE__VALUE_UINT_VAL;
            tv[i].uint_val = (uint64_t)(target + 1) * 1000000u + (uint64_t)sel[i];
        }
        u[i].val = &tv[i];
        up[i] = &u[i];
    }
    no.n_update = n;
    no.update = up;
    size_t len = gnmi__notification__get_packed_size(&no);
    buf = malloc(len ? len : 1);
    if (!buf)
        goto out;
    gnmi__notification__pack(&no, buf);
    *out = grpc_slice_new(buf, len, free); /* the slice owns buf now */
    buf = NULL;
    rc = 0;
out:
    free(buf);
    free(u);
    free(up);
    free(paths);
    free(tv);
    free(pe);
    free(pp);
    free(ke);
    free(kp);
    return rc;
}

/* ---- server state ---- */

enum tag_kind { T_REQ = 0, T_START, T_CLOSE, T_SEND, T_STATUS, T_CAPS, T_N };

struct stream;
struct tag {
    struct stream *s;
    enum tag_kind kind;
};

/* A subscription's messages and its schedule. */
struct sub {
    grpc_slice *bodies;   /* owned (one reference each) */
    size_t n_bodies, pos; /* pos == n_bodies: the round is sent */
    int64_t interval_ns, next_due_ns;
};

struct poller;
/* One call (owned by its poller; freed when no operation is pending and it closed). */
struct stream {
    struct poller *th;
    struct stream *next, *prev; /* th->streams once accepted */
    struct tag tags[T_N];
    int pending;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_byte_buffer *recv_buf, *send_buf;
    int cancelled;
    grpc_slice status_details;
    int target;
    bool closed, failed, streaming, synced;
    struct sub subs[MAX_SUBS];
    size_t n_subs;
};

struct poller {
    pthread_t thread;
    grpc_completion_queue *cq;
    struct stream *streams;
    int n_streams, n_req;
    bool got_shutdown; /* the server's shutdown notification (poller 0) */
    uint64_t rounds, late, messages, n_opened;
};

static grpc_server *server;
static struct poller *pollers;
static int n_pollers = 2;
static atomic_bool stopping;
static bool grouped;
static int n_targets;
static int32_t port_target[65536];
static grpc_slice caps_slice, sync_slice;
static struct tag shutdown_tag = {NULL, T_N};

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool
batch(struct stream *s, enum tag_kind k, const grpc_op *ops, size_t n)
{
    if (grpc_call_start_batch(s->call, ops, n, &s->tags[k], NULL) != GRPC_CALL_OK)
        return false;
    s->pending++;
    return true;
}

static int
request_call(struct poller *th)
{
    struct stream *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->th = th;
    for (int k = 0; k < T_N; k++)
        s->tags[k] = (struct tag){s, (enum tag_kind)k};
    grpc_call_details_init(&s->details);
    grpc_metadata_array_init(&s->md);
    if (grpc_server_request_call(server, &s->call, &s->details, &s->md, th->cq, th->cq,
                                 &s->tags[T_REQ]) != GRPC_CALL_OK) {
        grpc_call_details_destroy(&s->details);
        grpc_metadata_array_destroy(&s->md);
        free(s);
        return -1;
    }
    th->n_req++;
    return 0;
}

static void
stream_free(struct stream *s)
{
    struct poller *th = s->th;
    if (s->prev)
        s->prev->next = s->next;
    else if (th->streams == s)
        th->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    th->n_streams--;
    if (s->streaming)
        fprintf(stderr, "stream-end target=%d\n", s->target);
    for (size_t i = 0; i < s->n_subs; i++) {
        for (size_t j = 0; j < s->subs[i].n_bodies; j++)
            grpc_slice_unref(s->subs[i].bodies[j]);
        free(s->subs[i].bodies);
    }
    if (s->recv_buf)
        grpc_byte_buffer_destroy(s->recv_buf);
    if (s->send_buf)
        grpc_byte_buffer_destroy(s->send_buf);
    grpc_slice_unref(s->status_details);
    if (s->call)
        grpc_call_unref(s->call);
    grpc_call_details_destroy(&s->details);
    grpc_metadata_array_destroy(&s->md);
    free(s);
}

static void
send_status(struct stream *s, grpc_status_code code, const char *msg)
{
    s->failed = true;
    s->status_details = grpc_slice_from_copied_string(msg);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    op.data.send_status_from_server.status = code;
    op.data.send_status_from_server.status_details = &s->status_details;
    batch(s, T_STATUS, &op, 1);
}

/* Sends one message: the per-send header, then the shared body (by reference). */
static void
send_msg(struct stream *s, grpc_slice body, bool update)
{
    grpc_slice sl[2];
    size_t n = 0;
    if (update) {
        /* SubscribeResponse{update(1): Notification{timestamp(1): 10-byte varint, body}} */
        uint8_t h[20];
        size_t o = 0, inner = 11 + GRPC_SLICE_LENGTH(body);
        h[o++] = 0x0a;
        for (size_t v = inner;; v >>= 7) {
            h[o++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
            if (v < 0x80)
                break;
        }
        h[o++] = 0x08;
        uint64_t ts = (uint64_t)now_ns();
        for (int i = 0; i < 10; i++, ts >>= 7) /* fixed width: patched, never re-encoded */
            h[o++] = (uint8_t)((ts & 0x7f) | (i < 9 ? 0x80 : 0));
        sl[n++] = grpc_slice_from_copied_buffer((const char *)h, o);
    }
    sl[n++] = body;
    s->send_buf = grpc_raw_byte_buffer_create(sl, n); /* takes its own references */
    if (update)
        grpc_slice_unref(sl[0]);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = s->send_buf;
    if (!batch(s, T_SEND, &op, 1)) {
        grpc_byte_buffer_destroy(s->send_buf);
        s->send_buf = NULL;
        s->failed = true;
        return;
    }
    s->th->messages++;
}

/* Sends the next due message, if none is in flight. */
static void
pump(struct stream *s)
{
    if (s->send_buf || s->closed || s->failed || !s->streaming)
        return;
    for (size_t i = 0; i < s->n_subs; i++) {
        struct sub *b = &s->subs[i];
        if (b->pos < b->n_bodies) {
            send_msg(s, b->bodies[b->pos++], true);
            return;
        }
    }
    if (!s->synced) {
        s->synced = true;
        send_msg(s, sync_slice, false);
    }
}

/* Starts the rounds that are due (timer scan, its poller's thread). */
static void
tick(struct stream *s, int64_t now)
{
    if (!s->streaming || s->closed || s->failed)
        return;
    for (size_t i = 0; i < s->n_subs; i++) {
        struct sub *b = &s->subs[i];
        if (now < b->next_due_ns)
            continue;
        b->next_due_ns += b->interval_ns;
        if (b->next_due_ns <= now) /* far behind (a stalled reader): no burst */
            b->next_due_ns = now + b->interval_ns;
        if (b->pos < b->n_bodies) {
            s->th->late++;
            continue;
        }
        b->pos = 0;
        s->th->rounds++;
    }
    pump(s);
}

static grpc_byte_buffer *
recv_slice(grpc_byte_buffer *bb, grpc_slice *out)
{
    grpc_byte_buffer_reader r;
    if (!bb || !grpc_byte_buffer_reader_init(&r, bb))
        return NULL;
    *out = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    return bb;
}

/* The SubscribeRequest arrived: encode its subscriptions and start streaming. */
static void
start_stream(struct stream *s)
{
    grpc_slice sl;
    if (!recv_slice(s->recv_buf, &sl)) {
        send_status(s, GRPC_STATUS_INVALID_ARGUMENT, "no SubscribeRequest");
        return;
    }
    Gnmi__SubscribeRequest *rq =
        gnmi__subscribe_request__unpack(NULL, GRPC_SLICE_LENGTH(sl), GRPC_SLICE_START_PTR(sl));
    grpc_slice_unref(sl);
    const char *why = NULL;
    grpc_status_code code = GRPC_STATUS_UNIMPLEMENTED;
    int *sel = NULL;
    size_t total = 0;
    if (!rq || rq->request_case != GNMI__SUBSCRIBE_REQUEST__REQUEST_SUBSCRIBE) {
        why = "first request must be subscribe";
        code = GRPC_STATUS_INVALID_ARGUMENT;
        goto out;
    }
    const Gnmi__SubscriptionList *sl_ = rq->subscribe;
    if (sl_->mode != GNMI__SUBSCRIPTION_LIST__MODE__STREAM) {
        why = "only STREAM subscriptions are served";
        goto out;
    }
    if (sl_->encoding != GNMI__ENCODING__PROTO) {
        why = "only PROTO encoding is served";
        goto out;
    }
    if (sl_->n_subscription > MAX_SUBS || !(sel = malloc(N_LEAVES * sizeof *sel))) {
        why = "too many subscriptions";
        goto out;
    }
    int64_t now = now_ns();
    for (size_t i = 0; i < sl_->n_subscription; i++) {
        const Gnmi__Subscription *su = sl_->subscription[i];
        const Gnmi__Path *parts[2] = {sl_->prefix, su->path};
        size_t n = 0;
        for (int l = 0; l < N_LEAVES; l++)
            if (path_selects(parts, 2, &leaves[l]))
                sel[n++] = l;
        struct sub *b = &s->subs[s->n_subs++];
        /* ON_CHANGE: the values never change, so they are sent in the first round only */
        bool once = su->mode == GNMI__SUBSCRIPTION_MODE__ON_CHANGE;
        b->interval_ns = su->sample_interval ? (int64_t)su->sample_interval : 1000000000;
        b->next_due_ns = once ? INT64_MAX : now + b->interval_ns; /* round 1 goes now */
        total += n;
        /* runs of one group: one message each (group), or all in one (sample) */
        for (size_t a = 0; a < n;) {
            size_t e = a + 1;
            while (e < n && (!grouped || leaves[sel[e]].group == leaves[sel[a]].group))
                e++;
            grpc_slice *nb = realloc(b->bodies, (b->n_bodies + 1) * sizeof *nb);
            if (!nb ||
                encode_notification(sel + a, e - a, grouped, s->target, &nb[b->n_bodies]) != 0) {
                if (nb)
                    b->bodies = nb;
                why = "out of memory";
                code = GRPC_STATUS_RESOURCE_EXHAUSTED;
                goto out;
            }
            b->bodies = nb;
            b->n_bodies++;
            a = e;
        }
    }
    s->streaming = true;
    s->th->rounds++;
    fprintf(stderr, "subscribe target=%d subs=%zu leaves=%zu\n", s->target, s->n_subs, total);
out:
    free(sel);
    if (rq)
        gnmi__subscribe_request__free_unpacked(rq, NULL);
    if (why)
        send_status(s, code, why);
    else
        pump(s);
}

/* A call arrived: tell the target by the port dialled, then answer its method. */
static void
accept_call(struct stream *s)
{
    struct poller *th = s->th;
    s->next = th->streams;
    if (th->streams)
        th->streams->prev = s;
    th->streams = s;
    th->n_streams++;
    th->n_opened++;
    const char *h = (const char *)GRPC_SLICE_START_PTR(s->details.host);
    size_t hl = GRPC_SLICE_LENGTH(s->details.host);
    long port = 0;
    size_t c = hl;
    while (c > 0 && h[c - 1] != ':')
        c--;
    for (size_t i = c; i < hl && h[i] >= '0' && h[i] <= '9' && port < 65536; i++)
        port = port * 10 + (h[i] - '0');
    s->target = port > 0 && port < 65536 ? port_target[port] : -1;
    const char *m = (const char *)GRPC_SLICE_START_PTR(s->details.method);
    size_t ml = GRPC_SLICE_LENGTH(s->details.method);
    grpc_op ops[5];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[0].data.recv_close_on_server.cancelled = &s->cancelled;
    if (!batch(s, T_CLOSE, ops, 1)) {
        s->closed = true;
        return;
    }
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &s->recv_buf;
    if (s->target < 0) {
        send_status(s, GRPC_STATUS_NOT_FOUND, "no target at the port in :authority");
    } else if (ml == strlen("/gnmi.gNMI/Subscribe") && memcmp(m, "/gnmi.gNMI/Subscribe", ml) == 0) {
        batch(s, T_START, ops, 2);
    } else if (ml == strlen("/gnmi.gNMI/Capabilities") &&
               memcmp(m, "/gnmi.gNMI/Capabilities", ml) == 0) {
        s->send_buf = grpc_raw_byte_buffer_create(&caps_slice, 1);
        s->status_details = grpc_empty_slice();
        ops[2].op = GRPC_OP_SEND_MESSAGE;
        ops[2].data.send_message.send_message = s->send_buf;
        ops[3].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[3].data.send_status_from_server.status = GRPC_STATUS_OK;
        ops[3].data.send_status_from_server.status_details = &s->status_details;
        batch(s, T_CAPS, ops, 4);
    } else {
        send_status(s, GRPC_STATUS_UNIMPLEMENTED, "method not served");
    }
}

static void
handle(struct poller *th, struct tag *t, bool ok)
{
    if (t == &shutdown_tag) {
        th->got_shutdown = true;
        return;
    }
    struct stream *s = t->s;
    if (t->kind == T_REQ) {
        th->n_req--;
        if (!ok) { /* the server is shutting down */
            grpc_call_details_destroy(&s->details);
            grpc_metadata_array_destroy(&s->md);
            free(s);
            return;
        }
        bool stop = atomic_load(&stopping);
        if (!stop)
            request_call(th);
        accept_call(s);
        if (stop) /* arrived after grpc_server_cancel_all_calls */
            grpc_call_cancel(s->call, NULL);
    } else {
        s->pending--;
        switch (t->kind) {
        case T_CLOSE:
            s->closed = true;
            break;
        case T_START:
            if (ok && !s->closed)
                start_stream(s);
            break;
        case T_SEND:
            grpc_byte_buffer_destroy(s->send_buf);
            s->send_buf = NULL;
            if (!ok)
                s->failed = true; /* the client went away: the close follows */
            pump(s);
            break;
        default:
            break;
        }
    }
    if (s->closed && s->pending == 0)
        stream_free(s);
}

static void *
poll_loop(void *arg)
{
    struct poller *th = arg;
    int64_t last_scan = 0;
    for (;;) {
        bool stop = atomic_load(&stopping);
        if (stop && th->n_req == 0 && th->n_streams == 0 && (th != &pollers[0] || th->got_shutdown))
            break;
        gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                       gpr_time_from_millis(stop ? 50 : 1, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(th->cq, dl, NULL);
        if (ev.type == GRPC_OP_COMPLETE)
            handle(th, ev.tag, ev.success != 0);
        else if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        int64_t now = now_ns();
        if (now - last_scan >= 1000000 && !stop) {
            last_scan = now;
            for (struct stream *s = th->streams; s; s = s->next)
                tick(s, now);
        }
    }
    return NULL;
}

static int
encode_static(void)
{
    Gnmi__CapabilityResponse cr = GNMI__CAPABILITY_RESPONSE__INIT;
    Gnmi__ModelData md[3], *mp[3];
    const char *models[3] = {"openconfig-interfaces", "openconfig-qos", "openconfig-acl"};
    for (int i = 0; i < 3; i++) {
        gnmi__model_data__init(&md[i]);
        md[i].name = (char *)models[i];
        md[i].organization = "OpenConfig working group";
        md[i].version = "1.0.0";
        mp[i] = &md[i];
    }
    Gnmi__Encoding enc = GNMI__ENCODING__PROTO;
    cr.n_supported_models = 3;
    cr.supported_models = mp;
    cr.n_supported_encodings = 1;
    cr.supported_encodings = &enc;
    cr.gnmi_version = "0.10.0";
    uint8_t buf[512];
    if (gnmi__capability_response__get_packed_size(&cr) > sizeof buf)
        return -1;
    size_t n = gnmi__capability_response__pack(&cr, buf);
    caps_slice = grpc_slice_from_copied_buffer((const char *)buf, n);
    sync_slice = grpc_slice_from_copied_buffer("\x18\x01", 2); /* sync_response(3): true */
    return 0;
}

static long
cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec * 1000L + ru.ru_utime.tv_usec / 1000 + ru.ru_stime.tv_sec * 1000L +
           ru.ru_stime.tv_usec / 1000;
}

static void
usage(void)
{
    fprintf(stderr, "usage: gnmi-load --targets N [--port-file F] [--threads K] "
                    "[--messages sample|group] [--bind ADDR]\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    const char *port_file = NULL, *bind = "127.0.0.1";
    int rc = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (strcmp(argv[i], "--targets") == 0)
            n_targets = atoi(v);
        else if (strcmp(argv[i], "--port-file") == 0)
            port_file = v;
        else if (strcmp(argv[i], "--threads") == 0)
            n_pollers = atoi(v);
        else if (strcmp(argv[i], "--bind") == 0)
            bind = v;
        else if (strcmp(argv[i], "--messages") == 0 && strcmp(v, "group") == 0)
            grouped = true;
        else if (strcmp(argv[i], "--messages") != 0 || strcmp(v, "sample") != 0)
            usage();
        i++;
    }
    if (n_targets < 1 || n_targets > 30000 || n_pollers < 1 || n_pollers > 64)
        usage();
    build_leaves();
    memset(port_target, 0xff, sizeof port_target); /* -1: no target */

    /* signals go to sigwait below, never to gRPC's threads */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    grpc_init();
    int *ports = calloc((size_t)n_targets, sizeof *ports);
    pollers = calloc((size_t)n_pollers, sizeof *pollers);
    char *list = calloc((size_t)n_targets, 8);
    if (!ports || !pollers || !list || encode_static() != 0)
        goto out;
    server = grpc_server_create(NULL, NULL);
    for (int i = 0; i < n_pollers; i++) {
        pollers[i].cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(server, pollers[i].cq, NULL);
    }
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    char addr[300];
    bool v6 = strchr(bind, ':') != NULL;
    size_t lo = 0;
    for (int i = 0; i < n_targets; i++) {
        snprintf(addr, sizeof addr, v6 ? "[%s]:0" : "%s:0", bind);
        ports[i] = grpc_server_add_http2_port(server, addr, creds);
        if (ports[i] <= 0 || port_target[ports[i]] >= 0) {
            fprintf(stderr, "cannot listen on %s (target %d)\n", addr, i);
            grpc_server_credentials_release(creds);
            goto destroy;
        }
        port_target[ports[i]] = i;
        lo += (size_t)snprintf(list + lo, 8, "%s%d", i ? "," : "", ports[i]);
    }
    grpc_server_credentials_release(creds);
    grpc_server_start(server);
    for (int i = 0; i < n_pollers; i++)
        for (int k = 0; k < REQ_PER_THREAD; k++)
            if (request_call(&pollers[i]) != 0)
                goto destroy;
    for (int i = 0; i < n_pollers; i++)
        pthread_create(&pollers[i].thread, NULL, poll_loop, &pollers[i]);
    if (port_file) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%s\n", list) < 0 || fclose(f) != 0 || rename(tmp, port_file) != 0)
            fprintf(stderr, "cannot write %s: %s\n", port_file, strerror(errno));
    }
    fprintf(stderr, "listening %d ports\n", n_targets);

    int sig = 0;
    sigwait(&sigs, &sig);
    atomic_store(&stopping, true);
    grpc_server_shutdown_and_notify(server, pollers[0].cq, &shutdown_tag);
    grpc_server_cancel_all_calls(server);
    for (int i = 0; i < n_pollers; i++)
        pthread_join(pollers[i].thread, NULL);
    uint64_t rounds = 0, late = 0, msgs = 0, opened = 0;
    for (int i = 0; i < n_pollers; i++) {
        rounds += pollers[i].rounds;
        late += pollers[i].late;
        msgs += pollers[i].messages;
        opened += pollers[i].n_opened;
    }
    fprintf(stderr, "stats streams=%llu rounds=%llu late=%llu messages=%llu cpu_ms=%ld\n",
            (unsigned long long)opened, (unsigned long long)rounds, (unsigned long long)late,
            (unsigned long long)msgs, cpu_ms());
    rc = 0;
destroy:
    if (rc != 0) { /* not started, or started without its pollers: just stop it */
        grpc_server_shutdown_and_notify(server, pollers[0].cq, &shutdown_tag);
        grpc_server_cancel_all_calls(server);
    }
    grpc_server_destroy(server);
    for (int i = 0; i < n_pollers; i++) {
        grpc_completion_queue_shutdown(pollers[i].cq);
        grpc_event ev;
        do {
            ev =
                grpc_completion_queue_next(pollers[i].cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
            if (ev.type == GRPC_OP_COMPLETE && ev.tag != &shutdown_tag) {
                struct tag *t = ev.tag; /* requested calls never answered */
                grpc_call_details_destroy(&t->s->details);
                grpc_metadata_array_destroy(&t->s->md);
                free(t->s);
            }
        } while (ev.type != GRPC_QUEUE_SHUTDOWN);
        grpc_completion_queue_destroy(pollers[i].cq);
    }
    grpc_slice_unref(caps_slice);
    grpc_slice_unref(sync_slice);
out:
    free(ports);
    free(pollers);
    free(list);
    grpc_shutdown();
    return rc;
}
