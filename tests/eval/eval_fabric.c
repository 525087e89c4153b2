/* make eval: the diagnosis scored on leaf-spine fabrics as pods are (world.h), in virtual
 * time, per stall window and per fabric.
 *
 * Each family (world_families.h, shared with world_om) changes what a pod does to the
 * answers: PFC spread, ECMP bundles, load ramps and steps, resets and gaps, strays, a
 * backup in phase, two jobs, pods of 2,304 and 10,368 series.
 *
 * The stalls are posted as host events (ncclAllReduce ranges of the job's ranks on their
 * own clocks, with the offsets they measured), with ordinary ones around them and a few
 * slow windows without a switch-side cause; the analysis is refreshed every 60 s as the
 * daemon does. At the end /api/v1/correlate (slow host events, defaults) and
 * /api/v1/incidents (defaults) are asked through the functions the endpoint calls.
 *
 * Scored per stall window (each slow event of a stall): the origin (any member of a
 * bundle) is the first suspect; the origin ranks above every victim listed (a port of the
 * stall's PFC spread); per unrelated window: its first suspect is not the origin. Per
 * fabric: the origin first in the summary; the origin's recurring group found, first in
 * /incidents, its period within 1% and next stall within 2% of the period; recurring
 * groups of ports with no periodic process (neither a job's origin or victims, nor the
 * backup): false recurrences.
 *
 *   eval_fabric [--seeds N] [--seed-base B] [--family NAME] (default 50, 7000, all;
 *               pod_10k runs a fifth of the seeds; EVAL_VERBOSE=1 prints each run)
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "http/analysis_api.h"
#include "store/store.h"
#include "topology/topology.h"
#include "world.h"
#include "world_families.h"

#define S 1000000LL
#define REFRESH_S 60

struct result {
    int stall_windows, origin_first, origin_above, unrelated, blamed;
    bool summary_first, recurring, group_first;
    int false_groups;
    double period_err, next_err, answer_s;
    double correlate_ms, incidents_ms;
    int tree_windows, tree_edges, tree_right, tree_victims; /* stall windows' propagation */
};

/* ---- feeding the store ---- */

struct feed {
    struct world *w;
    struct fs_sink **sink;
};

static void
feed_begin(void *arg, int sw, int64_t ts)
{
    struct feed *f = arg;
    fs_sink_begin(f->sink[sw], ts);
}

static void
feed_counter(void *arg, int sw, int port, enum world_kind k, uint64_t v)
{
    struct feed *f = arg;
    const char *ifn = world_port_name(f->w, port);
    if (k == WK_PFC_TX || k == WK_PFC_RX) {
        struct fs_label l[3] = {
            {"interface", ifn}, {"direction", k == WK_PFC_TX ? "tx" : "rx"}, {"priority", "3"}};
        fs_sink_counter(f->sink[sw], FS_M_PFC_PAUSE_FRAMES, l, 3, v, 64);
        return;
    }
    struct fs_label l[2] = {{"interface", ifn}, {"tc", "3"}};
    fs_sink_counter(f->sink[sw], k == WK_ECN ? FS_M_QUEUE_ECN_MARKED : FS_M_QUEUE_NO_BUFFER_DROPPED,
                    l, 2, v, 64);
}

static void
feed_gauge(void *arg, int sw, int port, enum world_kind k, double v)
{
    (void)k;
    struct feed *f = arg;
    struct fs_label l[2] = {{"interface", world_port_name(f->w, port)}, {"tc", "3"}};
    fs_sink_gauge(f->sink[sw], FS_M_QUEUE_DEPTH_MAX, l, 2, v);
}

static void
feed_end(void *arg, int sw)
{
    struct feed *f = arg;
    fs_sink_end(f->sink[sw]);
}

struct poster {
    struct fs_analysis *an;
    int64_t now;
    struct fs_buf out;
};

static void
post_cb(void *arg, const char *body, size_t len)
{
    struct poster *p = arg;
    fs_buf_reset(&p->out);
    int rc = fs_analysis_post_host_events(p->an, "Bearer eval-token", body, len, p->now, &p->out);
    if (rc != 200)
        fprintf(stderr, "eval_fabric: post %d: %.200s\n", rc, p->out.data);
}

/* ---- reading the answers ---- */

static struct json_object *
jget(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static const char *
jstr(struct json_object *o, const char *key)
{
    return json_object_get_string(jget(o, key));
}

/* The (switch, port) a suspect or series names; false when it names none of ours. */
static bool
port_of(const struct world *w, struct json_object *s, int *sw, int *p)
{
    const char *t = jstr(s, "target"), *i = jstr(s, "interface");
    if (!t || !i || strncmp(i, "Eth1/", 5) != 0)
        return false;
    for (int k = 0; k < world_switches(w); k++)
        if (!strcmp(world_switch_name(w, k), t)) {
            *sw = k;
            *p = atoi(i + 5) - 1;
            return *p >= 0 && *p < world_ports(w, k);
        }
    return false;
}

static bool
names_origin(const struct world *w, int job, struct json_object *s)
{
    int sw, p;
    return port_of(w, s, &sw, &p) && world_is_origin(w, job, sw, p);
}

static bool
names_victim(const struct world *w, int job, struct json_object *s)
{
    int sw, p;
    return port_of(w, s, &sw, &p) && world_is_victim(w, job, sw, p);
}

/* A port with a periodic process of its own: a job's origin or its spread, the backup. */
static bool
names_periodic(const struct world *w, struct json_object *s)
{
    int sw, p;
    if (!port_of(w, s, &sw, &p))
        return false;
    struct world_port b = world_backup(w), tw = world_twin(w);
    if ((b.sw == sw && b.port == p) || (tw.sw == sw && tw.port == p))
        return true;
    for (int j = 0; world_job(w, j); j++)
        if (world_is_origin(w, j, sw, p) || world_is_victim(w, j, sw, p))
            return true;
    return false;
}

/* Which stall of job 0 the window [s, e] (collector axis, µs) is, or -1. */
static int
stall_of(const struct world *w, int64_t s, int64_t e)
{
    const struct world_job *j = world_job(w, 0);
    for (size_t k = 0; k < j->n_stall; k++)
        if (s < j->stall[k] + j->stall_len[k] + S && e > j->stall[k] - S)
            return (int)k;
    return -1;
}

static bool
is_unrelated(const struct world *w, int64_t s)
{
    for (int i = 0; world_unrelated(w, i) >= 0; i++)
        if (llabs(s - world_unrelated(w, i)) < 2 * S)
            return true;
    return false;
}

static double
ms_since(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

/* Whether a propagation edge is the world's: a received pause explained by the pauses its
 * link partner sent, pauses sent by a congested port of the same switch, a port's queue
 * or marks by the pauses that port received. */
static bool
edge_right(const struct world *w, struct json_object *child, struct json_object *parent)
{
    int cs, cp, ps, pp;
    if (!port_of(w, child, &cs, &cp) || !port_of(w, parent, &ps, &pp))
        return false;
    const char *cd = jstr(child, "direction"), *pd = jstr(parent, "direction");
    if (cd && !strcmp(cd, "rx")) {
        int s2, p2;
        return pd && !strcmp(pd, "tx") && world_link_partner(w, cs, cp, &s2, &p2) == 1 &&
               s2 == ps && p2 == pp;
    }
    if (cd && !strcmp(cd, "tx"))
        return ps == cs && !pd;
    return ps == cs && pp == cp && pd && !strcmp(pd, "rx");
}

static void
score_tree(const struct world *w, struct json_object *ev, struct result *res)
{
    struct json_object *tree = jget(ev, "propagation");
    size_t n = tree ? json_object_array_length(tree) : 0;
    res->tree_windows += n > 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *e = json_object_array_get_idx(tree, i);
        int sw, p;
        res->tree_edges++;
        res->tree_right += edge_right(w, e, jget(e, "paused_by"));
        res->tree_victims += port_of(w, e, &sw, &p) && world_is_victim(w, 0, sw, p);
    }
}

static void
score_correlate(const struct world *w, struct json_object *data, struct result *res, bool verbose)
{
    struct json_object *summary = jget(data, "summary"), *events = jget(data, "events");
    if (summary && json_object_array_length(summary) > 0)
        res->summary_first = names_origin(w, 0, json_object_array_get_idx(summary, 0));
    for (size_t i = 0; verbose && summary && i < json_object_array_length(summary) && i < 20; i++) {
        struct json_object *x = json_object_array_get_idx(summary, i);
        fprintf(stderr, "  summary %zu%s%s: %s (evidence %.3f, max z %.1f)\n", i,
                names_origin(w, 0, x) ? " [origin]" : "", names_victim(w, 0, x) ? " [victim]" : "",
                jstr(x, "text"), json_object_get_double(jget(x, "evidence")),
                json_object_get_double(jget(x, "max_z")));
    }
    size_t ne = events ? json_object_array_length(events) : 0;
    for (size_t i = 0; i < ne; i++) {
        struct json_object *ev = json_object_array_get_idx(events, i);
        int64_t s = (int64_t)(json_object_get_int64(jget(ev, "start_ns")) / 1000);
        int64_t e = (int64_t)(json_object_get_int64(jget(ev, "end_ns")) / 1000);
        struct json_object *sus = jget(ev, "suspects");
        size_t ns = sus ? json_object_array_length(sus) : 0;
        int k = stall_of(w, s, e);
        if (k >= 0) {
            res->stall_windows++;
            int first_origin = -1, first_victim = -1;
            for (size_t q = 0; q < ns; q++) {
                struct json_object *x = json_object_array_get_idx(sus, q);
                if (first_origin < 0 && names_origin(w, 0, x))
                    first_origin = (int)q;
                if (first_victim < 0 && names_victim(w, 0, x))
                    first_victim = (int)q;
            }
            res->origin_first += first_origin == 0;
            if (first_origin == 0)
                score_tree(w, ev, res);
            /* EVAL_DEBUG_TREE=1: each stall window's suspects and tree where the origin led. */
            if (first_origin == 0 && getenv("EVAL_DEBUG_TREE"))
                fprintf(stderr, "  stall %d: suspects %.3000s\n  tree %.3000s\n", k,
                        json_object_to_json_string(sus),
                        json_object_to_json_string(jget(ev, "propagation")));
            res->origin_above +=
                first_origin >= 0 && (first_victim < 0 || first_origin < first_victim);
            if (verbose && first_origin != 0)
                fprintf(stderr, "  stall %d: origin at %d, first victim at %d: %.6000s\n", k,
                        first_origin, first_victim, json_object_to_json_string(sus));
        } else if (is_unrelated(w, s)) {
            res->unrelated++;
            if (ns > 0 && names_origin(w, 0, json_object_array_get_idx(sus, 0))) {
                res->blamed++;
                if (verbose)
                    fprintf(stderr, "  unrelated window blamed on the origin: %.6000s\n",
                            json_object_to_json_string(sus));
            }
        }
    }
}

static void
score_incidents(const struct world *w, struct json_object *data, struct result *res, bool verbose)
{
    struct json_object *rec = jget(data, "recurring");
    const struct world_job *j0 = world_job(w, 0);
    /* EVAL_DEBUG_PORT=leaf02/Eth1/14: that port's episodes (start, end, kinds, z). */
    const char *dbg = getenv("EVAL_DEBUG_PORT");
    struct json_object *eps = jget(data, "episodes");
    for (size_t i = 0; dbg && eps && i < json_object_array_length(eps); i++) {
        struct json_object *e = json_object_array_get_idx(eps, i), *ms = jget(e, "series");
        for (size_t k = 0; ms && k < json_object_array_length(ms); k++) {
            struct json_object *m = json_object_array_get_idx(ms, k);
            char key[96];
            snprintf(key, sizeof key, "%s/%s", jstr(m, "target"), jstr(m, "interface"));
            if (strcmp(key, dbg) == 0)
                fprintf(stderr, "  episode %.3f-%.3f %s %s z %.1f\n",
                        json_object_get_double(jget(e, "start")) - (double)world_t0(w) / 1e6,
                        json_object_get_double(jget(e, "end")) - (double)world_t0(w) / 1e6,
                        jstr(m, "metric"), jstr(m, "direction") ? jstr(m, "direction") : "",
                        json_object_get_double(jget(m, "z")));
        }
    }
    for (size_t i = 0; rec && i < json_object_array_length(rec); i++) {
        struct json_object *g = json_object_array_get_idx(rec, i), *series = jget(g, "series");
        bool origin = false, periodic = false;
        for (size_t k = 0; series && k < json_object_array_length(series); k++) {
            struct json_object *s = json_object_array_get_idx(series, k);
            origin |= names_origin(w, 0, s);
            periodic |= names_periodic(w, s);
        }
        if (!origin) {
            if (!periodic) {
                res->false_groups++;
                if (verbose)
                    fprintf(stderr,
                            "  false recurrence: %s (confidence %.4f, first %.1f, last %.1f, "
                            "run end %.1f)\n",
                            jstr(g, "text"), json_object_get_double(jget(g, "confidence")),
                            json_object_get_double(jget(g, "first")) - (double)world_t0(w) / 1e6,
                            json_object_get_double(jget(g, "last")) - (double)world_t0(w) / 1e6,
                            (double)(world_end(w) - world_t0(w)) / 1e6);
            }
            continue;
        }
        if (res->recurring)
            continue;
        res->recurring = true;
        res->group_first = i == 0;
        double p = json_object_get_double(jget(g, "period_s"));
        double nx = json_object_get_double(jget(g, "next_expected"));
        res->period_err = fabs(p - j0->period_s) / j0->period_s;
        res->next_err = fabs(nx - (double)j0->next_us / 1e6) / j0->period_s;
        if (verbose && (res->period_err > 0.01 || res->next_err > 0.02)) {
            fprintf(stderr,
                    "  origin's group off: %s (%d occurrences, first %.1f last %.1f next %.1f); "
                    "truth: period %.1f, stalls at",
                    jstr(g, "text"), json_object_get_int(jget(g, "occurrences")),
                    json_object_get_double(jget(g, "first")) - (double)world_t0(w) / 1e6,
                    json_object_get_double(jget(g, "last")) - (double)world_t0(w) / 1e6,
                    nx - (double)world_t0(w) / 1e6, j0->period_s);
            for (size_t k = 0; k < j0->n_stall; k++)
                fprintf(stderr, " %.1f", (double)(j0->stall[k] - world_t0(w)) / 1e6);
            fprintf(stderr, ", next %.1f, end %.1f\n", (double)(j0->next_us - world_t0(w)) / 1e6,
                    (double)(world_end(w) - world_t0(w)) / 1e6);
        }
    }
}

static int
run_one(const struct world_family *fam, uint64_t seed, struct result *res)
{
    bool verbose = getenv("EVAL_VERBOSE") != NULL;
    struct world_cfg cfg;
    uint64_t stream = world_family_cfg(fam, seed, &cfg);
    memset(res, 0, sizeof *res);
    res->answer_s = -1;
    res->period_err = res->next_err = NAN;
    struct world *w = world_new(&cfg, seed, stream, (int64_t)time(NULL) * S);
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 1024u << 20, .retention_us = 3600 * S};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    struct fs_host_events_opts ho = {256 << 20, 24 * 3600LL * 1000000000LL};
    struct fs_analysis *an = fs_analysis_new(&ho, err, sizeof err);
    if (!w || !st || !an) {
        fprintf(stderr, "eval_fabric: %s\n", w ? err : "out of memory");
        return -1;
    }
    fs_analysis_set_token(an, "eval-token");
    int nsw = world_switches(w);
    struct fs_sink **sink = calloc((size_t)nsw, sizeof *sink);
    struct fs_target_cfg *tc = calloc((size_t)nsw, sizeof *tc);
    for (int k = 0; k < nsw; k++) {
        tc[k].name = (char *)world_switch_name(w, k);
        tc[k].address = "192.0.2.1";
        tc[k].staleness_intervals = 3;
        sink[k] = fs_store_sink_add(st, &tc[k], "snmp", cfg.poll_us);
    }
    struct feed feed = {w, sink};
    struct world_sink ws = {&feed, feed_begin, feed_counter, feed_gauge, feed_end};
    struct poster po = {.an = an};
    fs_buf_init(&po.out, 64 << 20);
    struct fs_buf out;
    fs_buf_init(&out, 256 << 20);
    const struct world_job *j0 = world_job(w, 0);
    char needle[128];
    snprintf(needle, sizeof needle,
             "fabricscope_incident_next_expected_timestamp_seconds{target=\"%s\",interface=\"%s\"",
             world_switch_name(w, j0->origin[0].sw), world_port_name(w, j0->origin[0].port));
    int64_t third_end = j0->n_stall >= 3 ? j0->stall[2] + j0->stall_len[2] : INT64_MAX;
    int64_t t0 = world_t0(w), end = world_end(w), posted = t0;
    for (int64_t t = t0; t <= end; t += cfg.poll_us) {
        world_step(w, t, &ws);
        if ((t - t0) % (REFRESH_S * S) >= cfg.poll_us && t + cfg.poll_us <= end)
            continue;
        /* The hosts post what ended a little before (an agent's batch). */
        po.now = t;
        world_host_posts(w, posted, t - 5 * S, post_cb, &po);
        posted = t - 5 * S;
        fs_analysis_refresh(an, st, t);
        if (t < third_end || res->answer_s >= 0)
            continue;
        fs_buf_reset(&out);
        fs_analysis_metrics(an, &out);
        if (getenv("EVAL_DEBUG_METRICS") && t - third_end < REFRESH_S * S * 3)
            for (char *l =
                     strstr(out.data, "fabricscope_incident_next_expected_timestamp_seconds{");
                 l; l = strstr(l + 1, "fabricscope_incident_next_expected_timestamp_seconds{"))
                fprintf(stderr, "  at +%.0f s: %.*s\n", (double)(t - third_end) / 1e6,
                        (int)strcspn(l, "\n"), l);
        for (int i = 0; i < j0->n_origin && res->answer_s < 0; i++) {
            snprintf(needle, sizeof needle,
                     "fabricscope_incident_next_expected_timestamp_seconds{target=\"%s\","
                     "interface=\"%s\"",
                     world_switch_name(w, j0->origin[i].sw),
                     world_port_name(w, j0->origin[i].port));
            if (strstr(out.data, needle))
                res->answer_s = (double)(t - third_end) / 1e6;
        }
    }
    po.now = end;
    world_host_posts(w, posted, end + 10 * S, post_cb, &po);
    /* The links, as the switches' last LLDP read before the request reports them. */
    struct fs_topo *topo = cfg.links_known ? fs_topo_new() : NULL;
    /* With hosts_known, hosts by the names their events carry (EVAL_NO_PATHS: as before,
       for comparison), and the job's agents report their NIC's switch port. */
    bool paths = cfg.hosts_known && !getenv("EVAL_NO_PATHS");
    const char *hn;
    int hs, hp, hj;
    for (int h = 0; topo && paths && world_host(w, h, &hn, &hs, &hp, &hj); h++) {
        if (hj != 0) /* the second job's hosts run no agent */
            continue;
        struct fs_topo_neighbor nb = {
            "eth0", "", world_switch_name(w, hs), world_port_name(w, hp), world_port_name(w, hp),
            ""};
        if (fs_topo_host_neighbors(topo, hn, &nb, 1, 30 * S, end, err, sizeof err) != 0)
            fprintf(stderr, "eval_fabric: topology: %s\n", err);
    }
    for (int k = 0; topo && k < nsw; k++) {
        fs_topo_local(topo, world_switch_name(w, k), "snmp", "", world_switch_name(w, k), end, err,
                      sizeof err);
        for (int p = 0; p < world_ports(w, k); p++) {
            int s2, p2;
            char host[32];
            const char *node = host, *port = "eth0";
            if (world_link_partner(w, k, p, &s2, &p2) == 1) {
                node = world_switch_name(w, s2);
                port = world_port_name(w, p2);
            } else {
                snprintf(host, sizeof host, "host-%02d-%02d", k + 1, p + 1);
                for (int h = 0; paths && world_host(w, h, &hn, &hs, &hp, NULL); h++)
                    if (hs == k && hp == p)
                        node = hn;
            }
            struct fs_topo_neighbor nb = {world_port_name(w, p), "", node, port, port, ""};
            if (fs_topo_neighbor(topo, world_switch_name(w, k), "snmp", &nb, end, err,
                                 sizeof err) != 0)
                fprintf(stderr, "eval_fabric: topology: %s\n", err);
        }
        fs_topo_table_end(topo, world_switch_name(w, k), "snmp", 30 * S, end);
    }
    fs_analysis_set_topology(an, topo);
    /* /correlate over the slow host events of the whole run. */
    char sbuf[32], ebuf[32];
    snprintf(sbuf, sizeof sbuf, "%lld", (long long)(t0 / S));
    snprintf(ebuf, sizeof ebuf, "%lld", (long long)(end / S + 1));
    struct fs_analysis_arg args[] = {{"start", sbuf}, {"end", ebuf}, {"limit", "100000"}};
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fs_buf_reset(&out);
    int rc = fs_analysis_correlate(an, st, args, 3, end + S, &out);
    res->correlate_ms = ms_since(&ts);
    struct json_object *o = rc == 200 ? json_tokener_parse(out.data) : NULL;
    if (!o)
        fprintf(stderr, "eval_fabric: correlate %d: %.300s\n", rc, out.data);
    else
        score_correlate(w, jget(o, "data"), res, verbose);
    json_object_put(o);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fs_buf_reset(&out);
    struct fs_analysis_arg iargs[] = {{"limit", "100000"}};
    rc = fs_analysis_incidents(an, st, iargs, 1, end + S, &out);
    res->incidents_ms = ms_since(&ts);
    o = rc == 200 ? json_tokener_parse(out.data) : NULL;
    if (!o)
        fprintf(stderr, "eval_fabric: incidents %d: %.300s\n", rc, out.data);
    else
        score_incidents(w, jget(o, "data"), res, verbose);
    json_object_put(o);
    for (int k = 0; k < nsw; k++)
        fs_store_sink_remove(st, sink[k]);
    free(sink);
    free(tc);
    fs_analysis_free(an);
    fs_topo_free(topo);
    fs_store_free(st);
    fs_buf_free(&out);
    fs_buf_free(&po.out);
    world_free(w);
    return 0;
}

struct tally {
    int n, windows, origin_first, origin_above, unrelated, blamed;
    int summary_first, recurring, group_first, period_ok, next_ok, false_runs, false_groups;
    int answered;
    int tree_windows, tree_edges, tree_right, tree_victims;
    double answer_sum, correlate_ms, incidents_ms, correlate_max, incidents_max;
};

static void
add(struct tally *t, const struct result *r)
{
    t->n++;
    t->windows += r->stall_windows;
    t->origin_first += r->origin_first;
    t->origin_above += r->origin_above;
    t->unrelated += r->unrelated;
    t->blamed += r->blamed;
    t->summary_first += r->summary_first;
    t->recurring += r->recurring;
    t->group_first += r->group_first;
    t->false_groups += r->false_groups;
    t->false_runs += r->false_groups > 0;
    if (r->recurring) {
        t->period_ok += r->period_err <= 0.01;
        t->next_ok += r->next_err <= 0.02;
    }
    if (r->answer_s >= 0) {
        t->answered++;
        t->answer_sum += r->answer_s;
    }
    t->tree_windows += r->tree_windows;
    t->tree_edges += r->tree_edges;
    t->tree_right += r->tree_right;
    t->tree_victims += r->tree_victims;
    t->correlate_ms += r->correlate_ms;
    t->incidents_ms += r->incidents_ms;
    if (r->correlate_ms > t->correlate_max)
        t->correlate_max = r->correlate_ms;
    if (r->incidents_ms > t->incidents_max)
        t->incidents_max = r->incidents_ms;
}

static double
pct(int a, int b)
{
    return b ? 100.0 * a / b : 0;
}

int
main(int argc, char **argv)
{
    int seeds = 50;
    uint64_t base = 7000;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seeds"))
            seeds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed-base"))
            base = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--family"))
            only = argv[i + 1];
    }
    struct tally *fam = calloc(world_n_families, sizeof *fam);
    if (!fam)
        return 1;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t f = 0; f < world_n_families; f++) {
        if (only && strcmp(only, world_families[f].name) != 0)
            continue;
        int n = seeds / world_families[f].seed_div;
        if (n < 1)
            n = 1;
        for (int s = 0; s < n; s++) {
            struct result r;
            if (run_one(&world_families[f], base + (uint64_t)s, &r) != 0)
                return 1;
            add(&fam[f], &r);
            if (getenv("EVAL_VERBOSE"))
                fprintf(stderr,
                        "%s seed %d: windows %d first %d above %d blamed %d/%d summary %d "
                        "recurring %d (first %d) period_err %.4f next_err %.4f answer %.0f s "
                        "false %d correlate %.0f ms incidents %.0f ms tree %d/%d right\n",
                        world_families[f].name, s, r.stall_windows, r.origin_first, r.origin_above,
                        r.blamed, r.unrelated, r.summary_first, r.recurring, r.group_first,
                        r.period_err, r.next_err, r.answer_s, r.false_groups, r.correlate_ms,
                        r.incidents_ms, r.tree_right, r.tree_edges);
        }
    }
    printf("%-16s %5s %8s %8s %8s %8s %7s %7s %7s %8s %8s %7s %8s %8s\n", "family", "runs",
           "windows", "first%", "above%", "blamed%", "summ%", "recur%", "gfirst%", "period1%",
           "next2%", "false%", "answer_s", "corr_ms");
    for (size_t f = 0; f < world_n_families; f++) {
        const struct tally *t = &fam[f];
        if (!t->n)
            continue;
        printf("%-16s %5d %8d %8.1f %8.1f %8.1f %7.1f %7.1f %7.1f %8.1f %8.1f %7.1f %8.1f %8.0f\n",
               world_families[f].name, t->n, t->windows, pct(t->origin_first, t->windows),
               pct(t->origin_above, t->windows), pct(t->blamed, t->unrelated),
               pct(t->summary_first, t->n), pct(t->recurring, t->n), pct(t->group_first, t->n),
               pct(t->period_ok, t->n), pct(t->next_ok, t->n), pct(t->false_runs, t->n),
               t->answered ? t->answer_sum / t->answered : -1, t->correlate_ms / t->n);
    }
    for (size_t f = 0; f < world_n_families; f++) {
        const struct tally *t = &fam[f];
        const char *nm = world_families[f].name;
        if (!t->n)
            continue;
        printf("EVAL %s_origin_first_windows %.1f %%\n", nm, pct(t->origin_first, t->windows));
        printf("EVAL %s_origin_above_victims_windows %.1f %%\n", nm,
               pct(t->origin_above, t->windows));
        printf("EVAL %s_unrelated_blamed_on_origin %.1f %%\n", nm, pct(t->blamed, t->unrelated));
        printf("EVAL %s_origin_first_summary %.1f %%\n", nm, pct(t->summary_first, t->n));
        printf("EVAL %s_recurring_found %.1f %%\n", nm, pct(t->recurring, t->n));
        printf("EVAL %s_recurring_group_first %.1f %%\n", nm, pct(t->group_first, t->n));
        printf("EVAL %s_period_within_1pct %.1f %%\n", nm, pct(t->period_ok, t->n));
        printf("EVAL %s_next_within_2pct_of_period %.1f %%\n", nm, pct(t->next_ok, t->n));
        printf("EVAL %s_false_recurring_runs %.1f %%\n", nm, pct(t->false_runs, t->n));
        printf("EVAL %s_time_to_answer_mean %.1f s\n", nm,
               t->answered ? t->answer_sum / t->answered : -1);
        /* The origin's propagation tree, where it led: windows with one, its edges that
           are the world's (link partner, same switch, same port), its ports that were
           the stall's victims. */
        printf("EVAL %s_tree_windows %.1f %%\n", nm, pct(t->tree_windows, t->origin_first));
        printf("EVAL %s_tree_edges_right %.1f %%\n", nm, pct(t->tree_right, t->tree_edges));
        printf("EVAL %s_tree_edges_on_victims %.1f %%\n", nm, pct(t->tree_victims, t->tree_edges));
        printf("EVAL %s_correlate_ms_max %.0f ms\n", nm, t->correlate_max);
        printf("EVAL %s_incidents_ms_max %.0f ms\n", nm, t->incidents_max);
    }
    printf("EVAL eval_fabric_wall_time %.1f s\n", ms_since(&t0) / 1e3);
    free(fam);
    return 0;
}
