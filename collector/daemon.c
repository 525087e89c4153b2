/* The daemon's life cycle and the one-shot subcommands; see daemon.h. */
#include "daemon.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "analysis/service.h"
#include "util/buf.h"
#include "util/clock.h"
#include "driver.h"
#include "export/remote_write.h"
#include "http/expo.h"
#include "http/http.h"
#include "util/log.h"
#include "scheduler.h"
#include "store/store.h"
#include "analysis/host_events.h"
#include "topology/topology.h"

#define MAX_DRIVERS 8

/* A configuration shared by the instances created from it; freed with the last one. */
struct cfg_ref {
    struct fs_config *cfg;
    int refs;
};

struct drv_slot {
    const struct fs_driver *drv;
    void *state;
    bool started;
};

/* One (target, driver) pair. */
struct instance {
    struct instance *next;
    const struct fs_driver *drv;
    struct drv_slot *slot; /* NULL when the driver refused the target (shown as down) */
    void *tstate;
    struct fs_sink *sink;
    struct fs_sched_entry *entry;
    const struct fs_target_cfg *tcfg;
    const struct fs_target_block *blk; /* tcfg's block for drv */
    struct cfg_ref *ref;
};

/* What a file was when the listener read it: a change means it was rewritten. */
struct file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim, ctim;
};

/* The HTTP endpoint and what it was started from, so a reload can tell whether it must
 * be restarted: it is down, its settings changed, or a file it read (bearer token, TLS
 * certificate or key) was rewritten. */
struct listener {
    struct fs_http *http;    /* NULL: down (failed to start) */
    struct cfg_ref *cfg;     /* the configuration it runs, or last tried */
    struct file_id files[3]; /* token, certificate, key */
};

/* The analysis context (host events, incidents) and the thread that keeps its incident
 * metrics current. */
#define ANALYSIS_REFRESH_S 30
struct analysis {
    struct fs_analysis *an;
    pthread_t refresher, prefetcher;
    bool started, prefetch_started, stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;          /* CLOCK_MONOTONIC */
    pthread_cond_t prefetch_cond; /* signalled after each refresh and at stop */
    uint64_t refreshes;           /* refreshes done (lock) */
};

struct daemon {
    struct fs_store *store;
    struct fs_sched *sched;
    struct analysis an;
    struct listener http;
    struct drv_slot slots[MAX_DRIVERS];
    struct instance *insts;
    struct cfg_ref *current;
    struct fs_cluster *cluster; /* shard and external labels, read by the HTTP side */
    struct fs_shard override;   /* --shard; count 0: the configuration's shard block */
    int64_t store_created_us;
    struct fs_remote_write *rw; /* remote_write senders */
    struct fs_topo *topo;       /* links the drivers learn (LLDP); read by the HTTP side */
};

/* Whether this instance polls t (its shard owns it). */
static bool
target_mine(const struct daemon *d, const struct fs_config *c, const struct fs_target_cfg *t)
{
    struct fs_shard s = fs_shard_effective(c, &d->override);
    return fs_shard_mine(&s, t->name);
}

/* Whether the core can use drv; a driver it cannot use is logged once per process. */
static bool
driver_usable(size_t idx, const struct fs_driver *drv)
{
    static bool logged[MAX_DRIVERS];
    char why[256];
    if (fs_driver_check(drv, why, sizeof why) == 0)
        return true;
    if (idx < MAX_DRIVERS && !logged[idx]) {
        fs_log(FS_LOG_ERROR, "main", "driver #%zu of the registry is not used: %s", idx + 1, why);
        logged[idx] = true;
    }
    return false;
}

void
fs_daemon_config_opts(struct fs_config_opts *o)
{
    static const struct fs_cfg_block_ops *blocks[MAX_DRIVERS];
    static const char *absent[MAX_DRIVERS];
    size_t nb = 0, na = 0;

    for (size_t i = 0; i < fs_builtin_driver_count && nb < MAX_DRIVERS; i++)
        if (driver_usable(i, fs_builtin_drivers[i]))
            blocks[nb++] = &fs_builtin_drivers[i]->block;
    /* Every other driver fabricscope knows: its block is refused with that reason. */
    for (size_t i = 0; i < fs_known_driver_count && na < MAX_DRIVERS; i++) {
        bool have = false;
        for (size_t j = 0; j < nb; j++)
            have = have || strcmp(blocks[j]->name, fs_known_driver_names[i]) == 0;
        if (!have)
            absent[na++] = fs_known_driver_names[i];
    }
    o->blocks = blocks;
    o->n_blocks = nb;
    o->absent = absent;
    o->n_absent = na;
}

static int
load_config(const char *path, struct fs_config **out, FILE *err)
{
    struct fs_config_opts o;
    char *errors = NULL;
    fs_daemon_config_opts(&o);
    int n = fs_config_load(path, &o, out, &errors);
    if (n != 0) {
        if (err)
            fprintf(err, "%s%s", errors ? errors : "invalid configuration\n",
                    errors && errors[0] && errors[strlen(errors) - 1] != '\n' ? "\n" : "");
        else if (errors) {
            /* One problem a line: as one log message, ';' between them and no trailing
             * newline (the logger would print it escaped, \x0a). */
            size_t len = strlen(errors);
            while (len && errors[len - 1] == '\n')
                errors[--len] = '\0';
            for (char *nl = strchr(errors, '\n'); nl; nl = strchr(nl + 1, '\n'))
                *nl = ';';
            fs_log(FS_LOG_ERROR, "config", "%s: refused (%d problems): %s", path, n, errors);
        } else
            fs_log(FS_LOG_ERROR, "config", "%s: refused (%d problems)", path, n);
        free(errors);
        return -1;
    }
    return 0;
}

int
fs_check_config(const char *path, FILE *out, FILE *err)
{
    struct fs_config *cfg = NULL;
    if (load_config(path, &cfg, err) != 0)
        return 2;
    fprintf(out, "%s: ok (%zu targets, %zu flow rules)\n", path, cfg->n_targets, cfg->n_flow_rules);
    fs_config_free(cfg);
    return 0;
}

/* ---- driver blocks of a target ---- */

static struct drv_slot *
slot_get(struct drv_slot *slots, const struct fs_driver *drv, char *errbuf, size_t errlen)
{
    if (fs_driver_check(drv, errbuf, errlen) != 0)
        return NULL;
    for (size_t i = 0; i < MAX_DRIVERS; i++) {
        struct drv_slot *s = &slots[i];
        if (s->drv && s->drv != drv)
            continue;
        s->drv = drv;
        if (!s->started) {
            if (drv->init(&s->state, errbuf, errlen) != FS_DRV_OK)
                return NULL;
            s->started = true;
        }
        return s;
    }
    snprintf(errbuf, errlen, "too many drivers");
    return NULL;
}

static void
slots_shutdown(struct drv_slot *slots)
{
    for (size_t i = 0; i < MAX_DRIVERS; i++) {
        if (slots[i].started)
            slots[i].drv->shutdown(slots[i].state);
        slots[i].started = false;
    }
}

static void
cfg_unref(struct cfg_ref *r)
{
    if (r && --r->refs == 0) {
        fs_config_free(r->cfg);
        free(r);
    }
}

/* Starts the driver side of an instance whose sink exists: the driver's target and, for
 * a polling driver, its scheduler entry. A driver that fails to start or refuses the
 * target leaves the instance down with the reason (in->slot NULL); a reload retries it. */
static void
instance_start(struct daemon *d, struct instance *in)
{
    char err[256] = "";
    const struct fs_driver *drv = in->drv;
    const struct fs_target_cfg *t = in->tcfg;
    const struct fs_target_block *blk = in->blk;
    const char *name = drv->block.name;
    in->slot = slot_get(d->slots, drv, err, sizeof err);
    if (!in->slot) {
        fs_log(FS_LOG_ERROR, name, "driver failed to start: %s", err);
        fs_sink_done(in->sink, 0, FS_POLL_PROTOCOL, err);
        return;
    }
    if (drv->target_add(in->slot->state, t, blk->cfg, in->sink, &in->tstate, err, sizeof err) !=
        FS_DRV_OK) {
        fs_log(FS_LOG_ERROR, name, "target %s not added: %s", t->name, err);
        fs_sink_done(in->sink, 0, FS_POLL_PROTOCOL, err);
        in->tstate = NULL;
        in->slot = NULL;
        return;
    }
    /* A streaming driver reports on its own: only polling targets are scheduled. */
    if (drv->kind == FS_DRIVER_POLL) {
        char ename[300];
        snprintf(ename, sizeof ename, "%s/%s", t->name, name);
        in->entry = fs_sched_add(d->sched, drv, in->slot->state, in->tstate, in->sink, ename,
                                 blk->ops->config_interval(blk->cfg));
    }
}

/* Stops the driver side of an instance; its sink (history, counter state) stays. The
 * order is the scheduler entry's lifetime (scheduler.h): no new start or cancel, then the
 * driver ends what is in flight and its done calls, then the entry goes. */
static void
instance_stop(struct daemon *d, struct instance *in)
{
    fs_sched_remove(d->sched, in->entry);
    if (in->slot && in->tstate)
        in->slot->drv->target_remove(in->slot->state, in->tstate);
    fs_sched_entry_free(d->sched, in->entry);
    in->entry = NULL;
    in->tstate = NULL;
    in->slot = NULL;
}

static struct instance *
instance_add(struct daemon *d, const struct fs_target_cfg *t, const struct fs_target_block *blk,
             const struct fs_driver *drv, struct cfg_ref *ref)
{
    struct instance *in = calloc(1, sizeof *in);
    if (!in)
        return NULL;
    in->tcfg = t;
    in->blk = blk;
    in->drv = drv;
    in->sink = fs_store_sink_add(d->store, t, drv->block.name, blk->ops->config_interval(blk->cfg));
    if (!in->sink) {
        free(in);
        return NULL;
    }
    fs_store_sink_set_streaming(in->sink, drv->kind == FS_DRIVER_STREAM);
    in->ref = ref;
    ref->refs++;
    instance_start(d, in);
    in->next = d->insts;
    d->insts = in;
    return in;
}

static void
instance_remove(struct daemon *d, struct instance *in)
{
    instance_stop(d, in);
    fs_store_sink_remove(d->store, in->sink);
    cfg_unref(in->ref);
    free(in);
}

/* Adds instances for every driver block of t that has no instance yet. */
static void
target_add_all(struct daemon *d, const struct fs_target_cfg *t, struct cfg_ref *ref)
{
    if (!target_mine(d, ref->cfg, t))
        return; /* another shard polls it */
    for (size_t i = 0; i < t->n_blocks; i++) {
        const struct fs_driver *drv = fs_driver_of_block(t->blocks[i].ops);
        if (!drv)
            continue; /* cannot happen: the blocks came from this registry */
        bool have = false;
        for (struct instance *in = d->insts; in; in = in->next)
            if (strcmp(in->tcfg->name, t->name) == 0 && in->drv == drv)
                have = true;
        if (!have)
            instance_add(d, t, &t->blocks[i], drv, ref);
    }
}

static const struct fs_target_cfg *
find_target(const struct fs_config *c, const char *name)
{
    for (size_t i = 0; i < c->n_targets; i++)
        if (strcmp(c->targets[i].name, name) == 0)
            return &c->targets[i];
    return NULL;
}

/* ---- HTTP ---- */

static void
file_id_of(const char *path, struct file_id *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    /* stat() does not open the file: a FIFO in its place cannot block the reload. */
    if (!path || stat(path, &st) != 0)
        return;
    id->exists = true;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtim = st.st_mtim;
    id->ctim = st.st_ctim;
}

static bool
file_id_equal(const struct file_id *a, const struct file_id *b)
{
    return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec &&
           a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec;
}

static void
listener_files(const struct fs_config *c, struct file_id files[3])
{
    file_id_of(c->http_bearer_token.file, &files[0]);
    file_id_of(c->http_tls_cert_file, &files[1]);
    file_id_of(c->http_tls_key_file, &files[2]);
}

/* Starts the endpoint of ref's configuration into d->http (which must be down), reading
 * its secret afresh; the attempt is remembered whether or not it succeeds. */
static int
http_start(struct daemon *d, struct cfg_ref *ref)
{
    const struct fs_config *c = ref->cfg;
    char err[256] = "", token[512] = "";
    struct fs_http_opts o = {
        .host = c->listen_host,
        .port = c->listen_port,
        .tls_cert_file = c->http_tls_cert_file,
        .tls_key_file = c->http_tls_key_file,
        .cluster = d->cluster,
        .store_created_us = d->store_created_us,
        .analysis = d->an.an,
        .topology = d->topo,
    };
    int rc = -1;
    ref->refs++;
    cfg_unref(d->http.cfg);
    d->http.cfg = ref;
    /* Before reading: a file rewritten after this is seen as changed at the next reload. */
    listener_files(c, d->http.files);
    if (c->http_bearer_token.file || c->http_bearer_token.env) {
        if (fs_secret_read(&c->http_bearer_token, token, sizeof token, err, sizeof err) != 0) {
            fs_log(FS_LOG_ERROR, "http", "bearer token: %s", err);
            goto out;
        }
        o.bearer_token = token;
    }
    d->http.http = fs_http_start(&o, d->store, err, sizeof err);
    if (!d->http.http) {
        fs_log(FS_LOG_ERROR, "http", "cannot listen on %s:%u: %s", c->listen_host, c->listen_port,
               err);
        goto out;
    }
    rc = 0;
out:
    /* fs_http_start() keeps its own copy; ours goes now. */
    explicit_bzero(token, sizeof token);
    return rc;
}

static void
http_stop(struct daemon *d)
{
    fs_http_stop(d->http.http);
    d->http.http = NULL;
    cfg_unref(d->http.cfg);
    d->http.cfg = NULL;
}

static bool
str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool
http_same(const struct fs_config *a, const struct fs_config *b)
{
    return str_eq(a->listen_host, b->listen_host) && a->listen_port == b->listen_port &&
           str_eq(a->http_tls_cert_file, b->http_tls_cert_file) &&
           str_eq(a->http_tls_key_file, b->http_tls_key_file) &&
           str_eq(a->http_bearer_token.file, b->http_bearer_token.file) &&
           str_eq(a->http_bearer_token.env, b->http_bearer_token.env);
}

/* On reload: restarts the endpoint if it is down, its settings changed, or a file it
 * read was rewritten (a rotated token or certificate takes effect). If the new one
 * cannot start, the previous settings are tried again so the endpoint stays up. */
static void
http_reload(struct daemon *d, struct cfg_ref *nref)
{
    const char *why = NULL;
    struct file_id now[3];
    if (!d->http.http) {
        why = "was down";
    } else if (!http_same(d->http.cfg->cfg, nref->cfg)) {
        why = "settings changed";
    } else {
        listener_files(nref->cfg, now);
        for (size_t i = 0; i < 3; i++)
            if (!file_id_equal(&now[i], &d->http.files[i]))
                why = "a token or certificate file changed";
    }
    if (!why)
        return;
    fs_log(FS_LOG_INFO, "http", "restarting the endpoint: %s", why);
    struct cfg_ref *prev = d->http.cfg;
    bool was_up = d->http.http != NULL;
    prev->refs++;
    fs_http_stop(d->http.http);
    d->http.http = NULL;
    if (http_start(d, nref) != 0) {
        if (was_up && http_start(d, prev) == 0)
            fs_log(FS_LOG_WARN, "http", "kept the previous endpoint; retried on the next reload");
        else
            fs_log(FS_LOG_ERROR, "http", "no HTTP endpoint; retried on the next reload");
        /* Either way the next reload differs from what runs (or nothing runs): it retries. */
    }
    cfg_unref(prev);
}

/* ---- remote_write ---- */

/* Runs the configuration's receivers; one that cannot start is logged and retried by the
 * next reload. External labels: this configuration has none yet. HOOK: once struct
 * fs_config has `external_labels` (the ops branch adds cfg->external_labels and
 * cfg->n_external_labels, sorted fs_kv), pass them instead of NULL, 0 below; every
 * series sent then carries them and a change of them restarts the senders. */
static void
remote_write_apply(struct daemon *d, const struct fs_config *c)
{
    char err[256] = "";
    if (!d->rw)
        return;
    size_t n_ext = 0;
    const struct fs_kv *ext = fs_external_labels(c, &n_ext);
    if (fs_remote_write_apply(d->rw, c->remote_write, c->n_remote_write, ext, n_ext, err,
                              sizeof err) != 0)
        fs_log(FS_LOG_ERROR, "remote_write", "not every receiver runs; retried on the next reload");
}

/* ---- analysis ---- */

/* Applies c's host_events, analysis and clock settings: the host-event bounds, the
 * analysis settings and episode log bounds, the flow rules,
 * and the post token read afresh (an unreadable token disables posting: 403). */
static void
analysis_configure(struct daemon *d, const struct fs_config *c)
{
    fs_store_set_clock_max_offset(d->store, c->clock_max_offset_us);
    struct fs_host_events_opts ho = {c->host_events_memory_limit,
                                     c->host_events_retention_us * 1000};
    fs_host_events_set_opts(fs_analysis_host_events(d->an.an), &ho);
    struct fs_analysis_opts ao;
    fs_analysis_opts_default(&ao);
    ao.an.z_threshold = c->analysis.z_threshold;
    ao.an.baseline_window_us = c->analysis.baseline_window_us;
    ao.an.baseline_step_us = c->analysis.baseline_window_us;
    ao.an.merge_gap_us = c->analysis.merge_gap_us;
    ao.an.min_occurrences = c->analysis.min_occurrences;
    ao.an.max_period_spread = c->analysis.max_period_spread;
    ao.horizon_us = c->analysis.horizon_us;
    ao.request_wait_us = c->analysis.request_timeout_us;
    ao.log.retention_us = c->analysis.episode_retention_us;
    ao.log.memory_limit = c->analysis.episode_memory_limit;
    fs_analysis_set_opts(d->an.an, &ao);
    char herr[160];
    if (fs_analysis_set_history(d->an.an, c->analysis.history, herr, sizeof herr) != 0)
        fs_log(FS_LOG_ERROR, "analysis", "analysis.history: %s", herr);
    struct fs_analysis_flow_rule *rules =
        c->n_flow_rules ? calloc(c->n_flow_rules, sizeof *rules) : NULL;
    if (c->n_flow_rules && !rules) {
        fs_log(FS_LOG_ERROR, "analysis", "out of memory for the flow rules");
    } else {
        for (size_t i = 0; i < c->n_flow_rules; i++) {
            const struct fs_flow_rule *r = &c->flow_rules[i];
            rules[i] = (struct fs_analysis_flow_rule){r->name,   (int)r->protocol, r->src_lo,
                                                      r->src_hi, r->dst_lo,        r->dst_hi};
        }
        if (fs_analysis_set_flow_rules(d->an.an, rules, c->n_flow_rules) != 0)
            fs_log(FS_LOG_ERROR, "analysis", "out of memory for the flow rules");
        free(rules);
    }
    char token[512] = "", err[256] = "";
    const char *use = NULL;
    if (c->host_events_token.file || c->host_events_token.env) {
        if (fs_secret_read(&c->host_events_token, token, sizeof token, err, sizeof err) != 0)
            fs_log(FS_LOG_ERROR, "analysis",
                   "host_events bearer token: %s; posting host events is disabled", err);
        else
            use = token;
    }
    /* Per-host tokens: one that cannot be read is left out (its hosts cannot post), the
       others stand. */
    struct fs_analysis_token *ht = c->n_host_tokens ? calloc(c->n_host_tokens, sizeof *ht) : NULL;
    char(*secrets)[512] = c->n_host_tokens ? calloc(c->n_host_tokens, sizeof *secrets) : NULL;
    size_t n_ht = 0;
    if (c->n_host_tokens && (!ht || !secrets)) {
        fs_log(FS_LOG_ERROR, "analysis", "out of memory for host_events.tokens");
    } else {
        for (size_t i = 0; i < c->n_host_tokens; i++) {
            const struct fs_host_token_cfg *h = &c->host_tokens[i];
            if (fs_secret_read(&h->token, secrets[n_ht], sizeof secrets[n_ht], err, sizeof err) !=
                0) {
                fs_log(FS_LOG_ERROR, "analysis",
                       "host_events.tokens[%s]: %s; hosts %s cannot post with it", h->name, err,
                       h->hosts);
                continue;
            }
            ht[n_ht] =
                (struct fs_analysis_token){h->name, secrets[n_ht], h->hosts, h->memory_limit};
            n_ht++;
        }
    }
    if (fs_analysis_set_tokens(d->an.an, use, ht, n_ht) != 0)
        fs_log(FS_LOG_ERROR, "analysis", "out of memory for the host_events tokens");
    explicit_bzero(token, sizeof token);
    if (secrets)
        explicit_bzero(secrets, c->n_host_tokens * sizeof *secrets);
    free(secrets);
    free(ht);
}

static void *
analysis_refresher(void *arg)
{
    struct daemon *d = arg;
    pthread_mutex_lock(&d->an.lock);
    while (!d->an.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ANALYSIS_REFRESH_S;
        pthread_cond_timedwait(&d->an.cond, &d->an.lock, &ts);
        if (d->an.stop)
            break;
        pthread_mutex_unlock(&d->an.lock);
        if (fs_analysis_refresh(d->an.an, d->store, fs_realtime_us()) != 0)
            fs_log(FS_LOG_WARN, "analysis", "incident refresh failed (out of memory)");
        fs_analysis_log_persist(d->an.an, fs_realtime_us(), false);
        pthread_mutex_lock(&d->an.lock);
        d->an.refreshes++;
        pthread_cond_signal(&d->an.prefetch_cond);
    }
    pthread_mutex_unlock(&d->an.lock);
    return NULL;
}

/* analysis.history read ahead after each refresh (fs_analysis_prefetch_history), in a
   thread of its own: a slow or hung history holds back this thread, never the refresh.
   A chunk at a time, so a stop waits for one read only. */
static void *
history_prefetcher(void *arg)
{
    struct daemon *d = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&d->an.lock);
    while (!d->an.stop) {
        if (d->an.refreshes == seen) {
            pthread_cond_wait(&d->an.prefetch_cond, &d->an.lock);
            continue;
        }
        seen = d->an.refreshes;
        bool more = true;
        while (more && !d->an.stop) {
            pthread_mutex_unlock(&d->an.lock);
            (void)fs_analysis_prefetch_history(d->an.an, d->store, fs_realtime_us(), &more);
            pthread_mutex_lock(&d->an.lock);
        }
    }
    pthread_mutex_unlock(&d->an.lock);
    return NULL;
}

/* ---- topology: the sink's LLDP reports into the daemon's store of links ---- */

/* A refused report is logged at most once a minute (a full topology refuses each one). */
static void
topo_refused(const char *target, const char *why)
{
    static _Atomic int64_t last_us;
    int64_t now = fs_monotonic_us(), prev = atomic_load(&last_us);
    if (now - prev >= 60 * 1000000LL && atomic_compare_exchange_strong(&last_us, &prev, now))
        fs_log(FS_LOG_WARN, "topology", "target %s: %s", target, why);
}

static int
topo_local(void *arg, const char *target, const char *source, const char *chassis_id,
           const char *sys_name, int64_t now_us)
{
    char err[160] = "";
    int rc = fs_topo_local(arg, target, source, chassis_id, sys_name, now_us, err, sizeof err);
    if (rc != 0)
        topo_refused(target, err);
    return rc;
}

static int
topo_neighbor(void *arg, const char *target, const char *source, const struct fs_lldp_neighbor *n,
              int64_t now_us)
{
    char err[160] = "";
    struct fs_topo_neighbor tn = {n->local_port, n->chassis_id, n->sys_name,
                                  n->port,       n->port_id,    n->port_descr};
    int rc = fs_topo_neighbor(arg, target, source, &tn, now_us, err, sizeof err);
    if (rc != 0)
        topo_refused(target, err);
    return rc;
}

static void
topo_table_end(void *arg, const char *target, const char *source, int64_t interval_us,
               int64_t now_us)
{
    size_t gone = fs_topo_table_end(arg, target, source, interval_us, now_us);
    if (gone)
        fs_log(FS_LOG_INFO, "topology", "target %s (%s): %zu neighbour(s) no longer listed", target,
               source, gone);
}

/* The configuration's static links replace the previous set (they never age). A set the
 * store refuses is logged; the configuration itself was checked when parsed. */
static void
topology_configure(struct daemon *d, const struct fs_config *c)
{
    char err[256] = "";
    struct fs_topo_static_link *v = NULL;
    if (c->n_topo_links && !(v = calloc(c->n_topo_links, sizeof *v))) {
        fs_log(FS_LOG_ERROR, "topology", "out of memory: the configured links are not updated");
        return;
    }
    for (size_t i = 0; i < c->n_topo_links; i++)
        v[i] = (struct fs_topo_static_link){c->topo_links[i].a_node, c->topo_links[i].a_port,
                                            c->topo_links[i].b_node, c->topo_links[i].b_port};
    if (fs_topo_set_static(d->topo, v, c->n_topo_links, fs_realtime_us(), err, sizeof err) != 0)
        fs_log(FS_LOG_ERROR, "topology", "configured links: %s", err);
    else if (c->n_topo_links)
        fs_log(FS_LOG_INFO, "topology", "%zu configured link(s)", c->n_topo_links);
    free(v);
}

/* A host's posted neighbours (POST /api/v1/host-events, "neighbors") into the topology. */
static int
topo_host_neighbors(void *arg, const char *host, const struct fs_host_neighbor *n, size_t count,
                    int64_t interval_ns, int64_t now_ns, char *errbuf, size_t errlen)
{
    struct fs_topo_neighbor v[FS_HOST_EVENTS_MAX_NEIGHBORS];
    for (size_t i = 0; i < count && i < FS_HOST_EVENTS_MAX_NEIGHBORS; i++)
        v[i] = (struct fs_topo_neighbor){n[i].nic,  n[i].chassis_id, n[i].sys_name,
                                         n[i].port, n[i].port_id,    n[i].port_descr};
    int rc = fs_topo_host_neighbors(arg, host, v, count, interval_ns / 1000, now_ns / 1000, errbuf,
                                    errlen);
    if (rc != 0)
        topo_refused(host, errbuf);
    return rc;
}

/* Creates the topology and has the store hand it what drivers learn. 0 or -1 (logged). */
static int
topology_start(struct daemon *d, const struct fs_config *c)
{
    d->topo = fs_topo_new();
    if (!d->topo) {
        fs_log(FS_LOG_ERROR, "topology", "out of memory");
        return -1;
    }
    struct fs_lldp_listener l = {d->topo, topo_local, topo_neighbor, topo_table_end};
    fs_store_set_lldp_listener(d->store, &l);
    /* The correlation traces pauses along the links; before the HTTP endpoint starts. */
    if (d->an.an)
        fs_analysis_set_topology(d->an.an, d->topo);
    fs_host_events_set_neighbor_listener(fs_analysis_host_events(d->an.an), topo_host_neighbors,
                                         d->topo);
    topology_configure(d, c);
    return 0;
}

/* After every target is gone and the HTTP endpoint (which borrows it) is stopped. */
static void
topology_stop(struct daemon *d)
{
    if (!d->topo)
        return;
    fs_store_set_lldp_listener(d->store, NULL);
    if (d->an.an)
        fs_host_events_set_neighbor_listener(fs_analysis_host_events(d->an.an), NULL, NULL);
    fs_topo_free(d->topo);
    d->topo = NULL;
}

/* The episode log of the last run, from state_dir (created if missing). A directory or
 * file that cannot be used is logged and the collector runs without it: it loses what
 * it would have lost without state_dir, nothing more. */
static void
analysis_restore_log(struct daemon *d, const struct fs_config *c)
{
    if (!c->state_dir)
        return;
    char err[512] = "", path[4096];
    if (mkdir(c->state_dir, 0700) != 0 && errno != EEXIST) {
        fs_log(FS_LOG_ERROR, "analysis",
               "state_dir %s cannot be created (%s): the episode log "
               "is not kept across restarts",
               c->state_dir, strerror(errno));
        return;
    }
    int n = snprintf(path, sizeof path, "%s/episode-log", c->state_dir);
    if (n < 0 || (size_t)n >= sizeof path) {
        fs_log(FS_LOG_ERROR, "analysis", "state_dir is too long");
        return;
    }
    int rc = fs_analysis_log_restore(d->an.an, path, fs_realtime_us(), err, sizeof err);
    struct fs_episode_log_stats ls;
    fs_episode_log_stats(fs_analysis_episode_log(d->an.an), &ls);
    if (rc == 0)
        fs_log(FS_LOG_INFO, "analysis", "episode log: %zu episodes of %zu series read from %s",
               ls.runs, ls.series, path);
    else if (rc > 0)
        fs_log(FS_LOG_INFO, "analysis", "episode log: none in %s yet; kept there from now on",
               path);
    else
        fs_log(FS_LOG_ERROR, "analysis", "episode log %s not read: %s; starting empty", path, err);
}

/* Creates the analysis context from c and starts its refresher. 0 or -1 (logged). */
static int
analysis_start(struct daemon *d, const struct fs_config *c)
{
    char err[256] = "";
    struct fs_host_events_opts ho = {c->host_events_memory_limit,
                                     c->host_events_retention_us * 1000};
    d->an.an = fs_analysis_new(&ho, err, sizeof err);
    if (!d->an.an) {
        fs_log(FS_LOG_ERROR, "analysis", "cannot create the analysis context: %s", err);
        return -1;
    }
    analysis_configure(d, c);
    analysis_restore_log(d, c);
    /* Device-stamped events (WJH drops) join the host events; cleared in analysis_stop,
     * after every target is gone. */
    fs_store_set_device_event_listener(d->store, fs_analysis_device_event, d->an.an);
    pthread_mutex_init(&d->an.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->an.cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&d->an.prefetch_cond, NULL);
    d->an.started = pthread_create(&d->an.refresher, NULL, analysis_refresher, d) == 0;
    if (!d->an.started)
        fs_log(FS_LOG_WARN, "analysis",
               "no incident refresher thread: incident metrics are "
               "updated only by GET /api/v1/incidents");
    d->an.prefetch_started =
        d->an.started && pthread_create(&d->an.prefetcher, NULL, history_prefetcher, d) == 0;
    if (d->an.started && !d->an.prefetch_started)
        fs_log(FS_LOG_WARN, "analysis",
               "no history prefetch thread: each request reads analysis.history itself");
    return 0;
}

/* After the HTTP endpoint (which borrows the context) is stopped. */
static void
analysis_stop(struct daemon *d)
{
    if (!d->an.an)
        return;
    fs_store_set_device_event_listener(d->store, NULL, NULL);
    if (d->an.started) {
        pthread_mutex_lock(&d->an.lock);
        d->an.stop = true;
        pthread_cond_signal(&d->an.cond);
        pthread_cond_signal(&d->an.prefetch_cond);
        pthread_mutex_unlock(&d->an.lock);
        pthread_join(d->an.refresher, NULL);
        if (d->an.prefetch_started)
            pthread_join(d->an.prefetcher, NULL);
    }
    fs_analysis_log_persist(d->an.an, fs_realtime_us(), true);
    pthread_cond_destroy(&d->an.prefetch_cond);
    pthread_cond_destroy(&d->an.cond);
    pthread_mutex_destroy(&d->an.lock);
    fs_analysis_free(d->an.an);
    d->an.an = NULL;
}

/* ---- reload ---- */

/* Returns 0 applied, -1 refused (out of memory: the running configuration stays). */
static int
apply_reload(struct daemon *d, struct fs_config *ncfg)
{
    struct cfg_ref *nref = calloc(1, sizeof *nref);
    if (!nref) {
        fs_log(FS_LOG_ERROR, "config", "reload refused: out of memory");
        fs_config_free(ncfg);
        return -1;
    }
    nref->cfg = ncfg;
    nref->refs = 1;
    struct cfg_ref *old = d->current;

    /* Instances of removed or changed targets go. Unchanged ones keep all their state,
     * except that one its driver refused or that is failing is restarted in place (its
     * history and counters stay): its driver reads its secret files again and its
     * backoff starts over, as the reload may be how the operator says it is fixed. */
    struct instance **pp = &d->insts;
    size_t kept = 0, restarted = 0, removed = 0, before = 0, after = 0;
    while (*pp) {
        struct instance *in = *pp;
        const struct fs_target_cfg *nt = find_target(ncfg, in->tcfg->name);
        before++;
        if (nt && !target_mine(d, ncfg, nt))
            nt = NULL; /* resharded: another instance polls it now */
        if (nt && fs_target_instance_equal(in->tcfg, nt, in->blk->ops)) {
            if (!in->slot || (in->entry && fs_sched_failures(d->sched, in->entry) > 0)) {
                instance_stop(d, in);
                instance_start(d, in);
                restarted++;
            } else {
                kept++;
            }
            pp = &in->next;
            continue;
        }
        *pp = in->next;
        instance_remove(d, in);
        removed++;
    }
    for (size_t i = 0; i < ncfg->n_targets; i++)
        target_add_all(d, &ncfg->targets[i], nref);
    struct fs_shard shard = fs_shard_effective(ncfg, &d->override);
    if (fs_cluster_update(d->cluster, ncfg, &shard) != 0)
        fs_log(FS_LOG_ERROR, "config",
               "out of memory: /api/v1/targets and the external "
               "labels keep the previous configuration's");

    struct fs_ring_opts ro = {.memory_limit = ncfg->memory_limit,
                              .retention_us = ncfg->retention_us};
    fs_store_set_ring_opts(d->store, &ro);
    fs_store_set_series_limit(d->store, ncfg->max_series_per_target);
    analysis_configure(d, ncfg);
    if ((ncfg->state_dir == NULL) != (old->cfg->state_dir == NULL) ||
        (ncfg->state_dir && strcmp(ncfg->state_dir, old->cfg->state_dir)))
        fs_log(FS_LOG_WARN, "config", "state_dir changes take effect at the next start");
    topology_configure(d, ncfg);

    http_reload(d, nref);
    remote_write_apply(d, ncfg);
    d->current = nref;
    cfg_unref(old);
    for (struct instance *in = d->insts; in; in = in->next)
        after++;
    fs_log(FS_LOG_INFO, "config",
           "reloaded %s: %zu instances kept, %zu restarted (refused or failing), %zu removed, "
           "%zu added",
           ncfg->path, kept, restarted, removed, after - (before - removed));
    return 0;
}

/* The value a reload request (fs_daemon_reload) carries with its SIGHUP ("fsrl"): a
 * sigqueue() from another program with another value is not answered. */
#define FS_RELOAD_ASK 0x6673726c
#define FS_RELOAD_VERDICT_SIG SIGUSR1

/* Answers the process that asked for the reload, if one did; it may be gone (ESRCH). */
static void
reload_answer(const siginfo_t *si, int verdict)
{
    if (si->si_code != SI_QUEUE || si->si_value.sival_int != FS_RELOAD_ASK || si->si_pid <= 0)
        return;
    union sigval v = {.sival_int = verdict};
    if (sigqueue(si->si_pid, FS_RELOAD_VERDICT_SIG, v) != 0)
        fs_log(FS_LOG_WARN, "config", "cannot answer the reload request of process %ld: %s",
               (long)si->si_pid, strerror(errno));
}

int
fs_daemon_reload(long pid, int timeout_s, FILE *out, FILE *err)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, FS_RELOAD_VERDICT_SIG);
    /* Blocked before asking: the answer waits for sigtimedwait however fast it comes. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    union sigval v = {.sival_int = FS_RELOAD_ASK};
    if (pid <= 0 || sigqueue((pid_t)pid, SIGHUP, v) != 0) {
        fprintf(err, "fabricscope: cannot signal process %ld: %s\n", pid,
                pid <= 0 ? "not a process id" : strerror(errno));
        return 1;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_s;
    for (;;) {
        struct timespec now, left;
        clock_gettime(CLOCK_MONOTONIC, &now);
        left.tv_sec = deadline.tv_sec - now.tv_sec;
        left.tv_nsec = deadline.tv_nsec - now.tv_nsec;
        if (left.tv_nsec < 0) {
            left.tv_nsec += 1000000000L;
            left.tv_sec--;
        }
        if (left.tv_sec < 0)
            break;
        siginfo_t si;
        int sig = sigtimedwait(&set, &si, &left);
        if (sig < 0 && errno == EINTR)
            continue;
        if (sig < 0)
            break; /* EAGAIN: the deadline */
        if (si.si_code != SI_QUEUE || si.si_pid != (pid_t)pid)
            continue; /* not the daemon's answer */
        if (si.si_value.sival_int == 0) {
            fprintf(out, "fabricscope: process %ld reloaded its configuration\n", pid);
            return 0;
        }
        fprintf(err,
                "fabricscope: process %ld refused the reload; the running configuration "
                "stays (its log says why)\n",
                pid);
        return 1;
    }
    fprintf(err,
            "fabricscope: no answer from process %ld within %d s (not a fabricscope "
            "collector, or still reloading)\n",
            pid, timeout_s);
    return 1;
}

/* ---- shutdown ---- */

/* Shutdown must end even if a driver is stuck in a call (a dead mount under a secret
 * file, a peer that never lets go): nothing is lost by ending the process then, the
 * store lives in memory. A second SIGTERM/SIGINT ends it at once, and so does the limit. */
#define SHUTDOWN_LIMIT_S 15

static atomic_size_t shutdown_removed, shutdown_total;
static _Atomic(const char *) shutdown_step = "starting";

static void *
shutdown_guard(void *arg)
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    struct timespec limit = {.tv_sec = SHUTDOWN_LIMIT_S};
    int sig;
    do
        sig = sigtimedwait(&set, NULL, &limit);
    while (sig < 0 && errno == EINTR);
    const char *why = sig > 0 ? "a second signal" : "the time limit";
    fs_log(FS_LOG_ERROR, "main",
           "shutdown ended by %s while %s (%zu of %zu targets removed); exiting now", why,
           atomic_load(&shutdown_step), atomic_load(&shutdown_removed),
           atomic_load(&shutdown_total));
    _exit(1);
    return NULL;
}

/* Started once the shutdown begins; the signals it waits for are blocked everywhere. */
static void
shutdown_guard_start(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, shutdown_guard, NULL) == 0)
        pthread_detach(t);
}

int
fs_daemon_run(const char *config_path)
{
    return fs_daemon_run_shard(config_path, NULL);
}

int
fs_daemon_run_shard(const char *config_path, const struct fs_shard *shard)
{
    struct daemon d;
    struct fs_config *cfg = NULL;
    char err[256] = "";
    int rc = 1;
    sigset_t set;

    memset(&d, 0, sizeof d);
    if (shard)
        d.override = *shard;
    if (load_config(config_path, &cfg, stderr) != 0)
        return 2;
    struct fs_shard eff = fs_shard_effective(cfg, &d.override);
    d.cluster = fs_cluster_new();
    if (!d.cluster || fs_cluster_update(d.cluster, cfg, &eff) != 0) {
        fs_log(FS_LOG_ERROR, "main", "out of memory");
        fs_cluster_free(d.cluster);
        fs_config_free(cfg);
        return 1;
    }
    d.store_created_us = fs_realtime_us();

    /* Signals are taken by this thread alone (sigwait); every thread started from here on
     * inherits the blocked mask. */
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct fs_ring_opts ro = {.memory_limit = cfg->memory_limit, .retention_us = cfg->retention_us};
    d.store = fs_store_new(&ro, err, sizeof err);
    if (!d.store) {
        fs_log(FS_LOG_ERROR, "main", "cannot create the store: %s", err);
        fs_config_free(cfg);
        fs_cluster_free(d.cluster);
        return 1;
    }
    fs_store_set_series_limit(d.store, cfg->max_series_per_target);
    d.current = calloc(1, sizeof *d.current);
    if (!d.current) {
        fs_config_free(cfg);
        goto out;
    }
    d.current->cfg = cfg;
    d.current->refs = 1;
    d.sched = fs_sched_new(NULL, err, sizeof err);
    if (!d.sched) {
        fs_log(FS_LOG_ERROR, "main", "%s", err);
        goto out;
    }
    if (analysis_start(&d, cfg) != 0 || topology_start(&d, cfg) != 0)
        goto out;
    /* A listener that cannot start (port taken, unreadable token) does not stop the
     * polling: it is logged and retried on every reload. */
    if (http_start(&d, d.current) != 0)
        fs_log(FS_LOG_ERROR, "http", "no HTTP endpoint; retried on the next reload (SIGHUP)");
    for (size_t i = 0; i < cfg->n_targets; i++)
        target_add_all(&d, &cfg->targets[i], d.current);
    d.rw = fs_remote_write_new(d.store, err, sizeof err);
    if (!d.rw)
        fs_log(FS_LOG_ERROR, "remote_write", "%s", err);
    remote_write_apply(&d, cfg);
    if (eff.count > 1)
        fs_log(FS_LOG_INFO, "main", "fabricscope %s running with %s (shard %u of %u)", FS_VERSION,
               config_path, eff.index, eff.count);
    else
        fs_log(FS_LOG_INFO, "main", "fabricscope %s running with %s (%zu targets)", FS_VERSION,
               config_path, cfg->n_targets);

    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&set, &si);
        if (sig < 0)
            continue;
        if (sig == SIGHUP) {
            struct fs_config *ncfg = NULL;
            fs_log(FS_LOG_INFO, "config", "SIGHUP: reloading %s", config_path);
            if (load_config(config_path, &ncfg, NULL) != 0) {
                fs_log(FS_LOG_ERROR, "config", "reload refused; the running configuration stays");
                reload_answer(&si, 1);
                continue;
            }
            reload_answer(&si, apply_reload(&d, ncfg) == 0 ? 0 : 1);
            continue;
        }
        fs_log(FS_LOG_INFO, "main", "signal %d: shutting down", sig);
        shutdown_guard_start();
        break;
    }
    rc = 0;
out:
    /* Readers first, then the producers (each instance: scheduler, driver, sink), then
     * the threads that served them, then the data. The history's reads are cancelled
     * before any of them: a request or the prefetch inside a read of a hung history would
     * hold the stop for the read's remote_timeout. */
    if (d.an.an)
        fs_analysis_cancel_history(d.an.an);
    atomic_store(&shutdown_step, "stopping the HTTP endpoint");
    http_stop(&d);
    atomic_store(&shutdown_step, "sending the last remote_write batches");
    fs_remote_write_free(d.rw);
    atomic_store(&shutdown_step, "removing targets");
    for (struct instance *in = d.insts; in; in = in->next)
        atomic_fetch_add(&shutdown_total, 1);
    fs_log(FS_LOG_INFO, "main", "shutdown: removing %zu targets", atomic_load(&shutdown_total));
    while (d.insts) {
        struct instance *in = d.insts;
        d.insts = in->next;
        instance_remove(&d, in);
        atomic_fetch_add(&shutdown_removed, 1);
    }
    atomic_store(&shutdown_step, "stopping the scheduler and the drivers");
    fs_sched_free(d.sched);
    slots_shutdown(d.slots);
    /* The endpoint that borrowed it is gone; its refresher reads the store. */
    atomic_store(&shutdown_step, "stopping the analysis");
    analysis_stop(&d);
    topology_stop(&d);
    atomic_store(&shutdown_step, "freeing the store");
    fs_store_free(d.store);
    cfg_unref(d.current);
    fs_cluster_free(d.cluster);
    return rc;
}

/* ---- probe ---- */

struct probe_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    enum fs_poll_result r;
};

static void
probe_done(void *arg, uint64_t cycle_id, enum fs_poll_result r)
{
    struct probe_wait *w = arg;
    (void)cycle_id;
    pthread_mutex_lock(&w->lock);
    w->done = true;
    w->r = r;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static int
probe_print_instance(void *arg, const struct fs_instance_info *in)
{
    FILE *out = arg;
    fprintf(out, "# %s/%s: %s, %llu series, %.3f s%s%s%s%s\n", in->target, in->source,
            in->state_name, (unsigned long long)in->series, (double)in->last_duration_us / 1e6,
            in->last_error[0] ? ", error: " : "", in->last_error, in->driver_detail[0] ? ", " : "",
            in->driver_detail);
    return 0;
}

/* Runs one cycle of a polling target (or gives a stream one interval) and waits for
 * its end. w is initialized by the caller and destroyed only after target_remove()
 * (the driver's done callback may still be returning from it until then). Returns 0
 * when it succeeded (fully or partly), 1 otherwise. */
static int
probe_cycle(const struct fs_driver *drv, void *state, void *ts, struct fs_sink *sink,
            int64_t interval, struct probe_wait *wp, const char *tname, FILE *err)
{
    int rc = 0;

    if (drv->kind != FS_DRIVER_POLL) {
        struct timespec d = {.tv_sec = interval / 1000000 + 1};
        nanosleep(&d, NULL);
        return 0;
    }
    int64_t budget = fs_sched_cycle_budget(interval);
    int64_t deadline = fs_monotonic_us() + budget;
    fs_sink_set_done_cb(sink, probe_done, wp);
    fs_sink_cycle_begin(sink, 1);
    if (drv->cycle_start(state, ts, 1, deadline) != FS_DRV_OK) {
        fprintf(err, "%s/%s: cycle did not start\n", tname, drv->block.name);
        rc = 1;
    } else {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += budget / 1000000 + 2;
        pthread_mutex_lock(&wp->lock);
        while (!wp->done)
            if (pthread_cond_timedwait(&wp->cond, &wp->lock, &until) == ETIMEDOUT)
                break;
        bool done = wp->done;
        pthread_mutex_unlock(&wp->lock);
        if (!done) {
            drv->cycle_cancel(state, ts);
            pthread_mutex_lock(&wp->lock);
            while (!wp->done)
                pthread_cond_wait(&wp->cond, &wp->lock);
            pthread_mutex_unlock(&wp->lock);
        }
        if (wp->r != FS_POLL_OK && wp->r != FS_POLL_PARTIAL)
            rc = 1;
    }
    return rc;
}

static void
probe_wait_init(struct probe_wait *w)
{
    w->done = false;
    w->r = FS_POLL_OK;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
}

static void
probe_wait_destroy(struct probe_wait *w)
{
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
}

/* Copies what the driver wrote to tf (from its start) to out, framed. */
static void
probe_copy_transcript(FILE *tf, const char *tname, const char *dname, FILE *out)
{
    char buf[4096];
    size_t n;
    fprintf(out, "# ---- transcript of %s/%s ----\n", tname, dname);
    rewind(tf);
    while ((n = fread(buf, 1, sizeof buf, tf)) > 0)
        fwrite(buf, 1, n, out);
    fprintf(out, "\n# ---- end of transcript of %s/%s ----\n", tname, dname);
}

/* ---- one-shot commands (probe, plan-flow-rules): a config, a store, driver slots ---- */

struct oneshot {
    struct fs_config *cfg;
    struct drv_slot slots[MAX_DRIVERS];
    struct fs_store *st;
};

/* Loads the config and makes a store; target (may be NULL) must name a target. 0, or 2
 * with the reason on err. oneshot_close in every case. */
static int
oneshot_open(struct oneshot *o, const char *config_path, const char *target, FILE *err)
{
    char msg[256] = "";

    memset(o, 0, sizeof *o);
    if (load_config(config_path, &o->cfg, err) != 0)
        return 2;
    if (target && !find_target(o->cfg, target)) {
        fprintf(err, "%s: no target named \"%s\"\n", config_path, target);
        return 2;
    }
    struct fs_ring_opts ro = {.memory_limit = 64 << 20, .retention_us = 3600LL * 1000000};
    o->st = fs_store_new(&ro, msg, sizeof msg);
    if (!o->st) {
        fprintf(err, "%s\n", msg);
        return 2;
    }
    return 0;
}

static void
oneshot_close(struct oneshot *o)
{
    /* Sinks go with the store; drivers were detached from them before. */
    if (o->st)
        fs_store_free(o->st);
    slots_shutdown(o->slots);
    fs_config_free(o->cfg);
}

/* Starts block blk of target t in its driver (one sink in the store): 0 with *slot, *sink
 * and *ts filled, or -1 with the reason on err. The caller removes *ts. */
static int
oneshot_attach(struct oneshot *o, const struct fs_target_cfg *t, const struct fs_target_block *blk,
               const struct fs_driver *drv, struct drv_slot **slot, struct fs_sink **sink,
               void **ts, FILE *err)
{
    char msg[256] = "";
    int64_t interval = blk->ops->config_interval(blk->cfg);

    *sink = fs_store_sink_add(o->st, t, drv->block.name, interval);
    *slot = *sink ? slot_get(o->slots, drv, msg, sizeof msg) : NULL;
    *ts = NULL;
    if (!*slot ||
        drv->target_add((*slot)->state, t, blk->cfg, *sink, ts, msg, sizeof msg) != FS_DRV_OK) {
        fprintf(err, "%s/%s: %s\n", t->name, drv->block.name, msg);
        return -1;
    }
    return 0;
}

int
fs_probe(const char *config_path, const char *target, const struct fs_probe_opts *po, FILE *out,
         FILE *err)
{
    struct oneshot o;
    int rc = 2;

    if (oneshot_open(&o, config_path, target, err) != 0)
        goto out;
    const struct fs_target_cfg *t = find_target(o.cfg, target);
    rc = 0;
    for (size_t i = 0; i < t->n_blocks; i++) {
        const struct fs_target_block *blk = &t->blocks[i];
        const struct fs_driver *drv = fs_driver_of_block(blk->ops);
        if (!drv)
            continue;
        const char *name = drv->block.name;
        struct drv_slot *slot;
        struct fs_sink *sink;
        void *ts;
        FILE *tf = NULL;
        if (oneshot_attach(&o, t, blk, drv, &slot, &sink, &ts, err) != 0) {
            rc = 1;
            continue;
        }
        if (po && po->transcript) {
            if (!drv->target_transcript)
                fprintf(out, "# %s/%s: this driver has no transcript\n", t->name, name);
            else if (!(tf = tmpfile()))
                fprintf(err, "%s/%s: no temporary file for the transcript: %s\n", t->name, name,
                        strerror(errno));
            else
                drv->target_transcript(slot->state, ts, tf);
        }
        struct probe_wait w;
        probe_wait_init(&w);
        if (probe_cycle(drv, slot->state, ts, sink, blk->ops->config_interval(blk->cfg), &w,
                        t->name, err) != 0)
            rc = 1;
        if (tf) {
            drv->target_transcript(slot->state, ts, NULL);
            probe_copy_transcript(tf, t->name, name, out);
        }
        drv->target_remove(slot->state, ts);
        probe_wait_destroy(&w);
        if (tf)
            fclose(tf);
    }
    /* Exactly what /metrics would carry for this target, then each driver's state. */
    struct fs_buf b;
    fs_buf_init(&b, 256u << 20);
    if (fs_expo_render(o.st, &b) == 0)
        fwrite(b.data ? b.data : "", 1, b.len, out);
    else
        fprintf(err, "the exposition did not fit in memory\n");
    fs_buf_free(&b);
    fs_store_foreach_instance(o.st, probe_print_instance, out);
out:
    oneshot_close(&o);
    return rc;
}

/* ---- plan-flow-rules ---- */

static int
print_failed_instance(void *arg, const struct fs_instance_info *in)
{
    if (in->last_error[0])
        fprintf(arg, "%s/%s: %s\n", in->target, in->source, in->last_error);
    return 0;
}

/* Plans target t with every driver of it that plans; 0 good, 1 a device not read or a
 * driver failed. *planned counts the drivers that planned. */
static int
plan_target(struct oneshot *o, const struct fs_target_cfg *t, size_t *planned, FILE *out, FILE *err)
{
    char msg[256] = "";
    int rc = 0;

    for (size_t i = 0; i < t->n_blocks; i++) {
        const struct fs_target_block *blk = &t->blocks[i];
        const struct fs_driver *drv = fs_driver_of_block(blk->ops);
        if (!drv || !drv->target_plan || !drv->target_plan_mode)
            continue;
        struct drv_slot *slot;
        struct fs_sink *sink;
        void *ts;
        (*planned)++;
        if (oneshot_attach(o, t, blk, drv, &slot, &sink, &ts, err) != 0) {
            rc = 1;
            continue;
        }
        struct probe_wait w;
        probe_wait_init(&w);
        drv->target_plan_mode(slot->state, ts);
        probe_cycle(drv, slot->state, ts, sink, blk->ops->config_interval(blk->cfg), &w, t->name,
                    err);
        int prc = drv->target_plan(slot->state, ts, out, msg, sizeof msg);
        if (prc != 0)
            rc = 1;
        if (prc < 0)
            fprintf(err, "%s/%s: %s\n", t->name, drv->block.name, msg);
        drv->target_remove(slot->state, ts);
        probe_wait_destroy(&w);
    }
    return rc;
}

int
fs_plan_flow_rules(const char *config_path, const char *target, FILE *out, FILE *err)
{
    struct oneshot o;
    size_t planned = 0;
    int rc = 2;

    if (oneshot_open(&o, config_path, target, err) != 0)
        goto out;
    rc = 0;
    for (size_t i = 0; i < o.cfg->n_targets; i++) {
        const struct fs_target_cfg *t = &o.cfg->targets[i];
        if (target && strcmp(t->name, target) != 0)
            continue;
        size_t before = planned;
        if (plan_target(&o, t, &planned, out, err) != 0)
            rc = 1;
        if (planned == before)
            fprintf(out, "# %s: none of its drivers installs flow rules\n", t->name);
    }
    /* Why a device could not be read (connection, authentication, timeout). */
    fs_store_foreach_instance(o.st, print_failed_instance, err);
out:
    oneshot_close(&o);
    return rc;
}
