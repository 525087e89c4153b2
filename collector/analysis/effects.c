/* Cause and effect among departures (see effects.h). */
#include "analysis/effects.h"

#include <stdlib.h>
#include <string.h>

enum fs_an_role
fs_an_role_of(const struct fs_an_series_ref *s)
{
    if (s->kind != FS_AN_PFC)
        return FS_AN_ROLE_CAUSE;
    return strcmp(s->direction, "tx") == 0 ? FS_AN_ROLE_PAUSE_SENT : FS_AN_ROLE_PAUSE_RECEIVED;
}

static uint64_t
hash_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return (h ^ 0xff) * 0x100000001b3ULL;
}

/* Dense ids of distinct names: open addressing over the series that first held each. */
struct idmap {
    uint32_t *slot; /* series index + 1 */
    uint32_t *id;
    size_t cap;
    uint32_t n;
};

static uint32_t
idmap_get(struct idmap *m, const struct fs_departures *d, uint32_t s, bool port)
{
    const struct fs_an_series_ref *r = &d->series[s];
    uint64_t h = hash_str(0xcbf29ce484222325ULL, r->target);
    if (port)
        h = hash_str(h, r->interface);
    size_t k = (size_t)h & (m->cap - 1);
    for (; m->slot[k]; k = (k + 1) & (m->cap - 1)) {
        const struct fs_an_series_ref *x = &d->series[m->slot[k] - 1];
        if (strcmp(x->target, r->target) == 0 && (!port || strcmp(x->interface, r->interface) == 0))
            return m->id[k];
    }
    m->slot[k] = s + 1;
    m->id[k] = m->n++;
    return m->id[k];
}

/* The port id of (target, port), or UINT32_MAX when no series of d has it. */
static uint32_t
idmap_find(const struct idmap *m, const struct fs_departures *d, const char *target,
           const char *port)
{
    if (!target || !port || !port[0])
        return UINT32_MAX;
    uint64_t h = hash_str(hash_str(0xcbf29ce484222325ULL, target), port);
    for (size_t k = (size_t)h & (m->cap - 1); m->slot[k]; k = (k + 1) & (m->cap - 1)) {
        const struct fs_an_series_ref *x = &d->series[m->slot[k] - 1];
        if (strcmp(x->target, target) == 0 && strcmp(x->interface, port) == 0)
            return m->id[k];
    }
    return UINT32_MAX;
}

int
fs_an_places(const struct fs_departures *d, const struct fs_an_link *links, size_t n_links,
             struct fs_an_place *place, uint32_t *n_ports)
{
    size_t cap = 64;
    while (cap < d->n_series * 2 + 2)
        cap *= 2;
    struct idmap sw = {calloc(cap, sizeof(uint32_t)), malloc(cap * sizeof(uint32_t)), cap, 0};
    struct idmap pt = {calloc(cap, sizeof(uint32_t)), malloc(cap * sizeof(uint32_t)), cap, 0};
    uint32_t *partner = NULL;
    bool *up = NULL;
    int rc = -1;
    if (!sw.slot || !sw.id || !pt.slot || !pt.id)
        goto out;
    for (size_t s = 0; s < d->n_series; s++) {
        place[s].sw = idmap_get(&sw, d, (uint32_t)s, false);
        place[s].port =
            d->series[s].interface[0] ? idmap_get(&pt, d, (uint32_t)s, true) : UINT32_MAX;
        place[s].role = (uint8_t)fs_an_role_of(&d->series[s]);
        place[s].partner = UINT32_MAX;
        place[s].linked = false;
        place[s].uplink = false;
    }
    *n_ports = pt.n;
    if (n_links > 0) {
        /* Per port: partner id + 1 (0: no link known; UINT32_MAX: linked, unwatched). */
        partner = calloc(pt.n ? pt.n : 1, sizeof *partner);
        up = calloc(pt.n ? pt.n : 1, sizeof *up);
        if (!partner || !up)
            goto out;
        for (size_t i = 0; i < n_links; i++) {
            uint32_t a = idmap_find(&pt, d, links[i].a_node, links[i].a_port);
            uint32_t b = idmap_find(&pt, d, links[i].b_node, links[i].b_port);
            if (a != UINT32_MAX && partner[a] == 0) {
                partner[a] = b == UINT32_MAX ? UINT32_MAX : b + 1;
                up[a] = links[i].b_switch;
            }
            if (b != UINT32_MAX && partner[b] == 0) {
                partner[b] = a == UINT32_MAX ? UINT32_MAX : a + 1;
                up[b] = links[i].a_switch;
            }
        }
        for (size_t s = 0; s < d->n_series; s++) {
            uint32_t p = place[s].port;
            if (p == UINT32_MAX || partner[p] == 0)
                continue;
            place[s].linked = true;
            place[s].uplink = up[p];
            place[s].partner = partner[p] == UINT32_MAX ? UINT32_MAX : partner[p] - 1;
        }
    }
    rc = 0;
out:
    free(sw.slot);
    free(sw.id);
    free(pt.slot);
    free(pt.id);
    free(partner);
    free(up);
    return rc;
}

int
fs_an_port_cmp(const void *a, const void *b)
{
    const struct fs_an_port *x = a, *y = b;
    int c = strcmp(x->node, y->node);
    return c ? c : strcmp(x->port, y->port);
}

/* A name up to its first '.' (all of it when it starts with one). */
struct short_name {
    const char *s;
    size_t len;
};

static struct short_name
short_of(const char *name)
{
    size_t n = strcspn(name, ".");
    return (struct short_name){name, n ? n : strlen(name)};
}

static int
cmp_short(const void *a, const void *b)
{
    const struct short_name *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int
path_add(struct fs_an_port **v, size_t *n, size_t *cap, const char *node, const char *port)
{
    if (*n == *cap) {
        size_t c2 = *cap ? *cap * 2 : 16;
        void *q = realloc(*v, c2 * sizeof **v);
        if (!q)
            return -1;
        *v = q;
        *cap = c2;
    }
    (*v)[(*n)++] = (struct fs_an_port){node, port};
    return 0;
}

int
fs_an_path_ports(const struct fs_an_link *links, size_t n_links, const char *const *hosts,
                 size_t n_hosts, struct fs_an_port **out, size_t *n_out)
{
    struct fs_an_port *v = NULL;
    struct short_name *hs = malloc((n_hosts ? n_hosts : 1) * sizeof *hs);
    const char **tor = NULL;
    size_t n = 0, cap = 0, n_tor = 0;
    int rc = -1;
    *out = NULL;
    *n_out = 0;
    if (!hs)
        goto out;
    for (size_t i = 0; i < n_hosts; i++)
        hs[i] = short_of(hosts[i]);
    qsort(hs, n_hosts, sizeof *hs, cmp_short);
    /* The hosts' switch ports first: their switches are the TORs. */
    for (size_t i = 0; i < n_links; i++) {
        const struct fs_an_link *l = &links[i];
        if (l->a_switch == l->b_switch)
            continue;
        const char *host = l->a_switch ? l->b_node : l->a_node;
        struct short_name k = short_of(host);
        if (!n_hosts || !bsearch(&k, hs, n_hosts, sizeof *hs, cmp_short))
            continue;
        if (path_add(&v, &n, &cap, l->a_switch ? l->a_node : l->b_node,
                     l->a_switch ? l->a_port : l->b_port) != 0)
            goto out;
    }
    if (n > 0) {
        if (!(tor = malloc(n * sizeof *tor)))
            goto out;
        for (size_t i = 0; i < n; i++)
            tor[i] = v[i].node;
        qsort(tor, n, sizeof *tor, cmp_str);
        n_tor = n;
    }
    for (size_t i = 0; i < n_links && n_tor > 0; i++) {
        const struct fs_an_link *l = &links[i];
        if (!l->a_switch || !l->b_switch)
            continue;
        if (bsearch(&l->a_node, tor, n_tor, sizeof *tor, cmp_str) ||
            bsearch(&l->b_node, tor, n_tor, sizeof *tor, cmp_str))
            if (path_add(&v, &n, &cap, l->a_node, l->a_port) != 0 ||
                path_add(&v, &n, &cap, l->b_node, l->b_port) != 0)
                goto out;
    }
    if (n > 1) {
        qsort(v, n, sizeof *v, fs_an_port_cmp);
        size_t m = 1;
        for (size_t i = 1; i < n; i++)
            if (fs_an_port_cmp(&v[i], &v[m - 1]) != 0)
                v[m++] = v[i];
        n = m;
    }
    *out = v;
    *n_out = n;
    v = NULL;
    rc = 0;
out:
    free(v);
    free(hs);
    free(tor);
    return rc;
}

/* Runs of one role, by start, with the switch or the port they belong to. */
struct ivs {
    int64_t *iv;  /* start, end pairs */
    uint32_t *id; /* their switch (pauses sent) or port (pauses received) */
    size_t n;
    int64_t longest;
};

static int
ivs_collect(const struct fs_departures *d, const struct fs_an_place *place, uint8_t role,
            bool by_port, struct ivs *v)
{
    memset(v, 0, sizeof *v);
    size_t m = 0;
    for (size_t k = 0; k < d->n_runs; k++)
        m += place[d->runs[k].series].role == role;
    v->iv = malloc((m ? m : 1) * 2 * sizeof *v->iv);
    v->id = malloc((m ? m : 1) * sizeof *v->id);
    if (!v->iv || !v->id)
        return -1;
    for (size_t k = 0; k < d->n_runs; k++) { /* d's runs are by start */
        const struct fs_departure *run = &d->runs[k];
        const struct fs_an_place *x = &place[run->series];
        if (x->role != role)
            continue;
        int64_t su = d->series[run->series].time_uncertainty_us;
        v->iv[2 * v->n] = run->start_us - su;
        v->iv[2 * v->n + 1] = run->end_us + su;
        v->id[v->n++] = by_port ? x->port : x->sw;
        if (run->end_us - run->start_us + 2 * su > v->longest)
            v->longest = run->end_us - run->start_us + 2 * su;
    }
    return 0;
}

/* Whether a run of v overlapping [lo, hi] has id (same) or another id than id (!same). */
static bool
ivs_overlap(const struct ivs *v, int64_t lo, int64_t hi, uint32_t id, bool same)
{
    size_t a = 0, b = v->n;
    while (a < b) { /* the first run starting after hi */
        size_t mid = a + (b - a) / 2;
        if (v->iv[2 * mid] <= hi)
            a = mid + 1;
        else
            b = mid;
    }
    for (size_t i = a; i-- > 0 && v->iv[2 * i] >= lo - v->longest;)
        if (v->iv[2 * i + 1] >= lo && (v->id[i] == id) == same)
            return true;
    return false;
}

int
fs_an_mark_paused_runs(const struct fs_departures *d, const struct fs_an_link *links,
                       size_t n_links, bool *out)
{
    size_t ns = d->n_series ? d->n_series : 1;
    struct fs_an_place *place = malloc(ns * sizeof *place);
    struct ivs sent = {0}, sent_port = {0}, recv = {0};
    uint32_t n_ports = 0;
    int rc = -1;
    if (!place || fs_an_places(d, links, n_links, place, &n_ports) != 0 ||
        ivs_collect(d, place, FS_AN_ROLE_PAUSE_SENT, false, &sent) != 0 ||
        (n_links > 0 && ivs_collect(d, place, FS_AN_ROLE_PAUSE_SENT, true, &sent_port) != 0) ||
        ivs_collect(d, place, FS_AN_ROLE_PAUSE_RECEIVED, true, &recv) != 0)
        goto out;
    for (size_t k = 0; k < d->n_runs; k++) {
        const struct fs_departure *run = &d->runs[k];
        const struct fs_an_place *x = &place[run->series];
        int64_t su = d->series[run->series].time_uncertainty_us;
        int64_t lo = run->start_us - su, hi = run->end_us + su;
        bool explained_pause;
        if (x->linked) /* its partner's pauses; an unwatched partner's explain nothing */
            explained_pause = x->partner != UINT32_MAX && sent_port.n &&
                              ivs_overlap(&sent_port, lo, hi, x->partner, true);
        else
            explained_pause = sent.n && ivs_overlap(&sent, lo, hi, x->sw, false);
        out[k] = x->role == FS_AN_ROLE_CAUSE && x->port != UINT32_MAX && recv.n &&
                 ivs_overlap(&recv, lo, hi, x->port, true) && explained_pause;
    }
    rc = 0;
out:
    free(sent.iv);
    free(sent.id);
    free(sent_port.iv);
    free(sent_port.id);
    free(recv.iv);
    free(recv.id);
    free(place);
    return rc;
}
