/* A world (world.h) as a real Prometheus holds it, for the end-to-end evaluation of
 * analysis.history (tests/eval/eval_pod_history.sh) and its benchmarks
 * (tests/bench/bench_history_pod.sh).
 *
 * The world of a family (world_families.h) and seed is stepped over its whole time
 * range, each switch polled every poll_us at its own phase, and written to OUT/:
 *
 *   fabric.om   OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`: the
 *               series fabricscope exports for these switches (source="snmp"):
 *               fabric_queue_ecn_marked_packets_total, fabric_queue_depth_max_bytes,
 *               fabric_queue_no_buffer_dropped_packets_total{interface,tc="3"} and
 *               fabric_pfc_pause_frames_total{interface,direction,priority="3"}, the
 *               kinds the family reports; counters as the store exposes them (a counter
 *               that went down after a reboot is rebased, never decreasing). Stamped
 *               --stamp scrape: as a Prometheus scraping fabricscope's /metrics every
 *                 --scrape S seconds stores it: at each scrape time (one phase for the
 *                 one scrape target, as Prometheus offsets each target), the latest
 *                 polled value of each series at or before it, stamped at the scrape
 *                 time, with job="fabricscope" and instance="127.0.0.1:9464" added; a
 *                 series whose last poll is older than 3 polls (the collector's
 *                 staleness) is absent from that scrape; beside them, as fabricscope exports
 *                 it, each switch's fabricscope_target_last_sample_timestamp_seconds (the
 *                 time of the poll the scrape shows; left out with --poll-stamps no, as an
 *                 older fabricscope exported nothing of the kind);
 *               --stamp poll: as remote_write sends it: every poll's value at the
 *                 poll's own timestamp, with the external label replica="a".
 *   posts/NNN.json  the hosts' events over the whole range (world_host_posts), one
 *               POST /api/v1/host-events body a file.
 *   truth.json  the period, the stalls (start, length), the next scheduled stall, the
 *               origin port(s), the victims (world_is_victim), the backup, the
 *               unrelated windows (their starts), the origin's strays (their times),
 *               when the history stamps the origin's first sample after each stall's
 *               onset (stamp_delay_s: the poll after it, or the scrape after that
 *               poll), every port with a periodic process
 *               (any job's origin or victims, the backup), the poll and scrape settings.
 *
 *   world_om --family NAME --seed N --out DIR [--stamp scrape|poll] [--scrape S]
 *            [--poll S] [--hours H] [--period S] [--end EPOCH_S] [--poll-stamps yes|no]
 *
 * --poll overrides the family's poll interval (0: the family's own), --hours makes the run last H
 * hours whatever its period, --period fixes the period; --end is the world's end (default: 120 s
 * ago). The world's noise differs from eval_fabric's run of the same family and seed (eval_fabric
 * draws host events between polls, this after them); the fabric, its jobs, stalls, origins and
 * hosts are the same.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "rng.h"
#include "world.h"
#include "world_families.h"

#define S 1000000LL
#define STALE_POLLS 3 /* targets[].staleness_intervals' default */
#define INSTANCE "127.0.0.1:9464"

/* The kinds in the order their families are written; PFC tx and rx are one family. */
static const enum world_kind kind_order[] = {WK_ECN, WK_QUEUE, WK_DROP, WK_PFC_TX, WK_PFC_RX};

struct gen {
    struct world *w;
    bool scrape;
    int64_t poll_us, scrape_us;
    int n_sw, total_ports;
    int *port_base;
    int slot[WK_COUNT]; /* kind -> series slot, -1 when not reported */
    int n_slots;
    size_t n_series, cap; /* samples a series may hold */
    double *v;            /* n_series x cap; NAN: no sample */
    /* per series: the store's counter state */
    uint64_t *last_raw;
    double *exposed;
    bool *seen;
    /* poll stamping: per switch, its polls' timestamps */
    int64_t **poll_ts;
    size_t *n_poll;
    /* scrape stamping: the scrape grid, and per switch its next unfilled scrape and last
       poll */
    int64_t scrape0;
    size_t n_scrape;
    size_t *next_scrape;
    int64_t *last_poll;
    int64_t *scrape_poll; /* n_sw x n_scrape: the poll each scrape shows (0: none) */
    bool poll_stamps;     /* write fabricscope_target_last_sample_timestamp_seconds */
    /* the polls of the origin's switch, for the stamp delays of the truth */
    int origin_sw;
    int64_t *origin_polls;
    size_t n_origin_polls, cap_origin_polls;
};

static size_t
series_of(const struct gen *g, int sw, int port, enum world_kind k)
{
    return (size_t)g->slot[k] * (size_t)g->total_ports + (size_t)(g->port_base[sw] + port);
}

static double *
cell(struct gen *g, size_t series, size_t i)
{
    return &g->v[series * g->cap + i];
}

/* Scrapes before ts see the switch's previous poll (or nothing, when it is stale). */
static void
fill_scrapes(struct gen *g, int sw, int64_t ts)
{
    size_t *k = &g->next_scrape[sw];
    for (; *k < g->n_scrape && g->scrape0 + (int64_t)*k * g->scrape_us < ts; (*k)++) {
        int64_t at = g->scrape0 + (int64_t)*k * g->scrape_us;
        bool fresh =
            g->last_poll[sw] != INT64_MIN && at - g->last_poll[sw] <= STALE_POLLS * g->poll_us;
        if (g->last_poll[sw] != INT64_MIN) /* the gauge is an instance's: never stale */
            g->scrape_poll[(size_t)sw * g->n_scrape + *k] = g->last_poll[sw];
        for (int p = 0; p < world_ports(g->w, sw); p++)
            for (int kd = 0; kd < WK_COUNT; kd++) {
                if (g->slot[kd] < 0)
                    continue;
                size_t s = series_of(g, sw, p, (enum world_kind)kd);
                *cell(g, s, *k) = fresh && g->seen[s] ? g->exposed[s] : NAN;
            }
    }
}

static void
on_begin(void *arg, int sw, int64_t ts)
{
    struct gen *g = arg;
    if (sw == g->origin_sw && g->n_origin_polls < g->cap_origin_polls)
        g->origin_polls[g->n_origin_polls++] = ts;
    if (g->scrape) {
        fill_scrapes(g, sw, ts);
        g->last_poll[sw] = ts;
    } else if (g->n_poll[sw] < g->cap) {
        g->poll_ts[sw][g->n_poll[sw]] = ts;
    }
}

static void
put(struct gen *g, int sw, size_t s, double v)
{
    g->exposed[s] = v;
    g->seen[s] = true;
    if (!g->scrape && g->n_poll[sw] < g->cap)
        *cell(g, s, g->n_poll[sw]) = v;
}

static void
on_counter(void *arg, int sw, int port, enum world_kind k, uint64_t v)
{
    struct gen *g = arg;
    size_t s = series_of(g, sw, port, k);
    /* As the store exposes a 64-bit counter: it grows by the raw increase, and by the raw
       value after it went down (a clear, counted from zero). */
    double e = !g->seen[s]           ? (double)v
               : v >= g->last_raw[s] ? g->exposed[s] + (double)(v - g->last_raw[s])
                                     : g->exposed[s] + (double)v;
    g->last_raw[s] = v;
    put(g, sw, s, e);
}

static void
on_gauge(void *arg, int sw, int port, enum world_kind k, double v)
{
    struct gen *g = arg;
    put(g, sw, series_of(g, sw, port, k), v);
}

static void
on_end(void *arg, int sw)
{
    struct gen *g = arg;
    if (!g->scrape && g->n_poll[sw] < g->cap)
        g->n_poll[sw]++;
}

static const char *
metric_name(enum world_kind k)
{
    switch (k) {
    case WK_ECN:
        return "fabric_queue_ecn_marked_packets_total";
    case WK_QUEUE:
        return "fabric_queue_depth_max_bytes";
    case WK_DROP:
        return "fabric_queue_no_buffer_dropped_packets_total";
    default:
        return "fabric_pfc_pause_frames_total";
    }
}

static const char *
family_type_line(enum world_kind k)
{
    switch (k) {
    case WK_ECN:
        return "# TYPE fabric_queue_ecn_marked_packets counter\n";
    case WK_QUEUE:
        return "# TYPE fabric_queue_depth_max_bytes gauge\n";
    case WK_DROP:
        return "# TYPE fabric_queue_no_buffer_dropped_packets counter\n";
    default:
        return "# TYPE fabric_pfc_pause_frames counter\n";
    }
}

static int
write_om(struct gen *g, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    const char *extra =
        g->scrape ? "job=\"fabricscope\",instance=\"" INSTANCE "\"," : "replica=\"a\",";
    bool pfc_typed = false;
    for (size_t ko = 0; ko < sizeof kind_order / sizeof *kind_order; ko++) {
        enum world_kind k = kind_order[ko];
        if (g->slot[k] < 0)
            continue;
        bool pfc = k == WK_PFC_TX || k == WK_PFC_RX;
        if (!pfc || !pfc_typed)
            fputs(family_type_line(k), f);
        pfc_typed |= pfc;
        for (int sw = 0; sw < g->n_sw; sw++)
            for (int p = 0; p < world_ports(g->w, sw); p++) {
                char lab[256];
                if (pfc)
                    snprintf(lab, sizeof lab,
                             "%s{%starget=\"%s\",interface=\"%s\",direction=\"%s\","
                             "priority=\"3\",source=\"snmp\"} ",
                             metric_name(k), extra, world_switch_name(g->w, sw),
                             world_port_name(g->w, p), k == WK_PFC_TX ? "tx" : "rx");
                else
                    snprintf(lab, sizeof lab,
                             "%s{%starget=\"%s\",interface=\"%s\",tc=\"3\",source=\"snmp\"} ",
                             metric_name(k), extra, world_switch_name(g->w, sw),
                             world_port_name(g->w, p));
                size_t s = series_of(g, sw, p, k);
                size_t n = g->scrape ? g->n_scrape : g->n_poll[sw];
                for (size_t i = 0; i < n; i++) {
                    double v = *cell(g, s, i);
                    if (isnan(v))
                        continue;
                    int64_t ms =
                        (g->scrape ? g->scrape0 + (int64_t)i * g->scrape_us : g->poll_ts[sw][i]) /
                        1000;
                    fprintf(f, "%s%.0f %" PRId64 ".%03d\n", lab, v, ms / 1000, (int)(ms % 1000));
                }
            }
    }
    if (g->scrape && g->poll_stamps) {
        /* What the scrape stored beside the values: the time of the poll they come from. */
        fputs("# TYPE fabricscope_target_last_sample_timestamp_seconds gauge\n", f);
        for (int sw = 0; sw < g->n_sw; sw++)
            for (size_t i = 0; i < g->n_scrape; i++) {
                int64_t pt = g->scrape_poll[(size_t)sw * g->n_scrape + i];
                if (!pt)
                    continue;
                int64_t ms = (g->scrape0 + (int64_t)i * g->scrape_us) / 1000;
                fprintf(f,
                        "fabricscope_target_last_sample_timestamp_seconds{%starget=\"%s\","
                        "source=\"snmp\"} %" PRId64 ".%06d %" PRId64 ".%03d\n",
                        extra, world_switch_name(g->w, sw), (int64_t)(pt / S), (int)(pt % S),
                        ms / 1000, (int)(ms % 1000));
            }
    }
    fputs("# EOF\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

struct poster {
    const char *dir;
    int n;
    int err;
};

static void
post_cb(void *arg, const char *body, size_t len)
{
    struct poster *p = arg;
    char path[4096];
    snprintf(path, sizeof path, "%s/posts/%03d.json", p->dir, p->n++);
    FILE *f = fopen(path, "w");
    if (!f || fwrite(body, 1, len, f) != len || fclose(f) != 0)
        p->err = errno ? errno : EIO;
}

static void
put_port(FILE *f, const struct world *w, int sw, int p, bool *first)
{
    fprintf(f, "%s[\"%s\",\"%s\"]", *first ? "" : ",", world_switch_name(w, sw),
            world_port_name(w, p));
    *first = false;
}

static int
write_truth(const struct gen *g, const char *path, const char *family, uint64_t seed,
            double scrape_phase_s)
{
    const struct world *w = g->w;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const struct world_job *j0 = world_job(w, 0);
    fprintf(f,
            "{\"family\":\"%s\",\"seed\":%" PRIu64 ",\"stamp\":\"%s\",\"poll_s\":%.3f,"
            "\"scrape_s\":%.3f,\"scrape_phase_s\":%.3f,\"t0\":%.6f,\"end\":%.6f,\"switches\":%d,"
            "\"series\":%zu,\n",
            family, seed, g->scrape ? "scrape" : "poll", (double)g->poll_us / 1e6,
            g->scrape ? (double)g->scrape_us / 1e6 : 0.0, scrape_phase_s, (double)world_t0(w) / 1e6,
            (double)world_end(w) / 1e6, g->n_sw, g->n_series);
    fprintf(f, "\"period_s\":%.6f,\"next\":%.6f,\"job\":\"%s\",\n\"stalls\":[", j0->period_s,
            (double)j0->next_us / 1e6, j0->name);
    for (size_t k = 0; k < j0->n_stall; k++)
        fprintf(f, "%s[%.6f,%.6f]", k ? "," : "", (double)j0->stall[k] / 1e6,
                (double)j0->stall_len[k] / 1e6);
    /* When the history stamps the origin's first sample after each stall's onset: the
       poll whose interval holds the onset, or the first scrape at or after that poll. */
    fputs("],\n\"stamp_delay_s\":[", f);
    for (size_t k = 0; k < j0->n_stall; k++) {
        size_t i = 0;
        while (i < g->n_origin_polls && g->origin_polls[i] < j0->stall[k])
            i++;
        double d = NAN;
        if (i < g->n_origin_polls) {
            int64_t at = g->origin_polls[i];
            if (g->scrape) {
                int64_t n = (at - g->scrape0 + g->scrape_us - 1) / g->scrape_us;
                at = g->scrape0 + n * g->scrape_us;
            }
            d = (double)(at - j0->stall[k]) / 1e6;
        }
        if (isnan(d))
            fprintf(f, "%snull", k ? "," : "");
        else
            fprintf(f, "%s%.3f", k ? "," : "", d);
    }
    fputs("],\n\"origin\":[", f);
    bool first = true;
    for (int i = 0; i < j0->n_origin; i++)
        put_port(f, w, j0->origin[i].sw, j0->origin[i].port, &first);
    fputs("],\n\"victims\":[", f);
    first = true;
    for (int sw = 0; sw < g->n_sw; sw++)
        for (int p = 0; p < world_ports(w, sw); p++)
            if (world_is_victim(w, 0, sw, p))
                put_port(f, w, sw, p, &first);
    struct world_port b = world_backup(w);
    if (b.sw >= 0)
        fprintf(f, "],\n\"backup\":[\"%s\",\"%s\"],\n\"periodic\":[", world_switch_name(w, b.sw),
                world_port_name(w, b.port));
    else
        fputs("],\n\"backup\":null,\n\"periodic\":[", f);
    first = true;
    for (int sw = 0; sw < g->n_sw; sw++)
        for (int p = 0; p < world_ports(w, sw); p++) {
            bool per = b.sw == sw && b.port == p;
            for (int j = 0; world_job(w, j); j++)
                per |= world_is_origin(w, j, sw, p) || world_is_victim(w, j, sw, p);
            if (per)
                put_port(f, w, sw, p, &first);
        }
    fputs("],\n\"unrelated\":[", f);
    for (int i = 0; world_unrelated(w, i) >= 0; i++)
        fprintf(f, "%s%.6f", i ? "," : "", (double)world_unrelated(w, i) / 1e6);
    fputs("],\n\"strays\":[", f);
    for (int i = 0; world_stray(w, i) >= 0; i++)
        fprintf(f, "%s%.6f", i ? "," : "", (double)world_stray(w, i) / 1e6);
    fputs("]}\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

static void
usage(void)
{
    fprintf(stderr, "usage: world_om --family NAME --seed N --out DIR [--stamp scrape|poll] "
                    "[--scrape S] [--poll S] [--hours H] [--period S] [--end EPOCH_S] "
                    "[--poll-stamps yes|no]\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    const char *family = NULL, *out = NULL, *stamp = "scrape", *poll_stamps = "yes";
    uint64_t seed = 0;
    bool have_seed = false;
    double scrape_s = 15, poll_s = 0, hours = 0, period_s = 0, end_s = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        const char *k = argv[i], *v = argv[++i];
        if (!strcmp(k, "--family"))
            family = v;
        else if (!strcmp(k, "--seed")) {
            seed = strtoull(v, NULL, 10);
            have_seed = true;
        } else if (!strcmp(k, "--out"))
            out = v;
        else if (!strcmp(k, "--stamp"))
            stamp = v;
        else if (!strcmp(k, "--scrape"))
            scrape_s = atof(v);
        else if (!strcmp(k, "--poll"))
            poll_s = atof(v);
        else if (!strcmp(k, "--hours"))
            hours = atof(v);
        else if (!strcmp(k, "--period"))
            period_s = atof(v);
        else if (!strcmp(k, "--end"))
            end_s = atof(v);
        else if (!strcmp(k, "--poll-stamps"))
            poll_stamps = v;
        else
            usage();
    }
    if (!family || !out || !have_seed || (strcmp(stamp, "scrape") && strcmp(stamp, "poll")) ||
        scrape_s < 1 || (strcmp(poll_stamps, "yes") && strcmp(poll_stamps, "no")))
        usage();
    const struct world_family *fam = world_family_find(family);
    if (!fam) {
        fprintf(stderr, "world_om: no family %s\n", family);
        return 2;
    }
    struct world_cfg cfg;
    uint64_t stream = world_family_cfg(fam, seed, &cfg);
    if (poll_s > 0)
        cfg.poll_us = (int64_t)llround(poll_s * 1e6);
    if (hours > 0) {
        cfg.periods = 1e6; /* as many as the hours hold */
        cfg.max_dur_s = hours * 3600;
    }
    if (period_s > 0)
        cfg.period_s = period_s;
    int64_t end_us = end_s > 0 ? (int64_t)llround(end_s * 1e6) : ((int64_t)time(NULL) - 120) * S;
    struct world *w = world_new(&cfg, seed, stream, end_us);
    if (!w) {
        fprintf(stderr, "world_om: out of memory\n");
        return 1;
    }
    if (world_job(w, 0)->n_stall >= WORLD_MAX_STALLS) {
        /* world.c keeps no more: the truth would miss the later stalls. */
        fprintf(stderr, "world_om: %d stalls or more: a longer --period or fewer --hours\n",
                WORLD_MAX_STALLS);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/posts", out);
    if ((mkdir(out, 0755) != 0 && errno != EEXIST) || (mkdir(path, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "world_om: %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct gen g = {.w = w,
                    .scrape = !strcmp(stamp, "scrape"),
                    .poll_us = cfg.poll_us,
                    .poll_stamps = !strcmp(poll_stamps, "yes")};
    g.scrape_us = (int64_t)llround(scrape_s * 1e6);
    g.n_sw = world_switches(w);
    g.port_base = calloc((size_t)g.n_sw, sizeof *g.port_base);
    for (int sw = 0; sw < g.n_sw; sw++) {
        g.port_base[sw] = g.total_ports;
        g.total_ports += world_ports(w, sw);
    }
    for (int k = 0; k < WK_COUNT; k++)
        g.slot[k] = cfg.kinds & WK_BIT(k) ? g.n_slots++ : -1;
    g.n_series = (size_t)g.n_slots * (size_t)g.total_ports;
    g.origin_sw = world_job(w, 0)->origin[0].sw;
    int64_t t0 = world_t0(w), end = world_end(w);
    /* Prometheus offsets each scrape target within the interval; one target here, its
       phase taken from the world's start so that a seed's run does not depend on when it
       was made. */
    uint64_t r = fs_rng_seed(seed, 0x5c7a9e);
    int64_t phase = (int64_t)(fs_rng_uniform(&r) * (double)g.scrape_us);
    if (g.scrape) {
        g.scrape0 = t0 + phase;
        g.n_scrape = (size_t)((end - g.scrape0) / g.scrape_us) + 1;
        g.cap = g.n_scrape;
    } else {
        g.cap = (size_t)((end - t0) / cfg.poll_us) + 3;
    }
    g.v = malloc(g.n_series * g.cap * sizeof *g.v);
    g.last_raw = calloc(g.n_series, sizeof *g.last_raw);
    g.exposed = calloc(g.n_series, sizeof *g.exposed);
    g.seen = calloc(g.n_series, sizeof *g.seen);
    g.poll_ts = calloc((size_t)g.n_sw, sizeof *g.poll_ts);
    g.n_poll = calloc((size_t)g.n_sw, sizeof *g.n_poll);
    g.next_scrape = calloc((size_t)g.n_sw, sizeof *g.next_scrape);
    g.last_poll = calloc((size_t)g.n_sw, sizeof *g.last_poll);
    g.scrape_poll = calloc((size_t)g.n_sw * (g.scrape ? g.n_scrape : 1), sizeof *g.scrape_poll);
    if (!g.scrape_poll || !g.v || !g.last_raw || !g.exposed || !g.seen || !g.poll_ts || !g.n_poll ||
        !g.next_scrape || !g.last_poll) {
        fprintf(stderr, "world_om: out of memory (%zu series x %zu samples)\n", g.n_series, g.cap);
        return 1;
    }
    g.cap_origin_polls = (size_t)((world_end(w) - world_t0(w)) / cfg.poll_us) + 3;
    g.origin_polls = calloc(g.cap_origin_polls, sizeof *g.origin_polls);
    if (!g.origin_polls) {
        fprintf(stderr, "world_om: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < g.n_series * g.cap; i++)
        g.v[i] = NAN;
    for (int sw = 0; sw < g.n_sw; sw++) {
        g.last_poll[sw] = INT64_MIN;
        if (!g.scrape && !(g.poll_ts[sw] = calloc(g.cap, sizeof **g.poll_ts))) {
            fprintf(stderr, "world_om: out of memory\n");
            return 1;
        }
    }
    struct world_sink ws = {&g, on_begin, on_counter, on_gauge, on_end};
    for (int64_t t = t0; t <= end; t += cfg.poll_us)
        world_step(w, t, &ws);
    if (g.scrape)
        for (int sw = 0; sw < g.n_sw; sw++)
            fill_scrapes(&g, sw, INT64_MAX);
    snprintf(path, sizeof path, "%s/fabric.om", out);
    if (write_om(&g, path) != 0) {
        fprintf(stderr, "world_om: %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct poster po = {out, 0, 0};
    size_t events = world_host_posts(w, t0 - S, end + 10 * S, post_cb, &po);
    if (po.err) {
        fprintf(stderr, "world_om: posts: %s\n", strerror(po.err));
        return 1;
    }
    snprintf(path, sizeof path, "%s/truth.json", out);
    if (write_truth(&g, path, family, seed, (double)phase / 1e6) != 0) {
        fprintf(stderr, "world_om: %s: %s\n", path, strerror(errno));
        return 1;
    }
    const struct world_job *j0 = world_job(w, 0);
    fprintf(stderr,
            "world_om: %s seed %" PRIu64 ": %d switches, %zu series, %.2f h, period %.1f s, "
            "%zu stalls, %zu host events in %d posts, stamped at the %s\n",
            family, seed, g.n_sw, g.n_series, (double)(end - t0) / 3.6e9, j0->period_s, j0->n_stall,
            events, po.n, g.scrape ? "scrapes" : "polls");
    for (int sw = 0; sw < g.n_sw; sw++)
        free(g.poll_ts[sw]);
    free(g.poll_ts);
    free(g.n_poll);
    free(g.next_scrape);
    free(g.last_poll);
    free(g.scrape_poll);
    free(g.v);
    free(g.last_raw);
    free(g.exposed);
    free(g.seen);
    free(g.port_base);
    free(g.origin_polls);
    world_free(w);
    return 0;
}
