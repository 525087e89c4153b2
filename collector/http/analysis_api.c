/* The analysis endpoints: request arguments in, the service's results out as JSON (see
   analysis_api.h). */
#include "http/analysis_api.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/api.h"
#include "http/selector.h"

#define US 1000000LL
#define MAX_MATCH 16
#define MAX_OTHER_EVENTS 20
/* Times beyond ±4e15 µs (about 1843..2096) are refused: host events are kept in ns and
   µs * 1000 must not overflow. */
#define MAX_TIME_US 4000000000000000LL
/* A range this much longer than an endpoint's limit is taken as the limit's length
 * (ending at end): "now minus 7 days" computed by the caller in whole seconds, a moment
 * before the request arrives, is a little more than 7 days by the server's clock. */
#define RANGE_SLACK_US (60 * US)

/* ---- helpers ---- */

static int error_doc(struct fs_buf *out, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
error_doc(struct fs_buf *out, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fs_buf_reset(out);
    fs_buf_puts(out, "{\"status\":\"error\",\"error\":");
    fs_buf_json_str(out, msg);
    fs_buf_puts(out, "}");
    return status;
}

static int
overflow_doc(struct fs_buf *out)
{
    out->overflow = false;
    return error_doc(out, 413, "the answer is larger than the response limit; narrow the range");
}

static const char *
arg(const struct fs_analysis_arg *args, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(args[i].key, key) == 0)
            return args[i].value ? args[i].value : "";
    return NULL;
}

static bool
arg_known(const char *key, const char *const *known)
{
    for (size_t i = 0; known[i]; i++)
        if (strcmp(key, known[i]) == 0)
            return true;
    return false;
}

/* Unknown parameters are errors (a typo must not silently change the answer). */
static int
check_args(const struct fs_analysis_arg *args, size_t n, const char *const *known, const char *rep,
           struct fs_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        if (!arg_known(args[i].key, known))
            return error_doc(out, 400, "unknown parameter \"%.64s\"", args[i].key);
        if (rep && strcmp(args[i].key, rep) == 0)
            continue;
        for (size_t j = 0; j < i; j++)
            if (strcmp(args[i].key, args[j].key) == 0)
                return error_doc(out, 400, "parameter \"%.64s\" given twice", args[i].key);
    }
    return 0;
}

static int
parse_range(const struct fs_analysis_arg *args, size_t n, int64_t now_us, int64_t dflt_us,
            int64_t max_us, int64_t *start, int64_t *end, struct fs_buf *out)
{
    const char *s = arg(args, n, "start"), *e = arg(args, n, "end");
    *end = now_us;
    if (e && fs_api_parse_time(e, end) != 0)
        return error_doc(out, 400, "end: cannot parse \"%.64s\" as unix seconds or RFC 3339", e);
    *start = *end - dflt_us;
    if (s && fs_api_parse_time(s, start) != 0)
        return error_doc(out, 400, "start: cannot parse \"%.64s\" as unix seconds or RFC 3339", s);
    if (*start < -MAX_TIME_US || *end > MAX_TIME_US)
        return error_doc(out, 400, "start/end: outside 1843..2096");
    if (*start > *end)
        return error_doc(out, 400, "start is after end");
    if (*end - *start > max_us + RANGE_SLACK_US)
        return error_doc(out, 400, "the range is longer than %lld s", (long long)(max_us / US));
    if (*end - *start > max_us)
        *start = *end - max_us;
    return 0;
}

static void
put_time(struct fs_buf *b, int64_t us)
{
    int64_t s = us / US, f = us % US;
    if (f < 0) {
        s--;
        f += US;
    }
    fs_buf_printf(b, "%" PRId64 ".%06" PRId64, s, f);
}

static void
put_num(struct fs_buf *b, double v)
{
    if (!isfinite(v))
        fs_buf_puts(b, "null");
    else
        fs_buf_printf(b, "%.6g", v);
}

static void
put_series_ref(struct fs_buf *b, const struct fs_an_series_ref *s)
{
    fs_buf_puts(b, "\"target\":");
    fs_buf_json_str(b, s->target);
    fs_buf_puts(b, ",\"interface\":");
    fs_buf_json_str(b, s->interface);
    fs_buf_puts(b, ",\"tc\":");
    fs_buf_json_str(b, s->tc);
    fs_buf_puts(b, ",\"rule\":");
    fs_buf_json_str(b, s->rule);
    fs_buf_puts(b, ",\"metric\":");
    fs_buf_json_str(b, s->metric);
    /* Only where the series has them (pause frames: sent or received, per priority). */
    if (s->direction[0]) {
        fs_buf_puts(b, ",\"direction\":");
        fs_buf_json_str(b, s->direction);
    }
    if (s->priority[0]) {
        fs_buf_puts(b, ",\"priority\":");
        fs_buf_json_str(b, s->priority);
    }
    fs_buf_printf(b, ",\"kind\":\"%s\"", fs_an_kind_name(s->kind));
}

/* What explains an effect-kind departure (correlate.h). */
static const char *
effect_phrase(const struct fs_an_series_ref *s)
{
    if (s->kind != FS_AN_PFC)
        return "its port was paused by its link partner";
    if (strcmp(s->direction, "tx") == 0)
        return "pauses sent while a port of its switch congested";
    return "pauses received while another switch congested";
}

/* ,"group":{"members":[{"interface":...,"metric":...,"share":...},...]} */
static void
put_group(struct fs_buf *b, const struct fs_departures *d, const struct fs_corr_group *g)
{
    fs_buf_puts(b, ",\"group\":{\"members\":[");
    for (size_t k = 0; k < g->n; k++) {
        const struct fs_an_series_ref *m = &d->series[g->series[k]];
        fs_buf_puts(b, k ? ",{\"interface\":" : "{\"interface\":");
        fs_buf_json_str(b, m->interface);
        fs_buf_printf(b, ",\"share\":%.4f}", g->share[k]);
    }
    fs_buf_puts(b, "]}");
}

/* "; ports departing together: Eth1/21 27%, Eth1/22 25%, ..." into text; the length. */
static int
put_group_text(char *text, size_t len, const struct fs_departures *d, const struct fs_corr_group *g)
{
    int o = snprintf(text, len, "; ports departing together:");
    for (size_t k = 0; k < g->n && o > 0 && (size_t)o < len; k++)
        o += snprintf(text + o, len - (size_t)o, "%s %s %.0f%%", k ? "," : "",
                      d->series[g->series[k]].interface, 100 * g->share[k]);
    return o > 0 && (size_t)o < len ? o : (int)len - 1;
}

static void
put_kinds(struct fs_buf *b, unsigned kinds)
{
    fs_buf_puts(b, "[");
    bool first = true;
    for (int k = 0; k < FS_AN_KIND_COUNT; k++)
        if (kinds & (1u << k)) {
            fs_buf_printf(b, "%s\"%s\"", first ? "" : ",", fs_an_kind_name((enum fs_an_kind)k));
            first = false;
        }
    fs_buf_puts(b, "]");
}

/* ---- POST /api/v1/host-events and GET /api/v1/time ---- */

/* The answer for a token that does not let the request post (0: it does, *who filled). */
static int
authorize_poster(struct fs_analysis *a, const char *authorization, struct fs_buf *out,
                 struct fs_analysis_poster *who)
{
    switch (fs_analysis_check_poster(a, authorization, who)) {
    case FS_ANALYSIS_AUTH_NO_TOKEN:
        return error_doc(out, 403,
                         "posting host events is disabled: no bearer token is configured "
                         "(host_events: { bearer_token_file: ... } or tokens)");
    case FS_ANALYSIS_AUTH_WRONG:
        return error_doc(out, 401, "missing or wrong bearer token");
    case FS_ANALYSIS_AUTH_OK:
        break;
    }
    return 0;
}

int
fs_analysis_authorize_post(struct fs_analysis *a, const char *authorization, struct fs_buf *out)
{
    return authorize_poster(a, authorization, out, NULL);
}

int
fs_analysis_post_host_events(struct fs_analysis *a, const char *authorization, const char *body,
                             size_t len, int64_t now_us, struct fs_buf *out)
{
    struct fs_analysis_poster who;
    int auth = authorize_poster(a, authorization, out, &who);
    if (auth)
        return auth;
    struct fs_host_events_poster as = {who.name, who.name[0] ? who.hosts : NULL, who.quota};
    char err[256];
    struct fs_host_events_receipt r;
    int rc = fs_host_events_post_as(fs_analysis_host_events(a), &as, body, len, now_us * 1000, &r,
                                    err, sizeof err);
    if (rc != 0)
        return error_doc(out, rc, "%s", err);
    fs_buf_reset(out);
    fs_buf_printf(out,
                  "{\"status\":\"success\",\"data\":{\"stored\":%zu,\"duplicates\":%zu,"
                  "\"post_id\":%" PRIu64 ",\"oldest_post_id\":%" PRIu64
                  ",\"evicted_memory_total\":%" PRIu64 "}}",
                  r.stored, r.duplicates, r.post_id, r.oldest_post_id, r.evicted_memory_total);
    if (r.neighbors_given) {
        /* Before the closing "}}": how many neighbours the topology took. */
        out->len -= 2;
        fs_buf_printf(out, ",\"neighbors\":%zu,\"neighbors_refused\":%s}}", r.neighbors,
                      r.neighbors_refused ? "true" : "false");
    }
    return 200;
}

int
fs_analysis_time(int64_t receive_ns, struct fs_buf *out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t send_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    fs_buf_reset(out);
    fs_buf_printf(out, "{\"receive_ns\":%" PRId64 ",\"send_ns\":%" PRId64 "}", receive_ns, send_ns);
    return 200;
}

/* ---- GET /api/v1/correlate ---- */

/* other_host_events: the first MAX_OTHER_EVENTS listed, all counted. */
struct other_ctx {
    struct fs_buf *out;
    size_t n;
};

static int
other_cb(void *arg_, const struct fs_host_event *e, const struct fs_analysis_flow_match *m)
{
    struct other_ctx *o = arg_;
    if (o->n++ >= MAX_OTHER_EVENTS)
        return 0;
    struct fs_buf *b = o->out;
    fs_buf_puts(b, o->n > 1 ? ",{\"host\":" : "{\"host\":");
    fs_buf_json_str(b, e->host);
    fs_buf_puts(b, ",\"kind\":");
    fs_buf_json_str(b, e->kind);
    fs_buf_puts(b, ",\"name\":");
    fs_buf_json_str(b, e->name);
    fs_buf_puts(b, ",\"start\":");
    put_time(b, e->start_ns / 1000);
    fs_buf_puts(b, ",\"end\":");
    put_time(b, e->end_ns / 1000);
    /* how far its times can be trusted: a device event placed by an early clock
       estimate carries that estimate's width */
    fs_buf_printf(b, ",\"host_offset_ns\":%" PRId64 ",\"host_offset_uncertainty_ns\":%" PRId64,
                  e->host_offset_ns, e->host_offset_uncertainty_ns);
    fs_buf_puts(b, ",\"attrs\":{");
    for (uint32_t i = 0; i < e->n_attrs; i++) {
        if (i)
            fs_buf_puts(b, ",");
        fs_buf_json_str(b, e->attrs[i].key);
        fs_buf_puts(b, ":");
        if (e->attrs[i].is_string)
            fs_buf_json_str(b, e->attrs[i].value);
        else
            fs_buf_puts(b, e->attrs[i].value);
    }
    fs_buf_puts(b, "}");
    if (m->has_ports) {
        fs_buf_puts(b, ",\"flow_rules\":[");
        for (size_t r = 0; r < m->n; r++) {
            if (r)
                fs_buf_puts(b, ",");
            fs_buf_json_str(b, m->names[r]);
        }
        fs_buf_puts(b, "]");
    }
    fs_buf_puts(b, "}");
    return 0;
}

static int
parse_slow(const char *s, double *pct, double *factor)
{
    char *end;
    *pct = 0;
    *factor = 0;
    if (s[0] == 'p') {
        *pct = strtod(s + 1, &end);
        return (*end == '\0' && *pct > 0 && *pct < 100) ? 0 : -1;
    }
    *factor = strtod(s, &end);
    return (end != s && end[0] == 'x' && end[1] == '\0' && *factor > 0) ? 0 : -1;
}

/* The clocks behind an answer's times: every source of each target the answer names,
 * with its measured offset and what its bounds rest on (an assumed delivery delay is
 * stated, not hidden in the error bar). */
struct clocks_ctx {
    struct fs_buf *out;
    const char **targets;
    size_t n_targets;
    size_t n;
};

static int
clocks_cb(void *arg_, const struct fs_instance_info *in)
{
    struct clocks_ctx *c = arg_;
    size_t i = 0;
    while (i < c->n_targets && strcmp(c->targets[i], in->target) != 0)
        i++;
    if (i == c->n_targets)
        return 0;
    fs_buf_puts(c->out, c->n++ ? ",{\"target\":" : "{\"target\":");
    fs_buf_json_str(c->out, in->target);
    fs_buf_puts(c->out, ",\"source\":");
    fs_buf_json_str(c->out, in->source ? in->source : "");
    if (in->clock_known) {
        fs_buf_printf(c->out, ",\"offset_ms\":%.3f,\"uncertainty_ms\":%.3f,\"basis\":",
                      in->clock_offset_seconds * 1e3, in->clock_uncertainty_seconds * 1e3);
        fs_buf_json_str(c->out, in->clock_basis && *in->clock_basis
                                    ? in->clock_basis
                                    : "bounds reported by the driver");
    } else {
        fs_buf_printf(c->out, ",\"offset_ms\":null,\"uncertainty_ms\":%.3f,\"basis\":",
                      (double)in->last_duration_us / 2e3);
        fs_buf_json_str(c->out, "no device clock measured: samples placed within half a poll");
    }
    fs_buf_puts(c->out, "}");
    return 0;
}

static void
put_clocks(struct fs_buf *out, struct fs_store *st, const char **targets, size_t n)
{
    struct clocks_ctx c = {out, targets, n, 0};
    fs_buf_puts(out, ",\"clocks\":[");
    if (st)
        fs_store_foreach_instance(st, clocks_cb, &c);
    fs_buf_puts(out, "]");
}

/* Adds t to the set (by pointer text); false when the set is full. */
static void
target_set_add(const char **set, size_t *n, size_t cap, const char *t)
{
    if (!t || !*t)
        return;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(set[i], t) == 0)
            return;
    if (*n < cap)
        set[(*n)++] = t;
}

/* "history":{...} of an answer, when analysis.history is configured. */
static void
put_history(struct fs_buf *out, const struct fs_analysis_history_use *hu)
{
    if (!hu->used)
        return;
    fs_buf_puts(out, "\"history\":{\"server\":");
    fs_buf_json_str(out, hu->server);
    fs_buf_printf(out,
                  ",\"step_s\":%.3f,\"series\":%" PRIu64 ",\"refined\":%" PRIu64
                  ",\"restamped\":%" PRIu64 ",\"duplicates\":%" PRIu64 ",\"points\":%" PRIu64,
                  hu->info.step_us / 1e6, hu->info.series, hu->info.refined, hu->info.restamped,
                  hu->info.duplicates, hu->info.points);
    /* Polls the scrape never stored: a stall inside one is diluted into the next stored
       increase and its watermark lost, whatever the analysis does; say so, and how to
       keep them (a tenth or more is the scrape slower than the poll, not an outage). */
    uint64_t ps = hu->info.polls_stored, pu = hu->info.polls_unstored;
    fs_buf_printf(out, ",\"polls_stored\":%" PRIu64 ",\"polls_unstored\":%" PRIu64, ps, pu);
    if (pu && pu * 10 >= ps + pu)
        fs_buf_printf(out,
                      ",\"warning\":\"%.0f%% of the polls in the history were never stored: "
                      "the TSDB scrapes /metrics less often than the switches are polled, so a "
                      "stall inside a skipped poll shows only diluted in the next increase, "
                      "its queue watermark not at all; scrape at the poll interval or "
                      "shorter, or send remote_write\"",
                      100.0 * (double)pu / (double)(ps + pu));
    fs_buf_puts(out, ",\"cached_until\":");
    if (hu->info.cached_until_us)
        put_time(out, hu->info.cached_until_us);
    else
        fs_buf_puts(out, "null");
    fs_buf_puts(out, ",\"error\":");
    if (hu->info.error[0])
        fs_buf_json_str(out, hu->info.error);
    else
        fs_buf_puts(out, "null");
    fs_buf_puts(out, "},");
}

/* kind= (default nccl) and slow= (default p99) of /correlate and /incidents: 0, or the
   400 written to out. */
static int
parse_slow_args(const struct fs_analysis_arg *args, size_t n, const char **kind, const char **slow,
                double *pct, double *factor, struct fs_buf *out)
{
    *kind = arg(args, n, "kind");
    if (!*kind || !**kind)
        *kind = "nccl";
    *slow = arg(args, n, "slow");
    if (!*slow)
        *slow = "p99";
    if (parse_slow(*slow, pct, factor) != 0)
        return error_doc(out, 400, "slow: want pNN (0 < NN < 100) or Nx (N > 0), not \"%.32s\"",
                         *slow);
    return 0;
}

/* The endpoints below check every parameter first; with check_only they stop there
 * (0, or the error's status with its document in out) without touching the store. */
static int
correlate(struct fs_analysis *a, struct fs_store *st, const struct fs_analysis_arg *args, size_t n,
          int64_t now_us, bool check_only, int64_t *end_out, struct fs_buf *out)
{
    static const char *const known[] = {"start",  "end", "kind",  "name",      "slow",
                                        "window", "top", "limit", "dump_time", NULL};
    int rc = check_args(args, n, known, "window", out);
    if (rc)
        return rc;
    int64_t start, end;
    if ((rc = parse_range(args, n, now_us, 15 * 60 * US, 24 * 3600 * US, &start, &end, out)))
        return rc;
    const char *kind, *slow;
    double pct, factor;
    if ((rc = parse_slow_args(args, n, &kind, &slow, &pct, &factor, out)))
        return rc;
    struct fs_corr_opts co;
    fs_corr_opts_default(&co);
    const char *top = arg(args, n, "top");
    if (top) {
        char *e;
        long t = strtol(top, &e, 10);
        if (*e || t < 1 || t > FS_CORR_TOP)
            return error_doc(out, 400, "top: want 1..%d", FS_CORR_TOP);
        co.top = (size_t)t;
    }
    size_t limit = 200;
    const char *lim = arg(args, n, "limit");
    if (lim) {
        char *e;
        long l = strtol(lim, &e, 10);
        if (*e || l < 0 || l > 100000)
            return error_doc(out, 400, "limit: want 0..100000");
        limit = (size_t)l;
    }
    /* Explicit windows, or the slow host events of the range. */
    struct fs_corr_window *w = malloc(FS_ANALYSIS_MAX_WINDOWS * sizeof *w);
    struct fs_analysis_correlate_req req = {.kind = kind, .pct = pct, .factor = factor, .co = co};
    req.name = arg(args, n, "name");
    const char *dt = arg(args, n, "dump_time");
    if (dt && strcmp(dt, "include") != 0 && strcmp(dt, "exclude") != 0) {
        free(w);
        return error_doc(out, 400, "dump_time: want include or exclude");
    }
    req.dump_time = dt && !strcmp(dt, "include");
    size_t nw = 0;
    bool explicit = false;
    if (!w)
        return error_doc(out, 500, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (strcmp(args[i].key, "window") != 0)
            continue;
        explicit = true;
        const char *v = args[i].value ? args[i].value : "";
        const char *comma = strchr(v, ',');
        char s1[64], s2[64];
        int64_t ws, we;
        if (!comma || (size_t)(comma - v) >= sizeof s1 || strlen(comma + 1) >= sizeof s2) {
            free(w);
            return error_doc(out, 400, "window: want START,END");
        }
        memcpy(s1, v, (size_t)(comma - v));
        s1[comma - v] = '\0';
        snprintf(s2, sizeof s2, "%s", comma + 1);
        if (fs_api_parse_time(s1, &ws) != 0 || fs_api_parse_time(s2, &we) != 0 || ws > we ||
            ws < -MAX_TIME_US || we > MAX_TIME_US) {
            free(w);
            return error_doc(out, 400, "window \"%.64s\": want START,END with START <= END", v);
        }
        if (nw == FS_ANALYSIS_MAX_WINDOWS) {
            free(w);
            return error_doc(out, 400, "more than %d windows", FS_ANALYSIS_MAX_WINDOWS);
        }
        w[nw] = (struct fs_corr_window){.start_us = ws, .end_us = we, .ref = nw};
        nw++;
        if (ws < start)
            start = ws;
        if (we > end)
            end = we;
    }
    req.start_us = start;
    req.end_us = end;
    if (end_out)
        *end_out = end;
    req.windows = w;
    req.n_windows = nw;
    if (check_only) {
        free(w);
        return 0;
    }
    char err[128];
    struct fs_analysis_correlation *c = NULL;
    rc = fs_analysis_run_correlate(a, st, &req, now_us, &c, err, sizeof err);
    free(w);
    if (rc != 0)
        return error_doc(out, rc == FS_ANALYSIS_BUSY ? 503 : 500, "%s", err);
    const struct fs_departures *d = c->departures;
    const struct fs_corr_report *r = c->report;
    nw = c->n_windows;

    /* The name the summary speaks of: the slow events' common name, if they share one. */
    const char *subject = explicit ? "windows" : NULL;
    for (size_t i = 0; !explicit && i < nw; i++) {
        const char *nm = c->events[c->windows[i].ref].name;
        if (!subject)
            subject = nm;
        else if (strcmp(subject, nm) != 0) {
            subject = "events";
            break;
        }
    }
    if (!subject)
        subject = "events";

    fs_buf_reset(out);
    fs_buf_puts(out, "{\"status\":\"success\",\"data\":{\"start\":");
    put_time(out, start);
    fs_buf_puts(out, ",\"end\":");
    put_time(out, end);
    fs_buf_puts(out, ",\"kind\":");
    fs_buf_json_str(out, kind);
    fs_buf_puts(out, ",\"slow\":");
    fs_buf_json_str(out, explicit ? "windows" : slow);
    fs_buf_printf(out,
                  ",\"events_considered\":%zu,\"events_at_dump_time_left_out\":%zu,"
                  "\"windows\":%zu,\"series_scanned\":%zu,\"series_departing\":%zu,",
                  c->n_events, c->left_out_dump_time, nw, d->series_scanned, d->n_series);
    put_history(out, &c->history);
    fs_buf_puts(out, "\"summary\":[");
    for (size_t i = 0, listed = 0; i < r->n_aggregates && listed < 20; i++) {
        const struct fs_corr_aggregate *ag = &r->aggregates[i];
        if (ag->grouped)
            continue; /* listed with the member that leads its group */
        const struct fs_an_series_ref *s = &d->series[ag->series];
        char port[600], text[1400];
        fs_an_port_text(port, sizeof port, s);
        int o = snprintf(
            text, sizeof text, "%s %s during %zu of %zu slow %s (%zu of its %zu elsewhere)", port,
            fs_an_kind_phrase(s->kind), ag->departs, nw, subject, ag->runs_outside, ag->runs_total);
        if (ag->group >= 0 && o > 0 && (size_t)o < sizeof text)
            o += put_group_text(text + o, sizeof text - (size_t)o, d, &r->groups[ag->group]);
        if (ag->explained && o > 0 && (size_t)o < sizeof text)
            snprintf(text + o, sizeof text - (size_t)o, "; an effect in %zu of them: %s",
                     ag->explained, effect_phrase(s));
        fs_buf_puts(out, listed++ ? ",{" : "{");
        put_series_ref(out, s);
        fs_buf_printf(out,
                      ",\"evidence\":%.4f,\"departs\":%zu,\"explained\":%zu,\"first\":%zu,"
                      "\"in_top\":%zu,\"of\":%zu,\"runs_total\":%zu,\"runs_outside\":%zu,"
                      "\"max_z\":",
                      ag->evidence, ag->departs, ag->explained, ag->first, ag->in_top, nw,
                      ag->runs_total, ag->runs_outside);
        put_num(out, ag->max_z);
        if (ag->group >= 0)
            put_group(out, d, &r->groups[ag->group]);
        fs_buf_puts(out, ",\"text\":");
        fs_buf_json_str(out, text);
        fs_buf_puts(out, "}");
    }
    fs_buf_puts(out, "],\"events\":[");
    for (size_t i = 0; i < r->n_results && i < limit; i++) {
        const struct fs_corr_result *res = &r->results[i];
        fs_buf_puts(out, i ? ",{" : "{");
        if (!explicit) {
            const struct fs_analysis_event *e = &c->events[res->window.ref];
            fs_buf_puts(out, "\"host\":");
            fs_buf_json_str(out, e->host);
            fs_buf_puts(out, ",\"kind\":");
            fs_buf_json_str(out, e->kind);
            fs_buf_puts(out, ",\"name\":");
            fs_buf_json_str(out, e->name);
            if (e->poster && e->poster[0]) {
                fs_buf_puts(out, ",\"posted_by\":");
                fs_buf_json_str(out, e->poster);
            }
            /* start_ns/end_ns: the collector's axis; host_start_ns: as the host posted it. */
            fs_buf_printf(out,
                          ",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64
                          ",\"host_start_ns\":%" PRId64 ",\"duration_ms\":%.3f,"
                          "\"host_offset_ns\":%" PRId64 ",\"host_offset_uncertainty_ns\":%" PRId64
                          ",",
                          e->start_ns, e->end_ns, e->start_ns + e->host_offset_ns,
                          (double)(e->end_ns - e->start_ns) / 1e6, e->host_offset_ns,
                          e->host_offset_uncertainty_ns);
        }
        if (c->slow_ranks)
            fs_buf_printf(out, "\"slow_ranks\":%zu,\"path_ports\":%zu,", c->slow_ranks[i],
                          res->window.n_path);
        fs_buf_puts(out, "\"start\":");
        put_time(out, res->window.start_us);
        fs_buf_puts(out, ",\"end\":");
        put_time(out, res->window.end_us);
        fs_buf_puts(out, ",\"suspects\":[");
        for (size_t k = 0; k < res->n_top; k++) {
            const struct fs_corr_suspect *sp = &res->top[k];
            fs_buf_puts(out, k ? ",{" : "{");
            put_series_ref(out, &d->series[sp->series]);
            fs_buf_puts(out, ",\"peak\":");
            put_num(out, sp->peak_value);
            fs_buf_puts(out, ",\"baseline\":");
            put_num(out, sp->baseline);
            fs_buf_puts(out, ",\"z\":");
            put_num(out, sp->peak_z);
            fs_buf_puts(out, ",\"peak_time\":");
            put_time(out, sp->peak_us);
            fs_buf_printf(out,
                          ",\"evidence\":%.4f,\"explained\":%s,\"lag_ms\":%.3f,"
                          "\"clock_uncertainty_ms\":%.3f",
                          sp->evidence, sp->explained ? "true" : "false", (double)sp->lag_us / 1e3,
                          (double)sp->uncertainty_us / 1e3);
            if (sp->group >= 0)
                put_group(out, d, &r->groups[sp->group]);
            if (sp->paused_by != UINT32_MAX) {
                fs_buf_puts(out, ",\"paused_by\":{");
                put_series_ref(out, &d->series[sp->paused_by]);
                fs_buf_puts(out, "}");
            }
            if (sp->on_path >= 0)
                fs_buf_printf(out, ",\"on_path\":%s", sp->on_path ? "true" : "false");
            fs_buf_puts(out, "}");
        }
        /* The first suspect's propagation tree: which port paused which, by onset. */
        fs_buf_puts(out, "],\"propagation\":[");
        for (size_t k = 0; k < res->n_tree; k++) {
            const struct fs_corr_edge *e = &res->tree[k];
            fs_buf_puts(out, k ? ",{" : "{");
            put_series_ref(out, &d->series[e->series]);
            fs_buf_puts(out, ",\"paused_by\":{");
            put_series_ref(out, &d->series[e->paused_by]);
            fs_buf_puts(out, "},\"onset\":");
            put_time(out, e->onset_us);
            fs_buf_printf(out, ",\"hop\":%u}", (unsigned)e->hop);
        }
        fs_buf_printf(out, "],\"propagation_total\":%zu", res->tree_total);
        fs_buf_puts(out, ",\"other_host_events\":[");
        struct other_ctx oc = {out, 0};
        fs_analysis_foreach_other_event(a, res->window.start_us - co.lead_us,
                                        res->window.end_us + co.lag_us, kind, other_cb, &oc);
        fs_buf_printf(out, "],\"other_host_events_total\":%zu}", oc.n);
        if (out->overflow)
            break;
    }
    fs_buf_printf(out, "],\"events_listed\":%zu", r->n_results < limit ? r->n_results : limit);
    {
        /* Targets named by the summary and the listed suspects (bounded like them). */
        const char *tg[64];
        size_t ntg = 0;
        for (size_t i = 0; i < r->n_aggregates && i < 20; i++)
            target_set_add(tg, &ntg, 64, d->series[r->aggregates[i].series].target);
        for (size_t i = 0; i < r->n_results && i < limit; i++)
            for (size_t k = 0; k < r->results[i].n_top; k++)
                target_set_add(tg, &ntg, 64, d->series[r->results[i].top[k].series].target);
        put_clocks(out, st, tg, ntg);
    }
    fs_buf_puts(out, "}}");
    fs_analysis_correlation_free(c);
    if (out->overflow)
        return overflow_doc(out);
    return 200;
}

/* ---- GET /api/v1/incidents ---- */

static void
put_recurrence_text(char *text, size_t len, const struct fs_departures *d,
                    const struct fs_recurrence *g)
{
    char port[600];
    fs_an_port_text(port, sizeof port, &d->series[g->series[0]]);
    size_t o = (size_t)snprintf(text, len, "every %.3g s ± %.2g s on %s (", g->period_us / 1e6,
                                g->spread_us / 1e6, port);
    bool first = true;
    for (int k = 0; k < FS_AN_KIND_COUNT && o < len; k++)
        if (g->kinds & (1u << k)) {
            o += (size_t)snprintf(text + o, len - o, "%s%s", first ? "" : ", ",
                                  fs_an_kind_phrase((enum fs_an_kind)k));
            first = false;
        }
    if (o < len)
        snprintf(text + o, len - o, ")");
}
static int
incidents(struct fs_analysis *a, struct fs_store *st, const struct fs_analysis_arg *args, size_t n,
          int64_t now_us, bool check_only, int64_t *end_out, struct fs_buf *out)
{
    static const char *const known[] = {"start", "end", "limit", "kind", "slow", NULL};
    int rc = check_args(args, n, known, NULL, out);
    if (rc)
        return rc;
    const char *kind, *slow;
    double pct, factor;
    if ((rc = parse_slow_args(args, n, &kind, &slow, &pct, &factor, out)))
        return rc;
    /* Not fs_analysis_get_opts: it waits for a running analysis, and the check runs
     * when the request arrives. */
    int64_t horizon_us, retention_us;
    fs_analysis_get_range_limits(a, &horizon_us, &retention_us);
    int64_t start, end;
    if ((rc = parse_range(args, n, now_us, horizon_us, retention_us, &start, &end, out)))
        return rc;
    size_t limit = 200;
    const char *lim = arg(args, n, "limit");
    if (lim) {
        char *e;
        long l = strtol(lim, &e, 10);
        if (*e || l < 0 || l > 100000)
            return error_doc(out, 400, "limit: want 0..100000");
        limit = (size_t)l;
    }
    if (check_only)
        return 0;
    if (end_out)
        *end_out = end;
    struct fs_analysis_incidents_req req = {start, end, kind, pct, factor};
    struct fs_analysis_incident_findings *f = NULL;
    char err[128];
    rc = fs_analysis_run_incidents(a, st, &req, now_us, &f, err, sizeof err);
    if (rc != 0)
        return error_doc(out, rc == FS_ANALYSIS_BUSY ? 503 : 500, "%s", err);
    const struct fs_departures *d = f->departures;
    const struct fs_incident_report *r = f->report;
    const struct fs_analysis_host_match *hm = &f->host;
    const struct fs_episode_log_stats *ls = &f->log;

    fs_buf_reset(out);
    fs_buf_puts(out, "{\"status\":\"success\",\"data\":{\"start\":");
    put_time(out, start);
    fs_buf_puts(out, ",\"end\":");
    put_time(out, end);
    fs_buf_printf(out, ",\"series_scanned\":%zu,\"series_departing\":%zu,\"ring_scanned_from\":",
                  d->series_scanned, d->n_series);
    put_time(out, d->ring_scan_start_us);
    fs_buf_puts(out, ",");
    put_history(out, &f->history);
    fs_buf_printf(out, "\"episode_log\":{\"episodes\":%zu,\"oldest\":", ls->runs);
    if (ls->runs)
        put_time(out, ls->oldest_start_us);
    else
        fs_buf_puts(out, "null");
    fs_buf_printf(out, ",\"clamped_future\":%" PRIu64, ls->clamped_future);
    fs_buf_puts(out, "},\"host_events\":{\"kind\":");
    fs_buf_json_str(out, kind);
    fs_buf_puts(out, ",\"slow\":");
    fs_buf_json_str(out, slow);
    fs_buf_printf(out, ",\"considered\":%zu,\"slow_events\":%zu,\"left_out_dump_time\":%zu}",
                  hm->considered, hm->n_slow, hm->left_out);
    fs_buf_puts(out, ",\"recurring\":[");
    for (size_t i = 0; i < r->n_groups; i++) {
        const struct fs_recurrence *g = &r->groups[i];
        char text[1200];
        put_recurrence_text(text, sizeof text, d, g);
        if (hm->n_slow) {
            size_t tl = strlen(text);
            snprintf(text + tl, sizeof text - tl, "; a slow %s event in %zu of its %zu occurrences",
                     kind, hm->occ_with_slow[i], g->occurrences);
        }
        fs_buf_puts(out, i ? ",{\"series\":[" : "{\"series\":[");
        for (size_t j = 0; j < g->n_series && j < 64; j++) {
            fs_buf_puts(out, j ? ",{" : "{");
            put_series_ref(out, &d->series[g->series[j]]);
            fs_buf_puts(out, "}");
        }
        fs_buf_puts(out, "],\"kinds\":");
        put_kinds(out, g->kinds);
        fs_buf_printf(out,
                      ",\"occurrences\":%zu,\"period_s\":%.6f,\"spread_s\":%.6f,"
                      "\"confidence\":%.6f,\"first\":",
                      g->occurrences, g->period_us / 1e6, g->spread_us / 1e6, g->confidence);
        put_time(out, g->first_us);
        fs_buf_puts(out, ",\"last\":");
        put_time(out, g->last_us);
        fs_buf_puts(out, ",\"next_expected\":");
        put_time(out, g->next_us);
        fs_buf_printf(out,
                      ",\"next_expected_in_s\":%.3f,\"host_slow\":{\"occurrences\":%zu,"
                      "\"events\":%zu},\"text\":",
                      (double)(g->next_us - now_us) / 1e6, hm->n_slow ? hm->occ_with_slow[i] : 0,
                      hm->n_slow ? hm->slow_during[i] : 0);
        fs_buf_json_str(out, text);
        fs_buf_puts(out, "}");
    }
    fs_buf_printf(out, "],\"episodes_total\":%zu,\"episodes\":[", r->n_episodes);
    /* The most recent episodes. */
    size_t first = r->n_episodes > limit ? r->n_episodes - limit : 0;
    for (size_t i = first; i < r->n_episodes; i++) {
        const struct fs_episode *e = &r->episodes[i];
        fs_buf_puts(out, i > first ? ",{\"start\":" : "{\"start\":");
        put_time(out, e->start_us);
        fs_buf_puts(out, ",\"end\":");
        put_time(out, e->end_us);
        fs_buf_puts(out, ",\"peak_z\":");
        put_num(out, e->peak_z);
        fs_buf_puts(out, ",\"kinds\":");
        put_kinds(out, e->kinds);
        fs_buf_printf(out, ",\"series_total\":%zu,\"series\":[", e->n_members);
        for (size_t j = 0; j < e->n_members && j < 10; j++) {
            fs_buf_puts(out, j ? ",{" : "{");
            put_series_ref(out, &d->series[e->members[j].series]);
            fs_buf_puts(out, ",\"z\":");
            put_num(out, e->members[j].peak_z);
            fs_buf_puts(out, "}");
        }
        fs_buf_puts(out, "]}");
        if (out->overflow)
            break;
    }
    fs_buf_puts(out, "]}}");
    fs_analysis_incident_findings_free(f);
    if (out->overflow)
        return overflow_doc(out);
    return 200;
}

/* ---- GET /api/v1/export/trace ---- */

/* match[]: any of them chooses a series. */
struct sel_set {
    struct fs_selector *sel[MAX_MATCH];
    size_t n;
};

static void
free_sels(struct sel_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        fs_selector_free(s->sel[i]);
}

static bool
sels_match(void *arg_, const struct fs_series_info *s)
{
    const struct sel_set *ss = arg_;
    bool any = false;
    for (size_t i = 0; i < ss->n && !any; i++)
        any = fs_selector_match(ss->sel[i], s->name, s->labels, s->n_labels);
    return any;
}

static int
export_trace(struct fs_analysis *a, struct fs_store *st, const struct fs_analysis_arg *args,
             size_t n, int64_t now_us, bool check_only, struct fs_buf *out)
{
    static const char *const known[] = {"start", "end", "match[]", NULL};
    int rc = check_args(args, n, known, "match[]", out);
    if (rc)
        return rc;
    int64_t start, end;
    if ((rc = parse_range(args, n, now_us, 5 * 60 * US, 6 * 3600 * US, &start, &end, out)))
        return rc;
    struct sel_set sels = {0};
    for (size_t i = 0; i < n; i++) {
        if (strcmp(args[i].key, "match[]") != 0)
            continue;
        char err[256];
        const char *v = args[i].value ? args[i].value : "";
        if (sels.n == MAX_MATCH) {
            free_sels(&sels);
            return error_doc(out, 400, "more than %d match[]", MAX_MATCH);
        }
        if (fs_selector_parse(v, strlen(v), &sels.sel[sels.n], err, sizeof err) != 0) {
            free_sels(&sels);
            return error_doc(out, 400, "match[]: %s", err);
        }
        sels.n++;
    }
    if (check_only) {
        free_sels(&sels);
        return 0;
    }
    struct fs_analysis_trace_req req = {start, end, sels.n ? sels_match : NULL, &sels};
    char err[128];
    rc = fs_analysis_run_trace(a, st, &req, out, err, sizeof err);
    free_sels(&sels);
    if (rc == FS_ANALYSIS_TOO_LARGE)
        return overflow_doc(out);
    if (rc != 0)
        return error_doc(out, rc == FS_ANALYSIS_BUSY ? 503 : 500, "%s", err);
    return 200;
}

typedef int (*answer_fn)(struct fs_analysis *a, struct fs_store *st,
                         const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                         bool check_only, int64_t *end_out, struct fs_buf *out);

/* An answer from the service's cache (analysis/service.h) when the same request (the
   endpoint and its arguments as sent, in their order) was answered within the refresh
   period; else computed, and kept when it succeeded. */
static int
cached(struct fs_analysis *a, struct fs_store *st, const char *endpoint, answer_fn fn,
       const struct fs_analysis_arg *args, size_t n, int64_t now_us, struct fs_buf *out)
{
    struct fs_buf key;
    fs_buf_init(&key, 8192);
    fs_buf_puts(&key, endpoint);
    for (size_t i = 0; i < n; i++) {
        fs_buf_append(&key, "?", 1);
        fs_buf_puts(&key, args[i].key);
        if (args[i].value) {
            fs_buf_append(&key, "=", 1);
            fs_buf_puts(&key, args[i].value);
        }
    }
    bool keyed = !key.overflow && key.data;
    if (keyed && fs_analysis_cache_get(a, key.data, now_us, out)) {
        fs_buf_free(&key);
        return 200;
    }
    struct fs_analysis_cache_stamp stamp;
    fs_analysis_cache_stamp(a, &stamp);
    int64_t end = now_us;
    int status = fn(a, st, args, n, now_us, false, &end, out);
    /* An answer reaching into the last minute changes as samples come: kept briefly. */
    int64_t keep =
        end >= now_us - 60 * 1000000LL ? FS_ANALYSIS_CACHE_LIVE_US : FS_ANALYSIS_CACHE_US;
    if (keyed && status == 200 && !out->overflow)
        fs_analysis_cache_put(a, key.data, now_us, keep, &stamp, out->data, out->len);
    fs_buf_free(&key);
    return status;
}

int
fs_analysis_correlate(struct fs_analysis *a, struct fs_store *st,
                      const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                      struct fs_buf *out)
{
    return cached(a, st, "correlate", correlate, args, n, now_us, out);
}

int
fs_analysis_incidents(struct fs_analysis *a, struct fs_store *st,
                      const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                      struct fs_buf *out)
{
    return cached(a, st, "incidents", incidents, args, n, now_us, out);
}

int
fs_analysis_export_trace(struct fs_analysis *a, struct fs_store *st,
                         const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                         struct fs_buf *out)
{
    return export_trace(a, st, args, n, now_us, false, out);
}

int
fs_analysis_check_get(struct fs_analysis *a, enum fs_analysis_get which,
                      const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                      struct fs_buf *out)
{
    switch (which) {
    case FS_ANALYSIS_GET_CORRELATE:
        return correlate(a, NULL, args, n, now_us, true, NULL, out);
    case FS_ANALYSIS_GET_INCIDENTS:
        return incidents(a, NULL, args, n, now_us, true, NULL, out);
    default:
        return export_trace(a, NULL, args, n, now_us, true, out);
    }
}
