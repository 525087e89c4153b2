/*
 * The topology store (topology.h). Reports are kept in a flat array and looked up by a
 * linear scan: a fabric has thousands of links, not millions, and a neighbour table is
 * read every tens of seconds, so the scan costs less than a hash would in code. Links
 * are built only when read, so a report's arrival never has to find its twin from the
 * other end.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topology/topology.h"

struct reporter {
    char *target, *source;
    char *chassis_id, *sys_name; /* its own identity (fs_topo_local); "" unknown */
    uint64_t gen;                /* bumped at each complete table */
    int64_t hold_us;
    bool is_target; /* a configured target; false for hosts and the configuration */
};

struct report {
    size_t rep;       /* index into reporters (reporters are never removed) */
    char *local_node; /* NULL: the reporter itself (only the configuration names others) */
    char *local_port, *chassis_id, *sys_name, *port, *port_id, *port_descr;
    uint64_t gen; /* the reporter's gen when last renewed */
    int64_t first_seen_us, last_seen_us, hold_us;
};

struct fs_topo {
    pthread_mutex_t lock;
    struct reporter *reps;
    size_t n_reps, cap_reps;
    struct report *rpts;
    size_t n_rpts, cap_rpts;
    uint64_t refused, expired, dropped;
};

static const char *
nz(const char *s)
{
    return s ? s : "";
}

/* A copy cut at FS_TOPO_STR_MAX - 1 bytes; the caller checked UTF-8 (the sink did). */
static char *
dup_cut(const char *s)
{
    return strndup(nz(s), FS_TOPO_STR_MAX - 1);
}

/* Replaces *dst with a cut copy of s unless equal; -1 when out of memory (*dst kept). */
static int
set_str(char **dst, const char *s)
{
    int rc = 0;
    if (*dst && strncmp(*dst, nz(s), FS_TOPO_STR_MAX - 1) == 0 &&
        strlen(*dst) == strnlen(nz(s), FS_TOPO_STR_MAX - 1))
        goto out;
    char *c = dup_cut(s);
    if (!c) {
        rc = -1;
        goto out;
    }
    free(*dst);
    *dst = c;
out:
    return rc;
}

struct fs_topo *
fs_topo_new(void)
{
    struct fs_topo *t = calloc(1, sizeof *t);
    if (t && pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        t = NULL;
    }
    return t;
}

static void
report_free(struct report *r)
{
    free(r->local_node);
    free(r->local_port);
    free(r->chassis_id);
    free(r->sys_name);
    free(r->port);
    free(r->port_id);
    free(r->port_descr);
}

void
fs_topo_free(struct fs_topo *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_rpts; i++)
        report_free(&t->rpts[i]);
    for (size_t i = 0; i < t->n_reps; i++) {
        free(t->reps[i].target);
        free(t->reps[i].source);
        free(t->reps[i].chassis_id);
        free(t->reps[i].sys_name);
    }
    free(t->rpts);
    free(t->reps);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* The hold of a reporter that read its table every interval_us (topology.h). */
static int64_t
hold_for(int64_t interval_us)
{
    if (interval_us <= 0)
        return FS_TOPO_DEFAULT_HOLD_US;
    int64_t h = interval_us > INT64_MAX / 3 ? INT64_MAX : 3 * interval_us;
    return h > FS_TOPO_HOLD_FLOOR_US ? h : FS_TOPO_HOLD_FLOOR_US;
}

/* The reporter (target, source): its index, created when missing (create), else -1
 * (not found, a bound, no memory: errbuf says which when create). Under the lock. */
static long
reporter_find(struct fs_topo *t, const char *target, const char *source, bool create,
              bool is_target, char *errbuf, size_t errlen)
{
    long idx = -1;
    for (size_t i = 0; i < t->n_reps; i++)
        if (strcmp(t->reps[i].target, target) == 0 && strcmp(t->reps[i].source, source) == 0) {
            idx = (long)i;
            goto out;
        }
    if (!create)
        goto out;
    if (t->n_reps >= FS_TOPO_MAX_REPORTERS) {
        snprintf(errbuf, errlen, "topology: more than %d reporters", FS_TOPO_MAX_REPORTERS);
        goto out;
    }
    if (t->n_reps == t->cap_reps) {
        size_t cap = t->cap_reps ? 2 * t->cap_reps : 16;
        struct reporter *n = realloc(t->reps, cap * sizeof *n);
        if (!n) {
            snprintf(errbuf, errlen, "topology: out of memory");
            goto out;
        }
        t->reps = n;
        t->cap_reps = cap;
    }
    struct reporter *r = &t->reps[t->n_reps];
    memset(r, 0, sizeof *r);
    r->target = dup_cut(target);
    r->source = dup_cut(source);
    r->chassis_id = strdup("");
    r->sys_name = strdup("");
    r->hold_us = FS_TOPO_DEFAULT_HOLD_US;
    r->is_target = is_target;
    if (!r->target || !r->source || !r->chassis_id || !r->sys_name) {
        free(r->target);
        free(r->source);
        free(r->chassis_id);
        free(r->sys_name);
        snprintf(errbuf, errlen, "topology: out of memory");
        goto out;
    }
    idx = (long)t->n_reps++;
out:
    return idx;
}

/* Removes report i (order is not kept: links are sorted when read). */
static void
report_remove(struct fs_topo *t, size_t i)
{
    report_free(&t->rpts[i]);
    t->rpts[i] = t->rpts[--t->n_rpts];
}

/* Removes the reports past their hold; under the lock. */
static size_t
expire_locked(struct fs_topo *t, int64_t now_us)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n_rpts;) {
        const struct report *r = &t->rpts[i];
        if (r->hold_us > 0 && now_us - r->last_seen_us > r->hold_us) {
            report_remove(t, i);
            n++;
        } else {
            i++;
        }
    }
    t->expired += n;
    return n;
}

size_t
fs_topo_expire(struct fs_topo *t, int64_t now_us)
{
    pthread_mutex_lock(&t->lock);
    size_t n = expire_locked(t, now_us);
    pthread_mutex_unlock(&t->lock);
    return n;
}

int
fs_topo_local(struct fs_topo *t, const char *target, const char *source, const char *chassis_id,
              const char *sys_name, int64_t now_us, char *errbuf, size_t errlen)
{
    int rc = -1;
    pthread_mutex_lock(&t->lock);
    expire_locked(t, now_us);
    long ri = reporter_find(t, nz(target), nz(source), true, true, errbuf, errlen);
    if (ri < 0)
        goto out;
    struct reporter *r = &t->reps[ri];
    if ((*nz(chassis_id) && set_str(&r->chassis_id, chassis_id) != 0) ||
        (*nz(sys_name) && set_str(&r->sys_name, sys_name) != 0)) {
        snprintf(errbuf, errlen, "topology: out of memory");
        goto out;
    }
    rc = 0;
out:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

/* The key a remote system is told apart by: its chassis id, else its sysName. */
static const char *
remote_key(const char *chassis_id, const char *sys_name)
{
    return *nz(chassis_id) ? nz(chassis_id) : nz(sys_name);
}

static bool
eq_cut(const char *kept, const char *given)
{
    return strncmp(kept, nz(given), FS_TOPO_STR_MAX - 1) == 0 &&
           strlen(kept) == strnlen(nz(given), FS_TOPO_STR_MAX - 1);
}

/* Records (or renews) one neighbour of reporter ri, its local end on local_node (NULL:
 * the reporter). 0, or -1 with errbuf (counted as refused). Under the lock. */
static int
neighbor_locked(struct fs_topo *t, size_t ri, const char *local_node,
                const struct fs_topo_neighbor *n, int64_t now_us, char *errbuf, size_t errlen)
{
    int rc = -1;
    if (!*nz(n->local_port) || !*remote_key(n->chassis_id, n->sys_name)) {
        snprintf(errbuf, errlen,
                 "topology: a neighbour needs a local port and a chassis id "
                 "or system name");
        goto out;
    }
    const struct reporter *rep = &t->reps[ri];
    const char *key = remote_key(n->chassis_id, n->sys_name);
    struct report *r = NULL;
    for (size_t i = 0; i < t->n_rpts && !r; i++) {
        struct report *c = &t->rpts[i];
        if (c->rep == ri && eq_cut(c->local_node ? c->local_node : "", local_node) &&
            eq_cut(c->local_port, n->local_port) &&
            eq_cut(remote_key(c->chassis_id, c->sys_name), key) && eq_cut(c->port, n->port))
            r = c;
    }
    if (!r) {
        if (t->n_rpts >= FS_TOPO_MAX_REPORTS) {
            snprintf(errbuf, errlen, "topology: more than %d neighbour reports",
                     FS_TOPO_MAX_REPORTS);
            goto out;
        }
        if (t->n_rpts == t->cap_rpts) {
            size_t cap = t->cap_rpts ? 2 * t->cap_rpts : 64;
            struct report *g = realloc(t->rpts, cap * sizeof *g);
            if (!g) {
                snprintf(errbuf, errlen, "topology: out of memory");
                goto out;
            }
            t->rpts = g;
            t->cap_rpts = cap;
        }
        r = &t->rpts[t->n_rpts];
        memset(r, 0, sizeof *r);
        r->rep = ri;
        r->first_seen_us = now_us;
        if (set_str(&r->local_port, n->local_port) != 0 ||
            (*nz(local_node) && set_str(&r->local_node, local_node) != 0)) {
            report_free(r);
            snprintf(errbuf, errlen, "topology: out of memory");
            goto out;
        }
        t->n_rpts++;
    }
    /* The identity fields may change under the same key (a sysName set later): renew. */
    if (set_str(&r->chassis_id, n->chassis_id) != 0 || set_str(&r->sys_name, n->sys_name) != 0 ||
        set_str(&r->port, n->port) != 0 || set_str(&r->port_id, n->port_id) != 0 ||
        set_str(&r->port_descr, n->port_descr) != 0) {
        /* A half-filled new report would break the key scan: drop it whole. */
        report_remove(t, (size_t)(r - t->rpts));
        snprintf(errbuf, errlen, "topology: out of memory");
        goto out;
    }
    r->last_seen_us = now_us;
    r->gen = rep->gen;
    r->hold_us = rep->hold_us;
    rc = 0;
out:
    if (rc != 0)
        t->refused++;
    return rc;
}

int
fs_topo_neighbor(struct fs_topo *t, const char *target, const char *source,
                 const struct fs_topo_neighbor *n, int64_t now_us, char *errbuf, size_t errlen)
{
    int rc = -1;
    pthread_mutex_lock(&t->lock);
    expire_locked(t, now_us);
    long ri = reporter_find(t, nz(target), nz(source), true, true, errbuf, errlen);
    if (ri < 0) {
        t->refused++;
        goto out;
    }
    rc = neighbor_locked(t, (size_t)ri, NULL, n, now_us, errbuf, errlen);
out:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

/* Removes reporter ri's reports not renewed since its last table end and starts the next
 * generation; returns how many went. Under the lock. */
static size_t
table_end_locked(struct fs_topo *t, size_t ri)
{
    size_t gone = 0;
    struct reporter *rep = &t->reps[ri];
    for (size_t i = 0; i < t->n_rpts;) {
        struct report *r = &t->rpts[i];
        if (r->rep != ri) {
            i++;
        } else if (r->gen != rep->gen) {
            report_remove(t, i);
            gone++;
        } else {
            r->hold_us = rep->hold_us;
            i++;
        }
    }
    rep->gen++;
    t->dropped += gone;
    return gone;
}

int
fs_topo_host_neighbors(struct fs_topo *t, const char *host, const struct fs_topo_neighbor *n,
                       size_t count, int64_t interval_us, int64_t now_us, char *errbuf,
                       size_t errlen)
{
    int rc = -1;
    pthread_mutex_lock(&t->lock);
    expire_locked(t, now_us);
    if (!*nz(host)) {
        snprintf(errbuf, errlen, "topology: a host report needs the host's name");
        goto out;
    }
    long ri = reporter_find(t, host, FS_TOPO_SOURCE_HOST, true, false, errbuf, errlen);
    if (ri < 0)
        goto out;
    /* The hold first: the reports renewed now take the interval this post states. */
    t->reps[ri].hold_us = hold_for(interval_us);
    rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++)
        rc = neighbor_locked(t, (size_t)ri, NULL, &n[i], now_us, errbuf, errlen);
    /* Even after a refusal: what was recorded stands, and what the host no longer lists
     * goes (the list is its whole table). */
    table_end_locked(t, (size_t)ri);
out:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int
fs_topo_set_static(struct fs_topo *t, const struct fs_topo_static_link *links, size_t count,
                   int64_t now_us, char *errbuf, size_t errlen)
{
    int rc = -1;
    pthread_mutex_lock(&t->lock);
    expire_locked(t, now_us);
    if (count > FS_TOPO_MAX_STATIC) {
        snprintf(errbuf, errlen, "topology: more than %d static links", FS_TOPO_MAX_STATIC);
        goto out;
    }
    for (size_t i = 0; i < count; i++)
        if (!*nz(links[i].a_node) || !*nz(links[i].a_port) || !*nz(links[i].b_node) ||
            !*nz(links[i].b_port)) {
            snprintf(errbuf, errlen, "topology: static link %zu lacks a node or a port", i + 1);
            goto out;
        }
    long ri =
        reporter_find(t, FS_TOPO_SOURCE_CONFIG, FS_TOPO_SOURCE_CONFIG, true, false, errbuf, errlen);
    if (ri < 0)
        goto out;
    /* Never expire (hold 0); the set is a table: links no longer configured go at its end,
     * those kept keep their first_seen. */
    t->reps[ri].hold_us = 0;
    rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        struct fs_topo_neighbor n = {.local_port = links[i].a_port,
                                     .sys_name = links[i].b_node,
                                     .port = links[i].b_port,
                                     .port_id = links[i].b_port};
        rc = neighbor_locked(t, (size_t)ri, links[i].a_node, &n, now_us, errbuf, errlen);
    }
    table_end_locked(t, (size_t)ri);
out:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

size_t
fs_topo_table_end(struct fs_topo *t, const char *target, const char *source, int64_t interval_us,
                  int64_t now_us)
{
    size_t gone = 0;
    char err[96];
    pthread_mutex_lock(&t->lock);
    expire_locked(t, now_us);
    /* Created even with no neighbour: an empty table is news (all links went). */
    long ri = reporter_find(t, nz(target), nz(source), true, true, err, sizeof err);
    if (ri < 0)
        goto out;
    t->reps[ri].hold_us = hold_for(interval_us);
    gone = table_end_locked(t, (size_t)ri);
out:
    pthread_mutex_unlock(&t->lock);
    return gone;
}

/* ---- snapshots ---- */

/* The target a remote system is, or NULL: by its chassis id or sysName against the
 * targets' own, or by a sysName that is a target's name. Under the lock. */
static const char *
resolve_target(const struct fs_topo *t, const struct report *r)
{
    for (size_t i = 0; i < t->n_reps; i++) {
        const struct reporter *p = &t->reps[i];
        if (p->is_target && *r->chassis_id && *p->chassis_id &&
            strcmp(r->chassis_id, p->chassis_id) == 0)
            return p->target;
    }
    for (size_t i = 0; i < t->n_reps; i++) {
        const struct reporter *p = &t->reps[i];
        if (p->is_target && *r->sys_name &&
            ((*p->sys_name && strcmp(r->sys_name, p->sys_name) == 0) ||
             strcmp(r->sys_name, p->target) == 0))
            return p->target;
    }
    return NULL;
}

/* Whether name is a target's (a reporter of a target's kind). Under the lock. */
static bool
name_is_target(const struct fs_topo *t, const char *name)
{
    for (size_t i = 0; i < t->n_reps; i++)
        if (t->reps[i].is_target && strcmp(t->reps[i].target, name) == 0)
            return true;
    return false;
}

/* The local end's node of report r: the configuration names it, others are the reporter. */
static const char *
local_node_of(const struct fs_topo *t, const struct report *r)
{
    return r->local_node ? r->local_node : t->reps[r->rep].target;
}

static int
end_cmp(const struct fs_topo_end *x, const struct fs_topo_end *y)
{
    int c = strcmp(x->node, y->node);
    return c ? c : strcmp(x->port, y->port);
}

static int
link_cmp(const void *p, const void *q)
{
    const struct fs_topo_link *x = p, *y = q;
    int c = end_cmp(&x->a, &y->a);
    return c ? c : end_cmp(&x->b, &y->b);
}

static void
end_free(struct fs_topo_end *e)
{
    free(e->node);
    free(e->port);
}

static void
link_free(struct fs_topo_link *l)
{
    end_free(&l->a);
    end_free(&l->b);
    for (size_t i = 0; i < l->n_sources; i++) {
        free(l->sources[i].source);
        free(l->sources[i].reporter);
    }
}

void
fs_topo_snap_free(struct fs_topo_snap *s)
{
    for (size_t i = 0; i < s->n_links; i++)
        link_free(&s->links[i]);
    for (size_t i = 0; i < s->n_nodes; i++) {
        free(s->nodes[i].name);
        free(s->nodes[i].chassis_id);
        free(s->nodes[i].sys_name);
    }
    free(s->links);
    free(s->nodes);
    memset(s, 0, sizeof *s);
}

/* The link of one report, ends in canonical order; -1 when out of memory. Under the
 * lock. */
static int
link_of(const struct fs_topo *t, const struct report *r, struct fs_topo_link *l)
{
    const struct reporter *rep = &t->reps[r->rep];
    const char *tgt = resolve_target(t, r);
    const char *lnode = local_node_of(t, r);
    struct fs_topo_end a = {strdup(lnode), strdup(r->local_port),
                            rep->is_target || name_is_target(t, lnode)};
    struct fs_topo_end b = {strdup(tgt            ? tgt
                                   : *r->sys_name ? r->sys_name
                                                  : r->chassis_id),
                            strdup(r->port), tgt != NULL};
    memset(l, 0, sizeof *l);
    l->n_sources = 1;
    l->sources[0] = (struct fs_topo_source){strdup(rep->source), strdup(rep->target),
                                            r->first_seen_us, r->last_seen_us, r->hold_us};
    l->first_seen_us = r->first_seen_us;
    l->last_seen_us = r->last_seen_us;
    int rc = 0;
    if (!a.node || !a.port || !b.node || !b.port || !l->sources[0].source ||
        !l->sources[0].reporter)
        rc = -1;
    bool swap = rc == 0 && end_cmp(&a, &b) > 0;
    l->a = swap ? b : a;
    l->b = swap ? a : b;
    return rc;
}

/* Adds a node unless one of that name is there (a target's entry wins over a remote's).
 * -1 when out of memory. */
static int
node_add(struct fs_topo_snap *s, size_t *cap, const char *name, bool is_target,
         const char *chassis_id, const char *sys_name)
{
    int rc = -1;
    for (size_t i = 0; i < s->n_nodes; i++) {
        struct fs_topo_node *n = &s->nodes[i];
        if (strcmp(n->name, name) != 0)
            continue;
        n->is_target = n->is_target || is_target;
        if (!*n->chassis_id && *nz(chassis_id) && set_str(&n->chassis_id, chassis_id) != 0)
            goto out;
        if (!*n->sys_name && *nz(sys_name) && set_str(&n->sys_name, sys_name) != 0)
            goto out;
        rc = 0;
        goto out;
    }
    if (s->n_nodes == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        struct fs_topo_node *g = realloc(s->nodes, c * sizeof *g);
        if (!g)
            goto out;
        s->nodes = g;
        *cap = c;
    }
    struct fs_topo_node *n = &s->nodes[s->n_nodes];
    n->name = strdup(name);
    n->is_target = is_target;
    n->chassis_id = strdup(nz(chassis_id));
    n->sys_name = strdup(nz(sys_name));
    if (!n->name || !n->chassis_id || !n->sys_name) {
        free(n->name);
        free(n->chassis_id);
        free(n->sys_name);
        goto out;
    }
    s->n_nodes++;
    rc = 0;
out:
    return rc;
}

static int
node_cmp(const void *p, const void *q)
{
    return strcmp(((const struct fs_topo_node *)p)->name, ((const struct fs_topo_node *)q)->name);
}

/* Merges link src into dst (same ends): its sources move over (src is left without
 * them). */
static void
link_merge(struct fs_topo_link *dst, struct fs_topo_link *src)
{
    for (size_t i = 0; i < src->n_sources; i++) {
        if (dst->n_sources < FS_TOPO_LINK_MAX_SOURCES) {
            dst->sources[dst->n_sources++] = src->sources[i];
        } else {
            free(src->sources[i].source);
            free(src->sources[i].reporter);
        }
    }
    src->n_sources = 0;
    if (src->first_seen_us < dst->first_seen_us)
        dst->first_seen_us = src->first_seen_us;
    if (src->last_seen_us > dst->last_seen_us)
        dst->last_seen_us = src->last_seen_us;
}

int
fs_topo_snapshot(struct fs_topo *t, int64_t now_us, struct fs_topo_snap *out, char *errbuf,
                 size_t errlen)
{
    int rc = -1;
    size_t node_cap = 0;
    memset(out, 0, sizeof *out);
    out->now_us = now_us;
    pthread_mutex_lock(&t->lock);
    expire_locked(t, now_us);
    if (t->n_rpts) {
        out->links = calloc(t->n_rpts, sizeof *out->links);
        if (!out->links)
            goto unlock;
    }
    for (size_t i = 0; i < t->n_rpts; i++) {
        out->n_links = i + 1;
        if (link_of(t, &t->rpts[i], &out->links[i]) != 0)
            goto unlock;
    }
    /* Nodes: every target that reported (with its own identity), then remote systems
     * with what their reports say of them. */
    for (size_t i = 0; i < t->n_reps; i++) {
        const struct reporter *p = &t->reps[i];
        if (p->is_target &&
            node_add(out, &node_cap, p->target, true, p->chassis_id, p->sys_name) != 0)
            goto unlock;
    }
    for (size_t i = 0; i < t->n_rpts; i++) {
        const struct report *r = &t->rpts[i];
        const char *lnode = local_node_of(t, r);
        /* Hosts and configured nodes are nodes through their links only. */
        if (!t->reps[r->rep].is_target &&
            node_add(out, &node_cap, lnode, name_is_target(t, lnode), "", "") != 0)
            goto unlock;
        const char *tgt = resolve_target(t, r);
        if (node_add(out, &node_cap,
                     tgt            ? tgt
                     : *r->sys_name ? r->sys_name
                                    : r->chassis_id,
                     tgt != NULL, r->chassis_id, r->sys_name) != 0)
            goto unlock;
    }
    rc = 0;
unlock:
    pthread_mutex_unlock(&t->lock);
    if (rc != 0)
        goto out;
    /* Both ends of a link between two targets report it: one link, both sources. */
    if (out->n_links > 1) /* links is NULL when there are none */
        qsort(out->links, out->n_links, sizeof *out->links, link_cmp);
    size_t w = 0;
    for (size_t i = 0; i < out->n_links; i++) {
        if (w > 0 && link_cmp(&out->links[w - 1], &out->links[i]) == 0) {
            link_merge(&out->links[w - 1], &out->links[i]);
            link_free(&out->links[i]);
            continue;
        }
        out->links[w++] = out->links[i];
    }
    out->n_links = w;
    if (out->n_nodes > 1)
        qsort(out->nodes, out->n_nodes, sizeof *out->nodes, node_cmp);
out:
    if (rc != 0) {
        snprintf(errbuf, errlen, "topology: out of memory");
        fs_topo_snap_free(out);
    }
    return rc;
}

void
fs_topo_stats(struct fs_topo *t, struct fs_topo_stats *out)
{
    pthread_mutex_lock(&t->lock);
    out->reports = t->n_rpts;
    out->reporters = t->n_reps;
    out->refused = t->refused;
    out->expired = t->expired;
    out->dropped = t->dropped;
    pthread_mutex_unlock(&t->lock);
}
