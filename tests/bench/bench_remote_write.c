/*
 * remote_write sender benchmark: the real sender (ring walk, protobuf-c encoding, snappy,
 * libcurl POST over loopback) sending to an in-process libmicrohttpd receiver that reads
 * and discards each request and answers 204.
 *
 * Workload: the steady state of a large collector, the costly case for remote write:
 * 50 synthetic targets x 10 ports (22,000 series, labels as the drivers set them) each
 * polled once per round, so every batch of 2,000 carries ~2,000 distinct series with one
 * sample each (labels are sent with every sample). 50 rounds (10 with --quick or
 * FS_BENCH_QUICK=1); the benchmark waits for each round to be sent before the next.
 *
 * The sender is one thread: its CPU time (from /proc/self/task/TID/schedstat) is the
 * cost of "one core"; the receiver and the source run on other threads.
 *
 * Prints: BENCH remote_write_samples_per_s <v> samples/s (per core-second of the sender)
 *         BENCH remote_write_bytes_per_sample <v> bytes (compressed request bodies)
 */
#include <dirent.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "export/remote_write.h"
#include "store/store.h"
#include "synth.h"

static _Atomic uint64_t received_bytes;

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
           const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    static int marker;
    (void)cls, (void)url, (void)method, (void)version, (void)upload;
    if (*con_cls == NULL) {
        *con_cls = &marker;
        return MHD_YES;
    }
    if (*upload_size) {
        atomic_fetch_add(&received_bytes, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ok = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    return ok;
}

/* CPU time of the thread named name, in ns; -1 if none. */
static int64_t
thread_cpu_ns(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int64_t ns = -1;
    while (d && (e = readdir(d))) {
        char path[300], comm[64] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (!fgets(comm, sizeof comm, f))
            comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        if (strcmp(comm, name))
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        if ((f = fopen(path, "r"))) {
            long long v;
            if (fscanf(f, "%lld", &v) == 1)
                ns = v;
            fclose(f);
        }
        break;
    }
    if (d)
        closedir(d);
    return ns;
}

static double
mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
    const char *q = getenv("FS_BENCH_QUICK");
    bool quick = (argc > 1 && !strcmp(argv[1], "--quick")) || (q && !strcmp(q, "1"));
    size_t rounds = quick ? 10 : 50;
    char err[256], url[128];
    int rc = 1;

    struct MHD_Daemon *mhd =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                         on_request, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (!mhd) {
        fprintf(stderr, "bench_remote_write: cannot start the receiver\n");
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_BIND_PORT);
    snprintf(url, sizeof url, "http://127.0.0.1:%u/api/v1/write", di ? di->port : 0);

    struct fs_ring_opts ro = {.memory_limit = UINT64_C(1) << 30, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    struct fs_remote_write *rw = st ? fs_remote_write_new(st, err, sizeof err) : NULL;
    if (!rw) {
        fprintf(stderr, "bench_remote_write: %s\n", err);
        return 1;
    }
    struct fs_remote_write_cfg cfg = {
        .url = url,
        .remote_timeout_us = 30000000,
        .capacity = 1000000,
        .max_samples_per_send = 2000,
        .batch_send_deadline_us = 100000,
        .min_backoff_us = 30000,
        .max_backoff_us = 5000000,
    };
    struct fs_synth *sy = fs_synth_new(st, "tor", 50, 10, 1000000);
    if (!sy || fs_remote_write_apply(rw, &cfg, 1, NULL, 0, err, sizeof err) != 0) {
        fprintf(stderr, "bench_remote_write: %s\n", sy ? err : "no synthetic source");
        return 1;
    }
    size_t per_round = fs_synth_series(sy);
    int64_t t0 = fs_synth_now_us();
    int64_t cpu0 = -1;
    for (double until = mono_s() + 5; cpu0 < 0 && mono_s() < until;) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        cpu0 = thread_cpu_ns("fs-rw"); /* the thread names itself once it runs */
    }
    double wall0 = mono_s();
    struct fs_remote_write_stats s;
    memset(&s, 0, sizeof s);
    for (size_t r = 0; r < rounds; r++) {
        fs_synth_poll(sy, t0 + (int64_t)(r + 1) * 1000000, r + 3);
        uint64_t want = (uint64_t)per_round * (r + 1);
        double deadline = mono_s() + 60;
        do {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            fs_remote_write_stats(rw, url, &s);
        } while (s.sent + s.failed + s.dropped < want && mono_s() < deadline);
        if (s.sent != want) {
            fprintf(stderr,
                    "bench_remote_write: round %zu: %llu sent, %llu failed, %llu dropped, "
                    "%llu retried of %llu\n",
                    r, (unsigned long long)s.sent, (unsigned long long)s.failed,
                    (unsigned long long)s.dropped, (unsigned long long)s.retried,
                    (unsigned long long)want);
            goto out;
        }
    }
    int64_t cpu1 = thread_cpu_ns("fs-rw");
    double wall = mono_s() - wall0;
    if (cpu0 < 0 || cpu1 <= cpu0) {
        fprintf(stderr, "bench_remote_write: no CPU time of the sender thread\n");
        goto out;
    }
    double cpu = (double)(cpu1 - cpu0) / 1e9;
    fprintf(stderr,
            "# %llu samples of %zu series in %llu requests; sender CPU %.3f s, wall %.3f s "
            "(rounds waited for); receiver read %llu bytes\n",
            (unsigned long long)s.sent, per_round, (unsigned long long)s.requests, cpu, wall,
            (unsigned long long)atomic_load(&received_bytes));
    printf("BENCH remote_write_samples_per_s %.0f samples/s\n", (double)s.sent / cpu);
    printf("BENCH remote_write_bytes_per_sample %.2f bytes\n",
           (double)s.bytes_sent / (double)s.sent);
    rc = 0;
out:
    fs_remote_write_free(rw);
    fs_synth_free(sy);
    fs_store_free(st);
    MHD_stop_daemon(mhd);
    return rc;
}
