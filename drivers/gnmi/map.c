/* gNMI Notification -> samples (see map.h). */
#include "map.h"

#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_ELEMS 64
#define KEY_MAX 4096 /* longest joined path kept; longer ones are rejected */
#define JSON_MAX_DEPTH 16
#define MAX_LABELS 4
#define MAX_DELETES 64             /* deletes honoured per notification */
#define CACHE_MAX_BYTES (4u << 20) /* default bound of the resolution cache's entries */

/* ---- how a resolved path turns into samples ---- */

enum vkind {
    VK_UNMAPPED = 0,
    VK_COUNTER, /* u64 exact, times scale */
    VK_GAUGE,   /* double times scale */
    VK_UPDOWN,  /* "UP" -> 1, anything else -> 0 (oper/admin status) */
    VK_GENERIC, /* unmapped, exposed as fabric_gnmi_value{path} (expose_unmapped) */
};

/* Where a label value comes from (built-in rules). */
enum lsrc {
    LS_NONE = 0,
    LS_FIXED,      /* arg is the value */
    LS_KEY,        /* first key of element `arg` ("elem") or named key ("elem.key") */
    LS_KEY_DIGITS, /* trailing digits of that key's value ("UC3" -> "3") */
    LS_LEAF_DIGIT, /* the single digit in the leaf name ("in-pfc3-packets" -> "3") */
    LS_ACL,        /* flow rule of (acl set name, entry sequence-id) through the ACL map */
    LS_ANYKEY,     /* user mappings: key named `arg` on any element */
};

struct lspec {
    const char *label;
    enum lsrc src;
    const char *arg;
};

struct brule {
    const char *path; /* element names joined by '/'; '#' in the leaf matches one digit */
    enum fs_metric m;
    enum vkind kind;
    double scale;
    struct lspec l[MAX_LABELS];
};

#define IFC "interfaces/interface/state/counters/"
#define QS "qos/interfaces/interface/output/queues/queue/state/"
#define SP "qos/interfaces/interface/switch-priority/state/"
#define L_IF                                                                                       \
    {                                                                                              \
        "interface", LS_KEY, "interface"                                                           \
    }
#define L_RX                                                                                       \
    {                                                                                              \
        "direction", LS_FIXED, "rx"                                                                \
    }
#define L_TX                                                                                       \
    {                                                                                              \
        "direction", LS_FIXED, "tx"                                                                \
    }
#define L_TC                                                                                       \
    {                                                                                              \
        "tc", LS_KEY_DIGITS, "queue"                                                               \
    }
#define L_PRIO                                                                                     \
    {                                                                                              \
        "priority", LS_KEY_DIGITS, "switch-priority"                                               \
    }
#define L_RULE                                                                                     \
    {                                                                                              \
        "rule", LS_ACL, NULL                                                                       \
    }
/* the port an ACL set is bound to (/acl/interfaces/interface[id]) */
#define L_ACL_IF                                                                                   \
    {                                                                                              \
        "interface", LS_KEY, "interface.id"                                                        \
    }

/* The built-in table: OpenConfig interfaces/qos/acl and the Cumulus (NVUE) additions. */
static const struct brule builtin_rules[] = {
    {IFC "in-octets", FS_M_PORT_BYTES, VK_COUNTER, 1, {L_IF, L_RX}},
    {IFC "out-octets", FS_M_PORT_BYTES, VK_COUNTER, 1, {L_IF, L_TX}},
    {IFC "in-pkts", FS_M_PORT_PACKETS, VK_COUNTER, 1, {L_IF, L_RX}},
    {IFC "out-pkts", FS_M_PORT_PACKETS, VK_COUNTER, 1, {L_IF, L_TX}},
    {IFC "in-discards", FS_M_PORT_DISCARDS, VK_COUNTER, 1, {L_IF, L_RX}},
    {IFC "out-discards", FS_M_PORT_DISCARDS, VK_COUNTER, 1, {L_IF, L_TX}},
    {IFC "in-errors", FS_M_PORT_ERRORS, VK_COUNTER, 1, {L_IF, L_RX}},
    {IFC "out-errors", FS_M_PORT_ERRORS, VK_COUNTER, 1, {L_IF, L_TX}},
    {IFC "ecn-marked-pkts", FS_M_PORT_ECN_MARKED, VK_COUNTER, 1, {L_IF}},
    {IFC "carrier-transitions", FS_M_PORT_OPER_CHANGES, VK_COUNTER, 1, {L_IF}},
    {"interfaces/interface/state/oper-status", FS_M_PORT_OPER_UP, VK_UPDOWN, 1, {L_IF}},
    {"interfaces/interface/state/admin-status", FS_M_PORT_ADMIN_UP, VK_UPDOWN, 1, {L_IF}},
    {"interfaces/interface/state/high-speed", FS_M_PORT_SPEED, VK_GAUGE, 1e6, {L_IF}},
    /* Cumulus nvidia-if-ethernet-ext: per-priority PFC frames in the leaf name. */
    {"interfaces/interface/ethernet/state/counters/in-pfc#-packets",
     FS_M_PFC_PAUSE_FRAMES,
     VK_COUNTER,
     1,
     {L_IF, L_RX, {"priority", LS_LEAF_DIGIT, NULL}}},
    {"interfaces/interface/ethernet/state/counters/out-pfc#-packets",
     FS_M_PFC_PAUSE_FRAMES,
     VK_COUNTER,
     1,
     {L_IF, L_TX, {"priority", LS_LEAF_DIGIT, NULL}}},
    {QS "transmit-pkts", FS_M_QUEUE_TX_PACKETS, VK_COUNTER, 1, {L_IF, L_TC}},
    {QS "transmit-octets", FS_M_QUEUE_TX_BYTES, VK_COUNTER, 1, {L_IF, L_TC}},
    {QS "ecn-marked-pkts", FS_M_QUEUE_ECN_MARKED, VK_COUNTER, 1, {L_IF, L_TC}},
    {QS "wred-dropped-pkts", FS_M_QUEUE_WRED_DROPPED, VK_COUNTER, 1, {L_IF, L_TC}},
    {QS "no-buffer-uc-dropped-pkts", FS_M_QUEUE_NO_BUFFER_DROPPED, VK_COUNTER, 1, {L_IF, L_TC}},
    {QS "instant-queue-len", FS_M_QUEUE_DEPTH, VK_GAUGE, 1, {L_IF, L_TC}},
    {QS "max-queue-len", FS_M_QUEUE_DEPTH_MAX, VK_GAUGE, 1, {L_IF, L_TC}},
    {SP "counters/in-pause-pkts", FS_M_PFC_PAUSE_FRAMES, VK_COUNTER, 1, {L_IF, L_RX, L_PRIO}},
    {SP "counters/out-pause-pkts", FS_M_PFC_PAUSE_FRAMES, VK_COUNTER, 1, {L_IF, L_TX, L_PRIO}},
    /* Pause durations are taken as microseconds (the NVUE CLI's unit). */
    {SP "in-pause-duration", FS_M_PFC_PAUSE_SECONDS, VK_COUNTER, 1e-6, {L_IF, L_RX, L_PRIO}},
    {SP "out-pause-duration", FS_M_PFC_PAUSE_SECONDS, VK_COUNTER, 1e-6, {L_IF, L_TX, L_PRIO}},
    {SP "counters/in-pause-duration",
     FS_M_PFC_PAUSE_SECONDS,
     VK_COUNTER,
     1e-6,
     {L_IF, L_RX, L_PRIO}},
    {SP "counters/out-pause-duration",
     FS_M_PFC_PAUSE_SECONDS,
     VK_COUNTER,
     1e-6,
     {L_IF, L_TX, L_PRIO}},
    {"acl/acl-sets/acl-set/acl-entries/acl-entry/state/matched-packets",
     FS_M_FLOW_RULE_PACKETS,
     VK_COUNTER,
     1,
     {L_RULE}},
    {"acl/acl-sets/acl-set/acl-entries/acl-entry/state/matched-octets",
     FS_M_FLOW_RULE_BYTES,
     VK_COUNTER,
     1,
     {L_RULE}},
    {"acl/interfaces/interface/ingress-acl-sets/ingress-acl-set/acl-entries/acl-entry/state/"
     "matched-packets",
     FS_M_FLOW_RULE_PACKETS,
     VK_COUNTER,
     1,
     {L_RULE, L_ACL_IF}},
    {"acl/interfaces/interface/ingress-acl-sets/ingress-acl-set/acl-entries/acl-entry/state/"
     "matched-octets",
     FS_M_FLOW_RULE_BYTES,
     VK_COUNTER,
     1,
     {L_RULE, L_ACL_IF}},
    {"acl/interfaces/interface/egress-acl-sets/egress-acl-set/acl-entries/acl-entry/state/"
     "matched-packets",
     FS_M_FLOW_RULE_PACKETS,
     VK_COUNTER,
     1,
     {L_RULE, L_ACL_IF}},
    {"acl/interfaces/interface/egress-acl-sets/egress-acl-set/acl-entries/acl-entry/state/"
     "matched-octets",
     FS_M_FLOW_RULE_BYTES,
     VK_COUNTER,
     1,
     {L_RULE, L_ACL_IF}},
};
#define N_BUILTIN (sizeof builtin_rules / sizeof builtin_rules[0])

/* A rule split into element names, built once per map. */
struct crule {
    char **names;
    size_t n_names;
    enum fs_metric m;
    enum vkind kind;
    double scale;
    struct lspec l[MAX_LABELS];
    size_t n_labels;
};

/* A resolved path: what the cache holds. key, label values live in the same allocation. */
struct rentry {
    uint64_t hash;
    uint32_t key_len;
    uint8_t kind; /* enum vkind */
    uint8_t n_labels;
    bool shared;                /* in a class (see fs_gnmi_map_shared), else the map's own */
    uint32_t refs;              /* shared entries: maps holding it (under the pool's lock) */
    struct rentry *shared_next; /* shared entries: the class's bucket chain */
    enum fs_metric m;
    double scale;
    struct fs_label labels[MAX_LABELS];
    char key[]; /* key_len bytes, then NUL, then the label values */
};

/* A path element as seen during resolution (protobuf or a JSON member name). */
struct pview {
    const char *name;
    Gnmi__PathElem__KeyEntry **keys;
    size_t n_keys;
};

/* An ACL entry named for a flow rule by its description (map.h). */
struct acl_named {
    char *set;        /* owned */
    long long seq;    /* sequence-id */
    const char *rule; /* one of the map's rule names */
};

/* An nvidia-wjh aggregate: its last count and window, and what it added (map.h). */
struct wjh_agg {
    char *key; /* owned: "interface\0group\0id\0severity\0" */
    size_t key_len;
    char *reason; /* owned: the label value */
    uint64_t count, total;
    uint64_t win_start, win_end; /* 0: unknown */
};

/* A cached entry and the sink's series of its path, so a sample skips resolving its
 * labels (store/sink.h). */
struct centry {
    struct rentry *e;
    struct fs_series_handle h;
};

struct fs_gnmi_map {
    struct crule *rules; /* built-in first, then the user's */
    size_t n_rules;
    struct fs_gnmi_acl_rule *acl;
    size_t n_acl;
    const char **rule_names; /* strings in owned */
    size_t n_rule_names;
    const char *desc_prefix; /* in owned */
    struct acl_named *named; /* FS_GNMI_ACL_NAMED_MAX */
    size_t n_named;
    struct wjh_agg *wjh; /* grown up to FS_GNMI_WJH_MAX */
    size_t n_wjh, cap_wjh;
    json_tokener *wjh_tok;
    char **owned; /* strings copied from the options */
    size_t n_owned;
    /* The path cache: an open-addressed index (at most half full) of positions into
     * dense arrays of the cached entries, in insertion order. Kept apart so the per-slot
     * cost of the sparse index is 4 bytes, not the 25 of an entry, its handle and mark:
     * a target of 3,401 paths holds about 125 KB instead of 200 KB. */
    uint32_t *index;        /* per slot: position + 1 in ents; 0: empty */
    size_t n_slots;         /* power of two */
    struct centry *ents;    /* cache_entries of them, room for cap_ents */
    unsigned char *deleted; /* per entry: its path was deleted by the target */
    size_t cap_ents;
    size_t cur_ent; /* position of the entry lookup() returned; SIZE_MAX: not cached */
    struct fs_gnmi_map_shared *shared; /* NULL: entries are this map's own */
    struct shclass *cls;               /* the class of maps resolving as this one does */
    size_t cache_max, cache_max_bytes;
    bool expose_unmapped;
    struct fs_gnmi_map_stats st;
    json_tokener *tok;
    char key[KEY_MAX + 64]; /* scratch: the joined path being looked up */
    struct pview views[PATH_MAX_ELEMS];
    const char *json_names[JSON_MAX_DEPTH];
    /* the notification being mapped */
    const struct fs_gnmi_emit *e;
    void *arg;
    bool begun;
    int64_t recv_us, device_ns;
};

/* ---- small helpers ---- */

const char *const fs_gnmi_reject_names[FS_GNMI_REJ_COUNT] = {
    "wrong_type", "json_invalid", "json_too_deep",    "json_too_large", "json_shape",
    "bad_path",   "no_value",     "too_many_deletes", "no_memory"};

static void
reject(struct fs_gnmi_map *m, enum fs_gnmi_reject why)
{
    m->st.rejected++;
    m->st.rejected_by[why]++;
}

static const char *
strip_module(const char *name)
{
    /* JSON_IETF and some targets qualify names: "openconfig-interfaces:interfaces". */
    const char *c = strchr(name, ':');
    return c ? c + 1 : name;
}

static uint64_t
hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0x243f6a8885a308d3ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 32;
    return h;
}

int
fs_gnmi_metric_by_name(const char *name)
{
    for (int i = 0; i < FS_METRIC_COUNT; i++)
        if (strcmp(fs_metric_defs[i].name, name) == 0)
            return i;
    return -1;
}

static char *
own(struct fs_gnmi_map *m, const char *s)
{
    char **grown = realloc(m->owned, (m->n_owned + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    m->owned = grown;
    char *c = strdup(s ? s : "");
    if (c)
        m->owned[m->n_owned++] = c;
    return c;
}

/* Splits "a/b/c" (leading '/' and [keys] ignored, module prefixes stripped). */
static int
split_path(struct fs_gnmi_map *m, const char *path, struct crule *r)
{
    char buf[1024];
    size_t o = 0;
    int depth = 0;
    r->names = NULL;
    r->n_names = 0;
    for (const char *p = path;; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']' && depth > 0)
            depth--;
        else if ((*p == '/' || *p == '\0') && depth == 0) {
            if (o > 0) {
                buf[o] = '\0';
                char **grown = realloc(r->names, (r->n_names + 1) * sizeof *grown);
                if (!grown)
                    return -1;
                r->names = grown;
                char *nm = own(m, strip_module(buf));
                if (!nm)
                    return -1;
                r->names[r->n_names++] = nm;
                o = 0;
            }
            if (*p == '\0')
                break;
        } else if (depth == 0) {
            if (o + 1 >= sizeof buf)
                return -1;
            buf[o++] = *p;
        }
    }
    return r->n_names > 0 && r->n_names <= PATH_MAX_ELEMS ? 0 : -1;
}

static bool
metric_has_label(enum fs_metric mt, const char *label)
{
    const struct fs_metric_def *d = &fs_metric_defs[mt];
    for (size_t i = 0; i < d->n_labels; i++)
        if (strcmp(d->labels[i], label) == 0)
            return true;
    return false;
}

/* ---- resolved paths shared between maps (map.h) ----
 * Maps whose options resolve every path alike form a class (same signature: the options
 * serialized); a class holds one entry per path, counted by the maps that cache it. Each
 * map keeps its own table of pointers, its own deleted marks and its own bounds (entries
 * and bytes count for every map that holds them), so a hostile target is bounded as
 * before, and a map's lookups that hit take no lock. */
struct shclass {
    struct shclass *next;
    char *sig;
    size_t sig_len;
    struct rentry **buckets; /* chained by shared_next */
    size_t n_buckets;        /* power of two */
    size_t n;                /* entries */
    size_t maps;
};

struct fs_gnmi_map_shared {
    pthread_mutex_t lock;
    size_t refs; /* the creator's and one per map */
    struct shclass *classes;
    size_t entries;
};

struct fs_gnmi_map_shared *
fs_gnmi_map_shared_new(void)
{
    struct fs_gnmi_map_shared *sh = calloc(1, sizeof *sh);
    if (!sh)
        return NULL;
    pthread_mutex_init(&sh->lock, NULL);
    sh->refs = 1;
    return sh;
}

static void
shared_unref_pool(struct fs_gnmi_map_shared *sh)
{
    pthread_mutex_lock(&sh->lock);
    bool last = --sh->refs == 0;
    pthread_mutex_unlock(&sh->lock);
    if (!last)
        return;
    pthread_mutex_destroy(&sh->lock);
    free(sh);
}

void
fs_gnmi_map_shared_release(struct fs_gnmi_map_shared *sh)
{
    if (sh)
        shared_unref_pool(sh);
}

size_t
fs_gnmi_map_shared_entries(struct fs_gnmi_map_shared *sh)
{
    pthread_mutex_lock(&sh->lock);
    size_t n = sh->entries;
    pthread_mutex_unlock(&sh->lock);
    return n;
}

/* Appends a length-prefixed field to a signature being built; false on no memory. */
static bool
sig_put(char **sig, size_t *len, size_t *cap, const void *p, size_t n)
{
    if (*len + sizeof n + n > *cap) {
        size_t nc = (*cap ? *cap * 2 : 256) + sizeof n + n;
        char *g = realloc(*sig, nc);
        if (!g)
            return false;
        *sig = g;
        *cap = nc;
    }
    memcpy(*sig + *len, &n, sizeof n);
    memcpy(*sig + *len + sizeof n, p, n);
    *len += sizeof n + n;
    return true;
}

static bool
sig_str(char **sig, size_t *len, size_t *cap, const char *s)
{
    return sig_put(sig, len, cap, s ? s : "\xff", s ? strlen(s) : 1);
}

/* Everything of the options that decides how a path resolves, serialized. */
static char *
options_signature(const struct fs_gnmi_map_opts *o, size_t *len)
{
    char *sig = NULL;
    size_t cap = 0;
    bool ok = true;
    *len = 0;
    /* with ACL entries named by description, the paths resolved through them stay each
     * map's own (make_entry's by_acl); such maps are a class of their own all the same,
     * so that none of them finds an ACL path another resolved without names */
    unsigned char flags[2] = {o->expose_unmapped, o->rule_names && o->n_rule_names};
    ok = ok && sig_put(&sig, len, &cap, flags, sizeof flags);
    for (size_t i = 0; ok && i < o->n_user_maps; i++) {
        const struct fs_gnmi_user_map *u = &o->user_maps[i];
        int type = (int)u->type;
        ok = sig_str(&sig, len, &cap, u->pattern) && sig_str(&sig, len, &cap, u->metric) &&
             sig_put(&sig, len, &cap, &type, sizeof type) &&
             sig_put(&sig, len, &cap, &u->scale, sizeof u->scale) &&
             sig_put(&sig, len, &cap, &u->n_labels, sizeof u->n_labels);
        for (size_t j = 0; ok && j < u->n_labels; j++)
            ok = sig_str(&sig, len, &cap, u->labels[j].label) &&
                 sig_str(&sig, len, &cap, u->labels[j].key) &&
                 sig_str(&sig, len, &cap, u->labels[j].value);
    }
    ok = ok && sig_put(&sig, len, &cap, "acl", 3);
    for (size_t i = 0; ok && i < o->n_acl_rules; i++)
        ok = sig_str(&sig, len, &cap, o->acl_rules[i].acl_name) &&
             sig_put(&sig, len, &cap, &o->acl_rules[i].sequence_id,
                     sizeof o->acl_rules[i].sequence_id) &&
             sig_str(&sig, len, &cap, o->acl_rules[i].rule);
    if (!ok) {
        free(sig);
        return NULL;
    }
    return sig;
}

/* Joins the class of maps with these options (made if none); false on no memory. */
static bool
shared_join(struct fs_gnmi_map *m, struct fs_gnmi_map_shared *sh, const struct fs_gnmi_map_opts *o)
{
    size_t len;
    char *sig = options_signature(o, &len);
    if (!sig)
        return false;
    pthread_mutex_lock(&sh->lock);
    struct shclass *c = sh->classes;
    while (c && !(c->sig_len == len && memcmp(c->sig, sig, len) == 0))
        c = c->next;
    if (!c && (c = calloc(1, sizeof *c)) != NULL) {
        c->n_buckets = 1024;
        c->buckets = calloc(c->n_buckets, sizeof *c->buckets);
        if (!c->buckets) {
            free(c);
            c = NULL;
        } else {
            c->sig = sig;
            c->sig_len = len;
            sig = NULL;
            c->next = sh->classes;
            sh->classes = c;
        }
    }
    if (c) {
        c->maps++;
        sh->refs++;
        m->shared = sh;
        m->cls = c;
    }
    pthread_mutex_unlock(&sh->lock);
    free(sig);
    return c != NULL;
}

static void
shclass_grow(struct shclass *c)
{
    size_t nb = c->n_buckets * 2;
    struct rentry **b = calloc(nb, sizeof *b);
    if (!b)
        return; /* longer chains; still correct */
    for (size_t i = 0; i < c->n_buckets; i++)
        for (struct rentry *e = c->buckets[i], *nx; e; e = nx) {
            nx = e->shared_next;
            e->shared_next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    free(c->buckets);
    c->buckets = b;
    c->n_buckets = nb;
}

/* Drops one map's hold of a shared entry (caller holds the lock). */
static void
shared_put_locked(struct fs_gnmi_map_shared *sh, struct shclass *c, struct rentry *e)
{
    if (--e->refs > 0)
        return;
    struct rentry **pp = &c->buckets[e->hash & (c->n_buckets - 1)];
    while (*pp != e)
        pp = &(*pp)->shared_next;
    *pp = e->shared_next;
    c->n--;
    sh->entries--;
    free(e);
}

/* Leaves the class; the last map out frees it. */
static void
shared_leave(struct fs_gnmi_map *m)
{
    struct fs_gnmi_map_shared *sh = m->shared;
    pthread_mutex_lock(&sh->lock);
    struct shclass *c = m->cls;
    if (--c->maps == 0) {
        struct shclass **pp = &sh->classes;
        while (*pp != c)
            pp = &(*pp)->next;
        *pp = c->next;
        free(c->buckets); /* empty: every map released its entries */
        free(c->sig);
        free(c);
    }
    pthread_mutex_unlock(&sh->lock);
    m->cls = NULL;
    m->shared = NULL;
    shared_unref_pool(sh);
}

/* Drops every cached entry of the map. */
static void
cache_release(struct fs_gnmi_map *m)
{
    if (m->cls)
        pthread_mutex_lock(&m->shared->lock);
    for (size_t i = 0; i < m->st.cache_entries; i++) {
        if (m->ents[i].e->shared)
            shared_put_locked(m->shared, m->cls, m->ents[i].e);
        else
            free(m->ents[i].e);
    }
    if (m->cls)
        pthread_mutex_unlock(&m->shared->lock);
    if (m->index)
        memset(m->index, 0, m->n_slots * sizeof *m->index);
    m->st.cache_entries = 0;
    m->st.cache_bytes = 0;
}

/* Frees an entry lookup() handed out uncached (the cache was full). */
static void
entry_drop(struct fs_gnmi_map *m, struct rentry *e)
{
    if (!e)
        return;
    if (e->shared) {
        pthread_mutex_lock(&m->shared->lock);
        shared_put_locked(m->shared, m->cls, e);
        pthread_mutex_unlock(&m->shared->lock);
    } else {
        free(e);
    }
}

/* ---- construction ---- */

struct fs_gnmi_map *
fs_gnmi_map_new(const struct fs_gnmi_map_opts *o, char *errbuf, size_t errlen)
{
    static const struct fs_gnmi_map_opts none;
    if (!o)
        o = &none;
    struct fs_gnmi_map *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    m->cache_max = o->cache_max ? o->cache_max : 65536;
    m->cache_max_bytes = o->cache_max_bytes ? o->cache_max_bytes : CACHE_MAX_BYTES;
    m->expose_unmapped = o->expose_unmapped;
    m->n_slots = 1024;
    m->index = calloc(m->n_slots, sizeof *m->index);
    m->cur_ent = SIZE_MAX;
    m->tok = json_tokener_new_ex(FS_GNMI_JSON_MAX_DEPTH);
    m->wjh_tok = json_tokener_new_ex(8);
    m->rules = calloc(N_BUILTIN + o->n_user_maps, sizeof *m->rules);
    m->acl = calloc(o->n_acl_rules + 1, sizeof *m->acl);
    if (o->rule_names && o->n_rule_names) {
        m->rule_names = calloc(o->n_rule_names, sizeof *m->rule_names);
        m->named = calloc(FS_GNMI_ACL_NAMED_MAX, sizeof *m->named);
        m->desc_prefix = own(m, o->acl_description_prefix ? o->acl_description_prefix : "");
        if (!m->rule_names || !m->named || !m->desc_prefix) {
            snprintf(errbuf, errlen, "out of memory");
            goto fail;
        }
        for (size_t i = 0; i < o->n_rule_names; i++) {
            if (!(m->rule_names[i] = own(m, o->rule_names[i]))) {
                snprintf(errbuf, errlen, "out of memory");
                goto fail;
            }
            m->n_rule_names++;
        }
    }
    if (!m->index || !m->tok || !m->wjh_tok || !m->rules || !m->acl) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < N_BUILTIN; i++) {
        const struct brule *b = &builtin_rules[i];
        struct crule *r = &m->rules[m->n_rules++];
        if (split_path(m, b->path, r) != 0) {
            snprintf(errbuf, errlen, "out of memory");
            goto fail;
        }
        r->m = b->m;
        r->kind = b->kind;
        r->scale = b->scale;
        for (size_t j = 0; j < MAX_LABELS && b->l[j].label; j++)
            r->l[r->n_labels++] = b->l[j];
    }
    for (size_t i = 0; i < o->n_user_maps; i++) {
        const struct fs_gnmi_user_map *u = &o->user_maps[i];
        struct crule *r = &m->rules[m->n_rules++];
        int mt = u->metric ? fs_gnmi_metric_by_name(u->metric) : -1;
        if (mt < 0) {
            snprintf(errbuf, errlen, "mapping %zu: unknown metric %s", i,
                     u->metric ? u->metric : "(none)");
            goto fail;
        }
        if (!u->pattern || split_path(m, u->pattern, r) != 0) {
            snprintf(errbuf, errlen, "mapping %zu: bad path pattern", i);
            goto fail;
        }
        r->m = (enum fs_metric)mt;
        r->kind = u->type == FS_GNMI_GAUGE ? VK_GAUGE : VK_COUNTER;
        if ((fs_metric_defs[mt].type == FS_MT_COUNTER) != (r->kind == VK_COUNTER)) {
            snprintf(errbuf, errlen, "mapping %zu: %s is a %s", i, u->metric,
                     fs_metric_defs[mt].type_name);
            goto fail;
        }
        r->scale = u->scale > 0 ? u->scale : 1.0;
        if (u->n_labels > MAX_LABELS) {
            snprintf(errbuf, errlen, "mapping %zu: more than %d labels", i, MAX_LABELS);
            goto fail;
        }
        for (size_t j = 0; j < u->n_labels; j++) {
            const struct fs_gnmi_label_src *ls = &u->labels[j];
            if (!ls->label || !metric_has_label(r->m, ls->label)) {
                snprintf(errbuf, errlen, "mapping %zu: %s has no label %s", i, u->metric,
                         ls->label ? ls->label : "(none)");
                goto fail;
            }
            struct lspec *l = &r->l[r->n_labels++];
            l->label = own(m, ls->label);
            l->src = ls->key ? LS_ANYKEY : LS_FIXED;
            l->arg = own(m, ls->key ? ls->key : ls->value);
            if (!l->label || !l->arg) {
                snprintf(errbuf, errlen, "out of memory");
                goto fail;
            }
        }
    }
    for (size_t i = 0; i < o->n_acl_rules; i++) {
        const struct fs_gnmi_acl_rule *a = &o->acl_rules[i];
        m->acl[i].acl_name = own(m, a->acl_name);
        m->acl[i].rule = own(m, a->rule);
        m->acl[i].sequence_id = a->sequence_id;
        if (!m->acl[i].acl_name || !m->acl[i].rule) {
            snprintf(errbuf, errlen, "out of memory");
            goto fail;
        }
        m->n_acl++;
    }
    if (o->shared && !shared_join(m, o->shared, o)) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    return m;
fail:
    fs_gnmi_map_free(m);
    return NULL;
}

void
fs_gnmi_map_free(struct fs_gnmi_map *m)
{
    if (!m)
        return;
    if (m->index)
        cache_release(m);
    free(m->index);
    free(m->ents);
    free(m->deleted);
    if (m->cls)
        shared_leave(m);
    for (size_t i = 0; m->rules && i < m->n_rules; i++)
        free(m->rules[i].names);
    free(m->rules);
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->acl);
    for (size_t i = 0; i < m->n_named; i++)
        free(m->named[i].set);
    free(m->named);
    for (size_t i = 0; i < m->n_wjh; i++) {
        free(m->wjh[i].key);
        free(m->wjh[i].reason);
    }
    free(m->wjh);
    if (m->wjh_tok)
        json_tokener_free(m->wjh_tok);
    free(m->rule_names);
    if (m->tok)
        json_tokener_free(m->tok);
    free(m);
}

const struct fs_gnmi_map_stats *
fs_gnmi_map_get_stats(const struct fs_gnmi_map *m)
{
    return &m->st;
}

/* ---- the joined path (cache key) ----
 * origin, then per element \x01 name and per key \x02 key \x03 value. Control bytes
 * keep "a/b" as a name apart from two elements; keys stay in wire order. Names lose
 * their module prefix, so a JSON_IETF member, a JSON list entry and a PROTO path element
 * give one key (and a delete by plain path reaches series that came as JSON_IETF). */

static bool
key_put(char *k, size_t *len, char tag, const char *s)
{
    size_t n = strlen(s);
    if (*len + n + 1 > KEY_MAX)
        return false;
    k[(*len)++] = tag;
    memcpy(k + *len, s, n);
    *len += n;
    return true;
}

static bool
key_elem(char *k, size_t *len, const Gnmi__PathElem *pe)
{
    if (!pe || !key_put(k, len, '\x01', pe->name ? strip_module(pe->name) : ""))
        return false;
    for (size_t j = 0; j < pe->n_key; j++) {
        const Gnmi__PathElem__KeyEntry *ke = pe->key[j];
        if (!ke || !key_put(k, len, '\x02', ke->key ? ke->key : "") ||
            !key_put(k, len, '\x03', ke->value ? ke->value : ""))
            return false;
    }
    return true;
}

static bool
key_path(char *k, size_t *len, const Gnmi__Path *p, bool with_origin)
{
    if (!p)
        return true;
    if (with_origin && p->origin && p->origin[0] && !key_put(k, len, '\x04', p->origin))
        return false;
    for (size_t i = 0; i < p->n_elem; i++)
        if (!key_elem(k, len, p->elem[i]))
            return false;
    return true;
}

/* ---- resolution (cache misses only) ---- */

static const char *
view_key(const struct pview *v, const char *keyname)
{
    for (size_t j = 0; j < v->n_keys; j++)
        if (v->keys[j] && v->keys[j]->key && (!keyname || strcmp(v->keys[j]->key, keyname) == 0))
            return v->keys[j]->value ? v->keys[j]->value : "";
    return NULL;
}

static const char *
elem_key(const struct pview *vs, size_t n, const char *arg)
{
    char elem[64];
    const char *dot = strchr(arg, '.');
    size_t el = dot ? (size_t)(dot - arg) : strlen(arg);
    if (el >= sizeof elem)
        return NULL;
    memcpy(elem, arg, el);
    elem[el] = '\0';
    for (size_t i = 0; i < n; i++)
        if (strcmp(strip_module(vs[i].name), elem) == 0)
            return view_key(&vs[i], dot ? dot + 1 : NULL);
    return NULL;
}

static bool
leaf_match(const char *pat, const char *name, char *digit)
{
    for (; *pat; pat++, name++) {
        if (*pat == '#') {
            if (!isdigit((unsigned char)*name))
                return false;
            *digit = *name;
        } else if (*pat != *name)
            return false;
    }
    return *name == '\0';
}

static const char *
acl_rule(const struct fs_gnmi_map *m, const struct pview *vs, size_t n)
{
    const char *set = elem_key(vs, n, "acl-set.name");
    if (!set)
        set = elem_key(vs, n, "ingress-acl-set.set-name");
    if (!set)
        set = elem_key(vs, n, "egress-acl-set.set-name");
    const char *seq = elem_key(vs, n, "acl-entry.sequence-id");
    if (!set || !seq)
        return NULL;
    char *end;
    errno = 0;
    long long sq = strtoll(seq, &end, 10);
    if (errno || end == seq || *end)
        return NULL;
    for (size_t i = 0; i < m->n_acl; i++)
        if (strcmp(m->acl[i].acl_name, set) == 0 &&
            (m->acl[i].sequence_id < 0 || m->acl[i].sequence_id == sq))
            return m->acl[i].rule;
    for (size_t i = 0; i < m->n_named; i++)
        if (m->named[i].seq == sq && strcmp(m->named[i].set, set) == 0)
            return m->named[i].rule;
    return NULL;
}

/* Forgets every resolved path: they are resolved again as they come (an ACL entry's rule
   changed, and paths of it may have been resolved, or resolved as unmapped, before). */
static void
cache_clear(struct fs_gnmi_map *m)
{
    cache_release(m);
}

/*
 * An acl-entry's description under /acl/acl-sets/acl-set[name]/acl-entries/
 * acl-entry[sequence-id]/{config,state}/description: true when the path is one (the
 * value is consumed, whatever it says). Records, moves or removes the entry's rule.
 */
static bool
acl_description(struct fs_gnmi_map *m, size_t n, const char *desc)
{
    const struct pview *vs = m->views;
    if (!m->n_rule_names || n < 4 || strcmp(strip_module(vs[n - 1].name), "description") != 0 ||
        strcmp(strip_module(vs[n - 3].name), "acl-entry") != 0)
        return false;
    const char *parent = strip_module(vs[n - 2].name);
    if (strcmp(parent, "config") != 0 && strcmp(parent, "state") != 0)
        return false;
    const char *set = elem_key(vs, n, "acl-set.name");
    const char *seq = view_key(&vs[n - 3], "sequence-id");
    if (!set || !seq)
        return false;
    char *end;
    errno = 0;
    long long sq = strtoll(seq, &end, 10);
    if (errno || end == seq || *end)
        return false;
    m->st.acl_descriptions++;
    const char *rule = NULL;
    size_t pl = strlen(m->desc_prefix);
    if (strncmp(desc, m->desc_prefix, pl) == 0)
        for (size_t i = 0; i < m->n_rule_names && !rule; i++)
            if (strcmp(desc + pl, m->rule_names[i]) == 0)
                rule = m->rule_names[i];
    size_t i = 0;
    while (i < m->n_named && !(m->named[i].seq == sq && strcmp(m->named[i].set, set) == 0))
        i++;
    if (i < m->n_named) {
        if (m->named[i].rule == rule)
            return true;
        if (rule) {
            m->named[i].rule = rule;
        } else {
            free(m->named[i].set);
            m->named[i] = m->named[--m->n_named];
        }
    } else {
        if (!rule)
            return true;
        char *s = m->n_named < FS_GNMI_ACL_NAMED_MAX ? strdup(set) : NULL;
        if (!s) {
            m->st.acl_named_over++;
            return true;
        }
        m->named[m->n_named++] = (struct acl_named){s, sq, rule};
    }
    cache_clear(m);
    return true;
}

/* Matches the rules against the path; fills the entry's metric/kind and label values. */
static bool
resolve(const struct fs_gnmi_map *m, const struct pview *vs, size_t n, const struct crule **out,
        const char *vals[MAX_LABELS], char digits[MAX_LABELS][24], bool *by_acl)
{
    *by_acl = false;
    for (size_t ri = 0; ri < m->n_rules; ri++) {
        const struct crule *r = &m->rules[ri];
        if (r->n_names != n)
            continue;
        char leafdigit = 0;
        size_t i;
        for (i = 0; i < n; i++) {
            const char *nm = strip_module(vs[i].name);
            if (i + 1 == n && strchr(r->names[i], '#')) {
                if (!leaf_match(r->names[i], nm, &leafdigit))
                    break;
            } else if (strcmp(r->names[i], "*") != 0 && strcmp(r->names[i], nm) != 0)
                break;
        }
        if (i != n)
            continue;
        bool ok = true;
        for (size_t j = 0; j < r->n_labels && ok; j++) {
            const struct lspec *l = &r->l[j];
            const char *v = NULL;
            switch (l->src) {
            case LS_FIXED:
                v = l->arg;
                break;
            case LS_KEY:
                v = elem_key(vs, n, l->arg);
                break;
            case LS_KEY_DIGITS: {
                const char *k = elem_key(vs, n, l->arg);
                if (k) {
                    size_t kl = strlen(k), s = kl;
                    while (s > 0 && isdigit((unsigned char)k[s - 1]))
                        s--;
                    if (s < kl && kl - s < sizeof digits[j]) {
                        memcpy(digits[j], k + s, kl - s);
                        digits[j][kl - s] = '\0';
                        v = digits[j];
                    }
                }
                break;
            }
            case LS_LEAF_DIGIT:
                if (leafdigit) {
                    digits[j][0] = leafdigit;
                    digits[j][1] = '\0';
                    v = digits[j];
                }
                break;
            case LS_ACL:
                v = acl_rule(m, vs, n);
                *by_acl = true;
                break;
            case LS_ANYKEY:
                for (size_t e = 0; e < n && !v; e++)
                    v = view_key(&vs[e], l->arg);
                break;
            case LS_NONE:
                break;
            }
            ok = v != NULL && v[0] != '\0';
            vals[j] = v;
        }
        if (!ok)
            return false; /* the path matched but lacks a label: not mappable */
        *out = r;
        return true;
    }
    return false;
}

/*
 * Renders a joined path (the cache key) as a gNMI path string for fabric_gnmi_value's
 * path label: "origin:/a/b[k=v]/c", module prefixes of element names dropped (so PROTO
 * and JSON_IETF give the same label), ']' and '\\' in key values escaped. out must hold
 * 2 * len + 2 bytes. Returns the length.
 */
static size_t
render_path(const char *key, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        char tag = key[i++];
        size_t end = i;
        while (end < len && (unsigned char)key[end] > 0x04)
            end++;
        const char *seg = key + i;
        size_t sl = end - i;
        switch (tag) {
        case '\x04':
            memcpy(out + o, seg, sl);
            o += sl;
            out[o++] = ':';
            break;
        case '\x01': {
            const char *c = memchr(seg, ':', sl);
            if (c) {
                sl -= (size_t)(c + 1 - seg);
                seg = c + 1;
            }
            out[o++] = '/';
            memcpy(out + o, seg, sl);
            o += sl;
            break;
        }
        case '\x02':
            out[o++] = '[';
            memcpy(out + o, seg, sl);
            o += sl;
            out[o++] = '=';
            break;
        case '\x03':
            for (size_t j = 0; j < sl; j++) {
                if (seg[j] == ']' || seg[j] == '\\')
                    out[o++] = '\\';
                out[o++] = seg[j];
            }
            out[o++] = ']';
            break;
        default:
            break;
        }
        i = end;
    }
    out[o] = '\0';
    return o;
}

/* What a cached entry costs (its allocation; the allocator's overhead not counted). */
static size_t
entry_bytes(const struct rentry *e)
{
    size_t n = sizeof *e + e->key_len + 1;
    if (e->kind == VK_GENERIC)
        return n + 2 * e->key_len + 2;
    for (size_t j = 0; j < e->n_labels; j++)
        n += strlen(e->labels[j].value) + 1;
    return n;
}

/* The catalogue's own copy of a label name: an entry may outlive the map that made it
 * (shared entries), so it must not point into the map's options. */
static const char *
catalogue_label(enum fs_metric mt, const char *label)
{
    const struct fs_metric_def *d = &fs_metric_defs[mt];
    for (size_t i = 0; i < d->n_labels; i++)
        if (strcmp(d->labels[i], label) == 0)
            return d->labels[i];
    return label; /* not reached: labels are checked against the metric at construction */
}

static struct rentry *
make_entry(const struct fs_gnmi_map *m, const char *key, size_t key_len, uint64_t h,
           const struct pview *vs, size_t n, bool *by_acl)
{
    const struct crule *r = NULL;
    const char *vals[MAX_LABELS] = {0};
    char digits[MAX_LABELS][24];
    bool mapped = resolve(m, vs, n, &r, vals, digits, by_acl);
    if (!mapped && m->expose_unmapped) {
        struct rentry *e = calloc(1, sizeof *e + key_len + 1 + 2 * key_len + 2);
        if (!e)
            return NULL;
        e->hash = h;
        e->key_len = (uint32_t)key_len;
        memcpy(e->key, key, key_len);
        e->key[key_len] = '\0';
        char *p = e->key + key_len + 1;
        render_path(key, key_len, p);
        e->kind = VK_GENERIC;
        e->m = FS_M_GNMI_VALUE;
        e->scale = 1.0;
        e->labels[0] = (struct fs_label){"path", p};
        e->n_labels = 1;
        return e;
    }
    size_t extra = 0;
    if (mapped)
        for (size_t j = 0; j < r->n_labels; j++)
            extra += strlen(vals[j]) + 1;
    struct rentry *e = calloc(1, sizeof *e + key_len + 1 + extra);
    if (!e)
        return NULL;
    e->hash = h;
    e->key_len = (uint32_t)key_len;
    memcpy(e->key, key, key_len);
    e->key[key_len] = '\0';
    if (!mapped)
        return e; /* kind VK_UNMAPPED */
    e->kind = (uint8_t)r->kind;
    e->m = r->m;
    e->scale = r->scale;
    char *p = e->key + key_len + 1;
    for (size_t j = 0; j < r->n_labels; j++) {
        size_t l = strlen(vals[j]);
        memcpy(p, vals[j], l + 1);
        e->labels[j].name = catalogue_label(r->m, r->l[j].label);
        e->labels[j].value = p;
        p += l + 1;
    }
    e->n_labels = (uint8_t)r->n_labels;
    return e;
}

/* The class's entry of key m->key[0..len), made from the views on a miss; the caller
 * holds one reference to it. NULL on no memory. */
static struct rentry *
shared_get(struct fs_gnmi_map *m, size_t len, uint64_t h, size_t n_views)
{
    struct fs_gnmi_map_shared *sh = m->shared;
    struct shclass *c = m->cls;
    pthread_mutex_lock(&sh->lock);
    struct rentry *e = c->buckets[h & (c->n_buckets - 1)];
    while (e && !(e->hash == h && e->key_len == len && memcmp(e->key, m->key, len) == 0))
        e = e->shared_next;
    bool by_acl = false;
    if (e) {
        e->refs++;
    } else if ((e = make_entry(m, m->key, len, h, m->views, n_views, &by_acl)) != NULL && by_acl &&
               m->rule_names) {
        /* resolved through this target's ACL descriptions: its own (shared stays false) */
    } else if (e) {
        e->shared = true;
        e->refs = 1;
        e->shared_next = c->buckets[h & (c->n_buckets - 1)];
        c->buckets[h & (c->n_buckets - 1)] = e;
        c->n++;
        sh->entries++;
        if (c->n > c->n_buckets)
            shclass_grow(c);
    }
    pthread_mutex_unlock(&sh->lock);
    return e;
}

/* Doubles the index (positions in ents do not move). False on no memory. */
static bool
index_grow(struct fs_gnmi_map *m)
{
    size_t ns = m->n_slots * 2;
    uint32_t *x = calloc(ns, sizeof *x);
    if (!x)
        return false;
    for (size_t k = 0; k < m->st.cache_entries; k++) {
        size_t j = m->ents[k].e->hash & (ns - 1);
        while (x[j])
            j = (j + 1) & (ns - 1);
        x[j] = (uint32_t)(k + 1);
    }
    free(m->index);
    m->index = x;
    m->n_slots = ns;
    return true;
}

/* Room for one more entry in the dense arrays, grown by a quarter (not the power-of-two
 * slack of the index, up to twice the paths). False on no memory. */
static bool
ents_room(struct fs_gnmi_map *m)
{
    if (m->st.cache_entries < m->cap_ents)
        return true;
    size_t nc = m->cap_ents ? m->cap_ents + m->cap_ents / 4 : 256;
    struct centry *ne = realloc(m->ents, nc * sizeof *ne);
    if (!ne)
        return false;
    m->ents = ne;
    unsigned char *nd = realloc(m->deleted, nc);
    if (!nd)
        return false; /* ents is larger, cap_ents not: retried on the next insert */
    m->deleted = nd;
    m->cap_ents = nc;
    return true;
}

/* Finds the entry of key (m->key[0..len)); on a miss resolves it from the views. The
 * returned entry is owned by the cache, or by *tmp (caller frees) when the cache is full. */
static struct rentry *
lookup(struct fs_gnmi_map *m, size_t len, size_t n_views, struct rentry **tmp)
{
    uint64_t h = hash_bytes(m->key, len);
    size_t mask = m->n_slots - 1, i = h & mask;
    m->cur_ent = SIZE_MAX;
    for (uint32_t x; (x = m->index[i]) != 0; i = (i + 1) & mask) {
        struct rentry *e = m->ents[x - 1].e;
        if (e->hash == h && e->key_len == len && memcmp(e->key, m->key, len) == 0) {
            m->cur_ent = x - 1;
            return e;
        }
    }
    bool by_acl;
    struct rentry *e = m->cls ? shared_get(m, len, h, n_views)
                              : make_entry(m, m->key, len, h, m->views, n_views, &by_acl);
    if (!e)
        return NULL;
    size_t bytes = entry_bytes(e);
    /* the index stays at most half full: when it cannot grow, nothing more is cached */
    if (m->st.cache_entries >= m->cache_max || m->st.cache_bytes + bytes > m->cache_max_bytes ||
        ((m->st.cache_entries + 1) * 2 > m->n_slots && !index_grow(m)) || !ents_room(m)) {
        m->st.cache_overflow++;
        *tmp = e;
        return e;
    }
    size_t k = m->st.cache_entries;
    m->ents[k] = (struct centry){.e = e};
    m->deleted[k] = 0;
    mask = m->n_slots - 1; /* the index may have grown: e's slot is found afresh */
    for (i = h & mask; m->index[i]; i = (i + 1) & mask)
        ;
    m->index[i] = (uint32_t)(k + 1);
    m->cur_ent = k;
    m->st.cache_entries++;
    m->st.cache_bytes += bytes;
    return e;
}

/* ---- values ---- */

enum vtype { V_NONE = 0, V_U64, V_I64, V_DBL, V_STR, V_BOOL };
struct val {
    enum vtype t;
    uint64_t u;
    int64_t i;
    double d;
    const char *s;
};

static bool
parse_u64(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static bool
val_u64(const struct val *v, uint64_t *out)
{
    switch (v->t) {
    case V_U64:
        *out = v->u;
        return true;
    case V_I64:
        if (v->i < 0)
            return false;
        *out = (uint64_t)v->i;
        return true;
    case V_DBL:
        if (!(v->d >= 0 && v->d < 18446744073709551616.0) || v->d != floor(v->d))
            return false;
        *out = (uint64_t)v->d;
        return true;
    case V_STR:
        return parse_u64(v->s, out);
    default:
        return false;
    }
}

static bool
val_double(const struct val *v, double *out)
{
    switch (v->t) {
    case V_U64:
        *out = (double)v->u;
        return true;
    case V_I64:
        *out = (double)v->i;
        return true;
    case V_DBL:
        *out = v->d;
        return isfinite(v->d);
    case V_BOOL:
        *out = v->u ? 1 : 0;
        return true;
    case V_STR: {
        if (!v->s || !v->s[0])
            return false;
        char *end;
        errno = 0;
        double d = strtod(v->s, &end);
        if (errno || *end || !isfinite(d))
            return false;
        *out = d;
        return true;
    }
    default:
        return false;
    }
}

static bool
val_updown(const struct val *v, double *out)
{
    if (v->t == V_STR) {
        *out = strcmp(strip_module(v->s), "UP") == 0 ? 1 : 0;
        return true;
    }
    if (v->t == V_BOOL) {
        *out = v->u ? 1 : 0;
        return true;
    }
    return false;
}

static void
begin_batch(struct fs_gnmi_map *m)
{
    if (m->begun)
        return;
    m->begun = true;
    if (m->e->begin)
        m->e->begin(m->arg, m->recv_us, m->device_ns);
}

/* The entry lookup() returned has a value again. */
static void
undelete(struct fs_gnmi_map *m)
{
    if (m->cur_ent != SIZE_MAX)
        m->deleted[m->cur_ent] = 0;
}

/* A counter or gauge of the entry lookup() returned: through its cached entry's handle
 * when it is cached. */
static void
emit_counter(struct fs_gnmi_map *m, const struct rentry *e, uint64_t u)
{
    if (m->e->counter_h && m->cur_ent != SIZE_MAX)
        m->e->counter_h(m->arg, &m->ents[m->cur_ent].h, e->m, e->labels, e->n_labels, u, e->scale);
    else if (m->e->counter)
        m->e->counter(m->arg, e->m, e->labels, e->n_labels, u, e->scale);
}

static void
emit_gauge(struct fs_gnmi_map *m, const struct rentry *e, double v)
{
    if (m->e->gauge_h && m->cur_ent != SIZE_MAX)
        m->e->gauge_h(m->arg, &m->ents[m->cur_ent].h, e->m, e->labels, e->n_labels, v);
    else if (m->e->gauge)
        m->e->gauge(m->arg, e->m, e->labels, e->n_labels, v);
}

static void
emit_value(struct fs_gnmi_map *m, struct rentry *e, const struct val *v)
{
    if (e->kind == VK_UNMAPPED) {
        m->st.unmapped++;
        return;
    }
    if (e->kind == VK_GENERIC) {
        double g;
        /* numbers (also in strings, as JSON_IETF sends 64-bit ones) and booleans; other
         * strings (enums, names) have no number to show: dropped, counted unmapped */
        if (!val_double(v, &g)) {
            m->st.unmapped++;
            return;
        }
        begin_batch(m);
        emit_gauge(m, e, g);
        undelete(m);
        m->st.exposed++;
        return;
    }
    uint64_t u;
    double d;
    switch ((enum vkind)e->kind) {
    case VK_COUNTER:
        if (!val_u64(v, &u))
            goto rejected;
        begin_batch(m);
        emit_counter(m, e, u);
        break;
    case VK_GAUGE:
        if (!val_double(v, &d))
            goto rejected;
        begin_batch(m);
        emit_gauge(m, e, d * e->scale);
        break;
    case VK_UPDOWN:
        if (!val_updown(v, &d))
            goto rejected;
        begin_batch(m);
        emit_gauge(m, e, d);
        break;
    default:
        goto rejected;
    }
    undelete(m);
    m->st.mapped++;
    return;
rejected:
    reject(m, FS_GNMI_REJ_WRONG_TYPE);
}

/* Resolves m->key[0..len) with n_views views and emits v. */
/* A JSON member as a uint64 (a non-negative integer, or a string of digits). */
static bool
wjh_u64(json_object *o, const char *name, uint64_t *out)
{
    json_object *x;
    if (!json_object_object_get_ex(o, name, &x))
        return false;
    if (json_object_get_type(x) == json_type_int) {
        if (json_object_get_int64(x) < 0)
            return false;
        *out = json_object_get_uint64(x);
        return true;
    }
    if (json_object_get_type(x) != json_type_string)
        return false;
    return parse_u64(json_object_get_string(x), out);
}

/*
 * The `drop` leaf of an nvidia-wjh aggregate reason (map.h): true when the path is one
 * (the value is consumed, counted in wjh_records, and wjh_rejected when it cannot be
 * read). Adds to the aggregate's total as a window and emits it.
 */
static bool
wjh_drop(struct fs_gnmi_map *m, size_t n, const char *json)
{
    const struct pview *vs = m->views;
    if (n < 7 || strcmp(strip_module(vs[n - 1].name), "drop") != 0 ||
        strcmp(strip_module(vs[n - 2].name), "reason") != 0 ||
        strcmp(strip_module(vs[n - 3].name), "reasons") != 0 ||
        strcmp(strip_module(vs[n - 5].name), "aggregate") != 0 ||
        strcmp(strip_module(vs[n - 6].name), "wjh") != 0)
        return false;
    const char *iface = elem_key(vs, n, "interface.name");
    const char *group = strip_module(vs[n - 4].name);
    const char *id = view_key(&vs[n - 2], "id");
    const char *sev = view_key(&vs[n - 2], "severity");
    if (!iface || !id)
        return false;
    if (!sev)
        sev = "";
    m->st.wjh_records++;
    size_t jl = strlen(json);
    uint64_t count = 0, ws = 0, we = 0;
    const char *reason = NULL;
    char idr[48];
    json_object *jo = NULL;
    if (jl > FS_GNMI_WJH_JSON_MAX)
        goto rejected;
    json_tokener_reset(m->wjh_tok);
    jo = json_tokener_parse_ex(m->wjh_tok, json, (int)jl);
    if (!jo && json_tokener_get_error(m->wjh_tok) == json_tokener_continue)
        jo = json_tokener_parse_ex(m->wjh_tok, "", 1);
    if (!jo || json_object_get_type(jo) != json_type_object || !wjh_u64(jo, "count", &count))
        goto rejected;
    if (!wjh_u64(jo, "window_start", &ws) || !wjh_u64(jo, "window_end", &we) || we < ws)
        ws = we = 0;
    json_object *r;
    if (json_object_object_get_ex(jo, "reason", &r) &&
        json_object_get_type(r) == json_type_string && json_object_get_string_len(r) > 0 &&
        json_object_get_string_len(r) < 96)
        reason = json_object_get_string(r);
    else {
        snprintf(idr, sizeof idr, "id_%.40s", id);
        reason = idr;
    }
    /* the aggregate's key: interface, group, id, severity */
    size_t kl = strlen(iface) + strlen(group) + strlen(id) + strlen(sev) + 4;
    char key[KEY_MAX + 64];
    if (kl > sizeof key)
        goto rejected;
    size_t o = 0;
    const char *parts[4] = {iface, group, id, sev};
    for (int i = 0; i < 4; i++) {
        size_t l = strlen(parts[i]);
        memcpy(key + o, parts[i], l + 1);
        o += l + 1;
    }
    struct wjh_agg *a = NULL;
    for (size_t i = 0; i < m->n_wjh && !a; i++)
        if (m->wjh[i].key_len == kl && memcmp(m->wjh[i].key, key, kl) == 0)
            a = &m->wjh[i];
    if (!a) {
        if (m->n_wjh == FS_GNMI_WJH_MAX)
            goto rejected;
        if (m->n_wjh == m->cap_wjh) {
            size_t cap = m->cap_wjh ? m->cap_wjh * 2 : 16;
            struct wjh_agg *g = realloc(m->wjh, cap * sizeof *g);
            if (!g)
                goto rejected;
            m->wjh = g;
            m->cap_wjh = cap;
        }
        char *k = malloc(kl), *rs = strdup(reason);
        if (!k || !rs) {
            free(k);
            free(rs);
            goto rejected;
        }
        memcpy(k, key, kl);
        a = &m->wjh[m->n_wjh++];
        *a = (struct wjh_agg){.key = k, .key_len = kl, .reason = rs, .total = count};
    } else if (a->win_end && ws && ws > a->win_end) {
        a->total += count; /* a new window after the previous one: all of it is new */
    } else if (count > a->count) {
        a->total += count - a->count;
    }
    a->count = count;
    a->win_start = ws;
    a->win_end = we;
    json_object_put(jo);
    struct fs_label l[3] = {{"interface", iface}, {"group", group}, {"reason", a->reason}};
    begin_batch(m);
    if (m->e->counter)
        m->e->counter(m->arg, FS_M_PORT_WJH_DROPPED, l, 3, a->total, 1.0);
    m->st.mapped++;
    return true;
rejected:
    if (jo)
        json_object_put(jo);
    m->st.wjh_rejected++;
    return true;
}

/* ---- openconfig-lldp (map.h, lldp.h) ---- */

static bool
view_is(const struct pview *vs, size_t i, const char *name)
{
    return strcmp(strip_module(vs[i].name), name) == 0;
}

/* The key of a list element in a delete: NULL (every one) when absent or `*`. */
static const char *
delete_key(const struct pview *v, const char *keyname)
{
    const char *k = view_key(v, keyname);
    return k && strcmp(k, "*") != 0 ? k : NULL;
}

static const struct {
    const char *leaf;
    enum fs_gnmi_lldp_field field;
} lldp_fields[] = {
    {"chassis-id", FS_GNMI_LLDP_CHASSIS_ID},     {"port-id", FS_GNMI_LLDP_PORT_ID},
    {"port-id-type", FS_GNMI_LLDP_PORT_ID_TYPE}, {"port-description", FS_GNMI_LLDP_PORT_DESCR},
    {"system-name", FS_GNMI_LLDP_SYS_NAME},
};

static int
lldp_field(const char *leaf)
{
    for (size_t i = 0; i < sizeof lldp_fields / sizeof lldp_fields[0]; i++)
        if (strcmp(leaf, lldp_fields[i].leaf) == 0)
            return (int)lldp_fields[i].field;
    return -1;
}

static void
lldp_emit(struct fs_gnmi_map *m, const struct fs_gnmi_lldp_event *ev)
{
    m->st.lldp++;
    if (m->e->lldp)
        m->e->lldp(m->arg, ev);
}

/* Whether vs[0..n) is /lldp/interfaces/interface[name]/neighbors/neighbor[id]/... up to
 * min(n, 5) elements. */
static bool
lldp_neighbor_path(const struct pview *vs, size_t n)
{
    static const char *const names[] = {"lldp", "interfaces", "interface", "neighbors", "neighbor"};
    for (size_t i = 0; i < n && i < 5; i++)
        if (!view_is(vs, i, names[i]))
            return false;
    return true;
}

/* An LLDP leaf (true: consumed, whatever its value). */
static bool
lldp_leaf(struct fs_gnmi_map *m, size_t n, const struct val *v)
{
    const struct pview *vs = m->views;
    char num[32];
    const char *text = NULL;
    if (n < 3 || !view_is(vs, 0, "lldp"))
        return false;
    switch (v->t) {
    case V_STR:
        text = v->s ? v->s : "";
        break;
    case V_U64:
    case V_BOOL:
        snprintf(num, sizeof num, "%llu", (unsigned long long)v->u);
        text = num;
        break;
    case V_I64:
        snprintf(num, sizeof num, "%lld", (long long)v->i);
        text = num;
        break;
    case V_DBL:
        snprintf(num, sizeof num, "%.17g", v->d);
        text = num;
        break;
    case V_NONE:
        break;
    }
    if (n == 3 && view_is(vs, 1, "state")) {
        const char *leaf = strip_module(vs[2].name);
        bool ch = strcmp(leaf, "chassis-id") == 0, nm = strcmp(leaf, "system-name") == 0;
        if (!ch && !nm)
            return false; /* other /lldp/state leaves (counters, enabled): the usual way */
        if (text) {
            struct fs_gnmi_lldp_event ev = {
                .kind = ch ? FS_GNMI_LLDP_LOCAL_CHASSIS : FS_GNMI_LLDP_LOCAL_NAME, .value = text};
            lldp_emit(m, &ev);
        }
        return true;
    }
    if (n != 7 || !lldp_neighbor_path(vs, n) || !view_is(vs, 5, "state"))
        return false;
    const char *iface = view_key(&vs[2], "name"), *id = view_key(&vs[4], "id");
    int f = lldp_field(strip_module(vs[6].name));
    if (f >= 0 && text && iface && id) {
        struct fs_gnmi_lldp_event ev = {.kind = FS_GNMI_LLDP_NB_FIELD,
                                        .field = (enum fs_gnmi_lldp_field)f,
                                        .iface = iface,
                                        .id = id,
                                        .value = text};
        lldp_emit(m, &ev);
    }
    return true; /* ttl, age, capabilities...: a neighbour's, not a metric */
}

/* A delete under /lldp: the neighbours (or the local identity) it removes. */
static void
lldp_delete(struct fs_gnmi_map *m, size_t n)
{
    const struct pview *vs = m->views;
    struct fs_gnmi_lldp_event ev = {.kind = FS_GNMI_LLDP_NB_DELETE};
    if (n == 0 || !view_is(vs, 0, "lldp"))
        return;
    if (n >= 2 && view_is(vs, 1, "state")) {
        /* the identity (or one of its leaves) withdrawn */
        const char *leaf = n >= 3 ? strip_module(vs[2].name) : NULL;
        ev.value = "";
        if (!leaf || strcmp(leaf, "chassis-id") == 0) {
            ev.kind = FS_GNMI_LLDP_LOCAL_CHASSIS;
            lldp_emit(m, &ev);
        }
        if (!leaf || strcmp(leaf, "system-name") == 0) {
            ev.kind = FS_GNMI_LLDP_LOCAL_NAME;
            lldp_emit(m, &ev);
        }
        return;
    }
    if (!lldp_neighbor_path(vs, n))
        return;
    ev.iface = n >= 3 ? delete_key(&vs[2], "name") : NULL;
    ev.id = n >= 5 ? delete_key(&vs[4], "id") : NULL;
    if (n == 7 && view_is(vs, 5, "state")) {
        /* one leaf withdrawn: the neighbour stays, without it */
        int f = lldp_field(strip_module(vs[6].name));
        if (f < 0 || !ev.iface || !ev.id)
            return;
        ev.kind = FS_GNMI_LLDP_NB_FIELD;
        ev.field = (enum fs_gnmi_lldp_field)f;
        ev.value = "";
    } else if (n > 6 || (n == 6 && !view_is(vs, 5, "state"))) {
        return; /* config, or something below the neighbour we do not keep */
    }
    lldp_emit(m, &ev);
}

static void
map_leaf(struct fs_gnmi_map *m, size_t len, size_t n_views, const struct val *v)
{
    if (lldp_leaf(m, n_views, v))
        return;
    if (v->t == V_STR && v->s && (acl_description(m, n_views, v->s) || wjh_drop(m, n_views, v->s)))
        return;
    struct rentry *tmp = NULL;
    struct rentry *e = lookup(m, len, n_views, &tmp);
    if (!e) {
        reject(m, FS_GNMI_REJ_NO_MEMORY);
        return;
    }
    emit_value(m, e, v);
    entry_drop(m, tmp);
}

static void
json_to_val(json_object *jo, struct val *v)
{
    memset(v, 0, sizeof *v);
    switch (json_object_get_type(jo)) {
    case json_type_int: {
        int64_t i = json_object_get_int64(jo);
        if (i < 0) {
            v->t = V_I64;
            v->i = i;
        } else {
            v->t = V_U64;
            v->u = json_object_get_uint64(jo);
        }
        break;
    }
    case json_type_double:
        v->t = V_DBL;
        v->d = json_object_get_double(jo);
        break;
    case json_type_boolean:
        v->t = V_BOOL;
        v->u = json_object_get_boolean(jo) ? 1 : 0;
        break;
    case json_type_string:
        v->t = V_STR;
        v->s = json_object_get_string(jo);
        break;
    default:
        v->t = V_NONE;
        break;
    }
}

static void map_json(struct fs_gnmi_map *m, json_object *jo, size_t len, size_t n_views, int depth);

#define LIST_MAX_KEYS 8

static bool
json_scalar(json_object *jo)
{
    switch (json_object_get_type(jo)) {
    case json_type_string:
    case json_type_int:
    case json_type_double:
    case json_type_boolean:
        return true;
    default:
        return false;
    }
}

/* The member of obj named name, module prefixes ignored on both sides; NULL if none. */
static json_object *
json_member(json_object *obj, const char *name)
{
    if (!obj || json_object_get_type(obj) != json_type_object)
        return NULL;
    json_object_object_foreach(obj, k, v)
    {
        if (strcmp(strip_module(k), strip_module(name)) == 0)
            return v;
    }
    return NULL;
}

/*
 * The keys of one entry of a JSON list (RFC 7951 encodes a YANG list as an array of
 * objects). Without the schema they are inferred: an entry's scalar members that also
 * appear in its config or state container (OpenConfig keeps every list key as a leafref
 * to config/<key> beside the key itself, and repeats it in state); else its only scalar
 * member. Fills names and values; returns how many, 0 when no key can be told (several
 * scalar members, none repeated) or when there are more than LIST_MAX_KEYS.
 */
static size_t
list_entry_keys(json_object *entry, const char *names[LIST_MAX_KEYS],
                const char *vals[LIST_MAX_KEYS])
{
    json_object *config = json_member(entry, "config"), *state = json_member(entry, "state");
    size_t n = 0, scalars = 0;
    const char *only_name = NULL, *only_val = NULL;
    json_object_object_foreach(entry, k, v)
    {
        if (!json_scalar(v))
            continue;
        scalars++;
        only_name = k;
        only_val = json_object_get_string(v);
        if (json_member(config, k) || json_member(state, k)) {
            if (n == LIST_MAX_KEYS)
                return 0;
            names[n] = strip_module(k);
            vals[n++] = json_object_get_string(v);
        }
    }
    if (n == 0 && scalars == 1) {
        names[0] = strip_module(only_name);
        vals[0] = only_val;
        n = 1;
    }
    return n;
}

/*
 * A JSON list at m->key[0..len): the array is the value of the path's last element (a
 * member name or the update path's last element), which must not have keys yet. Each
 * entry becomes that element with the entry's keys (as a gNMI path would carry them),
 * and its other members map below it. An array that is not all objects (a leaf-list)
 * and an entry whose keys cannot be told are rejected.
 */
static void
map_json_list(struct fs_gnmi_map *m, json_object *arr, size_t len, size_t n_views, int depth)
{
    size_t n = json_object_array_length(arr);
    struct pview *last = n_views > 0 ? &m->views[n_views - 1] : NULL;
    bool objects = true;
    for (size_t i = 0; i < n && objects; i++)
        objects = json_object_get_type(json_object_array_get_idx(arr, i)) == json_type_object;
    if (!last || last->n_keys > 0 || !objects || depth >= JSON_MAX_DEPTH) {
        reject(m, depth >= JSON_MAX_DEPTH ? FS_GNMI_REJ_JSON_TOO_DEEP : FS_GNMI_REJ_JSON_SHAPE);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        json_object *entry = json_object_array_get_idx(arr, i);
        const char *kn[LIST_MAX_KEYS], *kv[LIST_MAX_KEYS];
        size_t nk = list_entry_keys(entry, kn, kv);
        if (nk == 0) {
            reject(m, FS_GNMI_REJ_JSON_SHAPE); /* a list entry whose key cannot be told */
            continue;
        }
        Gnmi__PathElem__KeyEntry ke[LIST_MAX_KEYS], *kp[LIST_MAX_KEYS];
        size_t l = len;
        bool ok = true;
        for (size_t j = 0; j < nk && ok; j++) {
            gnmi__path_elem__key_entry__init(&ke[j]);
            ke[j].key = (char *)kn[j];
            ke[j].value = (char *)kv[j];
            kp[j] = &ke[j];
            ok = key_put(m->key, &l, '\x02', kn[j]) && key_put(m->key, &l, '\x03', kv[j]);
        }
        if (!ok) {
            reject(m, FS_GNMI_REJ_BAD_PATH);
            continue;
        }
        last->keys = kp;
        last->n_keys = nk;
        json_object_object_foreach(entry, name, child)
        {
            bool is_key = false;
            for (size_t j = 0; j < nk && !is_key; j++)
                is_key = json_scalar(child) && strcmp(strip_module(name), kn[j]) == 0;
            if (is_key)
                continue;
            size_t cl = l;
            if (n_views >= PATH_MAX_ELEMS || !key_put(m->key, &cl, '\x01', strip_module(name))) {
                reject(m, FS_GNMI_REJ_BAD_PATH);
                continue;
            }
            m->views[n_views] = (struct pview){name, NULL, 0};
            map_json(m, child, cl, n_views + 1, depth + 1);
        }
        /* map_json may have reused the views below; this element's are ours again */
        last->keys = NULL;
        last->n_keys = 0;
    }
}

/* A JSON value at m->key[0..len): leaves map one by one, containers extend the path,
 * lists (arrays of objects) add their entries' keys to the path. */
static void
map_json(struct fs_gnmi_map *m, json_object *jo, size_t len, size_t n_views, int depth)
{
    enum json_type t = json_object_get_type(jo);
    if (t == json_type_array) {
        map_json_list(m, jo, len, n_views, depth);
        return;
    }
    if (t != json_type_object) {
        struct val v;
        json_to_val(jo, &v);
        if (v.t == V_NONE) {
            reject(m, FS_GNMI_REJ_WRONG_TYPE); /* null */
            return;
        }
        map_leaf(m, len, n_views, &v);
        return;
    }
    if (depth >= JSON_MAX_DEPTH || n_views >= PATH_MAX_ELEMS) {
        reject(m, depth >= JSON_MAX_DEPTH ? FS_GNMI_REJ_JSON_TOO_DEEP : FS_GNMI_REJ_BAD_PATH);
        return;
    }
    json_object_object_foreach(jo, name, child)
    {
        size_t l = len;
        if (!key_put(m->key, &l, '\x01', strip_module(name))) {
            reject(m, FS_GNMI_REJ_BAD_PATH);
            continue;
        }
        m->views[n_views] = (struct pview){name, NULL, 0};
        map_json(m, child, l, n_views + 1, depth + 1);
    }
}

static void
map_json_bytes(struct fs_gnmi_map *m, const ProtobufCBinaryData *b, size_t len, size_t n_views)
{
    if (!b->data || b->len == 0) {
        reject(m, FS_GNMI_REJ_JSON_INVALID);
        return;
    }
    /* Parsed whole on a thread that serves many targets, into about 32 times its size
     * (json-c objects): bounded before parsing. */
    if (b->len > FS_GNMI_JSON_MAX_BYTES) {
        reject(m, FS_GNMI_REJ_JSON_TOO_LARGE);
        return;
    }
    json_tokener_reset(m->tok);
    json_object *jo = json_tokener_parse_ex(m->tok, (const char *)b->data, (int)b->len);
    /* A bare number at the end of the bytes is complete only once the tokener sees a
     * terminator: hand it the NUL the wire form lacks. */
    if (!jo && json_tokener_get_error(m->tok) == json_tokener_continue)
        jo = json_tokener_parse_ex(m->tok, "", 1);
    if (!jo) {
        /* json-c stops at the depth limit: a value nested 100,000 deep costs 32 levels;
         * a JSON null parses to NULL */
        enum json_tokener_error je = json_tokener_get_error(m->tok);
        reject(m, je == json_tokener_error_depth ? FS_GNMI_REJ_JSON_TOO_DEEP
                  : je == json_tokener_success   ? FS_GNMI_REJ_WRONG_TYPE
                                                 : FS_GNMI_REJ_JSON_INVALID);
        return;
    }
    map_json(m, jo, len, n_views, 0);
    json_object_put(jo);
}

static void
map_typed(struct fs_gnmi_map *m, const Gnmi__TypedValue *tv, size_t len, size_t n_views)
{
    struct val v = {0};
    switch (tv->value_case) {
    case GNMI__TYPED_VALUE__VALUE_UINT_VAL:
        v.t = V_U64;
        v.u = tv->uint_val;
        break;
    case GNMI__TYPED_VALUE__VALUE_INT_VAL:
        v.t = V_I64;
        v.i = tv->int_val;
        break;
    case GNMI__TYPED_VALUE__VALUE_DOUBLE_VAL:
        v.t = V_DBL;
        v.d = tv->double_val;
        break;
    case GNMI__TYPED_VALUE__VALUE_FLOAT_VAL:
        v.t = V_DBL;
        v.d = tv->float_val;
        break;
    case GNMI__TYPED_VALUE__VALUE_BOOL_VAL:
        v.t = V_BOOL;
        v.u = tv->bool_val ? 1 : 0;
        break;
    case GNMI__TYPED_VALUE__VALUE_STRING_VAL:
        v.t = V_STR;
        v.s = tv->string_val ? tv->string_val : "";
        break;
    case GNMI__TYPED_VALUE__VALUE_ASCII_VAL:
        v.t = V_STR;
        v.s = tv->ascii_val ? tv->ascii_val : "";
        break;
    case GNMI__TYPED_VALUE__VALUE_DECIMAL_VAL:
        if (!tv->decimal_val || tv->decimal_val->precision > 18)
            break;
        if (tv->decimal_val->precision == 0) {
            v.t = V_I64;
            v.i = tv->decimal_val->digits;
        } else {
            v.t = V_DBL;
            v.d = (double)tv->decimal_val->digits / pow(10, tv->decimal_val->precision);
        }
        break;
    case GNMI__TYPED_VALUE__VALUE_JSON_VAL:
        map_json_bytes(m, &tv->json_val, len, n_views);
        return;
    case GNMI__TYPED_VALUE__VALUE_JSON_IETF_VAL:
        map_json_bytes(m, &tv->json_ietf_val, len, n_views);
        return;
    default:
        break;
    }
    if (v.t == V_NONE) {
        /* A value of no usable type is rejected if its path is mapped, else unmapped. */
        struct rentry *tmp = NULL;
        struct rentry *e = lookup(m, len, n_views, &tmp);
        if (e && (e->kind == VK_UNMAPPED || e->kind == VK_GENERIC))
            m->st.unmapped++;
        else
            reject(m, FS_GNMI_REJ_WRONG_TYPE);
        entry_drop(m, tmp);
        return;
    }
    map_leaf(m, len, n_views, &v);
}

/* Adds the views of a path after n existing ones; false if too deep. */
static bool
add_views(struct fs_gnmi_map *m, const Gnmi__Path *p, size_t *n)
{
    if (!p)
        return true;
    for (size_t i = 0; i < p->n_elem; i++) {
        const Gnmi__PathElem *pe = p->elem[i];
        if (*n >= PATH_MAX_ELEMS)
            return false;
        m->views[(*n)++] = (struct pview){pe->name ? pe->name : "", pe->key, pe->n_key};
    }
    return true;
}

/* Marks every cached mapped path under the deleted path (key[0..len)) deleted. */
static void
map_delete(struct fs_gnmi_map *m, size_t len)
{
    for (size_t i = 0; i < m->st.cache_entries; i++) {
        struct rentry *e = m->ents[i].e;
        if (e->kind == VK_UNMAPPED || m->deleted[i] || e->key_len < len ||
            memcmp(e->key, m->key, len) != 0)
            continue;
        char next = e->key_len > len ? e->key[len] : '\0';
        if (next != '\0' && next != '\x01' && next != '\x02')
            continue; /* "/a/bc" is not under "/a/b" */
        m->deleted[i] = 1;
        m->st.deletes++;
        begin_batch(m);
        if (m->e->deleted)
            m->e->deleted(m->arg, e->m, e->labels, e->n_labels);
    }
}

void
fs_gnmi_map_notification(struct fs_gnmi_map *m, const Gnmi__Notification *n, int64_t recv_us,
                         const struct fs_gnmi_emit *e, void *arg)
{
    m->st.notifications++;
    m->e = e;
    m->arg = arg;
    m->begun = false;
    m->recv_us = recv_us;
    m->device_ns = n->timestamp;
    /* A timestamp a day or more from its arrival is no clock reading: one such stamp
     * would set the clock estimate's bounds for a minute (map.h). */
    if (n->timestamp < 0 ||
        (n->timestamp > 0 && llabs(n->timestamp / 1000 - recv_us) > FS_GNMI_TS_MAX_SKEW_US)) {
        m->st.bad_timestamps++;
        m->device_ns = 0;
    }
    if (m->device_ns > 0)
        m->st.last_device_ns = m->device_ns;

    /* The prefix's part of the key and views, shared by every update. */
    size_t plen = 0, pviews = 0;
    bool prefix_ok = key_path(m->key, &plen, n->prefix, true) && add_views(m, n->prefix, &pviews);

    for (size_t i = 0; i < n->n_update; i++) {
        const Gnmi__Update *u = n->update[i];
        m->st.updates++;
        size_t len = plen, nv = pviews;
        if (!prefix_ok || !u || !u->path ||
            !key_path(m->key, &len, u->path,
                      !(n->prefix && n->prefix->origin && n->prefix->origin[0])) ||
            !add_views(m, u->path, &nv) || nv == 0) {
            reject(m, FS_GNMI_REJ_BAD_PATH);
            continue;
        }
        if (u->val)
            map_typed(m, u->val, len, nv);
        else if (u->value && (u->value->type == GNMI__ENCODING__JSON ||
                              u->value->type == GNMI__ENCODING__JSON_IETF))
            map_json_bytes(m, &u->value->value, len, nv);
        else
            reject(m, FS_GNMI_REJ_NO_VALUE);
    }
    for (size_t i = 0; i < n->n_delete_; i++) {
        size_t len = plen;
        /* Each delete scans the cache: bound the work one notification can cause. */
        if (i >= MAX_DELETES) {
            m->st.rejected += n->n_delete_ - i;
            m->st.rejected_by[FS_GNMI_REJ_TOO_MANY_DELETES] += n->n_delete_ - i;
            break;
        }
        size_t nv = pviews;
        if (prefix_ok && key_path(m->key, &len, n->delete_[i], true))
            map_delete(m, len);
        if (prefix_ok && add_views(m, n->delete_[i], &nv))
            lldp_delete(m, nv);
    }
    if (m->begun && e->end)
        e->end(arg);
}

/* ---- the sink emitter ---- */

/*
 * Minimum-delay filtering of notification timestamps. A notification stamped at device
 * time d and received at r says offset = (d - r) + delay with delay >= 0: its lag d - r
 * is a lower bound. The least delayed notification of each second (the largest lag) is
 * that second's measurement. The delay itself is not observable (a device stamps the
 * time its data was collected, which can precede sending by milliseconds), so the upper
 * bound rests on one assumption: over the last FS_GNMI_CLOCK_LAGS seconds, the least
 * delayed notification of all took at most clk_max_delay_us (the target's configured
 * clock_max_delivery_delay, default 5 ms; our simulator's take ~1-2.5 ms). Arrival minus
 * stamp measures offset plus delay together, so the delay cannot be measured from the
 * stream alone: it takes a probe with a round trip (as the ONYX and SNMP drivers have).
 * Each second is therefore reported as [its own lag, best lag of the window + delay]:
 * the lower bound is a fact, the upper one the assumption, and a second that was
 * delayed throughout (a loaded host) only loosens its own lower bound instead of
 * widening every bound (bounding each second by its own lag + delay would be wrong for
 * such a second, and the core's filter intersects, so a wrong bound would stay).
 * A device clock stepping forward contradicts the old bounds at once (the core drops
 * them); one stepping back is followed once the window has forgotten the old lags
 * (FS_GNMI_CLOCK_LAGS seconds). Nothing is reported before CLOCK_WARMUP seconds were seen:
 * the first seconds of a stream (connection set-up, a loaded host) are the ones most
 * often delayed throughout (seen in CI: a first second delayed 7.8 ms).
 */
#define CLOCK_BUCKET_US 1000000
#define CLOCK_WARMUP 10
_Static_assert(FS_GNMI_CLOCK_LAGS >= CLOCK_WARMUP, "the window holds the warm-up");

static void
clock_sample(struct fs_gnmi_sink_arg *a, int64_t dev_us, int64_t recv_us)
{
    if (a->clk_have && recv_us - a->clk_bucket_us >= CLOCK_BUCKET_US) {
        /* Close the second: remember its best lag and report it. */
        int64_t lag = a->clk_best_dev_us - a->clk_best_recv_us;
        a->clk_lags[a->clk_head] = lag;
        a->clk_head = (a->clk_head + 1) % FS_GNMI_CLOCK_LAGS;
        if (a->clk_n < FS_GNMI_CLOCK_LAGS)
            a->clk_n++;
        int64_t best = lag;
        for (size_t i = 0; i < a->clk_n; i++)
            if (a->clk_lags[i] > best)
                best = a->clk_lags[i];
        /* device said d while our clock read in [r - w, r]: offset in [lag, lag + w];
         * w is chosen so that the upper end is best + the assumed delivery delay */
        int64_t delay = a->clk_max_delay_us > 0 ? a->clk_max_delay_us : FS_GNMI_CLOCK_MAX_DELAY_US;
        int64_t w = best - lag + delay;
        if (a->clk_n >= CLOCK_WARMUP)
            fs_sink_clock(a->sink, a->clk_best_dev_us, a->clk_best_recv_us - w,
                          a->clk_best_recv_us);
        a->clk_have = false;
    }
    if (!a->clk_have) {
        a->clk_have = true;
        a->clk_bucket_us = recv_us;
        a->clk_best_dev_us = dev_us;
        a->clk_best_recv_us = recv_us;
    } else if (dev_us - recv_us > a->clk_best_dev_us - a->clk_best_recv_us) {
        a->clk_best_dev_us = dev_us;
        a->clk_best_recv_us = recv_us;
    }
}

static void
sink_begin(void *arg, int64_t recv_us, int64_t device_ns)
{
    struct fs_gnmi_sink_arg *a = arg;
    fs_sink_begin(a->sink, recv_us);
    if (device_ns > 0)
        clock_sample(a, device_ns / 1000, recv_us);
}

static void
sink_counter(void *arg, enum fs_metric mt, const struct fs_label *l, size_t n, uint64_t raw,
             double scale)
{
    struct fs_gnmi_sink_arg *a = arg;
    if (scale == 1.0)
        fs_sink_counter(a->sink, mt, l, n, raw, 64);
    else
        fs_sink_counter_scaled(a->sink, mt, l, n, raw, 64, scale);
}

static void
sink_gauge(void *arg, enum fs_metric mt, const struct fs_label *l, size_t n, double v)
{
    struct fs_gnmi_sink_arg *a = arg;
    fs_sink_gauge(a->sink, mt, l, n, v);
}

static void
sink_end(void *arg)
{
    struct fs_gnmi_sink_arg *a = arg;
    fs_sink_end(a->sink);
}

/* A deleted path's series leaves the exposition at once; its history stays. */
static void
sink_deleted(void *arg, enum fs_metric mt, const struct fs_label *l, size_t n)
{
    struct fs_gnmi_sink_arg *a = arg;
    fs_sink_retire(a->sink, mt, l, n);
}

static void
sink_counter_h(void *arg, struct fs_series_handle *h, enum fs_metric mt, const struct fs_label *l,
               size_t n, uint64_t raw, double scale)
{
    struct fs_gnmi_sink_arg *a = arg;
    fs_sink_counter_h(a->sink, h, mt, l, n, raw, 64, scale);
}

static void
sink_gauge_h(void *arg, struct fs_series_handle *h, enum fs_metric mt, const struct fs_label *l,
             size_t n, double v)
{
    struct fs_gnmi_sink_arg *a = arg;
    fs_sink_gauge_h(a->sink, h, mt, l, n, v);
}

/* LLDP events are the driver's to keep (gnmi.c holds the table): none here. */
const struct fs_gnmi_emit fs_gnmi_sink_emit = {sink_begin,     sink_counter, sink_gauge,
                                               sink_deleted,   sink_end,     NULL,
                                               sink_counter_h, sink_gauge_h};

/* ---- path strings (config subscriptions, user patterns) ---- */

/* Reads one token up to an unescaped character of `stops` into a new string. */
static char *
path_token(const char **pp, const char *stops)
{
    const char *p = *pp;
    size_t cap = strlen(p) + 1, o = 0;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    while (*p && !strchr(stops, *p)) {
        if (*p == '\\' && p[1])
            p++;
        t[o++] = *p++;
    }
    t[o] = '\0';
    *pp = p;
    return t;
}

int
fs_gnmi_path_parse(const char *s, Gnmi__Path **out, char *errbuf, size_t errlen)
{
    int rc = -1;
    *out = NULL;
    Gnmi__Path *path = malloc(sizeof *path);
    if (!path) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    gnmi__path__init(path);
    const char *p = s;
    const char *colon = strchr(s, ':'), *slash = strchr(s, '/');
    if (colon && (!slash || colon < slash) && colon > s) {
        path->origin = strndup(s, (size_t)(colon - s));
        if (!path->origin)
            goto oom;
        p = colon + 1;
    }
    while (*p) {
        if (*p == '/') {
            p++;
            continue;
        }
        Gnmi__PathElem **ge = realloc(path->elem, (path->n_elem + 1) * sizeof *ge);
        if (!ge)
            goto oom;
        path->elem = ge;
        Gnmi__PathElem *pe = malloc(sizeof *pe);
        if (!pe)
            goto oom;
        gnmi__path_elem__init(pe);
        path->elem[path->n_elem++] = pe;
        if (!(pe->name = path_token(&p, "/[")))
            goto oom;
        if (!pe->name[0]) {
            snprintf(errbuf, errlen, "empty element name in path %s", s);
            goto done;
        }
        while (*p == '[') {
            p++;
            Gnmi__PathElem__KeyEntry **gk = realloc(pe->key, (pe->n_key + 1) * sizeof *gk);
            if (!gk)
                goto oom;
            pe->key = gk;
            Gnmi__PathElem__KeyEntry *ke = malloc(sizeof *ke);
            if (!ke)
                goto oom;
            gnmi__path_elem__key_entry__init(ke);
            pe->key[pe->n_key++] = ke;
            ke->key = path_token(&p, "=]");
            if (!ke->key)
                goto oom;
            if (*p != '=' || !ke->key[0]) {
                snprintf(errbuf, errlen, "key without name=value in path %s", s);
                ke->value = NULL;
                goto done;
            }
            p++;
            if (!(ke->value = path_token(&p, "]")))
                goto oom;
            if (*p != ']') {
                snprintf(errbuf, errlen, "unterminated key in path %s", s);
                goto done;
            }
            p++;
        }
        if (*p && *p != '/') {
            snprintf(errbuf, errlen, "unexpected '%c' in path %s", *p, s);
            goto done;
        }
    }
    rc = 0;
    *out = path;
    path = NULL;
    goto done;
oom:
    snprintf(errbuf, errlen, "out of memory");
done:
    if (path)
        protobuf_c_message_free_unpacked(&path->base, NULL);
    return rc;
}
