/* The JSON query API and the HTML index (see api.h). */
#include "http/api.h"

#include <json-c/json.h>
#include <math.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/expo.h"
#include "util/clock.h"
#include "util/errf.h"

#define MAX_QUERY_ARGS 64
#define MAX_QUERY_STRING (64 * 1024)
/* |t| beyond this (about year 5138) is refused, which keeps µs arithmetic in range. */
#define MAX_ABS_SECONDS 100000000000LL

static bool
isdig(char c)
{
    return c >= '0' && c <= '9';
}

/* Reads exactly n digits at s into *v. */
static bool
digits(const char *s, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        if (!isdig(s[i]))
            return false;
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return true;
}

/* An optional ".digits" at *p as microseconds (digits past the sixth are read and
 * dropped); advances *p. Returns -1 for a dot without digits. */
static int
parse_fraction(const char **pp, int64_t *us)
{
    const char *p = *pp;
    int64_t frac = 0;
    int nd = 0;
    if (*p == '.') {
        p++;
        if (!isdig(*p))
            return -1;
        for (; isdig(*p); p++) {
            if (nd < 6) {
                frac = frac * 10 + (*p - '0');
                nd++;
            }
        }
        for (; nd < 6; nd++)
            frac *= 10;
    }
    *us = frac;
    *pp = p;
    return 0;
}

/* Unix seconds with an optional decimal fraction, converted without a double. */
static int
parse_unix_exact(const char *s, int64_t *us)
{
    bool neg = *s == '-';
    const char *p = s + neg;
    int64_t sec = 0, frac = 0;
    if (!isdig(*p))
        return -1;
    for (; isdig(*p); p++) {
        sec = sec * 10 + (*p - '0');
        if (sec > MAX_ABS_SECONDS)
            return -1;
    }
    if (parse_fraction(&p, &frac) != 0 || *p)
        return -1;
    int64_t v = sec * 1000000 + frac;
    *us = neg ? -v : v;
    return 0;
}

static int
days_in_month(int y, int m)
{
    static const int d[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : d[m - 1];
}

/* RFC 3339: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM). */
static int
parse_rfc3339(const char *s, int64_t *us)
{
    int Y, M, D, h, m, sec;
    if (strlen(s) < 20 || !digits(s, 4, &Y) || s[4] != '-' || !digits(s + 5, 2, &M) ||
        s[7] != '-' || !digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't') ||
        !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &m) || s[16] != ':' ||
        !digits(s + 17, 2, &sec))
        return -1;
    if (M < 1 || M > 12 || D < 1 || D > days_in_month(Y, M) || h > 23 || m > 59 || sec > 59)
        return -1;
    const char *p = s + 19;
    int64_t frac = 0;
    if (parse_fraction(&p, &frac) != 0)
        return -1;
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return -1;
        off = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p)
        return -1;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    *us = ((int64_t)t - off) * 1000000 + frac;
    return 0;
}

int
fs_api_parse_time(const char *s, int64_t *us)
{
    if (!s || !*s)
        return -1;
    if (parse_unix_exact(s, us) == 0)
        return 0;
    if (parse_rfc3339(s, us) == 0)
        return 0;
    /* Other float spellings Prometheus takes ("1.7e9"); only these go through a double. */
    char *end = NULL;
    double d = strtod(s, &end);
    if (end == s || *end || !isfinite(d) || fabs(d) > (double)MAX_ABS_SECONDS || strchr(s, 'x') ||
        strchr(s, 'X'))
        return -1;
    *us = (int64_t)llround(d * 1e6);
    return 0;
}

void
fs_api_format_rfc3339(int64_t ts_us, char *out, size_t len)
{
    int64_t sec = ts_us / 1000000, frac = ts_us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        sec--;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    char base[32];
    gmtime_r(&t, &tm);
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, len, "%s.%06lldZ", base, (long long)frac);
}

void
fs_raw_query_free(struct fs_raw_query *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->n_sel; i++)
        fs_selector_free(q->sel[i]);
    q->n_sel = 0;
}

int
fs_raw_query_parse(const struct fs_query_arg *args, size_t n, int64_t now_us,
                   struct fs_raw_query *q, char *err, size_t errlen)
{
    const char *start = NULL, *end = NULL, *limit = NULL;
    size_t regex_bytes = 0;
    memset(q, 0, sizeof *q);
    q->limit = FS_RAW_MAX_POINTS;
    for (size_t i = 0; i < n; i++) {
        const char *k = args[i].key, *v = args[i].value;
        const char **slot = NULL;
        if (strcmp(k, "match[]") == 0) {
            if (!v || !*v) {
                fs_errf(err, errlen, "match[]: empty selector");
                goto fail;
            }
            if (q->n_sel >= FS_RAW_MAX_MATCH) {
                fs_errf(err, errlen, "more than %d match[] parameters", FS_RAW_MAX_MATCH);
                goto fail;
            }
            char why[200];
            if (fs_selector_parse(v, strlen(v), &q->sel[q->n_sel], why, sizeof why) != 0) {
                fs_errf(err, errlen, "match[]: bad selector: %s", why);
                goto fail;
            }
            regex_bytes += fs_selector_regex_bytes(q->sel[q->n_sel]);
            q->n_sel++;
            if (regex_bytes > FS_RAW_MAX_REGEX_BYTES) {
                fs_errf(err, errlen,
                        "match[]: the regexes of this query would take more than %d "
                        "MiB compiled",
                        FS_RAW_MAX_REGEX_BYTES >> 20);
                goto fail;
            }
            continue;
        }
        if (strcmp(k, "start") == 0)
            slot = &start;
        else if (strcmp(k, "end") == 0)
            slot = &end;
        else if (strcmp(k, "limit") == 0)
            slot = &limit;
        if (!slot) {
            fs_errf(err, errlen, "unknown parameter \"%.64s\"", k);
            goto fail;
        }
        if (*slot) {
            fs_errf(err, errlen, "parameter %s given twice", k);
            goto fail;
        }
        *slot = v ? v : "";
    }
    if (q->n_sel == 0) {
        fs_errf(err, errlen, "match[] is required");
        goto fail;
    }
    q->end_us = now_us;
    if (end && fs_api_parse_time(end, &q->end_us) != 0) {
        fs_errf(err, errlen, "end: cannot parse \"%.64s\" as unix seconds or RFC 3339", end);
        goto fail;
    }
    q->start_us = q->end_us - FS_RAW_DEFAULT_RANGE_US;
    if (start && fs_api_parse_time(start, &q->start_us) != 0) {
        fs_errf(err, errlen, "start: cannot parse \"%.64s\" as unix seconds or RFC 3339", start);
        goto fail;
    }
    if (q->start_us > q->end_us) {
        fs_errf(err, errlen, "start is after end");
        goto fail;
    }
    if (limit) {
        uint64_t l = 0;
        const char *p = limit;
        for (; isdig(*p) && l <= FS_RAW_MAX_POINTS; p++)
            l = l * 10 + (uint64_t)(*p - '0');
        if (p == limit || *p || l == 0 || l > FS_RAW_MAX_POINTS) {
            fs_errf(err, errlen, "limit: must be a whole number in 1..%d", FS_RAW_MAX_POINTS);
            goto fail;
        }
        q->limit = l;
    }
    return 0;
fail:
    fs_raw_query_free(q);
    return -1;
}

/* x-www-form-urlencoded: '+' is a space, then %XX; MHD's own unescaper does the latter.
 * False when the result holds a NUL (%00), which would silently cut the value. */
static bool
form_decode(char *s)
{
    for (char *p = s; *p; p++)
        if (*p == '+')
            *p = ' ';
    return MHD_http_unescape(s) == strlen(s);
}

int
fs_raw_query_parse_string(const char *qs, size_t len, int64_t now_us, struct fs_raw_query *q,
                          char *err, size_t errlen)
{
    struct fs_query_arg args[MAX_QUERY_ARGS];
    size_t n = 0;
    int rc = -1;
    memset(q, 0, sizeof *q);
    if (len > MAX_QUERY_STRING) {
        fs_errf(err, errlen, "query string too long");
        return -1;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        fs_errf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(copy, qs, len);
    copy[len] = '\0';
    if (strlen(copy) != len) {
        fs_errf(err, errlen, "NUL byte in query string");
        goto cleanup;
    }
    for (char *save = NULL, *tok = strtok_r(copy, "&", &save); tok;
         tok = strtok_r(NULL, "&", &save)) {
        if (n >= MAX_QUERY_ARGS) {
            fs_errf(err, errlen, "more than %d parameters", MAX_QUERY_ARGS);
            goto cleanup;
        }
        char *eq = strchr(tok, '=');
        if (eq)
            *eq = '\0';
        if ((eq && !form_decode(eq + 1)) || !form_decode(tok)) {
            fs_errf(err, errlen, "NUL byte (%%00) in a parameter");
            goto cleanup;
        }
        args[n].key = tok;
        args[n].value = eq ? eq + 1 : NULL;
        n++;
    }
    rc = fs_raw_query_parse(args, n, now_us, q, err, errlen);
cleanup:
    free(copy);
    return rc;
}

void
fs_api_error_json(struct fs_buf *out, const char *msg)
{
    fs_buf_puts(out, "{\"status\":\"error\",\"error\":");
    fs_buf_json_str(out, msg);
    fs_buf_puts(out, "}\n");
}

/* ---- /api/v1/raw ---- */

struct match_rec {
    uint32_t id, gen; /* read by the pair: an id reused since is refused, not misread */
    bool counter;
    double scale;
    size_t head_off, head_len;
};

struct match_ctx {
    const struct fs_raw_query *q;
    struct match_rec *recs;
    size_t n, cap;
    struct fs_buf heads; /* `{"metric":{...},"values":[` per matched series */
    uint64_t scanned;
    int64_t chunk_start_us;
    bool nomem, too_many, late, yield;
};

static int
match_series(struct match_ctx *c, const struct fs_series_info *s)
{
    bool hit = false;
    for (size_t i = 0; i < c->q->n_sel && !hit; i++)
        hit = fs_selector_match(c->q->sel[i], s->name, s->labels, s->n_labels);
    if (!hit)
        return 0;
    if (c->n == c->cap) {
        if (c->cap >= FS_RAW_MAX_POINTS) {
            c->too_many = true;
            return 1;
        }
        size_t ncap = c->cap ? c->cap * 2 : 64;
        struct match_rec *r = realloc(c->recs, ncap * sizeof *r);
        if (!r) {
            c->nomem = true;
            return 1;
        }
        c->recs = r;
        c->cap = ncap;
    }
    struct match_rec *r = &c->recs[c->n++];
    r->id = s->id;
    r->gen = s->gen;
    r->counter = s->counter;
    r->scale = s->counter ? s->scale : 1.0;
    r->head_off = c->heads.len;
    fs_buf_puts(&c->heads, "{\"metric\":{\"__name__\":");
    fs_buf_json_str(&c->heads, s->name);
    for (size_t i = 0; i < s->n_labels; i++) {
        fs_buf_append(&c->heads, ",", 1);
        fs_buf_json_str(&c->heads, s->labels[i].name);
        fs_buf_append(&c->heads, ":", 1);
        fs_buf_json_str(&c->heads, s->labels[i].value);
    }
    fs_buf_puts(&c->heads, "},\"values\":[");
    r->head_len = c->heads.len - r->head_off;
    if (c->heads.overflow) {
        c->too_many = true;
        return 1;
    }
    return 0;
}

/* Matches one series, then checks the clock (every 16 series: cheap next to the
 * matching) against the query's deadline and the chunk's time slice. */
static int
match_cb(void *arg, const struct fs_series_info *s)
{
    struct match_ctx *c = arg;
    if (match_series(c, s))
        return 1;
    if ((++c->scanned & 15) == 0) {
        int64_t now = fs_monotonic_us();
        if (c->q->deadline_mono_us && now > c->q->deadline_mono_us) {
            c->late = true;
            return 1;
        }
        if (now - c->chunk_start_us > FS_RAW_SCAN_CHUNK_US) {
            c->yield = true; /* let writers in; the scan resumes after this series */
            return 1;
        }
    }
    return 0;
}

static void
put_sample(struct fs_buf *out, const struct fs_ring_sample *smp, bool counter, double scale)
{
    char tmp[96];
    int64_t sec = smp->ts_us / 1000000, frac = smp->ts_us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        sec--;
    }
    int n = snprintf(tmp, sizeof tmp, "[%lld.%06lld,\"", (long long)sec, (long long)frac);
    size_t m = (size_t)n;
    m += counter ? fs_expo_format_scaled(tmp + m, smp->v.u, scale)
                 : fs_expo_format_double(tmp + m, smp->v.d);
    tmp[m++] = '"';
    tmp[m++] = ']';
    fs_buf_append(out, tmp, m);
}

int
fs_api_raw(struct fs_store *st, const struct fs_raw_query *q, struct fs_buf *out, char *err,
           size_t errlen)
{
    struct match_ctx c;
    struct fs_ring_sample *smp = NULL;
    size_t smp_cap = 0, out_start = out->len;
    uint64_t total = 0;
    int rc = 0;
    memset(&c, 0, sizeof c);
    c.q = q;
    fs_buf_init(&c.heads, 64u << 20);
    /* First pass, in chunks under the store's read lock: only select and copy label
     * text. */
    uint64_t cursor = 0;
    do {
        c.yield = false;
        c.chunk_start_us = fs_monotonic_us();
    } while (!fs_store_foreach_series_chunk(st, false, &cursor, FS_RAW_SCAN_CHUNK, match_cb, &c) &&
             !c.nomem && !c.too_many && !c.late);
    if (c.late) {
        fs_errf(err, errlen, "the query took too long (selecting series); narrow the selector");
        rc = 503;
        goto cleanup;
    }
    if (c.nomem) {
        fs_errf(err, errlen, "out of memory");
        rc = 500;
        goto cleanup;
    }
    if (c.too_many) {
        fs_errf(err, errlen, "the selectors match too many series");
        rc = 400;
        goto cleanup;
    }
    fs_buf_puts(out, "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[");
    bool first = true;
    for (size_t i = 0; i < c.n; i++) {
        uint64_t want = q->limit - total + 1; /* one more than allowed detects overflow */
        size_t cap = smp_cap ? smp_cap : 1024;
        long n;
        bool trunc;
        for (;;) {
            if (cap > want)
                cap = (size_t)want;
            if (cap > smp_cap) {
                struct fs_ring_sample *ns = realloc(smp, cap * sizeof *ns);
                if (!ns) {
                    fs_errf(err, errlen, "out of memory");
                    rc = 500;
                    goto cleanup;
                }
                smp = ns;
                smp_cap = cap;
            }
            trunc = false;
            n = fs_store_read(st, c.recs[i].id, c.recs[i].gen, q->start_us, q->end_us, smp, cap,
                              &trunc);
            if (!trunc || cap >= want)
                break;
            cap *= 4;
        }
        if (q->deadline_mono_us && fs_monotonic_us() > q->deadline_mono_us) {
            fs_errf(err, errlen, "the query took too long; narrow the selector or the time range");
            rc = 503;
            goto cleanup;
        }
        if (n < 0) /* removed (or its id reused) since the first pass */
            continue;
        total += (uint64_t)n;
        if (trunc || total > q->limit) {
            fs_errf(err, errlen,
                    "the query matches more than %llu points; narrow the selector or the time "
                    "range",
                    (unsigned long long)q->limit);
            rc = 400;
            goto cleanup;
        }
        if (n == 0)
            continue;
        if (!first)
            fs_buf_append(out, ",", 1);
        first = false;
        fs_buf_append(out, c.heads.data + c.recs[i].head_off, c.recs[i].head_len);
        for (long j = 0; j < n; j++) {
            if (j)
                fs_buf_append(out, ",", 1);
            put_sample(out, &smp[j], c.recs[i].counter, c.recs[i].scale);
        }
        fs_buf_puts(out, "]}");
        if (out->overflow)
            break;
    }
    fs_buf_puts(out, "]}}\n");
    if (out->overflow) {
        fs_errf(err, errlen,
                "the result is larger than %zu MiB; narrow the selector or the time "
                "range",
                out->max >> 20);
        rc = FS_API_RAW_TOO_LARGE;
    }
cleanup:
    if (rc) {
        out->len = out_start;
        out->overflow = false;
    }
    free(smp);
    free(c.recs);
    fs_buf_free(&c.heads);
    return rc;
}

/* ---- /api/v1/targets ---- */

static json_object *
jdouble(double d)
{
    char s[32];
    if (!isfinite(d))
        return NULL;
    fs_expo_format_double(s, d);
    return json_object_new_double_s(d, s);
}

static json_object *
jtime_unix(int64_t us)
{
    char s[48];
    snprintf(s, sizeof s, "%lld.%06lld", (long long)(us / 1000000), (long long)(us % 1000000));
    return json_object_new_double_s((double)us / 1e6, s);
}

struct targets_ctx {
    json_object *arr;
    struct fs_shard shard;
};

static int
targets_cb(void *arg, const struct fs_instance_info *in)
{
    struct targets_ctx *c = arg;
    json_object *o = json_object_new_object();
    char ts[48];
    json_object_object_add(o, "target", json_object_new_string(in->target));
    json_object_object_add(o, "source", json_object_new_string(in->source));
    json_object_object_add(o, "address", json_object_new_string(in->address ? in->address : ""));
    json_object_object_add(o, "state", json_object_new_string(in->state_name));
    json_object_object_add(o, "shard",
                           json_object_new_uint64(fs_shard_owner(in->target, c->shard.count)));
    json_object_object_add(o, "polled", json_object_new_boolean(true));
    if (in->last_poll_us) {
        fs_api_format_rfc3339(in->last_poll_us, ts, sizeof ts);
        json_object_object_add(o, "last_poll", json_object_new_string(ts));
        json_object_object_add(o, "last_poll_unix", jtime_unix(in->last_poll_us));
        json_object_object_add(o, "last_poll_duration_seconds",
                               jdouble((double)in->last_duration_us / 1e6));
    } else {
        json_object_object_add(o, "last_poll", NULL);
        json_object_object_add(o, "last_poll_unix", NULL);
        json_object_object_add(o, "last_poll_duration_seconds", NULL);
    }
    json_object_object_add(o, "last_error", json_object_new_string(in->last_error));
    if (in->last_error_us) {
        fs_api_format_rfc3339(in->last_error_us, ts, sizeof ts);
        json_object_object_add(o, "last_error_time", json_object_new_string(ts));
    } else {
        json_object_object_add(o, "last_error_time", NULL);
    }
    json_object_object_add(o, "flapping", json_object_new_boolean(in->flapping));
    json_object_object_add(o, "reconnects", json_object_new_uint64(in->reconnects));
    json_object_object_add(o, "recent_drops", json_object_new_uint64(in->recent_drops));
    json_object_object_add(o, "series", json_object_new_uint64(in->series));
    json_object_object_add(o, "consecutive_failures",
                           json_object_new_uint64(in->consecutive_failures));
    json_object_object_add(o, "interval_seconds", jdouble((double)in->interval_us / 1e6));
    json_object *errs = json_object_new_object();
    for (size_t k = 0; k < FS_POLL_ERROR_KINDS; k++)
        json_object_object_add(errs, fs_poll_error_kind_names[k],
                               json_object_new_uint64(in->poll_errors[k]));
    json_object_object_add(o, "poll_errors", errs);
    json_object_object_add(o, "clock_offset_seconds",
                           in->clock_known ? jdouble(in->clock_offset_seconds) : NULL);
    json_object_object_add(o, "clock_uncertainty_seconds",
                           in->clock_known ? jdouble(in->clock_uncertainty_seconds) : NULL);
    json_object_object_add(o, "clock_basis",
                           in->clock_known && in->clock_basis && *in->clock_basis
                               ? json_object_new_string(in->clock_basis)
                               : NULL);
    json_object_object_add(o, "clock_offset_exceeded",
                           in->clock_known ? json_object_new_boolean(in->clock_offset_exceeded)
                                           : NULL);
    json_object *labels = json_object_new_object();
    for (size_t i = 0; i < in->n_static_labels; i++)
        json_object_object_add(labels, in->static_labels[i].key,
                               json_object_new_string(in->static_labels[i].value));
    json_object_object_add(o, "labels", labels);
    /* The driver's members join the object; the core's own keys win on a clash. */
    if (in->driver_detail && *in->driver_detail) {
        size_t dl = strlen(in->driver_detail);
        char *wrapped = malloc(dl + 3);
        json_object *d = NULL;
        if (wrapped) {
            wrapped[0] = '{';
            memcpy(wrapped + 1, in->driver_detail, dl);
            memcpy(wrapped + 1 + dl, "}", 2);
            d = json_tokener_parse(wrapped);
            free(wrapped);
        }
        if (d && json_object_is_type(d, json_type_object)) {
            json_object_object_foreach(d, key, val)
            {
                if (!json_object_object_get_ex(o, key, NULL))
                    json_object_object_add(o, key, json_object_get(val));
            }
        } else {
            json_object_object_add(o, "driver_detail_error",
                                   json_object_new_string("driver detail is not valid JSON"));
        }
        json_object_put(d);
    }
    json_object_array_add(c->arr, o);
    return 0;
}

/* A configured target another shard polls: named, with its owner, and nothing else. */
static int
other_shard_cb(void *arg, const char *target, uint32_t owner, bool mine)
{
    struct targets_ctx *c = arg;
    if (mine)
        return 0;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "target", json_object_new_string(target));
    json_object_object_add(o, "state", json_object_new_string("other shard"));
    json_object_object_add(o, "shard", json_object_new_uint64(owner));
    json_object_object_add(o, "polled", json_object_new_boolean(false));
    json_object_array_add(c->arr, o);
    return 0;
}

int
fs_api_targets(struct fs_store *st, struct fs_cluster *cl, struct fs_buf *out)
{
    struct targets_ctx c = {json_object_new_array(), fs_cluster_shard(cl)};
    if (!c.arr)
        return -1;
    fs_store_foreach_instance(st, targets_cb, &c);
    fs_cluster_foreach_target(cl, other_shard_cb, &c);
    fs_buf_puts(out, "{\"status\":\"success\",\"data\":");
    fs_buf_puts(out, json_object_to_json_string_ext(c.arr, JSON_C_TO_STRING_PLAIN |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE));
    fs_buf_puts(out, "}\n");
    json_object_put(c.arr);
    return out->overflow ? -1 : 0;
}
