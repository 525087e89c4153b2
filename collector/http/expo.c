/*
 * Prometheus text format 0.0.4, or OpenMetrics 1.0 when asked. Stored series are written straight
 * from the store's iteration (name and the pre-rendered label text are copied, the value formatted
 * in place), so a render into a buffer that has already grown allocates nothing.
 */
#include "http/expo.h"

#include "export/remote_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

size_t
fs_expo_format_u64(char *out, uint64_t v)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930"
                                "31323334353637383940414243444546474849505152535455565758596061"
                                "62636465666768697071727374757677787980818283848586878889909192"
                                "93949596979899";
    char tmp[24];
    size_t i = sizeof tmp;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        tmp[--i] = pairs[2 * r + 1];
        tmp[--i] = pairs[2 * r];
    }
    if (v >= 10) {
        tmp[--i] = pairs[2 * v + 1];
        tmp[--i] = pairs[2 * v];
    } else {
        tmp[--i] = (char)('0' + v);
    }
    size_t n = sizeof tmp - i;
    memcpy(out, tmp + i, n);
    return n;
}

size_t
fs_expo_format_double(char *out, double d)
{
    if (isnan(d)) {
        memcpy(out, "NaN", 4);
        return 3;
    }
    if (isinf(d)) {
        memcpy(out, d > 0 ? "+Inf" : "-Inf", 5);
        return 4;
    }
    /* Integral values (queue depths, speeds, up/down) are the common case: no printf. */
    if (d == floor(d) && fabs(d) < 1e15) {
        size_t n = 0;
        if (d < 0 || (d == 0 && signbit(d)))
            out[n++] = '-';
        n += fs_expo_format_u64(out + n, (uint64_t)fabs(d));
        out[n] = '\0';
        return n;
    }
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(out, 32, "%.*g", prec, d);
        if (prec == 17 || strtod(out, NULL) == d)
            break;
    }
    return (size_t)n;
}

size_t
fs_expo_format_scaled(char *out, uint64_t u, double scale)
{
    if (scale == 1.0)
        return fs_expo_format_u64(out, u);
    uint64_t div = 1;
    int digits = 0;
    double inv = 1.0 / scale;
    while (digits < 19 && (double)div < inv) {
        div *= 10;
        digits++;
    }
    /* 1/1e-9 is not exactly 1e9 in binary; a relative error this small still means 10^-k. */
    if (scale < 1.0 && digits > 0 && fabs(inv - (double)div) <= (double)div * 1e-12) {
        size_t n = fs_expo_format_u64(out, u / div);
        uint64_t rem = u % div;
        if (rem == 0)
            return n;
        out[n++] = '.';
        for (int i = digits - 1; i >= 0; i--) {
            out[n + (size_t)i] = (char)('0' + rem % 10);
            rem /= 10;
        }
        n += (size_t)digits;
        while (out[n - 1] == '0')
            n--;
        out[n] = '\0';
        return n;
    }
    return fs_expo_format_double(out, (double)u * scale);
}

/* Self metrics drawn from instance and ring state, never from stored series. */
static bool
is_self_metric(enum fs_metric m)
{
    switch (m) {
    case FS_M_COUNTER_RESETS:
    case FS_M_TARGET_UP:
    case FS_M_TARGET_SAMPLE_TIMESTAMP:
    case FS_M_POLL_DURATION:
    case FS_M_POLL_ERRORS:
    case FS_M_AGENT_RESTARTS:
    case FS_M_TARGET_RECONNECTS:
    case FS_M_CLOCK_STEPS:
    case FS_M_SERIES_LIMIT_DROPPED:
    case FS_M_RING_REFUSED:
    case FS_M_TARGET_CLOCK_OFFSET:
    case FS_M_TARGET_CLOCK_UNCERTAINTY:
    case FS_M_TARGET_CLOCK_OFFSET_EXCEEDED:
    case FS_M_HOST_EVENTS:
    case FS_M_HOST_EVENTS_BYTES:
    case FS_M_HOST_EVENTS_LIMIT_BYTES:
    case FS_M_HOST_EVENTS_INGESTED:
    case FS_M_HOST_EVENTS_REJECTED_POSTS:
    case FS_M_HOST_EVENTS_EVICTED:
    case FS_M_INCIDENT_PERIOD:
    case FS_M_INCIDENT_PERIOD_SPREAD:
    case FS_M_INCIDENT_NEXT_EXPECTED:
    case FS_M_RING_SAMPLES:
    case FS_M_RING_BYTES:
    case FS_M_RING_LIMIT_BYTES:
    case FS_M_RING_RETENTION:
    case FS_M_RING_EVICTED:
    case FS_M_SERIES:
    case FS_M_HTTP_REQUESTS:
    case FS_M_HTTP_INFLIGHT_BYTES:
    case FS_M_HTTP_INFLIGHT_LIMIT:
    case FS_M_BUILD_INFO:
    case FS_M_RW_PENDING:
    case FS_M_RW_SENT:
    case FS_M_RW_FAILED:
    case FS_M_RW_RETRIED:
    case FS_M_RW_DROPPED:
    case FS_M_RW_SENT_BYTES:
    case FS_M_RW_HIGHEST_SENT:
    case FS_M_RW_CAPACITY:
    case FS_M_RW_HORIZON:
    case FS_M_RW_METADATA_SENT:
    case FS_M_RW_METADATA_FAILED:
        return true;
    default:
        return false;
    }
}

/* What one render writes: the format and the labels every series gets. */
struct expo {
    struct fs_buf *out;
    bool om;         /* OpenMetrics 1.0 rather than text 0.0.4 */
    const char *ext; /* external label text `a="x"`, "" for none */
    size_t ext_len;
};

static bool
is_counter(enum fs_metric m)
{
    return !strcmp(fs_metric_defs[m].type_name, "counter");
}

/* OpenMetrics names a counter family without its _total suffix (the samples keep it). */
static size_t
family_name_len(const struct expo *x, enum fs_metric m)
{
    const char *n = fs_metric_defs[m].name;
    size_t len = strlen(n);
    if (x->om && is_counter(m) && len > 6 && !strcmp(n + len - 6, "_total"))
        len -= 6;
    return len;
}

/* # HELP and # TYPE. HELP escapes backslash and newline (and in OpenMetrics, where an
 * unescaped double quote is not allowed, that too). */
static void
family_header(struct expo *x, enum fs_metric m)
{
    struct fs_buf *out = x->out;
    const struct fs_metric_def *d = &fs_metric_defs[m];
    size_t nl = family_name_len(x, m);
    fs_buf_puts(out, "# HELP ");
    fs_buf_append(out, d->name, nl);
    fs_buf_append(out, " ", 1);
    const char *run = d->help, *p = d->help;
    for (; *p; p++) {
        if (*p != '\\' && *p != '\n' && !(x->om && *p == '"'))
            continue;
        fs_buf_append(out, run, (size_t)(p - run));
        fs_buf_puts(out, *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : "\\n");
        run = p + 1;
    }
    fs_buf_append(out, run, (size_t)(p - run));
    fs_buf_puts(out, "\n# TYPE ");
    fs_buf_append(out, d->name, nl);
    fs_buf_append(out, " ", 1);
    fs_buf_puts(out, d->type_name);
    fs_buf_append(out, "\n", 1);
}

/* `{` + the external labels + `}`: for a sample with no labels of its own. */
static void
ext_only(struct expo *x)
{
    if (!x->ext_len)
        return;
    fs_buf_append(x->out, "{", 1);
    fs_buf_append(x->out, x->ext, x->ext_len);
    fs_buf_append(x->out, "}", 1);
}

struct series_ctx {
    struct expo *x;
    int cur;
    size_t name_len[FS_METRIC_COUNT];
};

/* The hot path: one reserve, then raw copies; no allocation once the buffer has grown. */
static int
series_cb(void *arg, const struct fs_series_info *s)
{
    struct series_ctx *c = arg;
    struct expo *x = c->x;
    struct fs_buf *out = x->out;
    if (is_self_metric(s->metric))
        return 0;
    if ((int)s->metric != c->cur) {
        family_header(x, s->metric);
        c->cur = (int)s->metric;
    }
    size_t nl = c->name_len[s->metric];
    /* the labels come in pieces (fs_store_foreach_series_text), copied straight in */
    size_t tl = s->text_part_len[0] + s->text_part_len[1] + s->text_part_len[2];
    if (!fs_buf_reserve(out, nl + tl + x->ext_len + 41))
        return 1;
    char *p = out->data + out->len;
    memcpy(p, s->name, nl);
    p += nl;
    if (tl || x->ext_len) {
        *p++ = '{';
        for (int k = 0; k < 3; k++) {
            memcpy(p, s->text_part[k], s->text_part_len[k]);
            p += s->text_part_len[k];
        }
        if (tl && x->ext_len)
            *p++ = ',';
        memcpy(p, x->ext, x->ext_len);
        p += x->ext_len;
        *p++ = '}';
    }
    *p++ = ' ';
    if (!s->counter)
        p += fs_expo_format_double(p, s->d);
    else if (s->scale == 1.0)
        p += fs_expo_format_u64(p, s->u);
    else
        p += fs_expo_format_scaled(p, s->u, s->scale);
    *p++ = '\n';
    *p = '\0';
    out->len = (size_t)(p - out->data);
    return 0;
}

static void
put_label(struct fs_buf *out, bool *first, const char *name, const char *value)
{
    if (!*first)
        fs_buf_append(out, ",", 1);
    *first = false;
    fs_buf_puts(out, name);
    fs_buf_append(out, "=\"", 2);
    fs_buf_prom_label_value(out, value);
    fs_buf_append(out, "\"", 1);
}

/* Closes a label set opened by the caller: the external labels, then `}`. */
static void
labels_close(struct expo *x, bool first)
{
    if (x->ext_len) {
        if (!first)
            fs_buf_append(x->out, ",", 1);
        fs_buf_append(x->out, x->ext, x->ext_len);
    }
    fs_buf_append(x->out, "}", 1);
}

/* `name{target="t",<static labels>,source="s"` (no closing brace: callers add more). */
static void
inst_open(struct fs_buf *out, const char *name, const struct fs_instance_info *in, bool *first)
{
    fs_buf_puts(out, name);
    fs_buf_append(out, "{", 1);
    *first = true;
    put_label(out, first, "target", in->target);
    for (size_t i = 0; i < in->n_static_labels; i++)
        put_label(out, first, in->static_labels[i].key, in->static_labels[i].value);
    put_label(out, first, "source", in->source);
}

static void
put_u64_line(struct fs_buf *out, uint64_t v)
{
    char num[24];
    size_t n = fs_expo_format_u64(num, v);
    fs_buf_append(out, " ", 1);
    fs_buf_append(out, num, n);
    fs_buf_append(out, "\n", 1);
}

static void
put_double_line(struct fs_buf *out, double v)
{
    char num[32];
    size_t n = fs_expo_format_double(num, v);
    fs_buf_append(out, " ", 1);
    fs_buf_append(out, num, n);
    fs_buf_append(out, "\n", 1);
}

struct inst_ctx {
    struct expo *x;
    enum fs_metric m;
    size_t n;
};

/* The clock families have a sample only for targets whose clock a driver measured. */
static bool
is_clock_metric(enum fs_metric m)
{
    return m == FS_M_TARGET_CLOCK_OFFSET || m == FS_M_TARGET_CLOCK_UNCERTAINTY ||
           m == FS_M_TARGET_CLOCK_OFFSET_EXCEEDED;
}

static int
count_cb(void *arg, const struct fs_instance_info *in)
{
    struct inst_ctx *c = arg;
    if (c->m == FS_M_TARGET_SAMPLE_TIMESTAMP ? in->last_sample_us != 0
                                             : !is_clock_metric(c->m) || in->clock_known)
        c->n++;
    return 0;
}

/* One labelled instance sample: name{instance labels[,extra=value]<,external>} v. */
static void
inst_u64(struct expo *x, const char *name, const struct fs_instance_info *in, const char *extra,
         const char *extra_value, uint64_t v)
{
    bool first;
    inst_open(x->out, name, in, &first);
    if (extra)
        put_label(x->out, &first, extra, extra_value);
    labels_close(x, first);
    put_u64_line(x->out, v);
}

static int
inst_cb(void *arg, const struct fs_instance_info *in)
{
    struct inst_ctx *c = arg;
    struct expo *x = c->x;
    struct fs_buf *out = x->out;
    const char *name = fs_metric_defs[c->m].name;
    bool first;
    switch (c->m) {
    case FS_M_TARGET_UP:
        inst_u64(x, name, in, NULL, NULL, in->state == FS_INST_UP ? 1 : 0);
        break;
    case FS_M_TARGET_SAMPLE_TIMESTAMP:
        if (!in->last_sample_us)
            break;
        inst_open(out, name, in, &first);
        labels_close(x, first);
        put_double_line(out, (double)in->last_sample_us / 1e6);
        break;
    case FS_M_POLL_DURATION: {
        char bname[160];
        snprintf(bname, sizeof bname, "%s_bucket", name);
        for (size_t b = 0; b <= FS_POLL_BUCKETS; b++) {
            char le[32];
            if (b < FS_POLL_BUCKETS)
                fs_expo_format_double(le, fs_poll_bucket_bounds[b]);
            else
                strcpy(le, "+Inf");
            inst_u64(x, bname, in, "le", le, in->poll_hist[b]);
        }
        snprintf(bname, sizeof bname, "%s_sum", name);
        inst_open(out, bname, in, &first);
        labels_close(x, first);
        put_double_line(out, in->poll_sum_seconds);
        snprintf(bname, sizeof bname, "%s_count", name);
        inst_u64(x, bname, in, NULL, NULL, in->poll_count);
        break;
    }
    case FS_M_POLL_ERRORS:
        for (size_t k = 0; k < FS_POLL_ERROR_KINDS; k++)
            inst_u64(x, name, in, "kind", fs_poll_error_kind_names[k], in->poll_errors[k]);
        break;
    case FS_M_COUNTER_RESETS:
        for (size_t k = 0; k < FS_RESET_KIND_COUNT; k++)
            inst_u64(x, name, in, "kind", fs_reset_kind_names[k], in->counter_resets[k]);
        break;
    case FS_M_AGENT_RESTARTS:
    case FS_M_TARGET_RECONNECTS:
    case FS_M_CLOCK_STEPS:
    case FS_M_SERIES_LIMIT_DROPPED:
        inst_u64(x, name, in, NULL, NULL,
                 c->m == FS_M_AGENT_RESTARTS      ? in->agent_restarts
                 : c->m == FS_M_TARGET_RECONNECTS ? in->reconnects
                 : c->m == FS_M_CLOCK_STEPS       ? in->clock_steps
                                                  : in->series_limit_dropped);
        break;
    case FS_M_TARGET_CLOCK_OFFSET:
    case FS_M_TARGET_CLOCK_UNCERTAINTY:
        if (!in->clock_known)
            break;
        inst_open(out, name, in, &first);
        labels_close(x, first);
        put_double_line(out, c->m == FS_M_TARGET_CLOCK_OFFSET ? in->clock_offset_seconds
                                                              : in->clock_uncertainty_seconds);
        break;
    case FS_M_TARGET_CLOCK_OFFSET_EXCEEDED:
        if (!in->clock_known)
            break;
        inst_u64(x, name, in, NULL, NULL, in->clock_offset_exceeded ? 1 : 0);
        break;
    default:
        break;
    }
    return out->overflow;
}

static void
instance_family(struct fs_store *st, struct expo *x, enum fs_metric m)
{
    struct inst_ctx c = {x, m, 0};
    /* A family without samples gets no HELP/TYPE either. */
    fs_store_foreach_instance(st, count_cb, &c);
    if (c.n == 0)
        return;
    family_header(x, m);
    fs_store_foreach_instance(st, inst_cb, &c);
}

/* The _created sample of a counter sample just written (OpenMetrics only, and only
 * when its creation time is known): family name + "_created", the same labels. */
static void
put_created(struct expo *x, enum fs_metric m, const char *labels, const char *created)
{
    if (!x->om || !created || !created[0])
        return;
    fs_buf_append(x->out, fs_metric_defs[m].name, family_name_len(x, m));
    fs_buf_puts(x->out, "_created");
    fs_buf_puts(x->out, labels);
    fs_buf_append(x->out, " ", 1);
    fs_buf_puts(x->out, created);
    fs_buf_append(x->out, "\n", 1);
}

static void
scalar_u64(struct expo *x, enum fs_metric m, uint64_t v, const char *created)
{
    struct fs_buf lb;
    family_header(x, m);
    fs_buf_puts(x->out, fs_metric_defs[m].name);
    ext_only(x);
    put_u64_line(x->out, v);
    if (!x->om || !created || !created[0])
        return;
    fs_buf_init(&lb, 64 * 1024);
    if (x->ext_len)
        fs_buf_printf(&lb, "{%.*s}", (int)x->ext_len, x->ext);
    put_created(x, m, lb.data ? lb.data : "", created);
    fs_buf_free(&lb);
}

/* A sample with one label of its own (and the external ones). */
static void
labelled_u64(struct expo *x, enum fs_metric m, const char *labels_text, uint64_t v,
             const char *created)
{
    struct fs_buf lb;
    fs_buf_init(&lb, 64 * 1024);
    fs_buf_printf(&lb, "{%s%s%.*s}", labels_text, x->ext_len ? "," : "", (int)x->ext_len, x->ext);
    fs_buf_puts(x->out, fs_metric_defs[m].name);
    fs_buf_puts(x->out, lb.data ? lb.data : "{}");
    put_u64_line(x->out, v);
    put_created(x, m, lb.data ? lb.data : "{}", created);
    fs_buf_free(&lb);
}

static void
format_unix(char *buf, size_t len, int64_t us)
{
    if (us <= 0)
        buf[0] = '\0';
    else
        snprintf(buf, len, "%lld.%06lld", (long long)(us / 1000000), (long long)(us % 1000000));
}

/* ---- remote_write senders (collector/export) ---- */

struct rw_family {
    struct expo *x;
    struct fs_buf *out;
    enum fs_metric m;
    size_t n;
};

static void
rw_count_cb(void *arg, const struct fs_remote_write_info *in)
{
    (void)in;
    ((struct rw_family *)arg)->n++;
}

static void
rw_line_cb(void *arg, const struct fs_remote_write_info *in)
{
    struct rw_family *f = arg;
    const struct fs_remote_write_stats *s = &in->stats;
    bool first = true;
    fs_buf_puts(f->out, fs_metric_defs[f->m].name);
    fs_buf_append(f->out, "{", 1);
    put_label(f->out, &first, "remote_name", in->remote_name);
    put_label(f->out, &first, "url", in->url);
    labels_close(f->x, first);
    switch (f->m) {
    case FS_M_RW_PENDING:
        put_u64_line(f->out, s->pending);
        break;
    case FS_M_RW_SENT:
        put_u64_line(f->out, s->sent);
        break;
    case FS_M_RW_FAILED:
        put_u64_line(f->out, s->failed);
        break;
    case FS_M_RW_RETRIED:
        put_u64_line(f->out, s->retried);
        break;
    case FS_M_RW_DROPPED:
        put_u64_line(f->out, s->dropped);
        break;
    case FS_M_RW_SENT_BYTES:
        put_u64_line(f->out, s->bytes_sent);
        break;
    case FS_M_RW_HIGHEST_SENT:
        put_double_line(f->out, (double)s->highest_sent_ms / 1000.0);
        break;
    case FS_M_RW_CAPACITY:
        put_u64_line(f->out, in->capacity);
        break;
    case FS_M_RW_METADATA_SENT:
        put_u64_line(f->out, s->metadata_sent);
        break;
    case FS_M_RW_METADATA_FAILED:
        put_u64_line(f->out, s->metadata_failed);
        break;
    default: /* FS_M_RW_HORIZON */
        put_double_line(f->out, in->horizon_seconds);
        break;
    }
}

static void
remote_write_families(struct expo *x)
{
    static const enum fs_metric fams[] = {
        FS_M_RW_PENDING, FS_M_RW_SENT,          FS_M_RW_FAILED,         FS_M_RW_RETRIED,
        FS_M_RW_DROPPED, FS_M_RW_SENT_BYTES,    FS_M_RW_HIGHEST_SENT,   FS_M_RW_CAPACITY,
        FS_M_RW_HORIZON, FS_M_RW_METADATA_SENT, FS_M_RW_METADATA_FAILED};
    struct rw_family f = {x, x->out, FS_M_RW_PENDING, 0};
    fs_remote_write_foreach(rw_count_cb, &f);
    if (f.n == 0) /* no receiver configured: no family at all */
        return;
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) {
        f.m = fams[i];
        family_header(x, f.m);
        fs_remote_write_foreach(rw_line_cb, &f);
    }
}

int
fs_expo_render_opts(struct fs_store *st, struct fs_buf *out, const struct fs_expo_opts *o)
{
    static const struct fs_expo_opts none;
    char store_created[48], http_created[48];
    struct series_ctx sc;
    struct expo x;

    if (!o)
        o = &none;
    format_unix(store_created, sizeof store_created, o->store_created_us);
    format_unix(http_created, sizeof http_created, o->http_created_us);
    x.out = out;
    x.om = o->openmetrics;
    x.ext = o->external_labels ? o->external_labels : "";
    x.ext_len = strlen(x.ext);

    sc.x = &x;
    sc.cur = -1;
    for (size_t m = 0; m < FS_METRIC_COUNT; m++)
        sc.name_len[m] = strlen(fs_metric_defs[m].name);
    fs_store_foreach_series_text(st, true, series_cb, &sc);

    instance_family(st, &x, FS_M_TARGET_UP);
    instance_family(st, &x, FS_M_TARGET_SAMPLE_TIMESTAMP);
    instance_family(st, &x, FS_M_POLL_DURATION);
    instance_family(st, &x, FS_M_POLL_ERRORS);
    instance_family(st, &x, FS_M_COUNTER_RESETS);
    instance_family(st, &x, FS_M_AGENT_RESTARTS);
    instance_family(st, &x, FS_M_TARGET_RECONNECTS);
    instance_family(st, &x, FS_M_CLOCK_STEPS);
    instance_family(st, &x, FS_M_SERIES_LIMIT_DROPPED);
    instance_family(st, &x, FS_M_TARGET_CLOCK_OFFSET);
    instance_family(st, &x, FS_M_TARGET_CLOCK_UNCERTAINTY);
    instance_family(st, &x, FS_M_TARGET_CLOCK_OFFSET_EXCEEDED);

    struct fs_ring_stats rs;
    uint64_t limit = 0;
    memset(&rs, 0, sizeof rs);
    fs_store_ring_stats(st, &rs, &limit);
    scalar_u64(&x, FS_M_RING_SAMPLES, rs.samples, NULL);
    scalar_u64(&x, FS_M_RING_BYTES, rs.bytes, NULL);
    scalar_u64(&x, FS_M_RING_LIMIT_BYTES, limit, NULL);
    double retention = 0;
    if (rs.oldest_ts_us > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        retention = now > rs.oldest_ts_us ? (double)(now - rs.oldest_ts_us) / 1e6 : 0;
    }
    family_header(&x, FS_M_RING_RETENTION);
    fs_buf_puts(out, fs_metric_defs[FS_M_RING_RETENTION].name);
    ext_only(&x);
    put_double_line(out, retention);
    family_header(&x, FS_M_RING_EVICTED);
    labelled_u64(&x, FS_M_RING_EVICTED, "reason=\"memory\"", rs.evicted_memory, store_created);
    labelled_u64(&x, FS_M_RING_EVICTED, "reason=\"retention\"", rs.evicted_retention,
                 store_created);
    scalar_u64(&x, FS_M_RING_REFUSED, rs.refused_memory, store_created);
    scalar_u64(&x, FS_M_SERIES, rs.series, NULL);

    bool any = false;
    for (size_t i = 0; i < o->n_hc; i++) {
        const struct fs_expo_http_count *hc = &o->hc[i];
        if (hc->n == 0)
            continue;
        if (!any)
            family_header(&x, FS_M_HTTP_REQUESTS);
        any = true;
        struct fs_buf lb;
        bool first = true;
        char code[24];
        fs_buf_init(&lb, 64 * 1024);
        put_label(&lb, &first, "handler", hc->handler);
        code[fs_expo_format_u64(code, hc->code)] = '\0';
        put_label(&lb, &first, "code", code);
        labelled_u64(&x, FS_M_HTTP_REQUESTS, lb.data ? lb.data : "", hc->n, http_created);
        fs_buf_free(&lb);
    }

    if (o->have_inflight) {
        scalar_u64(&x, FS_M_HTTP_INFLIGHT_BYTES, o->inflight_bytes, NULL);
        scalar_u64(&x, FS_M_HTTP_INFLIGHT_LIMIT, o->inflight_limit, NULL);
    }

    remote_write_families(&x);

    family_header(&x, FS_M_BUILD_INFO);
    fs_buf_puts(out, fs_metric_defs[FS_M_BUILD_INFO].name);
    fs_buf_puts(out, "{version=\"");
    fs_buf_prom_label_value(out, FS_VERSION);
    fs_buf_puts(out, "\"");
    labels_close(&x, false);
    fs_buf_puts(out, " 1\n");
    if (!o->no_eof)
        return fs_expo_end(out, o);
    return out->overflow ? -1 : 0;
}

int
fs_expo_end(struct fs_buf *out, const struct fs_expo_opts *o)
{
    if (o && o->openmetrics)
        fs_buf_puts(out, "# EOF\n");
    return out->overflow ? -1 : 0;
}

/* Writes one sample line "name{labels} value" (or "name value") with the external
 * labels added to its label set. The value is the text after the last space (no
 * timestamps are written), so spaces inside label values do not matter. */
static void
adapt_sample(const char *line, size_t len, const struct expo *x)
{
    const char *sp = memrchr(line, ' ', len);
    size_t left = sp ? (size_t)(sp - line) : len;
    if (!x->ext_len || !sp) {
        fs_buf_append(x->out, line, len);
    } else if (left > 0 && line[left - 1] == '}') {
        fs_buf_append(x->out, line, left - 1);
        if (left < 2 || line[left - 2] != '{')
            fs_buf_append(x->out, ",", 1);
        fs_buf_append(x->out, x->ext, x->ext_len);
        fs_buf_append(x->out, line + left - 1, len - (left - 1));
    } else {
        fs_buf_append(x->out, line, left);
        ext_only((struct expo *)x);
        fs_buf_append(x->out, line + left, len - left);
    }
    fs_buf_append(x->out, "\n", 1);
}

/* "# HELP name text" / "# TYPE name type" of a family, named the OpenMetrics way for a
 * counter (without _total) and with a double quote in HELP escaped, which OpenMetrics
 * requires and text 0.0.4 does not. */
static void
adapt_header(const struct expo *x, const char *help, size_t help_len, const char *type,
             size_t type_len)
{
    const char *tname = type + 7, *tsp = memchr(tname, ' ', type_len - 7);
    size_t nl = tsp ? (size_t)(tsp - tname) : type_len - 7;
    const char *kind = tsp ? tsp + 1 : "";
    size_t kl = tsp ? type_len - 7 - nl - 1 : 0;
    size_t fam = nl;
    if (x->om && kl == 7 && !memcmp(kind, "counter", 7) && nl > 6 &&
        !memcmp(tname + nl - 6, "_total", 6))
        fam -= 6;
    if (help) {
        const char *htext = help + 7 + nl;
        size_t hl = help_len - 7 - nl;
        fs_buf_puts(x->out, "# HELP ");
        fs_buf_append(x->out, tname, fam);
        for (size_t i = 0; i < hl; i++) {
            if (x->om && htext[i] == '"')
                fs_buf_append(x->out, "\\\"", 2);
            else
                fs_buf_append(x->out, htext + i, 1);
        }
        fs_buf_append(x->out, "\n", 1);
    }
    fs_buf_puts(x->out, "# TYPE ");
    fs_buf_append(x->out, tname, fam);
    fs_buf_append(x->out, " ", 1);
    if (x->om && kl == 7 && !memcmp(kind, "untyped", 7))
        fs_buf_puts(x->out, "unknown");
    else
        fs_buf_append(x->out, kind, kl);
    fs_buf_append(x->out, "\n", 1);
}

int
fs_expo_adapt_text(const char *text, size_t len, const struct fs_expo_opts *o, struct fs_buf *out)
{
    struct expo x = {out, o && o->openmetrics, "", 0};
    const char *help = NULL;
    size_t help_len = 0;

    if (o && o->external_labels) {
        x.ext = o->external_labels;
        x.ext_len = strlen(x.ext);
    }
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *line = p;
        p += ll + (nl ? 1 : 0);
        if (help && !(ll > 7 && !memcmp(line, "# TYPE ", 7))) {
            /* A HELP without its TYPE: as it is. */
            fs_buf_append(out, help, help_len);
            fs_buf_append(out, "\n", 1);
            help = NULL;
        }
        if (ll == 0)
            continue;
        if (ll > 7 && !memcmp(line, "# HELP ", 7)) {
            help = line;
            help_len = ll;
        } else if (ll > 7 && !memcmp(line, "# TYPE ", 7)) {
            adapt_header(&x, help, help_len, line, ll);
            help = NULL;
        } else if (line[0] == '#') {
            if (!x.om) { /* OpenMetrics has no free comments */
                fs_buf_append(out, line, ll);
                fs_buf_append(out, "\n", 1);
            }
        } else {
            adapt_sample(line, ll, &x);
        }
    }
    if (help) {
        fs_buf_append(out, help, help_len);
        fs_buf_append(out, "\n", 1);
    }
    return out->overflow ? -1 : 0;
}

int
fs_expo_render_ex(struct fs_store *st, struct fs_buf *out, const struct fs_expo_http_count *hc,
                  size_t n_hc)
{
    struct fs_expo_opts o = {.hc = hc, .n_hc = n_hc};
    return fs_expo_render_opts(st, out, &o);
}

int
fs_expo_render(struct fs_store *st, struct fs_buf *out)
{
    return fs_expo_render_ex(st, out, NULL, 0);
}
