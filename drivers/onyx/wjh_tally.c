/* Counting WJH drops once from a moving window of records; see wjh_tally.h. */
#include "wjh_tally.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t
key_of(uint64_t ident)
{
    return ident ? ident : 1;
}

static struct onyx_wjh_row *
rowmap_find(const struct onyx_wjh_rowmap *m, uint64_t ident)
{
    if (!m->cap)
        return NULL;
    uint64_t k = key_of(ident);
    for (size_t i = (size_t)(k * 0x9e3779b97f4a7c15ull) & (m->cap - 1);;
         i = (i + 1) & (m->cap - 1)) {
        if (m->v[i].ident == k)
            return &m->v[i];
        if (m->v[i].ident == 0)
            return NULL;
    }
}

/* The slot of ident, inserted with count 0 when absent; NULL when out of memory. */
static struct onyx_wjh_row *
rowmap_slot(struct onyx_wjh_rowmap *m, uint64_t ident)
{
    struct onyx_wjh_row *r = rowmap_find(m, ident);
    if (r)
        return r;
    if ((m->n + 1) * 2 > m->cap) { /* keep the load at most one half */
        size_t nc = m->cap ? m->cap * 2 : 64;
        struct onyx_wjh_row *nv = calloc(nc, sizeof(*nv));
        if (!nv)
            return NULL;
        struct onyx_wjh_rowmap g = {nv, 0, nc};
        for (size_t i = 0; i < m->cap; i++)
            if (m->v[i].ident) {
                struct onyx_wjh_row *d = rowmap_slot(&g, m->v[i].ident);
                d->count = m->v[i].count;
            }
        free(m->v);
        *m = g;
    }
    uint64_t k = key_of(ident);
    size_t i = (size_t)(k * 0x9e3779b97f4a7c15ull) & (m->cap - 1);
    while (m->v[i].ident)
        i = (i + 1) & (m->cap - 1);
    m->v[i].ident = k;
    m->v[i].count = 0;
    m->n++;
    return &m->v[i];
}

static void
rowmap_clear(struct onyx_wjh_rowmap *m)
{
    if (m->cap)
        memset(m->v, 0, m->cap * sizeof(*m->v));
    m->n = 0;
}

/* True when this table's window starts after the previous one ended: both times are
 * known, in the same layout ("2021/06/16 12:57:23.046"), which then sorts as text. */
static bool
window_after(const char *start, const char *prev_end)
{
    size_t n = strlen(start);
    if (n == 0 || n != strlen(prev_end) || !isdigit((unsigned char)start[0]) ||
        !isdigit((unsigned char)prev_end[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (isdigit((unsigned char)start[i]) != isdigit((unsigned char)prev_end[i]))
            return false;
    return strcmp(start, prev_end) > 0;
}

void
onyx_wjh_tally_begin(struct onyx_wjh_tally *t)
{
    rowmap_clear(&t->cur);
    t->overflow = false;
}

int64_t
onyx_wjh_tally_row(struct onyx_wjh_tally *t, const struct onyx_wjh_record *r)
{
    const struct onyx_wjh_row *p = t->had_prev ? rowmap_find(&t->prev, r->ident) : NULL;
    uint64_t before = p ? p->count : 0;
    struct onyx_wjh_row *c = NULL;
    if (t->cur.n < ONYX_WJH_MAX_ROWS || rowmap_find(&t->cur, r->ident)) {
        if (!(c = rowmap_slot(&t->cur, r->ident)))
            return -1;
    } else {
        t->overflow = true;
    }
    if (r->aggregated) {
        /* Rows of one key are summed (a table should have one; a second one must not
         * make the first look new next time). */
        uint64_t cnt = r->count > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : r->count;
        uint64_t s0 = c ? c->count : 0;
        uint64_t s1 = s0 > (uint64_t)INT64_MAX - cnt ? (uint64_t)INT64_MAX : s0 + cnt;
        if (c)
            c->count = s1;
        if (!p || window_after(r->window_start, t->prev_window_end))
            return (int64_t)cnt;
        uint64_t floor = before > s0 ? before : s0;
        return s1 > floor ? (int64_t)(s1 - floor) : 0;
    }
    /* Raw: this is the ident's nth row of the table; new when the previous table had
     * fewer than n of them. */
    uint64_t nth = c ? ++c->count : before + 1;
    return nth > before ? 1 : 0;
}

int
onyx_wjh_tally_add(struct onyx_wjh_tally *t, const char *rule, const char *reason, uint64_t n)
{
    struct onyx_wjh_total *x = NULL;
    size_t in_rule = 0;
    for (size_t i = 0; i < t->n_totals && !x; i++) {
        if (strcmp(t->totals[i].rule, rule) != 0)
            continue;
        in_rule++;
        if (strcmp(t->totals[i].reason, reason) == 0)
            x = &t->totals[i];
    }
    if (!x && (t->n_totals >= ONYX_WJH_MAX_TOTALS || in_rule >= 32) && strcmp(reason, "other")) {
        /* Too many distinct reasons: the rest counts together. */
        return onyx_wjh_tally_add(t, rule, "other", n);
    }
    if (!x) {
        if (t->n_totals >= ONYX_WJH_MAX_TOTALS)
            return 0; /* "other" of a rule beyond the bound: nothing to add it to */
        if (t->n_totals == t->cap_totals) {
            size_t nc = t->cap_totals ? t->cap_totals * 2 : 8;
            struct onyx_wjh_total *v = realloc(t->totals, nc * sizeof(*v));
            if (!v)
                return -1;
            t->totals = v;
            t->cap_totals = nc;
        }
        x = &t->totals[t->n_totals++];
        memset(x, 0, sizeof(*x));
        snprintf(x->rule, sizeof(x->rule), "%s", rule);
        snprintf(x->reason, sizeof(x->reason), "%s", reason);
    }
    x->drops = x->drops > UINT64_MAX - n ? UINT64_MAX : x->drops + n;
    return 0;
}

void
onyx_wjh_tally_end(struct onyx_wjh_tally *t, const char *window_end)
{
    struct onyx_wjh_rowmap tmp = t->prev;
    t->prev = t->cur;
    t->cur = tmp;
    rowmap_clear(&t->cur);
    snprintf(t->prev_window_end, sizeof(t->prev_window_end), "%s", window_end ? window_end : "");
    t->had_prev = true;
}

void
onyx_wjh_tally_free(struct onyx_wjh_tally *t)
{
    free(t->prev.v);
    free(t->cur.v);
    free(t->totals);
    memset(t, 0, sizeof(*t));
}
