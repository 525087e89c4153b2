/* The host agent's configuration (see agent_config.h). */
#include "hostagent/agent_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/parse.h"

extern const char fs_host_agent_yang_text[];

/* The values of leaf-list name under parent, copied; dflt (NULL-terminated) when none. */
static int
strings(const struct lyd_node *parent, const char *name, const char *const *dflt, char ***out,
        size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    for (const struct lyd_node *l = fs_cfg_next(parent, NULL, name); l;
         l = fs_cfg_next(parent, l, name))
        cap++;
    size_t nd = 0;
    while (!cap && dflt && dflt[nd])
        nd++;
    if (!(*out = calloc((cap ? cap : nd) + 1, sizeof **out)))
        return -1;
    if (cap) {
        for (const struct lyd_node *l = fs_cfg_next(parent, NULL, name); l;
             l = fs_cfg_next(parent, l, name))
            if (!((*out)[(*n)++] = strdup(fs_cfg_value(l))))
                return -1;
    } else {
        for (size_t i = 0; i < nd; i++)
            if (!((*out)[(*n)++] = strdup(dflt[i])))
                return -1;
    }
    return 0;
}

static int
size_of(const struct lyd_node *parent, const char *name, uint64_t *v)
{
    const char *s = fs_cfg_cval(parent, name);
    return s ? fs_parse_size(s, v) : -1;
}

static int
build(const struct lyd_node *first, void *ctx, struct fs_cfg_errs *errs)
{
    static const char *const default_events[] = {"tcp:tcp_retransmit_skb", "skb:kfree_skb", NULL};
    struct fs_agent_cfg *c = ctx;
    const struct lyd_node *col = fs_cfg_top(first, "collector");
    const struct lyd_node *clk = fs_cfg_top(first, "clock");
    const struct lyd_node *nccl = fs_cfg_top(first, "nccl_inspector");
    const struct lyd_node *cap = fs_cfg_top(first, "capture");
    const struct lyd_node *sp = fs_cfg_top(first, "spool");
    const struct lyd_node *met = fs_cfg_top(first, "metrics");
    const struct lyd_node *cmd = fs_cfg_top(first, "command");
    const struct lyd_node *ll = fs_cfg_top(first, "lldp");
    char hn[256];

    if (fs_cfg_strdup(&c->url, col, "url") || fs_cfg_strdup(&c->token_file, col, "token_file") ||
        fs_cfg_strdup(&c->metrics_listen, met, "listen") ||
        fs_cfg_strdup(&c->nccl_dir, nccl, "dir"))
        return -1;
    const struct lyd_node *h = fs_cfg_top(first, "host");
    const struct lyd_node *sd = fs_cfg_top(first, "state_dir");
    if (h) {
        snprintf(hn, sizeof hn, "%s", fs_cfg_value(h));
    } else if (gethostname(hn, sizeof hn) != 0) {
        snprintf(hn, sizeof hn, "unknown");
    }
    hn[sizeof hn - 1] = '\0';
    if (!(c->host = strdup(hn)) || (sd && !(c->state_dir = strdup(fs_cfg_value(sd)))))
        return -1;
    if (sd && c->state_dir[0] != '/')
        fs_cfg_node_err(errs, sd, false, "must be an absolute path");
    c->request_timeout_us = fs_cfg_duration_us(col, "timeout", 10000000);
    if (c->request_timeout_us < 1000000 || c->request_timeout_us > 60000000 ||
        c->request_timeout_us % 1000000)
        fs_cfg_node_err(errs, fs_cfg_kid(col, "timeout"), false,
                        "must be whole seconds within 1s..60s");
    c->clock_interval_us = fs_cfg_duration_us(clk, "interval", 4000000);
    c->clock_rounds = (int)fs_cfg_long(clk, "rounds", 8);
    c->nccl_scan_us = fs_cfg_duration_us(nccl, "scan_interval", 1000000);
    c->capture = cap != NULL;
    if (strings(cap, "targets", NULL, &c->targets, &c->n_targets) ||
        strings(cap, "rules", NULL, &c->rules, &c->n_rules) ||
        strings(cap, "events", default_events, &c->events, &c->n_events) ||
        (cap && (fs_cfg_strdup(&c->perf, cap, "perf") || fs_cfg_strdup(&c->hook, cap, "hook"))))
        return -1;
    c->poll_us = fs_cfg_duration_us(cap, "poll", 10000000);
    c->lead_us = fs_cfg_duration_us(cap, "lead", 5000000);
    c->length_us = fs_cfg_duration_us(cap, "length", 10000000);
    c->max_length_us = fs_cfg_duration_us(cap, "max_length", 60000000);
    c->min_interval_us = fs_cfg_duration_us(cap, "min_interval", 300000000);
    c->keep_raw = fs_cfg_bool(cap, "keep_raw");
    c->raw_quota_bytes = 1ull << 30;
    c->spool_max_bytes = 256ull << 20;
    if (cap)
        (void)size_of(cap, "raw_quota_bytes", &c->raw_quota_bytes);
    (void)size_of(sp, "max_bytes", &c->spool_max_bytes);
    if (cap && c->length_us > c->max_length_us)
        fs_cfg_node_err(errs, fs_cfg_kid(cap, "length"), false,
                        "is longer than capture.max_length (%.0f s)",
                        (double)c->max_length_us / 1e6);
    if (cmd) {
        if (strings(cmd, "argv", NULL, &c->cmd_argv, &c->n_cmd_argv))
            return -1;
        c->cmd_interval_us = fs_cfg_duration_us(cmd, "interval", 0);
        c->cmd_at_capture = fs_cfg_bool(cmd, "at_capture");
        c->cmd_timeout_us = fs_cfg_duration_us(cmd, "timeout", 60000000);
        c->cmd_max_output = 16ull << 20;
        (void)size_of(cmd, "max_output_bytes", &c->cmd_max_output);
        const struct lyd_node *iv = fs_cfg_given(cmd, "interval");
        const struct lyd_node *ac = fs_cfg_given(cmd, "at_capture");
        if (c->n_cmd_argv == 0)
            fs_cfg_node_err(errs, cmd, true, "needs argv (the command and its arguments)");
        if (!iv && !c->cmd_at_capture)
            fs_cfg_node_err(errs, cmd, true, "needs interval or at_capture: true");
        if (iv && c->cmd_at_capture)
            fs_cfg_node_err(errs, iv, false, "and command.at_capture: true exclude each other");
        if (iv && c->cmd_interval_us < 100000)
            fs_cfg_node_err(errs, iv, false, "must be at least 100ms");
        if (c->cmd_at_capture && !cap)
            fs_cfg_node_err(errs, ac, false,
                            "needs a capture block (there is no capture to run at)");
        if (c->cmd_timeout_us < 100000)
            fs_cfg_node_err(errs, fs_cfg_kid(cmd, "timeout"), false, "must be at least 100ms");
        if (c->cmd_max_output < 4096)
            fs_cfg_node_err(errs, fs_cfg_kid(cmd, "max_output_bytes"), false,
                            "must be at least 4KiB (a few lines of perf script)");
    }
    /* lldp: on unless disabled, so a host that runs lldpd reports its links unasked. */
    c->lldp_on = ll ? fs_cfg_bool(ll, "enabled") : true;
    c->lldp_interval_us = fs_cfg_duration_us(ll, "interval", 30000000);
    if (ll &&
        (fs_cfg_strdup(&c->lldp_socket, ll, "socket") || fs_cfg_strdup(&c->lldpctl, ll, "lldpctl")))
        return -1;
    if (!c->lldpctl && !(c->lldpctl = strdup("lldpctl")))
        return -1;
    if (c->lldp_interval_us < 1000000 || c->lldp_interval_us > 3600000000LL)
        fs_cfg_node_err(errs, fs_cfg_kid(ll, "interval"), false, "must be within 1s..1h");
    if (met && c->metrics_listen &&
        fs_cfg_parse_listen(c->metrics_listen, c->metrics_host, sizeof c->metrics_host,
                            &c->metrics_port) != 0)
        fs_cfg_node_err(errs, fs_cfg_kid(met, "listen"), false,
                        "is not IP:port (e.g. 127.0.0.1:9465)");
    if (sp && c->spool_max_bytes < (1u << 20))
        fs_cfg_node_err(errs, fs_cfg_kid(sp, "max_bytes"), false,
                        "must be at least 1MiB (one batch of events)");
    return 0;
}

int
fs_agent_cfg_load(const char *path, struct fs_agent_cfg *cfg, char **errors)
{
    memset(cfg, 0, sizeof *cfg);
    return fs_cfg_doc_load(path, fs_host_agent_yang_text, build, cfg, errors);
}

static void
free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void
fs_agent_cfg_free(struct fs_agent_cfg *c)
{
    free(c->url);
    free(c->token_file);
    free(c->host);
    free(c->state_dir);
    free(c->nccl_dir);
    free_list(c->targets, c->n_targets);
    free_list(c->rules, c->n_rules);
    free_list(c->events, c->n_events);
    free(c->perf);
    free(c->hook);
    free(c->metrics_listen);
    free(c->lldpctl);
    free(c->lldp_socket);
    free_list(c->cmd_argv, c->n_cmd_argv);
    memset(c, 0, sizeof *c);
}
