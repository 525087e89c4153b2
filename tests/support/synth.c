/* The synthetic test source (see synth.h). */
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct synth_target {
    struct fs_target_cfg cfg;
    struct fs_kv labels[2];
    char name[64], rack[16];
    struct fs_sink *sink;
};

struct fs_synth {
    struct fs_store *st;
    struct synth_target *t;
    size_t n, ports;
};

int64_t
fs_synth_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct fs_synth *
fs_synth_new(struct fs_store *st, const char *prefix, size_t n_targets, size_t ports,
             int64_t interval_us)
{
    struct fs_synth *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->st = st;
    s->ports = ports;
    s->t = calloc(n_targets, sizeof *s->t);
    if (!s->t) {
        free(s);
        return NULL;
    }
    for (size_t i = 0; i < n_targets; i++) {
        struct synth_target *t = &s->t[i];
        snprintf(t->name, sizeof t->name, "%s%03zu", prefix, i);
        snprintf(t->rack, sizeof t->rack, "r%zu", i % 16);
        t->labels[0] = (struct fs_kv){"pod", "p1"};
        t->labels[1] = (struct fs_kv){"rack", t->rack};
        t->cfg.name = t->name;
        t->cfg.address = "192.0.2.1";
        t->cfg.labels = t->labels;
        t->cfg.n_labels = 2;
        t->cfg.staleness_intervals = 3;
        t->sink = fs_store_sink_add(st, &t->cfg, "synth", interval_us);
        if (!t->sink) {
            s->n = i;
            fs_synth_free(s);
            return NULL;
        }
    }
    s->n = n_targets;
    return s;
}

void
fs_synth_poll_target(struct fs_synth *s, size_t ti, int64_t ts_us, uint64_t cycle)
{
    static const char *const dir[2] = {"rx", "tx"};
    static const char *const num[8] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    struct fs_sink *k = s->t[ti].sink;
    fs_sink_cycle_begin(k, cycle);
    fs_sink_begin(k, ts_us);
    for (size_t p = 0; p < s->ports; p++) {
        char ifn[32];
        snprintf(ifn, sizeof ifn, "Eth1/%zu", p + 1);
        /* A quarter of the ports are busy; the rest barely move. */
        uint64_t rate = p % 4 == 0 ? 1000003 * (p + 1) : p % 3;
        for (int d = 0; d < 2; d++) {
            struct fs_label l[2] = {{"interface", ifn}, {"direction", dir[d]}};
            fs_sink_counter(k, FS_M_PORT_BYTES, l, 2, cycle * rate * 1500, 64);
            fs_sink_counter(k, FS_M_PORT_PACKETS, l, 2, cycle * rate, 64);
            for (int q = 0; q < 8; q++) {
                struct fs_label lp[3] = {
                    {"interface", ifn}, {"direction", dir[d]}, {"priority", num[q]}};
                fs_sink_counter(k, FS_M_PFC_PAUSE_FRAMES, lp, 3, q == 3 ? cycle : 0, 64);
            }
        }
        for (int q = 0; q < 8; q++) {
            struct fs_label l[2] = {{"interface", ifn}, {"tc", num[q]}};
            fs_sink_counter(k, FS_M_QUEUE_TX_PACKETS, l, 2, cycle * rate / 8, 64);
            fs_sink_counter(k, FS_M_QUEUE_TX_BYTES, l, 2, cycle * rate * 187, 64);
            double depth = (cycle + p + (uint64_t)q) % 17 == 0 ? 1234.5 * (double)q : 0.0;
            fs_sink_gauge(k, FS_M_QUEUE_DEPTH, l, 2, depth);
        }
    }
    fs_sink_end(k);
    fs_sink_done(k, cycle, FS_POLL_OK, NULL);
}

void
fs_synth_poll(struct fs_synth *s, int64_t ts_us, uint64_t cycle)
{
    for (size_t i = 0; i < s->n; i++)
        fs_synth_poll_target(s, i, ts_us, cycle);
}

size_t
fs_synth_series(const struct fs_synth *s)
{
    return s->n * s->ports * FS_SYNTH_SERIES_PER_PORT;
}

void
fs_synth_free(struct fs_synth *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        fs_store_sink_remove(s->st, s->t[i].sink);
    free(s->t);
    free(s);
}
