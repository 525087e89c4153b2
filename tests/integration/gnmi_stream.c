/*
 * fs-gnmi-stream: drives the gNMI driver (drivers/gnmi/gnmi.h) against a real target
 * over real gRPC, without the daemon: one target, a real store behind its sink.
 * Prints, line-buffered, for the integration test to check:
 *   sample <device_ts_ns> <metric> <labels> <value>     every sample (tap), raw counters
 *   event <ms> <what> ...                               streaming/sync/down/done changes
 *   store <metric> <labels> <value>                     latest values in the store at exit
 *   stats <key=value ...>                               the driver's counts at exit
 *
 *   fs-gnmi-stream --port P [--insecure | --ca F [--cert F --key F] [--server-name N]]
 *       [--username U --password-file F] [--mode stream|once|poll]
 *       [--encoding auto|proto|json|json_ietf] [--interval-ms N] [--stall-ms N]
 *       [--backoff-ms MIN,MAX] [--updates-only]
 *       --path PATH[,sample|on_change|target_defined[,INTERVAL_MS[,HEARTBEAT_MS[,suppress]]]] ...
 *       [--duration-ms N] [--exit-after-syncs N] [--exit-after-downs N] [--no-samples]
 *       [--targets N [--exit-when-all-synced [--steady-ms N]]] [--latency] [--store-mib N]
 *       [--ports P1,P2,..] [--cpu-pid PID] [--measure-by-ms N] [--exit-after-sync-ms N]
 * With --targets N, N targets (own channel, connection and sink each) stream from the same
 * simulator; samples and events are those of the first; `rss_kib before=.. after=..` is
 * the process RSS before adding them and once all are synced. --latency prints, for the
 * first target, the time from a notification's arrival on the gRPC thread to its commit
 * into the store (`internal`) and from the target's send timestamp to that commit
 * (`e2e`; meaningful when the scenario's clock offset is 0), as medians and p99.
 * --steady-ms N: once all targets are synced, N ms more during which the updates of all
 * targets are counted: `fleet updates=.. ms=.. downs=..` (the RSS is taken at its end).
 * --store-mib N: the store's memory limit (default 64). --cpu-pid PID: the steady state also
 * prints `cpu_ms self=.. peer=..`, the CPU time (user + system, /proc/PID/stat) this
 * process and PID (e.g. the load generator) used over it. --measure-by-ms N: with
 * --exit-when-all-synced, if not all targets synced N ms after the start, the steady
 * state is measured anyway (`measured_unsynced synced=K at_ms=..` says so).
 * --exit-after-sync-ms N: exit N ms after the (first) target's first sync.
 * With --exit-when-all-synced, once all are synced: `threads n=.. names=.. of_targets=..`
 * (the driver's stream threads, the names of this process' threads named "fs-gnmi-<digit>..",
 * and each target's stream_thread); --remove-after-sync K then removes
 * targets 1..K while every target streams (`removed k=.. ms=..`), and the steady-state
 * count covers the others (`fleet .. min_target=..`: the fewest updates one received).
 * The driver's thread count is FS_GNMI_THREADS's (gnmi.h).
 */
#include <dirent.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#include "gnmi/gnmi.h"
#include "util/clock.h"

static bool print_samples = true;
static bool measure_latency;
static int64_t dev_ns, recv_us_cur;
static int64_t t0_mono;
#define LAT_MAX 100000
static int64_t lat_internal[LAT_MAX], lat_e2e[LAT_MAX];
static size_t n_lat;
/* bumped by main when the steady state begins: the tap (I/O thread) starts afresh */
static atomic_int lat_epoch;
static int lat_epoch_seen;

static void
tap_end(void *arg)
{
    (void)arg;
    int e = atomic_load(&lat_epoch);
    if (e != lat_epoch_seen) {
        lat_epoch_seen = e;
        n_lat = 0;
    }
    if (!measure_latency || n_lat >= LAT_MAX)
        return;
    int64_t now = fs_realtime_us();
    lat_internal[n_lat] = now - recv_us_cur;
    lat_e2e[n_lat] = now - dev_ns / 1000;
    n_lat++;
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static long
rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* The heap as glibc sees it (KiB): in use, free inside the arenas, mmapped blocks. */
static void
heap_kib(long *used, long *free_kib, long *mmapped)
{
    struct mallinfo2 mi = mallinfo2();
    *used = (long)((mi.uordblks + mi.hblkhd) >> 10);
    *free_kib = (long)(mi.fordblks >> 10);
    *mmapped = (long)(mi.hblkhd >> 10);
}

static void
tap_begin(void *arg, int64_t recv_us, int64_t device_ns)
{
    (void)arg;
    recv_us_cur = recv_us;
    dev_ns = device_ns;
}

static void
labels_str(char *buf, size_t len, const struct fs_label *l, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s=%s", i ? "," : "", l[i].name, l[i].value);
}

static void
tap_counter(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
            double scale)
{
    (void)arg;
    (void)scale;
    if (!print_samples)
        return;
    char lb[256];
    labels_str(lb, sizeof lb, l, n);
    printf("sample %lld %s %s %llu\n", (long long)dev_ns, fs_metric_defs[m].name, lb,
           (unsigned long long)raw);
}

static void
tap_gauge(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    (void)arg;
    if (!print_samples)
        return;
    char lb[256];
    labels_str(lb, sizeof lb, l, n);
    printf("sample %lld %s %s %.17g\n", (long long)dev_ns, fs_metric_defs[m].name, lb, v);
}

static const struct fs_gnmi_emit tap = {tap_begin, tap_counter, tap_gauge, NULL,
                                        tap_end,   NULL,        NULL,      NULL};

static int
print_series(void *arg, const struct fs_series_info *s)
{
    (void)arg;
    char lb[512];
    size_t o = 0;
    lb[0] = '\0';
    for (size_t i = 0; i < s->n_labels && o < sizeof lb; i++) {
        if (strcmp(s->labels[i].name, "target") == 0 || strcmp(s->labels[i].name, "source") == 0)
            continue;
        o += (size_t)snprintf(lb + o, sizeof lb - o, "%s%s=%s", o ? "," : "", s->labels[i].name,
                              s->labels[i].value);
    }
    if (s->counter)
        printf("store %s %s %llu\n", s->name, lb, (unsigned long long)s->u);
    else
        printf("store %s %s %.17g\n", s->name, lb, s->d);
    return 0;
}

/* ---- the store's own cost, for the fleet's split (--targets) ----
 * The series the run left in the store are written again, with as many samples each, into
 * a second store of the same bounds with no driver behind it: the heap that store takes is
 * what the store costs for these series (its series, indexes and ring), not gNMI's. */
struct replay_series {
    int target;
    enum fs_metric m;
    bool counter;
    struct fs_label labels[8];
    size_t n_labels;
};
struct replay {
    struct replay_series *v;
    size_t n, cap;
    bool oom;
};

static int
replay_collect(void *arg, const struct fs_series_info *s)
{
    struct replay *r = arg;
    if (r->n == r->cap) {
        size_t nc = r->cap ? 2 * r->cap : 4096;
        struct replay_series *nv = realloc(r->v, nc * sizeof *nv);
        if (!nv) {
            r->oom = true;
            return 1;
        }
        r->v = nv;
        r->cap = nc;
    }
    struct replay_series *x = &r->v[r->n];
    memset(x, 0, sizeof *x);
    x->m = s->metric;
    x->counter = s->counter;
    for (size_t i = 0; i < s->n_labels; i++) {
        const char *n = s->labels[i].name, *v = s->labels[i].value;
        if (strcmp(n, "target") == 0)
            x->target = atoi(v + 3); /* "simI" */
        else if (strcmp(n, "source") != 0 && x->n_labels < 8)
            x->labels[x->n_labels++] = (struct fs_label){strdup(n), strdup(v)};
    }
    r->n++;
    return 0;
}

/* Heap in use (KiB) by a store holding r's series with `rounds` samples each. */
static long
replay_store_kib(const struct replay *r, int n_targets, const struct fs_ring_opts *ro,
                 int64_t interval_us, int rounds)
{
    long used0, f, mm, used1;
    struct fs_target_cfg *tc = calloc((size_t)n_targets, sizeof *tc);
    char(*names)[16] = calloc((size_t)n_targets, sizeof *names);
    struct fs_sink **sk = calloc((size_t)n_targets, sizeof *sk);
    char err[256];
    if (!tc || !names || !sk)
        return -1;
    heap_kib(&used0, &f, &mm);
    struct fs_store *st = fs_store_new(ro, err, sizeof err);
    for (int i = 0; st && i < n_targets; i++) {
        snprintf(names[i], sizeof names[i], "sim%d", i);
        tc[i].name = names[i];
        tc[i].address = "127.0.0.1";
        tc[i].staleness_intervals = 3;
        sk[i] = fs_store_sink_add(st, &tc[i], "gnmi", interval_us);
        fs_store_sink_set_streaming(sk[i], true);
    }
    int64_t t = fs_realtime_us() - (int64_t)rounds * 1000000;
    for (int k = 0; st && k < rounds; k++, t += 1000000) {
        size_t j = 0;
        for (int i = 0; i < n_targets; i++) {
            fs_sink_begin(sk[i], t);
            for (; j < r->n && r->v[j].target == i; j++) {
                const struct replay_series *x = &r->v[j];
                if (x->counter)
                    fs_sink_counter(sk[i], x->m, x->labels, x->n_labels, (uint64_t)k * 1000, 64);
                else
                    fs_sink_gauge(sk[i], x->m, x->labels, x->n_labels, (double)k);
            }
            fs_sink_end(sk[i]);
        }
    }
    heap_kib(&used1, &f, &mm);
    for (int i = 0; st && i < n_targets; i++)
        fs_store_sink_remove(st, sk[i]);
    fs_store_free(st);
    free(tc);
    free(names);
    free(sk);
    return st ? used1 - used0 : -1;
}

static int
cmp_replay(const void *a, const void *b)
{
    const struct replay_series *x = a, *y = b;
    return (x->target > y->target) - (x->target < y->target);
}

static int64_t
ms_now(void)
{
    return (fs_monotonic_us() - t0_mono) / 1000;
}

static void
usage(void)
{
    fprintf(stderr, "usage: see the comment at the top of tests/integration/gnmi_stream.c\n");
    exit(2);
}

/* P1,P2,..: as many as given (a load generator serves a port a target) */
static int
parse_ports(const char *v, uint16_t **ports)
{
    int n = 1;
    for (const char *p = v; *p; p++)
        n += *p == ',';
    *ports = calloc((size_t)n, sizeof **ports);
    if (!*ports)
        return 0;
    n = 0;
    for (const char *p = v; *p;) {
        (*ports)[n++] = (uint16_t)atoi(p);
        const char *c = strchr(p, ',');
        if (!c)
            break;
        p = c + 1;
    }
    return n;
}

/* utime + stime of a process (ms), from /proc/PID/stat; -1 if unreadable. */
static long
proc_cpu_ms(const char *pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut, st;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long)((ut + st) * 1000 / (unsigned long long)sysconf(_SC_CLK_TCK));
}

static const char *cpu_peer_pid; /* --cpu-pid: a process whose CPU the steady state reports */

/* Counts the updates every target still there (ts[i] not NULL) receives over ms (steady
 * state) and prints them, with the fewest one target received. */
static void
count_fleet(void **ts, int n, int64_t ms)
{
    uint64_t u1 = 0, d0 = 0, d1 = 0, min = UINT64_MAX;
    uint64_t *u0 = calloc((size_t)n, sizeof *u0);
    struct fs_gnmi_target_stats o;
    if (!u0)
        return;
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            continue;
        fs_gnmi_target_get_stats(ts[i], &o);
        u0[i] = o.map.updates;
        d0 += o.downs;
    }
    atomic_fetch_add(&lat_epoch, 1); /* latency of the steady state only */
    long self0 = proc_cpu_ms("self"), peer0 = cpu_peer_pid ? proc_cpu_ms(cpu_peer_pid) : -1;
    int64_t t0 = fs_monotonic_us();
    usleep((useconds_t)(ms * 1000));
    int64_t t1 = fs_monotonic_us();
    long self1 = proc_cpu_ms("self"), peer1 = cpu_peer_pid ? proc_cpu_ms(cpu_peer_pid) : -1;
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            continue;
        fs_gnmi_target_get_stats(ts[i], &o);
        u1 += o.map.updates - u0[i];
        d1 += o.downs;
        if (o.map.updates - u0[i] < min)
            min = o.map.updates - u0[i];
    }
    printf("fleet updates=%llu ms=%lld downs=%llu min_target=%llu\n", (unsigned long long)u1,
           (long long)((t1 - t0) / 1000), (unsigned long long)(d1 - d0),
           (unsigned long long)(min == UINT64_MAX ? 0 : min));
    printf("cpu_ms self=%ld peer=%ld\n", self1 - self0,
           peer0 >= 0 && peer1 >= 0 ? peer1 - peer0 : -1);
    free(u0);
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Prints the driver's stream threads: their count, the names of this process' threads
 * named fs-gnmi-*, and each target's stream_thread (from its description). */
static void
print_threads(void *drv, void **ts, int n)
{
    char *names[128];
    size_t nn = 0;
    DIR *dir = opendir("/proc/self/task");
    struct dirent *e;
    while (dir && (e = readdir(dir)) && nn < 128) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) && strncmp(comm, "fs-gnmi-", 8) == 0 && comm[8] >= '0' &&
            comm[8] <= '9') { /* not this program's own name */
            comm[strcspn(comm, "\n")] = '\0';
            names[nn++] = strdup(comm);
        }
        fclose(f);
    }
    if (dir)
        closedir(dir);
    qsort(names, nn, sizeof *names, cmp_str);
    printf("threads n=%u names=", fs_gnmi_threads(drv));
    for (size_t i = 0; i < nn; i++) {
        printf("%s%s", i ? "," : "", names[i]);
        free(names[i]);
    }
    printf(" of_targets=");
    for (int i = 0; i < n; i++) {
        char desc[4096];
        fs_gnmi_target_describe(drv, ts[i], desc, sizeof desc);
        const char *p = strstr(desc, "\"stream_thread\":");
        printf("%s%d", i ? "," : "", p ? atoi(p + strlen("\"stream_thread\":")) : -1);
    }
    printf("\n");
}

int
main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    t0_mono = fs_monotonic_us();
    struct fs_gnmi_cfg *cfg = calloc(1, sizeof *cfg);
    fs_gnmi_cfg_defaults(cfg);
    int64_t duration_ms = 5000;
    int64_t steady_ms = 0, store_mib = 64, measure_by_ms = 0;
    int64_t after_sync_ms = 0, synced_at_ms = -1;
    uint16_t *ports = NULL;
    int n_ports = 0;
    uint64_t exit_syncs = 0, exit_downs = 0;
    int n_targets = 1, remove_k = 0;
    bool exit_all_synced = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && (i++, 1))
        if (ARG("--port"))
            cfg->port = (uint16_t)atoi(v);
        else if (ARG("--ports")) /* P1,P2,..: target i goes to the (i mod n)th */
            n_ports = parse_ports(v, &ports);
        else if (ARG("--exit-after-sync-ms"))
            after_sync_ms = atoll(v);
        else if (ARG("--measure-by-ms"))
            measure_by_ms = atoll(v);
        else if (ARG("--cpu-pid"))
            cpu_peer_pid = v;
        else if (strcmp(a, "--insecure") == 0)
            cfg->insecure = true;
        else if (strcmp(a, "--updates-only") == 0)
            cfg->updates_only = true;
        else if (strcmp(a, "--no-samples") == 0)
            print_samples = false;
        else if (strcmp(a, "--latency") == 0)
            measure_latency = true;
        else if (strcmp(a, "--exit-when-all-synced") == 0)
            exit_all_synced = true;
        else if (ARG("--remove-after-sync"))
            remove_k = atoi(v);
        else if (ARG("--steady-ms"))
            steady_ms = atoll(v);
        else if (ARG("--store-mib"))
            store_mib = atoll(v);
        else if (ARG("--targets"))
            n_targets = atoi(v) > 0 ? atoi(v) : 1;
        else if (ARG("--ca"))
            cfg->tls_ca_file = strdup(v);
        else if (ARG("--cert"))
            cfg->tls_cert_file = strdup(v);
        else if (ARG("--key"))
            cfg->tls_key_file = strdup(v);
        else if (ARG("--server-name"))
            cfg->tls_server_name = strdup(v);
        else if (ARG("--username"))
            cfg->username = strdup(v);
        else if (ARG("--password-file"))
            cfg->password.file = strdup(v);
        else if (ARG("--mode"))
            cfg->list_mode = strcmp(v, "once") == 0   ? FS_GNMI_LIST_ONCE
                             : strcmp(v, "poll") == 0 ? FS_GNMI_LIST_POLL
                                                      : FS_GNMI_LIST_STREAM;
        else if (ARG("--encoding"))
            cfg->encoding = strcmp(v, "proto") == 0       ? FS_GNMI_ENC_PROTO
                            : strcmp(v, "json") == 0      ? FS_GNMI_ENC_JSON
                            : strcmp(v, "json_ietf") == 0 ? FS_GNMI_ENC_JSON_IETF
                                                          : FS_GNMI_ENC_AUTO;
        else if (ARG("--interval-ms"))
            cfg->interval_us = atoll(v) * 1000;
        else if (ARG("--stall-ms"))
            cfg->stall_us = atoll(v) * 1000;
        else if (ARG("--backoff-ms")) {
            cfg->backoff_min_us = atoll(v) * 1000;
            const char *c = strchr(v, ',');
            cfg->backoff_max_us = c ? atoll(c + 1) * 1000 : cfg->backoff_min_us;
        } else if (ARG("--path")) {
            cfg->subscriptions = realloc(cfg->subscriptions,
                                         (cfg->n_subscriptions + 1) * sizeof *cfg->subscriptions);
            struct fs_gnmi_subscription *s = &cfg->subscriptions[cfg->n_subscriptions++];
            memset(s, 0, sizeof *s);
            char *copy = strdup(v), *save = NULL;
            s->path = strdup(strtok_r(copy, ",", &save));
            char *f;
            if ((f = strtok_r(NULL, ",", &save)))
                s->mode = strcmp(f, "on_change") == 0        ? FS_GNMI_SUB_ON_CHANGE
                          : strcmp(f, "target_defined") == 0 ? FS_GNMI_SUB_TARGET_DEFINED
                                                             : FS_GNMI_SUB_SAMPLE;
            if ((f = strtok_r(NULL, ",", &save)))
                s->interval_us = atoll(f) * 1000;
            if ((f = strtok_r(NULL, ",", &save)))
                s->heartbeat_us = atoll(f) * 1000;
            if ((f = strtok_r(NULL, ",", &save)))
                s->suppress_redundant = strcmp(f, "suppress") == 0;
            free(copy);
        } else if (ARG("--duration-ms"))
            duration_ms = atoll(v);
        else if (ARG("--exit-after-syncs"))
            exit_syncs = (uint64_t)atoll(v);
        else if (ARG("--exit-after-downs"))
            exit_downs = (uint64_t)atoll(v);
        else
            usage();
#undef ARG
    }
    if (n_ports > 0)
        cfg->port = ports[0];
    if (!cfg->port || !cfg->n_subscriptions)
        usage();
    /* per port a shallow copy of the configuration (the driver copies what it needs) */
    struct fs_gnmi_cfg *pcfg = calloc(n_ports ? (size_t)n_ports : 1, sizeof *pcfg);
    for (int i = 0; i < n_ports; i++) {
        pcfg[i] = *cfg;
        pcfg[i].port = ports[i];
    }

    char err[512];
    struct fs_ring_opts ro = {.memory_limit = (size_t)store_mib << 20,
                              .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    struct fs_target_cfg *tcfgs = calloc((size_t)n_targets, sizeof *tcfgs);
    struct fs_sink **sinks = calloc((size_t)n_targets, sizeof *sinks);
    void **ts = calloc((size_t)n_targets, sizeof *ts);
    char(*names)[16] = calloc((size_t)n_targets, sizeof *names);
    void *drv = NULL;
    if (!st || !tcfgs || !sinks || !ts || !names || fs_gnmi_init(&drv, err, sizeof err) != 0) {
        fprintf(stderr, "setup: %s\n", err);
        return 1;
    }
    long rss_before = rss_kib();
    long heap_before, heapfree_before, mmap_before;
    heap_kib(&heap_before, &heapfree_before, &mmap_before);
    struct fs_ring_stats rs_before;
    uint64_t mem_limit;
    fs_store_ring_stats(st, &rs_before, &mem_limit);
    for (int i = 0; i < n_targets; i++) {
        snprintf(names[i], sizeof names[i], "sim%d", i);
        tcfgs[i].name = names[i];
        tcfgs[i].address = "127.0.0.1";
        tcfgs[i].staleness_intervals = 3;
        sinks[i] = fs_store_sink_add(st, &tcfgs[i], "gnmi", fs_gnmi_cfg_interval(cfg));
        if (sinks[i])
            fs_store_sink_set_streaming(sinks[i], true); /* as the daemon does for streams */
        if (!sinks[i] || fs_gnmi_target_add(
                             drv, names[i], "127.0.0.1", n_ports ? &pcfg[i % n_ports] : cfg,
                             sinks[i], i == 0 ? &tap : NULL, NULL, &ts[i], err, sizeof err) != 0) {
            fprintf(stderr, "target_add: %s\n", err);
            return 1;
        }
    }
    void *t = ts[0];
    struct fs_gnmi_target_stats prev = {0}, cur;
    prev.conn = -1;
    while (ms_now() < duration_ms) {
        fs_gnmi_target_get_stats(t, &cur);
        if (cur.conn != prev.conn)
            printf("event %lld conn %s\n", (long long)ms_now(),
                   (const char *[]){"connecting", "streaming", "down", "done"}[cur.conn & 3]);
        if (cur.syncs != prev.syncs)
            printf("event %lld sync %llu\n", (long long)ms_now(), (unsigned long long)cur.syncs);
        if (cur.downs != prev.downs)
            printf("event %lld down %llu %s\n", (long long)ms_now(), (unsigned long long)cur.downs,
                   cur.last_error);
        prev = cur;
        if (after_sync_ms > 0 && cur.syncs > 0 && synced_at_ms < 0)
            synced_at_ms = ms_now();
        if (synced_at_ms >= 0 && ms_now() - synced_at_ms >= after_sync_ms)
            break;
        if ((exit_syncs && cur.syncs >= exit_syncs) || (exit_downs && cur.downs >= exit_downs))
            break;
        if (exit_all_synced) {
            int synced = 0;
            for (int i = 0; i < n_targets; i++) {
                struct fs_gnmi_target_stats o;
                fs_gnmi_target_get_stats(ts[i], &o);
                synced += o.syncs > 0;
            }
            /* --measure-by-ms: a fleet that cannot all sync is measured as it is */
            bool late = measure_by_ms > 0 && ms_now() >= measure_by_ms;
            if (synced == n_targets || late) {
                if (late)
                    printf("measured_unsynced synced=%d at_ms=%lld\n", synced, (long long)ms_now());
                usleep(2000000); /* a couple of sample rounds at steady state */
                print_threads(drv, ts, n_targets);
                if (remove_k > 0) {
                    /* while every target streams: each removal waits for its thread */
                    int64_t r0 = fs_monotonic_us();
                    int k = 0;
                    for (int i = 1; i <= remove_k && i < n_targets; i++, k++) {
                        fs_gnmi_target_remove(drv, ts[i]);
                        ts[i] = NULL;
                    }
                    printf("removed k=%d ms=%lld\n", k,
                           (long long)((fs_monotonic_us() - r0) / 1000));
                }
                if (steady_ms > 0)
                    count_fleet(ts, n_targets, steady_ms);
                break;
            }
        }
        usleep(10000);
    }
    fs_gnmi_target_get_stats(t, &cur);
    char desc[4096];
    fs_gnmi_target_describe(drv, t, desc, sizeof desc);
    long rss_after = rss_kib();
    long heap_after, heapfree_after, mmap_after;
    heap_kib(&heap_after, &heapfree_after, &mmap_after);
    struct fs_ring_stats rs_after;
    fs_store_ring_stats(st, &rs_after, &mem_limit);
    long store_kib = -1;
    if (n_targets > 1 && exit_all_synced && remove_k == 0) {
        struct replay rp = {0};
        fs_store_foreach_series(st, false, replay_collect, &rp);
        qsort(rp.v, rp.n, sizeof *rp.v, cmp_replay);
        int rounds = rp.n ? (int)((rs_after.samples + rp.n / 2) / rp.n) : 0;
        if (!rp.oom)
            store_kib = replay_store_kib(&rp, n_targets, &ro, fs_gnmi_cfg_interval(cfg), rounds);
        for (size_t i = 0; i < rp.n; i++)
            for (size_t j = 0; j < rp.v[i].n_labels; j++) {
                free((char *)rp.v[i].labels[j].name);
                free((char *)rp.v[i].labels[j].value);
            }
        free(rp.v);
    }
    int all_synced = 0;
    for (int i = 0; i < n_targets; i++) {
        if (!ts[i]) { /* removed by --remove-after-sync, synced before */
            all_synced++;
            continue;
        }
        struct fs_gnmi_target_stats o;
        fs_gnmi_target_get_stats(ts[i], &o);
        all_synced += o.syncs > 0;
        fs_gnmi_target_remove(drv, ts[i]);
    }
    fs_gnmi_shutdown(drv);
    printf("rss_kib before=%ld after=%ld targets=%d synced=%d\n", rss_before, rss_after, n_targets,
           all_synced);
    printf("heap_kib before=%ld after=%ld free_before=%ld free_after=%ld mmap_before=%ld "
           "mmap_after=%ld\n",
           heap_before, heap_after, heapfree_before, heapfree_after, mmap_before, mmap_after);
    printf("store_replay kib=%ld\n", store_kib);
    printf("store_ring_kib before=%llu after=%llu series=%llu samples=%llu\n",
           (unsigned long long)(rs_before.bytes >> 10), (unsigned long long)(rs_after.bytes >> 10),
           (unsigned long long)rs_after.series, (unsigned long long)rs_after.samples);
    if (n_lat > 0) {
        qsort(lat_internal, n_lat, sizeof *lat_internal, cmp_i64);
        qsort(lat_e2e, n_lat, sizeof *lat_e2e, cmp_i64);
        printf("latency n=%zu internal_p50_us=%lld internal_p99_us=%lld e2e_p50_us=%lld "
               "e2e_p99_us=%lld\n",
               n_lat, (long long)lat_internal[n_lat / 2], (long long)lat_internal[n_lat * 99 / 100],
               (long long)lat_e2e[n_lat / 2], (long long)lat_e2e[n_lat * 99 / 100]);
    }
    fs_store_foreach_series(st, false, print_series, NULL);
    printf("stats attempts=%llu downs=%llu syncs=%llu notifications=%llu updates=%llu "
           "mapped=%llu unmapped=%llu rejected=%llu encoding=%s\n",
           (unsigned long long)cur.attempts, (unsigned long long)cur.downs,
           (unsigned long long)cur.syncs, (unsigned long long)cur.map.notifications,
           (unsigned long long)cur.map.updates, (unsigned long long)cur.map.mapped,
           (unsigned long long)cur.map.unmapped, (unsigned long long)cur.map.rejected,
           cur.encoding);
    printf("describe {%s}\n", desc);
    for (int i = 0; i < n_targets; i++)
        fs_store_sink_remove(st, sinks[i]);
    fs_store_free(st);
    free(tcfgs);
    free(sinks);
    free(ts);
    free(names);
    free(pcfg);
    free(ports);
    fs_gnmi_cfg_free(cfg);
    return 0;
}
