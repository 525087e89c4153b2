/*
 * Analysis concurrency, as in the daemon: a poller feeds the store (one switch, 16 ports,
 * one surging every 8 s) while the refresh thread runs fs_analysis_refresh (its scan of
 * the ring runs outside the analysis lock, then installs the series' baselines) and two
 * request threads call /incidents and /correlate (which scan only after the last
 * refresh, and record into the episode log), and the configuration is changed midway
 * (which drops the baselines). Every request must answer 200, and the surge must be
 * reported recurring by the end. Run under TSan too (label tsan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/analysis_api.h"
#include "store/store.h"
#include "util/buf.h"

#define S 1000000LL
#define PORTS 16
#define SECONDS 400

struct world {
    struct fs_store *st;
    struct fs_analysis *an;
    _Atomic int64_t now_us; /* virtual time: the poller's latest second */
    atomic_int done;
    atomic_int bad;
    atomic_int requests;
    int64_t t0;
};

static void *
refresher(void *arg)
{
    struct world *w = arg;
    while (!atomic_load(&w->done)) {
        if (fs_analysis_refresh(w->an, w->st, atomic_load(&w->now_us)) != 0)
            atomic_fetch_add(&w->bad, 1);
    }
    return NULL;
}

static void *
requester(void *arg)
{
    struct world *w = arg;
    struct fs_buf out;
    fs_buf_init(&out, 16 << 20);
    char a[32], b[32], win[80];
    for (int i = 0; !atomic_load(&w->done); i++) {
        int64_t now = atomic_load(&w->now_us);
        fs_buf_reset(&out);
        int rc;
        if (i % 2 == 0) {
            rc = fs_analysis_incidents(w->an, w->st, NULL, 0, now, &out);
        } else {
            snprintf(a, sizeof a, "%.6f", (double)(now - 20 * S) / 1e6);
            snprintf(b, sizeof b, "%.6f", (double)(now - 18 * S) / 1e6);
            snprintf(win, sizeof win, "%s,%s", a, b);
            struct fs_analysis_arg args[] = {{"window", win}};
            rc = fs_analysis_correlate(w->an, w->st, args, 1, now, &out);
        }
        if (rc != 200) {
            print_message("request %d answered %d: %.200s\n", i, rc, out.data);
            atomic_fetch_add(&w->bad, 1);
        }
        atomic_fetch_add(&w->requests, 1);
    }
    fs_buf_free(&out);
    return NULL;
}

static void
test_refresh_requests_reload(void **state)
{
    (void)state;
    char err[256];
    struct world w = {0};
    struct fs_ring_opts ro = {.memory_limit = 64 << 20, .retention_us = 3600 * S};
    w.st = fs_store_new(&ro, err, sizeof err);
    struct fs_host_events_opts ho = {1 << 20, 3600LL * 1000000000LL};
    w.an = fs_analysis_new(&ho, err, sizeof err);
    assert_non_null(w.st);
    assert_non_null(w.an);
    struct fs_target_cfg tc = {.name = "tor1", .address = "192.0.2.1", .staleness_intervals = 3};
    struct fs_sink *sink = fs_store_sink_add(w.st, &tc, "snmp", S);
    assert_non_null(sink);
    w.t0 = 1796236354LL * S;
    atomic_store(&w.now_us, w.t0);
    char ifname[PORTS][16];
    for (int p = 0; p < PORTS; p++)
        snprintf(ifname[p], sizeof ifname[p], "Eth1/%d", p + 1);
    uint64_t ecn[PORTS] = {0};
    uint64_t rng = 7;
    pthread_t th[3];
    bool started = false;
    for (int s = 0; s < SECONDS; s++) {
        int64_t t = w.t0 + s * S;
        fs_sink_begin(sink, t + 5000);
        for (int p = 0; p < PORTS; p++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            bool surge = p == 3 && s % 8 < 2;
            ecn[p] += 50 + (rng >> 60) + (surge ? 80000 : 0);
            struct fs_label l[2] = {{"interface", ifname[p]}, {"tc", "3"}};
            fs_sink_counter(sink, FS_M_QUEUE_ECN_MARKED, l, 2, ecn[p], 64);
        }
        fs_sink_end(sink);
        atomic_store(&w.now_us, t + S / 2);
        if (s == 60) { /* enough history for baselines: the threads start */
            assert_int_equal(pthread_create(&th[0], NULL, refresher, &w), 0);
            assert_int_equal(pthread_create(&th[1], NULL, requester, &w), 0);
            assert_int_equal(pthread_create(&th[2], NULL, requester, &w), 0);
            started = true;
        }
        if (s == SECONDS / 2) {
            struct fs_analysis_opts o;
            fs_analysis_opts_default(&o);
            o.an.baseline_window_us = 30 * S;
            o.an.baseline_step_us = 30 * S;
            fs_analysis_set_opts(w.an, &o);
        }
        /* let the readers in between polls (no pacing needed for correctness) */
        if (started && s % 20 == 0)
            while (atomic_load(&w.requests) < s / 20)
                sched_yield();
    }
    atomic_store(&w.done, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    print_message("%d requests, %d bad\n", atomic_load(&w.requests), atomic_load(&w.bad));
    assert_int_equal(atomic_load(&w.bad), 0);
    assert_true(atomic_load(&w.requests) > 0);
    /* The surge every 8 s is reported, after all that. */
    struct fs_buf out;
    fs_buf_init(&out, 16 << 20);
    assert_int_equal(fs_analysis_refresh(w.an, w.st, atomic_load(&w.now_us)), 0);
    assert_int_equal(fs_analysis_incidents(w.an, w.st, NULL, 0, atomic_load(&w.now_us), &out), 200);
    assert_non_null(strstr(
        out.data, "\"recurring\":[{\"series\":[{\"target\":\"tor1\",\"interface\":\"Eth1/4\""));
    /* ... by a request that read only the samples after that refresh */
    const char *f = strstr(out.data, "\"ring_scanned_from\":");
    assert_non_null(f);
    double from = strtod(f + strlen("\"ring_scanned_from\":"), NULL);
    print_message("the last request read the ring from %.1f s before its end\n",
                  (double)atomic_load(&w.now_us) / 1e6 - from);
    assert_true(from > (double)atomic_load(&w.now_us) / 1e6 - 5);
    fs_buf_free(&out);
    fs_store_sink_remove(w.st, sink);
    fs_analysis_free(w.an);
    fs_store_free(w.st);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refresh_requests_reload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
