/* The host-event store (see host_events.h). One allocation per accepted post holds its
 * events, attrs and strings, so eviction frees whole posts and ingest allocates once. */
#include "analysis/host_events.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

struct post {
    struct post *next;
    int64_t min_start, max_end;
    size_t bytes;
    size_t n;
    struct fs_host_event ev[]; /* then attrs, then strings */
};

struct fs_host_events {
    pthread_rwlock_t lock;
    struct fs_host_events_opts opts;
    struct post *head, *tail; /* oldest first */
    uint64_t events, bytes, posts;
    uint64_t ingested_total, rejected_total, evicted_memory, evicted_retention;
};

static void seterr(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
seterr(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

struct fs_host_events *
fs_host_events_new(const struct fs_host_events_opts *o, char *errbuf, size_t errlen)
{
    if (o->memory_limit == 0 || o->retention_ns <= 0) {
        seterr(errbuf, errlen, "host events: memory_limit and retention must be positive");
        return NULL;
    }
    struct fs_host_events *hs = calloc(1, sizeof *hs);
    if (!hs) {
        seterr(errbuf, errlen, "host events: out of memory");
        return NULL;
    }
    pthread_rwlock_init(&hs->lock, NULL);
    hs->opts = *o;
    return hs;
}

void
fs_host_events_free(struct fs_host_events *hs)
{
    if (!hs)
        return;
    struct post *p = hs->head;
    while (p) {
        struct post *next = p->next;
        free(p);
        p = next;
    }
    pthread_rwlock_destroy(&hs->lock);
    free(hs);
}

void
fs_host_events_set_opts(struct fs_host_events *hs, const struct fs_host_events_opts *o)
{
    if (o->memory_limit == 0 || o->retention_ns <= 0)
        return;
    pthread_rwlock_wrlock(&hs->lock);
    hs->opts = *o;
    pthread_rwlock_unlock(&hs->lock);
}

/* ---- validation (pass 1) and copying (pass 2) ---- */

/* Times and offsets beyond this (about the year 2096) are refused, so that the
   arithmetic on them cannot overflow and saturated literals are caught. */
#define FS_TIME_LIMIT_NS 4000000000000000000LL
#define FS_OFFSET_LIMIT_NS 100000000000000000LL

static bool
get_int(struct json_object *o, int64_t *v)
{
    if (!json_object_is_type(o, json_type_int))
        return false;
    /* json-c saturates out-of-range literals and sets errno. */
    errno = 0;
    *v = json_object_get_int64(o);
    return errno == 0 && *v > -FS_TIME_LIMIT_NS && *v < FS_TIME_LIMIT_NS;
}

/* A string member within limits; returns its length or -1. */
static long
get_str(struct json_object *o, size_t max)
{
    if (!json_object_is_type(o, json_type_string))
        return -1;
    int len = json_object_get_string_len(o);
    if (len < 1 || (size_t)len > max)
        return -1;
    const char *s = json_object_get_string(o);
    if (memchr(s, '\0', (size_t)len))
        return -1;
    return len;
}

struct sizing {
    size_t strings;
    size_t attrs;
};

/* The text a non-string attr value is stored as: integers are formatted here (the
   common case, and json-c's serializer allocates), other values by json-c. */
static const char *
attr_text(struct json_object *v, char *tmp, size_t tmplen, size_t *len)
{
    switch (json_object_get_type(v)) {
    case json_type_string:
        *len = (size_t)json_object_get_string_len(v);
        return json_object_get_string(v);
    case json_type_int: {
        int64_t i = json_object_get_int64(v);
        uint64_t u = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
        char *e = tmp + tmplen, *p = e;
        do {
            *--p = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (i < 0)
            *--p = '-';
        *len = (size_t)(e - p);
        return p;
    }
    default: {
        const char *t = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
        *len = strlen(t);
        return t;
    }
    }
}

static int
check_event(struct json_object *ev, size_t i, struct sizing *sz, char *err, size_t errlen)
{
    if (!json_object_is_type(ev, json_type_object)) {
        seterr(err, errlen, "events[%zu]: not an object", i);
        return -1;
    }
    bool have_host = false, have_kind = false, have_name = false, have_start = false;
    int64_t start = 0, end = 0;
    bool have_end = false;
    json_object_object_foreach(ev, key, val)
    {
        if (strcmp(key, "host") == 0 || strcmp(key, "kind") == 0 || strcmp(key, "name") == 0) {
            long l = get_str(val, FS_HOST_EVENTS_MAX_STR);
            if (l < 0) {
                seterr(err, errlen, "events[%zu].%s: not a string of 1..%d bytes", i, key,
                       FS_HOST_EVENTS_MAX_STR);
                return -1;
            }
            sz->strings += (size_t)l + 1;
            if (key[0] == 'h')
                have_host = true;
            else if (key[0] == 'k')
                have_kind = true;
            else
                have_name = true;
        } else if (strcmp(key, "start") == 0) {
            if (!get_int(val, &start) || start <= 0) {
                seterr(err, errlen, "events[%zu].start: not a positive integer (ns since epoch)",
                       i);
                return -1;
            }
            have_start = true;
        } else if (strcmp(key, "end") == 0) {
            if (!get_int(val, &end) || end <= 0) {
                seterr(err, errlen, "events[%zu].end: not a positive integer (ns since epoch)", i);
                return -1;
            }
            have_end = true;
        } else if (strcmp(key, "attrs") == 0) {
            if (!json_object_is_type(val, json_type_object)) {
                seterr(err, errlen, "events[%zu].attrs: not an object", i);
                return -1;
            }
            if (json_object_object_length(val) > FS_HOST_EVENTS_MAX_ATTRS) {
                seterr(err, errlen, "events[%zu].attrs: more than %d members", i,
                       FS_HOST_EVENTS_MAX_ATTRS);
                return -1;
            }
            json_object_object_foreach(val, ak, av)
            {
                size_t kl = strlen(ak);
                if (kl < 1 || kl > FS_HOST_EVENTS_MAX_KEY) {
                    seterr(err, errlen, "events[%zu].attrs: a key is not 1..%d bytes", i,
                           FS_HOST_EVENTS_MAX_KEY);
                    return -1;
                }
                json_type t = json_object_get_type(av);
                if (t != json_type_string && t != json_type_int && t != json_type_double &&
                    t != json_type_boolean) {
                    seterr(err, errlen, "events[%zu].attrs.%.64s: not a string, number or boolean",
                           i, ak);
                    return -1;
                }
                size_t vl;
                char tmp[24];
                const char *vt = attr_text(av, tmp, sizeof tmp, &vl);
                if (vl > FS_HOST_EVENTS_MAX_STR || memchr(vt, '\0', vl)) {
                    seterr(err, errlen, "events[%zu].attrs.%.64s: value longer than %d bytes", i,
                           ak, FS_HOST_EVENTS_MAX_STR);
                    return -1;
                }
                sz->strings += kl + 1 + vl + 1;
                sz->attrs++;
            }
        } else {
            seterr(err, errlen, "events[%zu]: unknown member \"%.64s\"", i, key);
            return -1;
        }
    }
    if (!have_host || !have_kind || !have_name || !have_start) {
        seterr(err, errlen, "events[%zu]: missing %s", i,
               !have_host   ? "host"
               : !have_kind ? "kind"
               : !have_name ? "name"
                            : "start");
        return -1;
    }
    if (have_end && end < start) {
        seterr(err, errlen, "events[%zu].end: before start", i);
        return -1;
    }
    if (have_end && end - start > FS_HOST_EVENTS_MAX_DURATION_NS) {
        seterr(err, errlen, "events[%zu]: longer than 24 h", i);
        return -1;
    }
    return 0;
}

/* Copies s into the post's string area, reusing the previous event's copy when equal
 * (hosts, kinds and names repeat within a post). */
static const char *
put_str(char **area, const char *s, size_t len, const char *prev)
{
    if (prev && strncmp(prev, s, len) == 0 && prev[len] == '\0')
        return prev;
    char *d = *area;
    memcpy(d, s, len);
    d[len] = '\0';
    *area += len + 1;
    return d;
}

static void
fill_event(struct fs_host_event *e, const struct fs_host_event *prev, struct json_object *ev,
           int64_t offset, int64_t unc, struct fs_host_attr **attr_area, char **str_area)
{
    int64_t start = 0, end = 0;
    bool have_end = false;
    e->attrs = NULL;
    e->n_attrs = 0;
    json_object_object_foreach(ev, key, val)
    {
        switch (key[0]) {
        case 'h':
        case 'k':
        case 'n': {
            const char *s = json_object_get_string(val);
            size_t l = (size_t)json_object_get_string_len(val);
            if (key[0] == 'h')
                e->host = put_str(str_area, s, l, prev ? prev->host : NULL);
            else if (key[0] == 'k')
                e->kind = put_str(str_area, s, l, prev ? prev->kind : NULL);
            else
                e->name = put_str(str_area, s, l, prev ? prev->name : NULL);
            break;
        }
        case 's':
            start = json_object_get_int64(val);
            break;
        case 'e':
            end = json_object_get_int64(val);
            have_end = true;
            break;
        case 'a': {
            struct fs_host_attr *a = *attr_area;
            e->attrs = a;
            json_object_object_foreach(val, ak, av)
            {
                size_t kl = strlen(ak), vl;
                char tmp[24];
                const char *vt = attr_text(av, tmp, sizeof tmp, &vl);
                a->key = put_str(str_area, ak, kl, NULL);
                a->value = put_str(str_area, vt, vl, NULL);
                a->is_string = json_object_is_type(av, json_type_string);
                a++;
                e->n_attrs++;
            }
            *attr_area = a;
            break;
        }
        default:
            break;
        }
    }
    if (!have_end)
        end = start;
    /* Host clock to collector clock; both are bounded, so this cannot overflow. */
    e->start_ns = start - offset;
    e->end_ns = end - offset;
    e->host_offset_ns = offset;
    e->host_offset_uncertainty_ns = unc;
}

static void
drop_head(struct fs_host_events *hs)
{
    struct post *p = hs->head;
    hs->head = p->next;
    if (!hs->head)
        hs->tail = NULL;
    hs->events -= p->n;
    hs->bytes -= p->bytes;
    hs->posts--;
    free(p);
}

/* Called with the write lock held. */
static void
expire_locked(struct fs_host_events *hs, int64_t now_ns)
{
    int64_t horizon = now_ns - hs->opts.retention_ns;
    struct post **pp = &hs->head, *last = NULL;
    while (*pp) {
        struct post *p = *pp;
        if (p->max_end < horizon) {
            *pp = p->next;
            hs->events -= p->n;
            hs->bytes -= p->bytes;
            hs->posts--;
            hs->evicted_retention += p->n;
            free(p);
        } else {
            last = p;
            pp = &p->next;
        }
    }
    hs->tail = last;
}

void
fs_host_events_expire(struct fs_host_events *hs, int64_t now_ns)
{
    pthread_rwlock_wrlock(&hs->lock);
    expire_locked(hs, now_ns);
    pthread_rwlock_unlock(&hs->lock);
}

static void
count_reject(struct fs_host_events *hs)
{
    pthread_rwlock_wrlock(&hs->lock);
    hs->rejected_total++;
    pthread_rwlock_unlock(&hs->lock);
}

int
fs_host_events_ingest(struct fs_host_events *hs, const char *body, size_t len, int64_t now_ns,
                      size_t *stored, char *errbuf, size_t errlen)
{
    int rc = 400;
    struct json_object *root = NULL;
    struct json_tokener *tok = NULL;
    struct post *p = NULL;
    if (stored)
        *stored = 0;
    if (len > FS_HOST_EVENTS_MAX_BODY) {
        seterr(errbuf, errlen, "body larger than %u bytes", FS_HOST_EVENTS_MAX_BODY);
        rc = 413;
        goto out;
    }
    tok = json_tokener_new();
    if (!tok) {
        rc = 500;
        seterr(errbuf, errlen, "out of memory");
        goto out;
    }
    root = json_tokener_parse_ex(tok, body, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    if (!root || jerr != json_tokener_success) {
        seterr(errbuf, errlen, "malformed JSON: %s",
               jerr == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(jerr));
        goto out;
    }
    /* Only whitespace may follow the document. */
    for (size_t i = json_tokener_get_parse_end(tok); i < len; i++) {
        if (body[i] != ' ' && body[i] != '\n' && body[i] != '\r' && body[i] != '\t') {
            seterr(errbuf, errlen, "malformed JSON: data after the document");
            goto out;
        }
    }
    if (!json_object_is_type(root, json_type_object)) {
        seterr(errbuf, errlen, "body: not a JSON object");
        goto out;
    }
    struct json_object *events = NULL, *off = NULL, *unc = NULL;
    json_object_object_foreach(root, key, val)
    {
        if (strcmp(key, "events") == 0)
            events = val;
        else if (strcmp(key, "host_offset_ns") == 0)
            off = val;
        else if (strcmp(key, "host_offset_uncertainty_ns") == 0)
            unc = val;
        else {
            seterr(errbuf, errlen, "body: unknown member \"%.64s\"", key);
            goto out;
        }
    }
    int64_t offset, uncertainty;
    if (!off || !get_int(off, &offset) || offset <= -FS_OFFSET_LIMIT_NS ||
        offset >= FS_OFFSET_LIMIT_NS) {
        seterr(errbuf, errlen, "host_offset_ns: missing or not an integer within ±1e17");
        goto out;
    }
    if (!unc || !get_int(unc, &uncertainty) || uncertainty < 0 ||
        uncertainty >= FS_OFFSET_LIMIT_NS) {
        seterr(errbuf, errlen, "host_offset_uncertainty_ns: missing or not an integer >= 0");
        goto out;
    }
    if (!events || !json_object_is_type(events, json_type_array)) {
        seterr(errbuf, errlen, "events: missing or not an array");
        goto out;
    }
    size_t n = json_object_array_length(events);
    if (n == 0 || n > FS_HOST_EVENTS_MAX_PER_POST) {
        seterr(errbuf, errlen, "events: %zu items (1..%d allowed)", n, FS_HOST_EVENTS_MAX_PER_POST);
        rc = n == 0 ? 400 : 413;
        goto out;
    }
    struct sizing sz = {0, 0};
    for (size_t i = 0; i < n; i++) {
        if (check_event(json_object_array_get_idx(events, i), i, &sz, errbuf, errlen) != 0)
            goto out;
    }
    size_t bytes = sizeof *p + n * sizeof(struct fs_host_event) +
                   sz.attrs * sizeof(struct fs_host_attr) + sz.strings;
    pthread_rwlock_rdlock(&hs->lock);
    uint64_t limit = hs->opts.memory_limit;
    pthread_rwlock_unlock(&hs->lock);
    if (bytes > limit) {
        seterr(errbuf, errlen, "post needs %zu bytes, more than the host-event memory limit %llu",
               bytes, (unsigned long long)limit);
        rc = 413;
        goto out;
    }
    p = malloc(bytes);
    if (!p) {
        seterr(errbuf, errlen, "out of memory");
        rc = 500;
        goto out;
    }
    p->next = NULL;
    p->n = n;
    p->bytes = bytes;
    struct fs_host_attr *attr_area = (struct fs_host_attr *)(p->ev + n);
    char *str_area = (char *)(attr_area + sz.attrs);
    p->min_start = INT64_MAX;
    p->max_end = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        fill_event(&p->ev[i], i ? &p->ev[i - 1] : NULL, json_object_array_get_idx(events, i),
                   offset, uncertainty, &attr_area, &str_area);
        if (p->ev[i].start_ns < p->min_start)
            p->min_start = p->ev[i].start_ns;
        if (p->ev[i].end_ns > p->max_end)
            p->max_end = p->ev[i].end_ns;
    }
    pthread_rwlock_wrlock(&hs->lock);
    expire_locked(hs, now_ns);
    while (hs->head && hs->bytes + bytes > hs->opts.memory_limit) {
        hs->evicted_memory += hs->head->n;
        drop_head(hs);
    }
    if (hs->tail)
        hs->tail->next = p;
    else
        hs->head = p;
    hs->tail = p;
    hs->events += n;
    hs->bytes += bytes;
    hs->posts++;
    hs->ingested_total += n;
    pthread_rwlock_unlock(&hs->lock);
    p = NULL;
    if (stored)
        *stored = n;
    rc = 0;
out:
    if (rc != 0)
        count_reject(hs);
    free(p);
    json_object_put(root);
    if (tok)
        json_tokener_free(tok);
    return rc;
}

bool
fs_host_event_kind_matches(const char *kind, const char *prefix)
{
    if (!prefix || !*prefix)
        return true;
    size_t l = strlen(prefix);
    return strncmp(kind, prefix, l) == 0 && (kind[l] == '\0' || kind[l] == '.');
}

void
fs_host_events_foreach(struct fs_host_events *hs, int64_t start_ns, int64_t end_ns,
                       const char *kind_prefix, fs_host_event_cb cb, void *arg)
{
    pthread_rwlock_rdlock(&hs->lock);
    for (struct post *p = hs->head; p; p = p->next) {
        if (p->max_end < start_ns || p->min_start > end_ns)
            continue;
        for (size_t i = 0; i < p->n; i++) {
            const struct fs_host_event *e = &p->ev[i];
            if (e->end_ns < start_ns || e->start_ns > end_ns)
                continue;
            if (!fs_host_event_kind_matches(e->kind, kind_prefix))
                continue;
            if (cb(arg, e) != 0)
                goto done;
        }
    }
done:
    pthread_rwlock_unlock(&hs->lock);
}

void
fs_host_events_stats(struct fs_host_events *hs, struct fs_host_events_stats *out)
{
    pthread_rwlock_rdlock(&hs->lock);
    out->events = hs->events;
    out->bytes = hs->bytes;
    out->posts = hs->posts;
    out->ingested_total = hs->ingested_total;
    out->rejected_total = hs->rejected_total;
    out->evicted_memory = hs->evicted_memory;
    out->evicted_retention = hs->evicted_retention;
    out->memory_limit = hs->opts.memory_limit;
    out->retention_ns = hs->opts.retention_ns;
    pthread_rwlock_unlock(&hs->lock);
}
