/*
 * gNMI decode + map + store throughput on one core: realistic notifications of many
 * updates (per port: prefix /qos/interfaces/interface[interface-id=..]/output/queues,
 * 8 queues x 7 leaves = 56 updates), unpacked with protobuf-c, mapped through the
 * resolution cache and committed into a real store through the sink, one batch per
 * notification. PROTO (uint64 typed values) and JSON_IETF (RFC 7951 numbers as strings).
 *
 *   bench_gnmi [seconds per encoding, default 2]
 * Prints: BENCH gnmi_updates_per_s <v> updates/s, BENCH gnmi_updates_per_s_json <v> updates/s
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gnmi/arena.h"
#include "gnmi/map.h"
#include "store/store.h"

#define PORTS 64
#define VARIANTS 4
static const char *const leaves[7] = {
    "ecn-marked-pkts",           "instant-queue-len", "max-queue-len",  "wred-dropped-pkts",
    "no-buffer-uc-dropped-pkts", "transmit-pkts",     "transmit-octets"};

static double
mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t
real_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static Gnmi__Path *
path(const char *s)
{
    char err[128];
    Gnmi__Path *p = NULL;
    if (fs_gnmi_path_parse(s, &p, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    return p;
}

/* Packs one port's notification; values grow with the variant. */
static ProtobufCBinaryData
build(int port, int variant, bool json)
{
    char buf[256];
    Gnmi__Notification n = GNMI__NOTIFICATION__INIT;
    n.timestamp = real_us() * 1000;
    snprintf(buf, sizeof buf, "/qos/interfaces/interface[interface-id=Eth1/%d]/output/queues",
             port + 1);
    n.prefix = path(buf);
    n.n_update = 8 * 7;
    n.update = calloc(n.n_update, sizeof *n.update);
    for (size_t i = 0; i < n.n_update; i++) {
        Gnmi__Update *u = calloc(1, sizeof *u);
        gnmi__update__init(u);
        snprintf(buf, sizeof buf, "queue[name=%zu]/state/%s", i / 7, leaves[i % 7]);
        u->path = path(buf);
        u->val = calloc(1, sizeof *u->val);
        gnmi__typed_value__init(u->val);
        uint64_t v = (1ull << 53) + (uint64_t)variant * 1000 + i;
        if (json) {
            char *j = malloc(32);
            snprintf(j, 32, "\"%llu\"", (unsigned long long)v);
            u->val->value_case = GNMI__TYPED_VALUE__VALUE_JSON_IETF_VAL;
            u->val->json_ietf_val = (ProtobufCBinaryData){strlen(j), (uint8_t *)j};
        } else {
            u->val->value_case = GNMI__TYPED_VALUE__VALUE_UINT_VAL;
            u->val->uint_val = v;
        }
        n.update[i] = u;
    }
    ProtobufCBinaryData out;
    out.len = gnmi__notification__get_packed_size(&n);
    out.data = malloc(out.len);
    gnmi__notification__pack(&n, out.data);
    for (size_t i = 0; i < n.n_update; i++)
        protobuf_c_message_free_unpacked(&n.update[i]->base, NULL);
    free(n.update);
    protobuf_c_message_free_unpacked(&n.prefix->base, NULL);
    return out;
}

static double
run(bool json, double seconds)
{
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 256u << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    struct fs_target_cfg tcfg = {0};
    tcfg.name = "leaf1";
    tcfg.address = "127.0.0.1";
    tcfg.staleness_intervals = 3;
    struct fs_sink *sink = st ? fs_store_sink_add(st, &tcfg, "gnmi", 100000) : NULL;
    struct fs_gnmi_map *m = fs_gnmi_map_new(NULL, err, sizeof err);
    if (!sink || !m) {
        fprintf(stderr, "bench_gnmi: setup failed: %s\n", err);
        exit(1);
    }
    static ProtobufCBinaryData msgs[PORTS][VARIANTS];
    for (int p = 0; p < PORTS; p++)
        for (int v = 0; v < VARIANTS; v++)
            msgs[p][v] = build(p, v, json);
    struct fs_gnmi_sink_arg a = {.sink = sink};
    struct fs_gnmi_arena arena;
    fs_gnmi_arena_init(&arena, 256 << 10, 16 << 20);
    uint64_t updates = 0;
    double t0 = mono_s(), t = t0;
    for (unsigned round = 0; t - t0 < seconds; round++) {
        for (int p = 0; p < PORTS; p++) {
            const ProtobufCBinaryData *b = &msgs[p][round % VARIANTS];
            /* As the driver's I/O thread does: unpack into the arena, drop it whole. */
            Gnmi__Notification *n = gnmi__notification__unpack(&arena.pa, b->len, b->data);
            fs_gnmi_map_notification(m, n, real_us(), &fs_gnmi_sink_emit, &a);
            updates += n->n_update;
            fs_gnmi_arena_reset(&arena);
        }
        t = mono_s();
    }
    const struct fs_gnmi_map_stats *s = fs_gnmi_map_get_stats(m);
    if (s->mapped != updates || s->rejected || s->unmapped) {
        fprintf(stderr, "bench_gnmi: mapped %llu of %llu (rejected %llu, unmapped %llu)\n",
                (unsigned long long)s->mapped, (unsigned long long)updates,
                (unsigned long long)s->rejected, (unsigned long long)s->unmapped);
        exit(1);
    }
    for (int p = 0; p < PORTS; p++)
        for (int v = 0; v < VARIANTS; v++)
            free(msgs[p][v].data);
    fs_gnmi_arena_fini(&arena);
    fs_gnmi_map_free(m);
    fs_store_sink_remove(st, sink);
    fs_store_free(st);
    return (double)updates / (t - t0);
}

int
main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (seconds <= 0)
        seconds = 2.0;
    printf("BENCH gnmi_updates_per_s %.0f updates/s\n", run(false, seconds));
    printf("BENCH gnmi_updates_per_s_json %.0f updates/s\n", run(true, seconds));
    return 0;
}
