/* Chrome Trace Event JSON writer (see trace.h). */
#include "analysis/trace.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lane_track {
    char *process, *track;
    int pid;
    int tid_first; /* tids of this track's lanes: tid_first + lane */
    int64_t *lane_end;
    size_t n_lanes;
};

struct proc {
    char *name;
    int pid;
};

struct thread_name {
    int pid, tid;
    char *name;
};

struct fs_trace {
    struct fs_buf *out;
    int64_t origin_ns;
    bool first;
    bool failed;
    struct proc *procs;
    size_t n_procs;
    struct lane_track *tracks;
    size_t n_tracks;
    struct thread_name *threads;
    size_t n_threads;
    int next_tid;
};

struct fs_trace *
fs_trace_new(struct fs_buf *out, int64_t origin_ns)
{
    struct fs_trace *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->out = out;
    t->origin_ns = origin_ns;
    t->first = true;
    t->next_tid = 1;
    fs_buf_puts(out, "{\"traceEvents\":[\n");
    return t;
}

void
fs_trace_free(struct fs_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_procs; i++)
        free(t->procs[i].name);
    for (size_t i = 0; i < t->n_tracks; i++) {
        free(t->tracks[i].process);
        free(t->tracks[i].track);
        free(t->tracks[i].lane_end);
    }
    for (size_t i = 0; i < t->n_threads; i++)
        free(t->threads[i].name);
    free(t->procs);
    free(t->tracks);
    free(t->threads);
    free(t);
}

/* Process id of a name, created on first use; -1 on no memory. */
static int
pid_of(struct fs_trace *t, const char *process)
{
    for (size_t i = 0; i < t->n_procs; i++)
        if (strcmp(t->procs[i].name, process) == 0)
            return t->procs[i].pid;
    void *p = realloc(t->procs, (t->n_procs + 1) * sizeof *t->procs);
    if (!p)
        return -1;
    t->procs = p;
    char *name = strdup(process);
    if (!name)
        return -1;
    t->procs[t->n_procs].name = name;
    t->procs[t->n_procs].pid = (int)t->n_procs + 1;
    return t->procs[t->n_procs++].pid;
}

/* Writes a timestamp (epoch ns) as µs relative to the origin, plain decimal. */
static void
put_ts(struct fs_buf *b, int64_t ns, int64_t origin_ns)
{
    int64_t rel = ns - origin_ns;
    const char *sign = "";
    uint64_t a = (uint64_t)rel;
    if (rel < 0) {
        sign = "-";
        a = (uint64_t)0 - (uint64_t)rel;
    }
    fs_buf_printf(b, "%s%" PRIu64 ".%03" PRIu64, sign, a / 1000, a % 1000);
}

static void
put_dur(struct fs_buf *b, int64_t ns)
{
    fs_buf_printf(b, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
}

static void
put_double(struct fs_buf *b, double v)
{
    if (!isfinite(v)) {
        fs_buf_puts(b, "null");
        return;
    }
    /* %g switches to an exponent outside [1e-4, 1e15); plain decimals there. */
    double a = fabs(v);
    if (a == 0 || (a >= 1e-4 && a < 1e15))
        fs_buf_printf(b, "%.15g", v);
    else if (a < 1e-4)
        fs_buf_printf(b, "%.12f", v);
    else
        fs_buf_printf(b, "%.0f", v);
}

static void
sep(struct fs_trace *t)
{
    if (!t->first)
        fs_buf_puts(t->out, ",\n");
    t->first = false;
}

static int
done(struct fs_trace *t)
{
    if (t->out->overflow)
        t->failed = true;
    return t->failed ? -1 : 0;
}

int
fs_trace_counter(struct fs_trace *t, const char *process, const char *track, const int64_t *ts_us,
                 const double *v, size_t n)
{
    int pid = pid_of(t, process);
    if (pid < 0) {
        t->failed = true;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        sep(t);
        fs_buf_puts(t->out, "{\"ph\":\"C\",\"name\":");
        fs_buf_json_str(t->out, track);
        fs_buf_printf(t->out, ",\"pid\":%d,\"ts\":", pid);
        put_ts(t->out, ts_us[i] * 1000, t->origin_ns);
        fs_buf_puts(t->out, ",\"args\":{\"value\":");
        put_double(t->out, v[i]);
        fs_buf_puts(t->out, "}}");
        if (t->out->overflow)
            break;
    }
    return done(t);
}

int
fs_trace_instant(struct fs_trace *t, const char *process, const char *name, int64_t ts_ns,
                 const char *args_json)
{
    int pid = pid_of(t, process);
    if (pid < 0) {
        t->failed = true;
        return -1;
    }
    sep(t);
    fs_buf_puts(t->out, "{\"ph\":\"i\",\"s\":\"p\",\"name\":");
    fs_buf_json_str(t->out, name);
    fs_buf_printf(t->out, ",\"pid\":%d,\"tid\":0,\"ts\":", pid);
    put_ts(t->out, ts_ns, t->origin_ns);
    if (args_json) {
        fs_buf_puts(t->out, ",\"args\":");
        fs_buf_puts(t->out, args_json);
    }
    fs_buf_puts(t->out, "}");
    return done(t);
}

/* The thread (lane) of a slice: the first lane of (process, track) free at start_ns. */
static int
lane_tid(struct fs_trace *t, int pid, const char *process, const char *track, int64_t start_ns,
         int64_t end_ns)
{
    struct lane_track *lt = NULL;
    for (size_t i = 0; i < t->n_tracks; i++)
        if (t->tracks[i].pid == pid && strcmp(t->tracks[i].track, track) == 0) {
            lt = &t->tracks[i];
            break;
        }
    if (!lt) {
        void *p = realloc(t->tracks, (t->n_tracks + 1) * sizeof *t->tracks);
        if (!p)
            return -1;
        t->tracks = p;
        lt = &t->tracks[t->n_tracks++];
        memset(lt, 0, sizeof *lt);
        lt->pid = pid;
        lt->process = strdup(process);
        lt->track = strdup(track);
        /* Lanes get tids in blocks of 64 per track; more lanes share the last one. */
        lt->tid_first = t->next_tid;
        t->next_tid += 64;
        if (!lt->process || !lt->track)
            return -1;
    }
    size_t lane;
    for (lane = 0; lane < lt->n_lanes; lane++)
        if (lt->lane_end[lane] <= start_ns)
            break;
    if (lane == lt->n_lanes) {
        if (lt->n_lanes == 64) {
            lane = 63;
        } else {
            void *p = realloc(lt->lane_end, (lt->n_lanes + 1) * sizeof *lt->lane_end);
            if (!p)
                return -1;
            lt->lane_end = p;
            lt->n_lanes++;
            int tid = lt->tid_first + (int)lane;
            void *q = realloc(t->threads, (t->n_threads + 1) * sizeof *t->threads);
            if (!q)
                return -1;
            t->threads = q;
            char name[FS_HOST_EVENTS_MAX_STR + 16];
            if (lane == 0)
                snprintf(name, sizeof name, "%s", track);
            else
                snprintf(name, sizeof name, "%s #%zu", track, lane + 1);
            t->threads[t->n_threads].pid = pid;
            t->threads[t->n_threads].tid = tid;
            t->threads[t->n_threads].name = strdup(name);
            if (!t->threads[t->n_threads++].name)
                return -1;
        }
    }
    if (end_ns > lt->lane_end[lane] || lane != 63)
        lt->lane_end[lane] = end_ns;
    return lt->tid_first + (int)lane;
}

int
fs_trace_slice(struct fs_trace *t, const char *process, const char *track, const char *name,
               int64_t start_ns, int64_t end_ns, const struct fs_host_attr *attrs, size_t n_attrs)
{
    int pid = pid_of(t, process);
    int tid = pid < 0 ? -1 : lane_tid(t, pid, process, track, start_ns, end_ns);
    if (tid < 0) {
        t->failed = true;
        return -1;
    }
    sep(t);
    fs_buf_puts(t->out, "{\"ph\":\"X\",\"name\":");
    fs_buf_json_str(t->out, name);
    fs_buf_printf(t->out, ",\"cat\":");
    fs_buf_json_str(t->out, track);
    fs_buf_printf(t->out, ",\"pid\":%d,\"tid\":%d,\"ts\":", pid, tid);
    put_ts(t->out, start_ns, t->origin_ns);
    fs_buf_puts(t->out, ",\"dur\":");
    put_dur(t->out, end_ns > start_ns ? end_ns - start_ns : 0);
    if (n_attrs) {
        fs_buf_puts(t->out, ",\"args\":{");
        for (size_t i = 0; i < n_attrs; i++) {
            if (i)
                fs_buf_puts(t->out, ",");
            fs_buf_json_str(t->out, attrs[i].key);
            fs_buf_puts(t->out, ":");
            if (attrs[i].is_string)
                fs_buf_json_str(t->out, attrs[i].value);
            else
                fs_buf_puts(t->out, attrs[i].value); /* validated JSON number or bool */
        }
        fs_buf_puts(t->out, "}");
    }
    fs_buf_puts(t->out, "}");
    return done(t);
}

int
fs_trace_finish(struct fs_trace *t, const char *extra_members)
{
    for (size_t i = 0; i < t->n_procs; i++) {
        sep(t);
        fs_buf_printf(t->out,
                      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":",
                      t->procs[i].pid);
        fs_buf_json_str(t->out, t->procs[i].name);
        fs_buf_puts(t->out, "}}");
    }
    for (size_t i = 0; i < t->n_threads; i++) {
        sep(t);
        fs_buf_printf(t->out,
                      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{"
                      "\"name\":",
                      t->threads[i].pid, t->threads[i].tid);
        fs_buf_json_str(t->out, t->threads[i].name);
        fs_buf_puts(t->out, "}}");
    }
    time_t secs = (time_t)(t->origin_ns / 1000000000);
    long frac = (long)(t->origin_ns % 1000000000);
    if (frac < 0) {
        secs--;
        frac += 1000000000;
    }
    struct tm tm;
    char when[64] = "";
    if (gmtime_r(&secs, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    fs_buf_printf(t->out,
                  "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"epoch_origin_ns\":%" PRId64
                  ",\"epoch_origin\":\"%s.%09ldZ\",\"generator\":\"fabricscope\"",
                  t->origin_ns, when, frac);
    if (extra_members && *extra_members) {
        fs_buf_puts(t->out, ",");
        fs_buf_puts(t->out, extra_members);
    }
    fs_buf_puts(t->out, "}}\n");
    int rc = done(t);
    fs_trace_free(t);
    return rc;
}
