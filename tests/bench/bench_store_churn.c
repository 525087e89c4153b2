/*
 * Removing many targets at once (a reload that drops a shard's switches, a fleet
 * decommissioned): the store keeps a removed target's series as history until retention
 * takes them, then sweeps them. Both steps must cost what the removed series cost, not
 * that times the number of targets removed before them.
 *
 *   bench_store_churn [--quick]   (--quick: 250 targets instead of 1,000)
 * A store holds N targets of 16 ports (44 series a port: 704 a target) polled twice,
 * plus one target that stays. Prints:
 *   BENCH store_remove_targets_ms     removing the N targets, one after another
 *   BENCH store_retired_sweep_ms      the stay-behind target's next poll once retention
 *                                     has passed (it runs the sweep that frees them all)
 * and checks that the store holds only the stay-behind target's series afterwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "synth.h"

#define PORTS 16

static int64_t fake_mono_us = 1000000;

static int64_t
fake_mono(void *arg)
{
    (void)arg;
    return fake_mono_us;
}

static int64_t
real_us(void *arg)
{
    (void)arg;
    return fs_synth_now_us();
}

static double
mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int
main(int argc, char **argv)
{
    size_t n = argc > 1 && strcmp(argv[1], "--quick") == 0 ? 250 : 1000;
    const char *q = getenv("FS_BENCH_QUICK");
    if (q && strcmp(q, "1") == 0)
        n = 250;
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 8ULL << 30, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    if (!st) {
        fprintf(stderr, "store: %s\n", err);
        return 1;
    }
    struct fs_store_clock clk = {real_us, fake_mono, NULL};
    fs_store_set_clock(st, &clk);
    struct fs_synth *stays = fs_synth_new(st, "stays", 1, PORTS, 1000000);
    struct fs_synth *gone = fs_synth_new(st, "gone", n, PORTS, 1000000);
    if (!stays || !gone) {
        fprintf(stderr, "synth: no memory\n");
        return 1;
    }
    int64_t now = fs_synth_now_us();
    for (uint64_t c = 1; c <= 2; c++, now += 1000000, fake_mono_us += 1000000) {
        fs_synth_poll(gone, now, c);
        fs_synth_poll(stays, now, c);
    }
    size_t before = fs_store_series_count(st), each = fs_synth_series(stays);
    double t0 = mono_ms();
    fs_synth_free(gone); /* removes its N targets one after another */
    double removed = mono_ms() - t0;
    printf("BENCH store_remove_targets_ms %.1f ms\n", removed);
    fake_mono_us += ro.retention_us + 1000000;
    t0 = mono_ms();
    fs_synth_poll(stays, now, 3);
    double swept = mono_ms() - t0;
    printf("BENCH store_retired_sweep_ms %.1f ms\n", swept);
    fflush(stdout);
    size_t after = fs_store_series_count(st);
    fprintf(stderr, "# %zu targets of %zu series removed: %zu series before, %zu after\n", n, each,
            before, after);
    int rc = 0;
    if (after != each) {
        fprintf(stderr, "bench_store_churn: %zu series left, want %zu (the stay-behind target's)\n",
                after, each);
        rc = 1;
    }
    fs_synth_free(stays);
    fs_store_free(st);
    return rc;
}
