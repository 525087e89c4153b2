/* Sharding by rendezvous hashing and the running cluster view; see cluster.h. */
#include "cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t
fnv1a64(const char *s)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* SplitMix64's finalizer: every input bit reaches every output bit. */
static uint64_t
mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint32_t
fs_shard_owner(const char *target, uint32_t count)
{
    uint64_t h = fnv1a64(target ? target : ""), best = 0;
    uint32_t owner = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t w = mix64(h ^ mix64(UINT64_C(0x9e3779b97f4a7c15) * (i + 1)));
        if (i == 0 || w > best) {
            best = w;
            owner = i;
        }
    }
    return owner;
}

int
fs_shard_parse(const char *text, struct fs_shard *out, char *errbuf, size_t errlen)
{
    char *end = NULL;
    unsigned long i, n;
    errno = 0;
    i = strtoul(text, &end, 10);
    if (errno || end == text || *end != '/' || text[0] == '-' || text[0] == '+')
        goto bad;
    const char *ns = end + 1;
    n = strtoul(ns, &end, 10);
    if (errno || end == ns || *end || ns[0] == '-' || ns[0] == '+' || n < 1 || n > 4096 || i >= n)
        goto bad;
    out->index = (uint32_t)i;
    out->count = (uint32_t)n;
    return 0;
bad:
    snprintf(errbuf, errlen,
             "--shard \"%s\": expected INDEX/COUNT with 0 <= INDEX < COUNT <= 4096 (e.g. 0/3)",
             text);
    return -1;
}

struct fs_shard
fs_shard_effective(const struct fs_config *cfg, const struct fs_shard *override)
{
    if (override && override->count > 0)
        return *override;
    struct fs_shard s = {cfg ? cfg->shard_index : 0, cfg ? cfg->shard_count : 0};
    return s;
}

bool
fs_shard_mine(const struct fs_shard *s, const char *target)
{
    return !s || s->count <= 1 || fs_shard_owner(target, s->count) == s->index;
}

const struct fs_kv *
fs_external_labels(const struct fs_config *cfg, size_t *n)
{
    *n = cfg ? cfg->n_external_labels : 0;
    return cfg ? cfg->external_labels : NULL;
}

/* ---- the running view ---- */

struct cl_target {
    char *name;
    uint32_t owner;
    bool mine;
};

struct fs_cluster {
    pthread_mutex_t lock;
    struct fs_shard shard;
    struct cl_target *targets; /* owned, with their names */
    size_t n_targets;
    char *labels_text; /* owned; "" when there are none */
};

struct fs_cluster *
fs_cluster_new(void)
{
    struct fs_cluster *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->labels_text = strdup("");
    if (!cl->labels_text) {
        free(cl);
        return NULL;
    }
    pthread_mutex_init(&cl->lock, NULL);
    return cl;
}

static void
targets_free(struct cl_target *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(t[i].name);
    free(t);
}

void
fs_cluster_free(struct fs_cluster *cl)
{
    if (!cl)
        return;
    targets_free(cl->targets, cl->n_targets);
    free(cl->labels_text);
    pthread_mutex_destroy(&cl->lock);
    free(cl);
}

int
fs_cluster_update(struct fs_cluster *cl, const struct fs_config *cfg, const struct fs_shard *s)
{
    struct cl_target *t = calloc(cfg->n_targets ? cfg->n_targets : 1, sizeof *t);
    struct fs_buf b;
    int rc = -1;

    fs_buf_init(&b, 1u << 20);
    if (!t)
        goto out;
    for (size_t i = 0; i < cfg->n_targets; i++) {
        const char *name = cfg->targets[i].name;
        if (!(t[i].name = strdup(name)))
            goto out;
        t[i].owner = fs_shard_owner(name, s->count);
        t[i].mine = fs_shard_mine(s, name);
    }
    for (size_t i = 0; i < cfg->n_external_labels; i++) {
        if (i)
            fs_buf_puts(&b, ",");
        fs_buf_puts(&b, cfg->external_labels[i].key);
        fs_buf_puts(&b, "=\"");
        fs_buf_prom_label_value(&b, cfg->external_labels[i].value);
        fs_buf_puts(&b, "\"");
    }
    char *text = strndup(b.data ? b.data : "", b.len);
    if (b.overflow || !text) {
        free(text);
        goto out;
    }
    pthread_mutex_lock(&cl->lock);
    struct cl_target *old = cl->targets;
    size_t n_old = cl->n_targets;
    char *old_text = cl->labels_text;
    cl->targets = t;
    cl->n_targets = cfg->n_targets;
    cl->labels_text = text;
    cl->shard = *s;
    pthread_mutex_unlock(&cl->lock);
    targets_free(old, n_old);
    free(old_text);
    t = NULL;
    rc = 0;
out:
    if (t)
        targets_free(t, cfg->n_targets);
    fs_buf_free(&b);
    return rc;
}

struct fs_shard
fs_cluster_shard(struct fs_cluster *cl)
{
    struct fs_shard s = {0, 0};
    if (!cl)
        return s;
    pthread_mutex_lock(&cl->lock);
    s = cl->shard;
    pthread_mutex_unlock(&cl->lock);
    return s;
}

void
fs_cluster_labels_text(struct fs_cluster *cl, struct fs_buf *out)
{
    if (!cl)
        return;
    pthread_mutex_lock(&cl->lock);
    fs_buf_puts(out, cl->labels_text);
    pthread_mutex_unlock(&cl->lock);
}

int
fs_cluster_foreach_target(struct fs_cluster *cl,
                          int (*cb)(void *arg, const char *target, uint32_t owner, bool mine),
                          void *arg)
{
    int rc = 0;
    if (!cl)
        return 0;
    pthread_mutex_lock(&cl->lock);
    for (size_t i = 0; i < cl->n_targets && rc == 0; i++)
        rc = cb(arg, cl->targets[i].name, cl->targets[i].owner, cl->targets[i].mine);
    pthread_mutex_unlock(&cl->lock);
    return rc;
}
