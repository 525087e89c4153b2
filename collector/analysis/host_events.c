/* The host-event store (see host_events.h). An accepted post is two allocations, its
 * events and attrs in one and their strings in the other (filled while parsing), so
 * eviction frees whole posts. */
#include "analysis/host_events.h"
#include "util/errf.h"

#include <fnmatch.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

struct post {
    struct post *next;
    uint64_t id;     /* 1, 2, ... in arrival order */
    uint32_t poster; /* index in posters */
    int64_t min_start, max_end;
    size_t bytes;
    size_t n;
    char *strings;             /* owned: every string of ev and its attrs */
    struct fs_host_event ev[]; /* then attrs */
};

struct fs_host_events {
    pthread_rwlock_t lock;
    struct fs_host_events_opts opts;
    struct post *head, *tail; /* oldest first */
    uint64_t events, bytes, posts;
    uint64_t ingested_total, rejected_total, evicted_memory, evicted_retention;
    uint64_t duplicates_total, last_post_id;
    /* The identity hash of every event held (event_key), so a post that repeats events
       already held (an import run twice) stores each once. Linear probing, backward-shift
       deletion; at most half full. */
    uint64_t *keys;
    size_t keys_cap, keys_n;
    fs_host_neighbors_fn nbr_fn; /* where posted neighbours go (NULL: dropped) */
    void *nbr_arg;
    /* Who posted what is held: one account per poster name ever seen ("" the shared
       token), each allocated once so that events can point at its name. */
    struct poster_acct {
        char name[FS_HOST_EVENTS_MAX_POSTER + 1];
        uint64_t bytes, events, evicted_quota;
    } * *posters;
    size_t n_posters;
    uint64_t evicted_quota;
};

/* Bytes an event costs in the key set (two slots at most half full). */
#define KEY_BYTES (2 * sizeof(uint64_t))

static uint64_t
mix_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return (h ^ 0xff) * 0x100000001b3ULL;
}

static uint64_t
mix_int(uint64_t h, int64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        h = (h ^ (unsigned char)(v & 0xff)) * 0x100000001b3ULL;
    return h;
}

/* An event's identity: host, kind, name, its times on the HOST clock (as posted, so a
   second import with another measured offset is still the same event) and its attrs.
   64 bits: two different events collide with probability ~n^2/2^65, below 1e-7 for a
   million events held. Never 0 (the empty slot). */
static uint64_t
event_key(const struct fs_host_event *e)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    h = mix_str(h, e->host);
    h = mix_str(h, e->kind);
    h = mix_str(h, e->name);
    h = mix_int(h, e->start_ns + e->host_offset_ns);
    h = mix_int(h, e->end_ns + e->host_offset_ns);
    for (uint32_t i = 0; i < e->n_attrs; i++) {
        h = mix_str(h, e->attrs[i].key);
        h = mix_str(h, e->attrs[i].value);
    }
    return h ? h : 1;
}

static bool
keys_has(const struct fs_host_events *hs, uint64_t k)
{
    if (!hs->keys_cap)
        return false;
    for (size_t i = (size_t)k & (hs->keys_cap - 1); hs->keys[i]; i = (i + 1) & (hs->keys_cap - 1))
        if (hs->keys[i] == k)
            return true;
    return false;
}

/* Inserts k (not present); false when out of memory. */
static bool
keys_add(struct fs_host_events *hs, uint64_t k)
{
    if ((hs->keys_n + 1) * 2 > hs->keys_cap) {
        size_t cap = hs->keys_cap ? hs->keys_cap * 2 : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t)
            return false;
        for (size_t i = 0; i < hs->keys_cap; i++) {
            if (!hs->keys[i])
                continue;
            size_t j = (size_t)hs->keys[i] & (cap - 1);
            while (t[j])
                j = (j + 1) & (cap - 1);
            t[j] = hs->keys[i];
        }
        free(hs->keys);
        hs->keys = t;
        hs->keys_cap = cap;
    }
    size_t i = (size_t)k & (hs->keys_cap - 1);
    while (hs->keys[i])
        i = (i + 1) & (hs->keys_cap - 1);
    hs->keys[i] = k;
    hs->keys_n++;
    return true;
}

static void
keys_del(struct fs_host_events *hs, uint64_t k)
{
    if (!hs->keys_cap)
        return;
    size_t m = hs->keys_cap - 1, i = (size_t)k & m;
    while (hs->keys[i] && hs->keys[i] != k)
        i = (i + 1) & m;
    if (!hs->keys[i])
        return;
    /* Backward shift: move later members of the cluster into the hole when their home
       slot does not lie between the hole and them. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & m;
        if (!hs->keys[j])
            break;
        size_t home = (size_t)hs->keys[j] & m;
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            hs->keys[i] = hs->keys[j];
            i = j;
        }
    }
    hs->keys[i] = 0;
    hs->keys_n--;
}

struct fs_host_events *
fs_host_events_new(const struct fs_host_events_opts *o, char *errbuf, size_t errlen)
{
    if (o->memory_limit == 0 || o->retention_ns <= 0) {
        fs_errf(errbuf, errlen, "host events: memory_limit and retention must be positive");
        return NULL;
    }
    struct fs_host_events *hs = calloc(1, sizeof *hs);
    if (!hs) {
        fs_errf(errbuf, errlen, "host events: out of memory");
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
        free(p->strings);
        free(p);
        p = next;
    }
    free(hs->keys);
    for (size_t i = 0; i < hs->n_posters; i++)
        free(hs->posters[i]);
    free(hs->posters);
    pthread_rwlock_destroy(&hs->lock);
    free(hs);
}

void
fs_host_events_set_neighbor_listener(struct fs_host_events *hs, fs_host_neighbors_fn fn, void *arg)
{
    pthread_rwlock_wrlock(&hs->lock);
    hs->nbr_fn = fn;
    hs->nbr_arg = arg;
    pthread_rwlock_unlock(&hs->lock);
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

/* ---- one streaming pass: yajl's callbacks validate each item and fill the pending
 * post as they go ----
 *
 * The contract (host_events.h) was first written against a parsed tree, and is kept:
 * a repeated member keeps the place of its first occurrence and takes its last value,
 * an item's members are checked in that order, a syntax error anywhere wins over any
 * item error, and the root members are checked before the items. So the callbacks
 * record item errors rather than stop at them, and the body is always parsed to its
 * end. */

/* Times and offsets beyond this (about the year 2096) are refused, so that the
   arithmetic on them cannot overflow and saturated literals are caught. */
#define FS_TIME_LIMIT_NS 4000000000000000000LL
#define FS_OFFSET_LIMIT_NS 100000000000000000LL
/* Values nested 32 deep are malformed (the limit bodies have always had); it bounds
   the container stack below. The deepest valid value is at depth 4 (an attr's). */
#define MAX_DEPTH 32

_Static_assert(FS_HOST_EVENTS_MAX_BODY < UINT32_MAX, "string offsets are 32-bit");

/* What an open container is to the parser. */
enum frame { FR_ROOT, FR_EVENTS, FR_EVENT, FR_ATTRS, FR_SKIP, FR_NBRS, FR_NBR_LIST, FR_NBR };
/* The members of an event. */
enum field { F_HOST, F_KIND, F_NAME, F_START, F_END, F_ATTRS, N_FIELDS };
enum root_key { RK_EVENTS, RK_OFFSET, RK_UNCERTAINTY, RK_NEIGHBORS, RK_UNKNOWN };
/* Members of "neighbors" and of its list's items (NF_*: the item's strings, in the
 * order of struct nbr_item). */
enum nbr_key { NK_HOST, NK_INTERVAL, NK_LIST, NK_UNKNOWN };
enum nbr_field { NF_NIC, NF_CHASSIS_ID, NF_SYS_NAME, NF_PORT, NF_PORT_ID, NF_PORT_DESCR, N_NF };
static const char *const nbr_field_names[N_NF] = {"nic",  "chassis_id", "sys_name",
                                                  "port", "port_id",    "port_descr"};

/* One posted neighbour, copied as parsed (a repeated member: the last value). */
struct nbr_item {
    char f[N_NF][FS_HOST_EVENTS_MAX_NBR_STR + 1];
};
enum attrs_err { AE_NONE, AE_NOT_OBJECT, AE_TOO_MANY, AE_KEY, AE_TYPE, AE_LONG };
enum root_events { EVENTS_ABSENT, EVENTS_ARRAY, EVENTS_NOT_ARRAY };

/* Strings are offsets into the pending string block until commit (it may move). */
struct pending_attr {
    uint32_t key, value;
    bool is_string;
};

struct pending_event {
    uint32_t host, kind, name;
    int64_t start, end; /* host clock; end == start for instants */
    uint32_t attr_first, n_attrs;
};

struct attr_slot {
    uint32_t key, key_len, value, value_len;
    bool key_bad, is_string;
    uint8_t value_err; /* AE_NONE, AE_TYPE or AE_LONG */
};

/* The event being parsed. pos[] is the member's first place (-1: absent). */
struct event_state {
    int32_t pos[N_FIELDS];
    bool bad[N_FIELDS];
    int32_t members;
    int32_t unknown_pos;
    char unknown[FS_HOST_EVENTS_MAX_KEY + 1];
    enum field field;            /* of the member whose value comes next; N_FIELDS: unknown */
    uint32_t str[3], str_len[3]; /* host, kind, name */
    int64_t start, end;
    uint8_t attrs_err;
    char attrs_err_key[FS_HOST_EVENTS_MAX_KEY + 1];
    uint32_t attr_first, n_attrs;
    size_t attr_strings; /* bytes the attrs' strings count for (see sizing) */
};

struct ingest_ctx {
    /* The pending post. Sizing of strings counts each string whole (+1), shared copies
       too, as the accounting always has. */
    char *str;
    size_t str_len, str_cap;
    struct pending_event *ev;
    size_t n_ev, ev_cap;
    struct pending_attr *attr;
    size_t n_attr, attr_cap;
    size_t sz_strings;
    bool oom, too_deep;

    uint8_t frames[MAX_DEPTH];
    unsigned depth;
    bool root_done;

    /* root members */
    bool root_not_object;
    enum root_key root_key;
    bool root_unknown;
    char root_unknown_name[FS_HOST_EVENTS_MAX_KEY + 1];
    bool have_offset, offset_ok, have_unc, unc_ok;
    int64_t offset, unc;
    enum root_events events;

    /* the events array */
    size_t n_items;
    bool item_failed;
    char item_err[192];

    struct event_state e;
    struct attr_slot slots[FS_HOST_EVENTS_MAX_ATTRS];
    unsigned n_slots;
    int cur_slot; /* -1: the value is not kept */
    bool attrs_too_many;

    /* "neighbors" (the first problem in it is kept: nbr_err) */
    bool have_nbrs, nbrs_twice, have_nbr_host, have_nbr_interval, have_nbr_list;
    enum nbr_key nbr_key;
    int nbr_field; /* N_NF: unknown member */
    char nbr_host[FS_HOST_EVENTS_MAX_STR + 1];
    int64_t nbr_interval_s;
    struct nbr_item *nbrs; /* FS_HOST_EVENTS_MAX_NEIGHBORS of them, owned by the parse */
    size_t n_nbrs;
    char nbr_err[192];
};

enum vkind { V_NULL, V_BOOL, V_NUM, V_STR, V_MAP, V_ARR };

static bool
reserve(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *b = realloc(*buf, n * elem);
    if (!b)
        return false;
    *buf = b;
    *cap = n;
    return true;
}

/* Copies s into the string block; returns its offset or UINT32_MAX on no memory. */
static uint32_t
put_str(struct ingest_ctx *c, const char *s, size_t len)
{
    if (!reserve((void **)&c->str, &c->str_cap, c->str_len + len + 1, 1)) {
        c->oom = true;
        return UINT32_MAX;
    }
    uint32_t off = (uint32_t)c->str_len;
    memcpy(c->str + off, s, len);
    c->str[off + len] = '\0';
    c->str_len += len + 1;
    return off;
}

/* A JSON number literal (yajl checked its syntax) to int64, within the time limit.
   False for fractions and exponents: "1.0" and "1e9" are not integers. */
static bool
literal_int(const char *s, size_t len, int64_t *v)
{
    bool neg = len > 0 && s[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == len || len - i > 19)
        return false;
    uint64_t x = 0; /* 19 digits cannot overflow 64 unsigned bits */
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9)
            return false; /* '.', 'e' or 'E' */
        x = x * 10 + d;
    }
    if (x >= (uint64_t)FS_TIME_LIMIT_NS)
        return false;
    *v = neg ? -(int64_t)x : (int64_t)x;
    return true;
}

static void
event_begin(struct ingest_ctx *c)
{
    struct event_state *e = &c->e;
    for (int f = 0; f < N_FIELDS; f++) {
        e->pos[f] = -1;
        e->bad[f] = false;
    }
    e->members = 0;
    e->unknown_pos = -1;
    e->field = N_FIELDS;
    e->attrs_err = AE_NONE;
    e->attr_first = (uint32_t)c->n_attr;
    e->n_attrs = 0;
    e->attr_strings = 0;
}

static void item_error(struct ingest_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
item_error(struct ingest_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->item_err, sizeof c->item_err, fmt, ap);
    va_end(ap);
    c->item_failed = true;
}

/* The first of the event's bad members, in member order. */
static void
event_member_error(struct ingest_ctx *c, size_t i)
{
    static const char *const names[] = {"host", "kind", "name"};
    struct event_state *e = &c->e;
    int worst = -1;
    int32_t worst_pos = e->unknown_pos;
    for (int f = 0; f < N_FIELDS; f++) {
        if (e->pos[f] >= 0 && e->bad[f] && (worst_pos < 0 || e->pos[f] < worst_pos)) {
            worst = f;
            worst_pos = e->pos[f];
        }
    }
    switch (worst) {
    case -1:
        item_error(c, "events[%zu]: unknown member \"%.64s\"", i, e->unknown);
        break;
    case F_HOST:
    case F_KIND:
    case F_NAME:
        item_error(c, "events[%zu].%s: not a string of 1..%d bytes", i, names[worst],
                   FS_HOST_EVENTS_MAX_STR);
        break;
    case F_START:
        item_error(c, "events[%zu].start: not a positive integer (ns since epoch)", i);
        break;
    case F_END:
        item_error(c, "events[%zu].end: not a positive integer (ns since epoch)", i);
        break;
    default:
        switch (e->attrs_err) {
        case AE_NOT_OBJECT:
            item_error(c, "events[%zu].attrs: not an object", i);
            break;
        case AE_TOO_MANY:
            item_error(c, "events[%zu].attrs: more than %d members", i, FS_HOST_EVENTS_MAX_ATTRS);
            break;
        case AE_KEY:
            item_error(c, "events[%zu].attrs: a key is not 1..%d bytes", i, FS_HOST_EVENTS_MAX_KEY);
            break;
        case AE_TYPE:
            item_error(c, "events[%zu].attrs.%.64s: not a string, number or boolean", i,
                       e->attrs_err_key);
            break;
        default:
            item_error(c, "events[%zu].attrs.%.64s: value longer than %d bytes", i,
                       e->attrs_err_key, FS_HOST_EVENTS_MAX_STR);
            break;
        }
    }
}

/* At the event's '}': checks it whole, then keeps it or records the item's error. */
static void
event_end(struct ingest_ctx *c)
{
    struct event_state *e = &c->e;
    size_t i = c->n_items - 1;
    bool any_bad = e->unknown_pos >= 0;
    for (int f = 0; f < N_FIELDS; f++)
        any_bad |= e->bad[f];
    if (any_bad) {
        event_member_error(c, i);
        return;
    }
    if (e->pos[F_HOST] < 0 || e->pos[F_KIND] < 0 || e->pos[F_NAME] < 0 || e->pos[F_START] < 0) {
        item_error(c, "events[%zu]: missing %s", i,
                   e->pos[F_HOST] < 0   ? "host"
                   : e->pos[F_KIND] < 0 ? "kind"
                   : e->pos[F_NAME] < 0 ? "name"
                                        : "start");
        return;
    }
    bool have_end = e->pos[F_END] >= 0;
    if (have_end && e->end < e->start) {
        item_error(c, "events[%zu].end: before start", i);
        return;
    }
    if (have_end && e->end - e->start > FS_HOST_EVENTS_MAX_DURATION_NS) {
        item_error(c, "events[%zu]: longer than 24 h", i);
        return;
    }
    if (!reserve((void **)&c->ev, &c->ev_cap, c->n_ev + 1, sizeof *c->ev)) {
        c->oom = true;
        return;
    }
    struct pending_event *p = &c->ev[c->n_ev++];
    p->host = e->str[0];
    p->kind = e->str[1];
    p->name = e->str[2];
    p->start = e->start;
    p->end = have_end ? e->end : e->start;
    p->attr_first = e->attr_first;
    p->n_attrs = e->pos[F_ATTRS] >= 0 ? e->n_attrs : 0;
    c->sz_strings += e->str_len[0] + e->str_len[1] + e->str_len[2] + 3 + e->attr_strings;
}

/* The attrs object's '}': its first bad member in order, or its members kept. */
static void
attrs_end(struct ingest_ctx *c)
{
    struct event_state *e = &c->e;
    if (c->attrs_too_many) {
        e->attrs_err = AE_TOO_MANY;
        e->bad[F_ATTRS] = true;
        return;
    }
    for (unsigned k = 0; k < c->n_slots; k++) {
        const struct attr_slot *s = &c->slots[k];
        uint8_t err = s->key_bad ? AE_KEY : s->value_err;
        if (err != AE_NONE) {
            e->attrs_err = err;
            e->bad[F_ATTRS] = true;
            size_t kl = s->key_len < FS_HOST_EVENTS_MAX_KEY ? s->key_len : FS_HOST_EVENTS_MAX_KEY;
            memcpy(e->attrs_err_key, c->str + s->key, kl);
            e->attrs_err_key[kl] = '\0';
            return;
        }
    }
    if (!reserve((void **)&c->attr, &c->attr_cap, c->n_attr + c->n_slots, sizeof *c->attr)) {
        c->oom = true;
        return;
    }
    size_t strings = 0;
    for (unsigned k = 0; k < c->n_slots; k++) {
        const struct attr_slot *s = &c->slots[k];
        c->attr[c->n_attr++] = (struct pending_attr){s->key, s->value, s->is_string};
        strings += s->key_len + 1 + s->value_len + 1;
    }
    e->n_attrs = c->n_slots;
    e->attr_strings = strings;
}

/* Is the item at index n_items-1 one we validate and keep? After the first bad item
   (nothing will be stored) and past the item limit (refused by count), items are only
   counted. */
static bool
keeping_items(const struct ingest_ctx *c)
{
    return !c->item_failed && c->n_items <= FS_HOST_EVENTS_MAX_PER_POST;
}

/* A host, kind or name value. */
static void
event_string(struct ingest_ctx *c, enum field f, const char *s, size_t len)
{
    struct event_state *e = &c->e;
    if (len < 1 || len > FS_HOST_EVENTS_MAX_STR || memchr(s, '\0', len)) {
        e->bad[f] = true;
        return;
    }
    e->bad[f] = false;
    e->str_len[f] = (uint32_t)len;
    /* Hosts, kinds and names repeat within a post: share the previous event's copy. */
    if (c->n_ev > 0) {
        const struct pending_event *prev = &c->ev[c->n_ev - 1];
        uint32_t po = f == F_HOST ? prev->host : f == F_KIND ? prev->kind : prev->name;
        const char *ps = c->str + po;
        if (strncmp(ps, s, len) == 0 && ps[len] == '\0') {
            e->str[f] = po;
            return;
        }
    }
    e->str[f] = put_str(c, s, len);
}

/* An attr's value: string, number or boolean, kept as text. */
static void
attr_value(struct ingest_ctx *c, enum vkind k, const char *s, size_t len)
{
    struct attr_slot *slot = &c->slots[c->cur_slot];
    if (k != V_STR && k != V_NUM && k != V_BOOL) {
        slot->value_err = AE_TYPE;
        return;
    }
    if (k == V_NUM && len == 2 && s[0] == '-' && s[1] == '0') {
        s = "0"; /* the one integer literal not kept as written, as it always was */
        len = 1;
    }
    if (len > FS_HOST_EVENTS_MAX_STR || memchr(s, '\0', len)) {
        slot->value_err = AE_LONG;
        return;
    }
    slot->value_err = AE_NONE;
    slot->is_string = k == V_STR;
    slot->value = put_str(c, s, len);
    slot->value_len = (uint32_t)len;
}

/* A root member's integer (host_offset_ns, host_offset_uncertainty_ns). */
static void
root_int(struct ingest_ctx *c, enum vkind k, const char *s, size_t len)
{
    int64_t v = 0;
    bool ok = k == V_NUM && literal_int(s, len, &v);
    if (c->root_key == RK_OFFSET) {
        c->have_offset = true;
        c->offset_ok = ok && v > -FS_OFFSET_LIMIT_NS && v < FS_OFFSET_LIMIT_NS;
        c->offset = v;
    } else {
        c->have_unc = true;
        c->unc_ok = ok && v >= 0 && v < FS_OFFSET_LIMIT_NS;
        c->unc = v;
    }
}

/* A new events array replaces what an earlier "events" member brought (the last wins). */
static void
events_reset(struct ingest_ctx *c, enum root_events state)
{
    c->events = state;
    c->n_ev = 0;
    c->n_attr = 0;
    c->str_len = 0;
    c->sz_strings = 0;
    c->n_items = 0;
    c->item_failed = false;
}

static void nbr_error(struct ingest_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void
nbr_error(struct ingest_ctx *c, const char *fmt, ...)
{
    if (c->nbr_err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->nbr_err, sizeof c->nbr_err, fmt, ap);
    va_end(ap);
}

/* A value inside "neighbors" (frame f); returns the frame to push for a container. */
static enum frame
nbr_value(struct ingest_ctx *c, enum frame f, enum vkind k, const char *s, size_t len)
{
    enum frame push = FR_SKIP;
    if (f == FR_NBRS) {
        switch (c->nbr_key) {
        case NK_HOST:
            c->have_nbr_host = true;
            if (k != V_STR || len < 1 || len > FS_HOST_EVENTS_MAX_STR || memchr(s, '\0', len)) {
                nbr_error(c, "neighbors.host: not a string of 1..%d bytes", FS_HOST_EVENTS_MAX_STR);
            } else {
                memcpy(c->nbr_host, s, len);
                c->nbr_host[len] = '\0';
            }
            break;
        case NK_INTERVAL:
            c->have_nbr_interval = true;
            if (k != V_NUM || !literal_int(s, len, &c->nbr_interval_s) || c->nbr_interval_s < 1 ||
                c->nbr_interval_s > FS_HOST_EVENTS_MAX_NBR_INTERVAL_S)
                nbr_error(c, "neighbors.interval_s: not an integer in 1..%d",
                          FS_HOST_EVENTS_MAX_NBR_INTERVAL_S);
            break;
        case NK_LIST:
            if (c->have_nbr_list) {
                nbr_error(c, "neighbors.list: given twice");
            } else if (k != V_ARR) {
                nbr_error(c, "neighbors.list: not an array");
            } else {
                c->have_nbr_list = true;
                push = FR_NBR_LIST;
            }
            break;
        default:
            break;
        }
    } else if (f == FR_NBR_LIST) {
        if (c->n_nbrs >= FS_HOST_EVENTS_MAX_NEIGHBORS) {
            nbr_error(c, "neighbors.list: more than %d items", FS_HOST_EVENTS_MAX_NEIGHBORS);
        } else if (k != V_MAP) {
            nbr_error(c, "neighbors.list[%zu]: not an object", c->n_nbrs);
        } else if (!c->nbrs &&
                   !(c->nbrs = malloc(FS_HOST_EVENTS_MAX_NEIGHBORS * sizeof *c->nbrs))) {
            c->oom = true;
        } else {
            memset(&c->nbrs[c->n_nbrs++], 0, sizeof *c->nbrs);
            c->nbr_field = N_NF;
            push = FR_NBR;
        }
    } else if (f == FR_NBR && c->nbr_field < N_NF) {
        size_t i = c->n_nbrs - 1;
        if (k != V_STR || len > FS_HOST_EVENTS_MAX_NBR_STR || memchr(s, '\0', len)) {
            nbr_error(c, "neighbors.list[%zu].%s: not a string of at most %d bytes", i,
                      nbr_field_names[c->nbr_field], FS_HOST_EVENTS_MAX_NBR_STR);
        } else {
            memcpy(c->nbrs[i].f[c->nbr_field], s, len);
            c->nbrs[i].f[c->nbr_field][len] = '\0';
        }
    }
    return push;
}

/* The end of a neighbour item: what names it must be there. */
static void
nbr_item_end(struct ingest_ctx *c)
{
    size_t i = c->n_nbrs - 1;
    const struct nbr_item *n = &c->nbrs[i];
    if (!n->f[NF_NIC][0])
        nbr_error(c, "neighbors.list[%zu].nic: missing or empty", i);
    else if (!n->f[NF_PORT][0])
        nbr_error(c, "neighbors.list[%zu].port: missing or empty", i);
    else if (!n->f[NF_CHASSIS_ID][0] && !n->f[NF_SYS_NAME][0])
        nbr_error(c, "neighbors.list[%zu]: needs chassis_id or sys_name", i);
}

/* Every value starts here: s/len carry a string's or number's text. Returns the yajl
   verdict (0 stops the parse: nested too deep, or out of memory). */
static int
on_value(struct ingest_ctx *c, enum vkind k, const char *s, size_t len)
{
    if (c->depth >= MAX_DEPTH) {
        c->too_deep = true;
        return 0;
    }
    enum frame push = FR_SKIP;
    if (c->depth == 0) {
        if (k == V_MAP) {
            push = FR_ROOT;
            c->root_key = RK_UNKNOWN;
        } else {
            c->root_not_object = true;
        }
    } else {
        switch ((enum frame)c->frames[c->depth - 1]) {
        case FR_ROOT:
            if (c->root_key == RK_EVENTS) {
                events_reset(c, k == V_ARR ? EVENTS_ARRAY : EVENTS_NOT_ARRAY);
                if (k == V_ARR)
                    push = FR_EVENTS;
            } else if (c->root_key == RK_NEIGHBORS) {
                if (c->have_nbrs) {
                    c->nbrs_twice = true;
                } else if (k != V_MAP) {
                    nbr_error(c, "neighbors: not an object");
                } else {
                    c->have_nbrs = true;
                    push = FR_NBRS;
                }
            } else if (c->root_key != RK_UNKNOWN) {
                root_int(c, k, s, len);
            }
            break;
        case FR_NBRS:
        case FR_NBR_LIST:
        case FR_NBR:
            push = nbr_value(c, (enum frame)c->frames[c->depth - 1], k, s, len);
            break;
        case FR_EVENTS:
            c->n_items++;
            if (keeping_items(c)) {
                if (k == V_MAP) {
                    event_begin(c);
                    push = FR_EVENT;
                } else {
                    item_error(c, "events[%zu]: not an object", c->n_items - 1);
                }
            }
            break;
        case FR_EVENT: {
            struct event_state *e = &c->e;
            switch (e->field) {
            case F_HOST:
            case F_KIND:
            case F_NAME:
                if (k == V_STR)
                    event_string(c, e->field, s, len);
                else
                    e->bad[e->field] = true;
                break;
            case F_START:
                e->bad[F_START] = !(k == V_NUM && literal_int(s, len, &e->start) && e->start > 0);
                break;
            case F_END:
                e->bad[F_END] = !(k == V_NUM && literal_int(s, len, &e->end) && e->end > 0);
                break;
            case F_ATTRS:
                /* A repeated attrs replaces the earlier one's (the event's are the last). */
                c->n_attr = e->attr_first;
                e->n_attrs = 0;
                e->attr_strings = 0;
                if (k == V_MAP) {
                    e->bad[F_ATTRS] = false;
                    e->attrs_err = AE_NONE;
                    c->n_slots = 0;
                    c->attrs_too_many = false;
                    c->cur_slot = -1;
                    push = FR_ATTRS;
                } else {
                    e->bad[F_ATTRS] = true;
                    e->attrs_err = AE_NOT_OBJECT;
                }
                break;
            default:
                break;
            }
            break;
        }
        case FR_ATTRS:
            if (c->cur_slot >= 0)
                attr_value(c, k, s, len);
            break;
        default:
            break;
        }
    }
    if (k == V_MAP || k == V_ARR) {
        c->frames[c->depth++] = (uint8_t)push;
    } else if (c->depth == 0) {
        c->root_done = true;
    }
    return !c->oom;
}

static int
on_key(void *ctx, const unsigned char *key, size_t len)
{
    struct ingest_ctx *c = ctx;
    const char *k = (const char *)key;
    switch ((enum frame)c->frames[c->depth - 1]) {
    case FR_ROOT:
        if (len == 6 && memcmp(k, "events", 6) == 0) {
            c->root_key = RK_EVENTS;
        } else if (len == 14 && memcmp(k, "host_offset_ns", 14) == 0) {
            c->root_key = RK_OFFSET;
        } else if (len == 26 && memcmp(k, "host_offset_uncertainty_ns", 26) == 0) {
            c->root_key = RK_UNCERTAINTY;
        } else if (len == 9 && memcmp(k, "neighbors", 9) == 0) {
            c->root_key = RK_NEIGHBORS;
        } else {
            c->root_key = RK_UNKNOWN;
            if (!c->root_unknown) {
                c->root_unknown = true;
                size_t l = len < FS_HOST_EVENTS_MAX_KEY ? len : FS_HOST_EVENTS_MAX_KEY;
                memcpy(c->root_unknown_name, k, l);
                c->root_unknown_name[l] = '\0';
            }
        }
        break;
    case FR_NBRS:
        if (len == 4 && memcmp(k, "host", 4) == 0) {
            c->nbr_key = NK_HOST;
        } else if (len == 10 && memcmp(k, "interval_s", 10) == 0) {
            c->nbr_key = NK_INTERVAL;
        } else if (len == 4 && memcmp(k, "list", 4) == 0) {
            c->nbr_key = NK_LIST;
        } else {
            c->nbr_key = NK_UNKNOWN;
            nbr_error(c, "neighbors: unknown member \"%.*s\"", (int)(len < 64 ? len : 64), k);
        }
        break;
    case FR_NBR:
        c->nbr_field = N_NF;
        for (int i = 0; i < N_NF; i++)
            if (strlen(nbr_field_names[i]) == len && memcmp(k, nbr_field_names[i], len) == 0)
                c->nbr_field = i;
        if (c->nbr_field == N_NF)
            nbr_error(c, "neighbors.list[%zu]: unknown member \"%.*s\"", c->n_nbrs - 1,
                      (int)(len < 64 ? len : 64), k);
        break;
    case FR_EVENT: {
        struct event_state *e = &c->e;
        enum field f = N_FIELDS;
        if (len == 4 && memcmp(k, "host", 4) == 0)
            f = F_HOST;
        else if (len == 4 && memcmp(k, "kind", 4) == 0)
            f = F_KIND;
        else if (len == 4 && memcmp(k, "name", 4) == 0)
            f = F_NAME;
        else if (len == 5 && memcmp(k, "start", 5) == 0)
            f = F_START;
        else if (len == 3 && memcmp(k, "end", 3) == 0)
            f = F_END;
        else if (len == 5 && memcmp(k, "attrs", 5) == 0)
            f = F_ATTRS;
        e->field = f;
        if (f == N_FIELDS) {
            if (e->unknown_pos < 0) {
                e->unknown_pos = e->members;
                size_t l = len < FS_HOST_EVENTS_MAX_KEY ? len : FS_HOST_EVENTS_MAX_KEY;
                memcpy(e->unknown, k, l);
                e->unknown[l] = '\0';
            }
            e->members++;
        } else if (e->pos[f] < 0) {
            e->pos[f] = e->members++;
        }
        break;
    }
    case FR_ATTRS: {
        c->cur_slot = -1;
        if (c->attrs_too_many)
            break;
        for (unsigned i = 0; i < c->n_slots; i++) {
            const struct attr_slot *s = &c->slots[i];
            if (s->key_len == len && memcmp(c->str + s->key, k, len) == 0) {
                c->cur_slot = (int)i; /* repeated: first place, last value */
                return 1;
            }
        }
        if (c->n_slots == FS_HOST_EVENTS_MAX_ATTRS) {
            c->attrs_too_many = true;
            break;
        }
        struct attr_slot *s = &c->slots[c->n_slots];
        s->key = put_str(c, k, len);
        s->key_len = (uint32_t)len;
        s->key_bad = len < 1 || len > FS_HOST_EVENTS_MAX_KEY || memchr(k, '\0', len);
        s->value_err = AE_TYPE; /* until a value comes */
        s->value = 0;
        s->value_len = 0;
        s->is_string = false;
        c->cur_slot = (int)c->n_slots++;
        break;
    }
    default:
        break;
    }
    return !c->oom;
}

static int
on_end(void *ctx)
{
    struct ingest_ctx *c = ctx;
    enum frame f = (enum frame)c->frames[--c->depth];
    if (f == FR_EVENT)
        event_end(c);
    else if (f == FR_ATTRS)
        attrs_end(c);
    else if (f == FR_NBR)
        nbr_item_end(c);
    if (c->depth == 0)
        c->root_done = true;
    return !c->oom;
}

static int
on_null(void *ctx)
{
    return on_value(ctx, V_NULL, NULL, 0);
}

static int
on_boolean(void *ctx, int v)
{
    return v ? on_value(ctx, V_BOOL, "true", 4) : on_value(ctx, V_BOOL, "false", 5);
}

static int
on_number(void *ctx, const char *s, size_t len)
{
    return on_value(ctx, V_NUM, s, len);
}

static int
on_string(void *ctx, const unsigned char *s, size_t len)
{
    return on_value(ctx, V_STR, (const char *)s, len);
}

static int
on_start_map(void *ctx)
{
    return on_value(ctx, V_MAP, NULL, 0);
}

static int
on_start_array(void *ctx)
{
    return on_value(ctx, V_ARR, NULL, 0);
}

/* Numbers come as text (yajl_number), not as yajl_integer/yajl_double: attrs keep the
   literal as posted, and an out-of-range start is this item's error (named by index),
   not a syntax error. */
static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_key,
    .yajl_end_map = on_end,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end,
};

/* Runs yajl over the body. 0, or 400 with errbuf set for a syntax error, 500 on no
   memory. */
static int
parse_body(struct ingest_ctx *c, const char *body, size_t len, char *errbuf, size_t errlen)
{
    yajl_handle h = yajl_alloc(&callbacks, NULL, c);
    if (!h) {
        fs_errf(errbuf, errlen, "out of memory");
        return 500;
    }
    /* The check for data after the root is ours: yajl's own (without this flag)
       misses an unfinished token there, such as a lone '"'. */
    yajl_config(h, yajl_allow_trailing_garbage, 1);
    int rc = 0;
    bool in_body = true; /* false: the error came at the end, from yajl_complete_parse */
    yajl_status st = yajl_parse(h, (const unsigned char *)body, len);
    if (st == yajl_status_ok && c->root_done) {
        /* yajl stopped after the root's last token. */
        for (size_t i = yajl_get_bytes_consumed(h); i < len; i++) {
            if (body[i] != ' ' && body[i] != '\n' && body[i] != '\r' && body[i] != '\t') {
                fs_errf(errbuf, errlen, "malformed JSON: data after the document");
                rc = 400;
                goto out;
            }
        }
        goto out;
    }
    if (st == yajl_status_ok) {
        in_body = false;
        st = yajl_complete_parse(h);
    }
    if (st == yajl_status_ok)
        goto out;
    rc = 400;
    if (c->oom) {
        fs_errf(errbuf, errlen, "out of memory");
        rc = 500;
    } else if (c->too_deep) {
        fs_errf(errbuf, errlen, "malformed JSON: nesting too deep");
    } else if (c->root_done) {
        fs_errf(errbuf, errlen, "malformed JSON: data after the document");
    } else {
        unsigned char *msg = yajl_get_error(h, 0, NULL, 0);
        const char *m = msg ? (const char *)msg : "error";
        size_t ml = strcspn(m, "\n");
        if (strstr(m, "premature EOF"))
            fs_errf(errbuf, errlen, "malformed JSON: unexpected end");
        else
            fs_errf(errbuf, errlen, "malformed JSON: %.*s at byte %zu", (int)ml, m,
                    in_body ? yajl_get_bytes_consumed(h) : len);
        if (msg)
            yajl_free_error(h, msg);
    }
out:
    yajl_free(h);
    return rc;
}

static void
free_post(struct post *p)
{
    free(p->strings);
    free(p);
}

static void
forget_keys(struct fs_host_events *hs, const struct post *p)
{
    for (size_t i = 0; i < p->n; i++)
        keys_del(hs, event_key(&p->ev[i]));
}

/* Unlinks p (prev: the post before it, NULL for the head) and frees it. */
static void
drop_post(struct fs_host_events *hs, struct post *prev, struct post *p)
{
    forget_keys(hs, p);
    if (prev)
        prev->next = p->next;
    else
        hs->head = p->next;
    if (hs->tail == p)
        hs->tail = prev;
    hs->events -= p->n;
    hs->bytes -= p->bytes;
    hs->posts--;
    struct poster_acct *a = hs->posters[p->poster];
    a->bytes -= p->bytes;
    a->events -= p->n;
    free_post(p);
}

static void
drop_head(struct fs_host_events *hs)
{
    drop_post(hs, NULL, hs->head);
}

/* The account of the poster named name, added when new; NULL on no memory. */
static struct poster_acct *
poster_find_add(struct fs_host_events *hs, const char *name, uint32_t *idx)
{
    for (size_t i = 0; i < hs->n_posters; i++)
        if (!strcmp(hs->posters[i]->name, name)) {
            *idx = (uint32_t)i;
            return hs->posters[i];
        }
    if (hs->n_posters >= FS_HOST_EVENTS_MAX_POSTERS)
        return NULL;
    void *v = realloc(hs->posters, (hs->n_posters + 1) * sizeof *hs->posters);
    if (!v)
        return NULL;
    hs->posters = v;
    struct poster_acct *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    snprintf(a->name, sizeof a->name, "%s", name);
    *idx = (uint32_t)hs->n_posters;
    hs->posters[hs->n_posters++] = a;
    return a;
}

/* The poster's oldest posts go until bytes more fit in its quota. */
static void
make_quota_room(struct fs_host_events *hs, uint32_t idx, uint64_t quota, size_t bytes)
{
    struct poster_acct *a = hs->posters[idx];
    struct post *prev = NULL, *p = hs->head;
    while (p && a->bytes + bytes > quota) {
        struct post *next = p->next;
        if (p->poster == idx) {
            a->evicted_quota += p->n;
            hs->evicted_quota += p->n;
            drop_post(hs, prev, p);
        } else {
            prev = p;
        }
        p = next;
    }
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
            forget_keys(hs, p);
            *pp = p->next;
            hs->events -= p->n;
            hs->bytes -= p->bytes;
            hs->posts--;
            hs->evicted_retention += p->n;
            hs->posters[p->poster]->bytes -= p->bytes;
            hs->posters[p->poster]->events -= p->n;
            free_post(p);
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

/* The parsed body's verdict, the root's members first: 0 when the post can be
   stored. */
static int
check_body(const struct ingest_ctx *c, char *errbuf, size_t errlen)
{
    if (c->root_not_object) {
        fs_errf(errbuf, errlen, "body: not a JSON object");
        return 400;
    }
    if (c->root_unknown) {
        fs_errf(errbuf, errlen, "body: unknown member \"%.64s\"", c->root_unknown_name);
        return 400;
    }
    if (c->nbrs_twice) {
        fs_errf(errbuf, errlen, "neighbors: given twice");
        return 400;
    }
    if (c->nbr_err[0]) {
        fs_errf(errbuf, errlen, "%s", c->nbr_err);
        return 400;
    }
    if (c->have_nbrs && (!c->have_nbr_host || !c->have_nbr_interval || !c->have_nbr_list)) {
        fs_errf(errbuf, errlen, "neighbors.%s: missing",
                !c->have_nbr_host       ? "host"
                : !c->have_nbr_interval ? "interval_s"
                                        : "list");
        return 400;
    }
    /* A post of neighbours only needs no events (and so no offsets). */
    if (c->have_nbrs && c->events == EVENTS_ABSENT)
        return 0;
    if (!c->have_offset || !c->offset_ok) {
        fs_errf(errbuf, errlen, "host_offset_ns: missing or not an integer within ±1e17");
        return 400;
    }
    if (!c->have_unc || !c->unc_ok) {
        fs_errf(errbuf, errlen, "host_offset_uncertainty_ns: missing or not an integer >= 0");
        return 400;
    }
    if (c->events != EVENTS_ARRAY) {
        fs_errf(errbuf, errlen, "events: missing or not an array");
        return 400;
    }
    size_t n = c->n_items;
    if ((n == 0 && !c->have_nbrs) || n > FS_HOST_EVENTS_MAX_PER_POST) {
        fs_errf(errbuf, errlen, "events: %zu items (1..%d allowed)", n,
                FS_HOST_EVENTS_MAX_PER_POST);
        return n == 0 ? 400 : 413;
    }
    if (c->item_failed) {
        fs_errf(errbuf, errlen, "%s", c->item_err);
        return 400;
    }
    return 0;
}

/* Hands a valid post's neighbours to the listener (outside the store's lock: the
 * topology takes its own). */
static void
post_neighbors(struct fs_host_events *hs, const struct ingest_ctx *c, int64_t now_ns,
               struct fs_host_events_receipt *receipt)
{
    struct fs_host_neighbor v[FS_HOST_EVENTS_MAX_NEIGHBORS];
    char err[256] = "";
    pthread_rwlock_rdlock(&hs->lock);
    fs_host_neighbors_fn fn = hs->nbr_fn;
    void *arg = hs->nbr_arg;
    pthread_rwlock_unlock(&hs->lock);
    receipt->neighbors_given = true;
    if (!fn)
        return;
    for (size_t i = 0; i < c->n_nbrs; i++) {
        const struct nbr_item *n = &c->nbrs[i];
        v[i] = (struct fs_host_neighbor){n->f[NF_NIC],  n->f[NF_CHASSIS_ID], n->f[NF_SYS_NAME],
                                         n->f[NF_PORT], n->f[NF_PORT_ID],    n->f[NF_PORT_DESCR]};
    }
    if (fn(arg, c->nbr_host, v, c->n_nbrs, c->nbr_interval_s * 1000000000LL, now_ns, err,
           sizeof err) != 0)
        receipt->neighbors_refused = true;
    else
        receipt->neighbors = c->n_nbrs;
}

int
fs_host_events_ingest(struct fs_host_events *hs, const char *body, size_t len, int64_t now_ns,
                      size_t *stored, char *errbuf, size_t errlen)
{
    struct fs_host_events_receipt r;
    int rc = fs_host_events_post(hs, body, len, now_ns, &r, errbuf, errlen);
    if (stored)
        *stored = rc == 0 ? r.stored : 0;
    return rc;
}

int
fs_host_events_post(struct fs_host_events *hs, const char *body, size_t len, int64_t now_ns,
                    struct fs_host_events_receipt *receipt, char *errbuf, size_t errlen)
{
    return fs_host_events_post_as(hs, NULL, body, len, now_ns, receipt, errbuf, errlen);
}

/* 0 when every host the post names (events and neighbours) is one who may post for. */
static int
check_hosts(const struct ingest_ctx *c, const struct fs_host_events_poster *who, char *errbuf,
            size_t errlen)
{
    if (!who || !who->hosts)
        return 0;
    for (size_t i = 0; i < c->n_ev; i++) {
        const char *h = c->str + c->ev[i].host;
        if (fnmatch(who->hosts, h, 0) != 0) {
            fs_errf(errbuf, errlen,
                    "events[%zu].host: \"%.64s\" is not a host the token \"%s\" may post for "
                    "(%.64s)",
                    i, h, who->name, who->hosts);
            return 403;
        }
    }
    if (c->have_nbrs && fnmatch(who->hosts, c->nbr_host, 0) != 0) {
        fs_errf(errbuf, errlen,
                "neighbors.host: \"%.64s\" is not a host the token \"%s\" may post for (%.64s)",
                c->nbr_host, who->name, who->hosts);
        return 403;
    }
    return 0;
}

int
fs_host_events_post_as(struct fs_host_events *hs, const struct fs_host_events_poster *who,
                       const char *body, size_t len, int64_t now_ns,
                       struct fs_host_events_receipt *receipt, char *errbuf, size_t errlen)
{
    int rc = 400;
    const char *poster = who && who->name ? who->name : "";
    uint64_t quota = who ? who->quota : 0;
    struct ingest_ctx c = {0};
    struct post *p = NULL;
    uint64_t *keys = NULL;
    *receipt = (struct fs_host_events_receipt){0};
    if (len > FS_HOST_EVENTS_MAX_BODY) {
        fs_errf(errbuf, errlen, "body larger than %u bytes", FS_HOST_EVENTS_MAX_BODY);
        rc = 413;
        goto out;
    }
    /* Every kept string is at most as long as its text in the body, quotes and
       separators paying for the terminators: one block of len bytes holds them all. */
    c.str_cap = len + 1;
    c.str = malloc(c.str_cap);
    if (!c.str) {
        fs_errf(errbuf, errlen, "out of memory");
        rc = 500;
        goto out;
    }
    rc = parse_body(&c, body, len, errbuf, errlen);
    if (rc != 0)
        goto out;
    rc = check_body(&c, errbuf, errlen);
    if (rc == 0)
        rc = check_hosts(&c, who, errbuf, errlen);
    if (rc != 0)
        goto out;
    size_t n = c.n_ev;
    if (n == 0) {
        /* Neighbours only (check_body allows no events only then). */
        pthread_rwlock_rdlock(&hs->lock);
        receipt->oldest_post_id = hs->head ? hs->head->id : 0;
        receipt->last_post_id = hs->last_post_id;
        receipt->evicted_memory_total = hs->evicted_memory;
        pthread_rwlock_unlock(&hs->lock);
        goto neighbors;
    }
    size_t bytes = sizeof *p + n * (sizeof(struct fs_host_event) + KEY_BYTES) +
                   c.n_attr * sizeof(struct fs_host_attr) + c.sz_strings;
    pthread_rwlock_rdlock(&hs->lock);
    uint64_t limit = hs->opts.memory_limit;
    pthread_rwlock_unlock(&hs->lock);
    if (bytes > limit) {
        fs_errf(errbuf, errlen, "post needs %zu bytes, more than the host-event memory limit %llu",
                bytes, (unsigned long long)limit);
        rc = 413;
        goto out;
    }
    if (quota && bytes > quota) {
        fs_errf(errbuf, errlen,
                "post needs %zu bytes, more than the quota %llu of the token \"%s\"", bytes,
                (unsigned long long)quota, poster);
        rc = 413;
        goto out;
    }
    p = malloc(sizeof *p + n * sizeof(struct fs_host_event) +
               c.n_attr * sizeof(struct fs_host_attr));
    keys = malloc(n * sizeof *keys);
    if (!p || !keys) {
        fs_errf(errbuf, errlen, "out of memory");
        rc = 500;
        goto out;
    }
    /* The string block becomes the post's, trimmed to what it holds (offsets until now,
       so it may move). */
    char *strings = realloc(c.str, c.str_len ? c.str_len : 1);
    p->strings = strings ? strings : c.str;
    c.str = NULL;
    p->next = NULL;
    p->n = n;
    p->bytes = bytes;
    struct fs_host_attr *attrs = (struct fs_host_attr *)(p->ev + n);
    for (size_t a = 0; a < c.n_attr; a++) {
        attrs[a].key = p->strings + c.attr[a].key;
        attrs[a].value = p->strings + c.attr[a].value;
        attrs[a].is_string = c.attr[a].is_string;
    }
    p->min_start = INT64_MAX;
    p->max_end = INT64_MIN;
    /* Host clock to collector clock, now that the offset is known wherever it was in
       the body; both are bounded, so this cannot overflow. */
    for (size_t i = 0; i < n; i++) {
        const struct pending_event *pe = &c.ev[i];
        struct fs_host_event *e = &p->ev[i];
        e->host = p->strings + pe->host;
        e->kind = p->strings + pe->kind;
        e->name = p->strings + pe->name;
        e->start_ns = pe->start - c.offset;
        e->end_ns = pe->end - c.offset;
        e->host_offset_ns = c.offset;
        e->host_offset_uncertainty_ns = c.unc;
        e->attrs = pe->n_attrs ? attrs + pe->attr_first : NULL;
        e->n_attrs = pe->n_attrs;
        if (e->start_ns < p->min_start)
            p->min_start = e->start_ns;
        if (e->end_ns > p->max_end)
            p->max_end = e->end_ns;
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = event_key(&p->ev[i]);
    pthread_rwlock_wrlock(&hs->lock);
    expire_locked(hs, now_ns);
    uint32_t pidx = 0;
    if (!poster_find_add(hs, poster, &pidx)) {
        pthread_rwlock_unlock(&hs->lock);
        fs_errf(errbuf, errlen, "out of memory");
        rc = 500;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        p->ev[i].poster = hs->posters[pidx]->name;
    /* Events already held (or repeated within the post) are stored once: the post keeps
       the others, in order (their attrs stay where they are in its block). */
    size_t kept = 0;
    bool oom = false;
    for (size_t i = 0; i < n; i++) {
        if (keys_has(hs, keys[i]))
            continue;
        if (!keys_add(hs, keys[i])) {
            oom = true;
            break;
        }
        p->ev[kept++] = p->ev[i];
    }
    if (oom) {
        for (size_t i = 0; i < kept; i++)
            keys_del(hs, event_key(&p->ev[i]));
        pthread_rwlock_unlock(&hs->lock);
        free_post(p);
        p = NULL;
        fs_errf(errbuf, errlen, "out of memory");
        rc = 500;
        goto out;
    }
    hs->duplicates_total += n - kept;
    receipt->duplicates = n - kept;
    receipt->stored = kept;
    if (kept) {
        bytes -= (n - kept) * (sizeof(struct fs_host_event) + KEY_BYTES);
        p->n = kept;
        p->bytes = bytes;
        p->min_start = INT64_MAX;
        p->max_end = INT64_MIN;
        for (size_t i = 0; i < kept; i++) {
            if (p->ev[i].start_ns < p->min_start)
                p->min_start = p->ev[i].start_ns;
            if (p->ev[i].end_ns > p->max_end)
                p->max_end = p->ev[i].end_ns;
        }
        /* Room for it: the poster's own oldest posts within its quota, so that one host
           cannot push out the others' events; then the oldest posts of all (never this
           one: it fits both alone). */
        if (quota)
            make_quota_room(hs, pidx, quota, bytes);
        while (hs->head && hs->bytes + bytes > hs->opts.memory_limit) {
            hs->evicted_memory += hs->head->n;
            drop_head(hs);
        }
        p->id = ++hs->last_post_id;
        p->poster = pidx;
        hs->posters[pidx]->bytes += bytes;
        hs->posters[pidx]->events += kept;
        receipt->post_id = p->id;
        if (hs->tail)
            hs->tail->next = p;
        else
            hs->head = p;
        hs->tail = p;
        hs->events += kept;
        hs->bytes += bytes;
        hs->posts++;
        hs->ingested_total += kept;
        p = NULL;
    } else {
        free_post(p);
        p = NULL;
    }
    receipt->oldest_post_id = hs->head ? hs->head->id : 0;
    receipt->last_post_id = hs->last_post_id;
    receipt->evicted_memory_total = hs->evicted_memory;
    pthread_rwlock_unlock(&hs->lock);
neighbors:
    rc = 0;
    if (c.have_nbrs)
        post_neighbors(hs, &c, now_ns, receipt);
out:
    if (rc != 0)
        count_reject(hs);
    free(c.nbrs);
    free(p); /* only ever before its strings were given to it */
    free(keys);
    free(c.str);
    free(c.ev);
    free(c.attr);
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
    out->duplicates_total = hs->duplicates_total;
    out->evicted_quota = hs->evicted_quota;
    out->memory_limit = hs->opts.memory_limit;
    out->retention_ns = hs->opts.retention_ns;
    pthread_rwlock_unlock(&hs->lock);
}

void
fs_host_events_foreach_poster(struct fs_host_events *hs, fs_host_poster_cb cb, void *arg)
{
    pthread_rwlock_rdlock(&hs->lock);
    for (size_t i = 0; i < hs->n_posters; i++) {
        const struct poster_acct *a = hs->posters[i];
        cb(arg, a->name, a->bytes, a->events, a->evicted_quota);
    }
    pthread_rwlock_unlock(&hs->lock);
}
