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

int
fs_an_places(const struct fs_departures *d, struct fs_an_place *place, uint32_t *n_ports)
{
    size_t cap = 64;
    while (cap < d->n_series * 2 + 2)
        cap *= 2;
    struct idmap sw = {calloc(cap, sizeof(uint32_t)), malloc(cap * sizeof(uint32_t)), cap, 0};
    struct idmap pt = {calloc(cap, sizeof(uint32_t)), malloc(cap * sizeof(uint32_t)), cap, 0};
    int rc = -1;
    if (!sw.slot || !sw.id || !pt.slot || !pt.id)
        goto out;
    for (size_t s = 0; s < d->n_series; s++) {
        place[s].sw = idmap_get(&sw, d, (uint32_t)s, false);
        place[s].port =
            d->series[s].interface[0] ? idmap_get(&pt, d, (uint32_t)s, true) : UINT32_MAX;
        place[s].role = (uint8_t)fs_an_role_of(&d->series[s]);
    }
    *n_ports = pt.n;
    rc = 0;
out:
    free(sw.slot);
    free(sw.id);
    free(pt.slot);
    free(pt.id);
    return rc;
}

void
fs_an_paused_free(struct fs_an_paused *p)
{
    free(p->first);
    free(p->iv);
    memset(p, 0, sizeof *p);
}

int
fs_an_paused_build(const struct fs_departures *d, const struct fs_an_place *place, uint32_t n_ports,
                   struct fs_an_paused *p)
{
    memset(p, 0, sizeof *p);
    p->first = calloc((size_t)n_ports + 1, sizeof *p->first);
    if (!p->first)
        return -1;
    size_t m = 0;
    for (size_t k = 0; k < d->n_runs; k++) {
        const struct fs_an_place *x = &place[d->runs[k].series];
        if (x->role == FS_AN_ROLE_PAUSE_RECEIVED && x->port != UINT32_MAX) {
            p->first[x->port + 1]++;
            m++;
        }
    }
    for (uint32_t q = 0; q < n_ports; q++)
        p->first[q + 1] += p->first[q];
    p->iv = malloc((m ? m : 1) * 2 * sizeof *p->iv);
    size_t *fill = malloc((n_ports ? n_ports : 1) * sizeof *fill);
    if (!p->iv || !fill) {
        free(fill);
        return -1;
    }
    memcpy(fill, p->first, n_ports * sizeof *fill);
    /* d's runs are by start: each port's list comes out by start too. */
    for (size_t k = 0; k < d->n_runs; k++) {
        const struct fs_departure *run = &d->runs[k];
        const struct fs_an_place *x = &place[run->series];
        if (x->role != FS_AN_ROLE_PAUSE_RECEIVED || x->port == UINT32_MAX)
            continue;
        size_t i = fill[x->port]++;
        p->iv[2 * i] = run->start_us;
        p->iv[2 * i + 1] = run->end_us;
        if (run->end_us - run->start_us > p->longest)
            p->longest = run->end_us - run->start_us;
    }
    free(fill);
    return 0;
}

bool
fs_an_paused_during(const struct fs_an_paused *p, uint32_t port, int64_t lo, int64_t hi)
{
    size_t a = p->first[port], b = p->first[port + 1];
    while (a < b) { /* the first run starting after hi */
        size_t mid = a + (b - a) / 2;
        if (p->iv[2 * mid] <= hi)
            a = mid + 1;
        else
            b = mid;
    }
    for (size_t i = a; i-- > p->first[port] && p->iv[2 * i] >= lo - p->longest;)
        if (p->iv[2 * i + 1] >= lo)
            return true;
    return false;
}

int
fs_an_mark_paused_runs(const struct fs_departures *d, bool *out)
{
    size_t ns = d->n_series ? d->n_series : 1;
    struct fs_an_place *place = malloc(ns * sizeof *place);
    struct fs_an_paused p = {0};
    uint32_t n_ports = 0;
    int rc = -1;
    if (!place || fs_an_places(d, place, &n_ports) != 0 ||
        fs_an_paused_build(d, place, n_ports, &p) != 0)
        goto out;
    for (size_t k = 0; k < d->n_runs; k++) {
        const struct fs_departure *run = &d->runs[k];
        const struct fs_an_place *x = &place[run->series];
        int64_t su = d->series[run->series].time_uncertainty_us;
        out[k] = x->role == FS_AN_ROLE_CAUSE && x->port != UINT32_MAX && p.first &&
                 p.first[x->port + 1] > p.first[x->port] &&
                 fs_an_paused_during(&p, x->port, run->start_us - su, run->end_us + su);
    }
    rc = 0;
out:
    fs_an_paused_free(&p);
    free(place);
    return rc;
}
