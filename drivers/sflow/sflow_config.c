/*
 * The sFlow driver's configuration block: address literals YANG's patterns only
 * approximate, and building struct fs_sflow_cfg; see sflow_config.h.
 */
#include "sflow_config.h"

#include <arpa/inet.h>
#include <libyang/libyang.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define US_PER_S INT64_C(1000000)

int
fs_sflow_parse_addr(const char *s, struct sflow_addr *a)
{
    int rc = -1;
    memset(a, 0, sizeof *a);
    if (s && inet_pton(AF_INET, s, a->bytes) == 1) {
        a->family = 4;
        rc = 0;
    } else if (s && inet_pton(AF_INET6, s, a->bytes) == 1) {
        a->family = 6;
        rc = 0;
    }
    return rc;
}

const char *
fs_sflow_addr_str(const struct sflow_addr *a, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    buf[0] = '\0';
    if (a->family == 4)
        inet_ntop(AF_INET, a->bytes, buf, (socklen_t)len);
    else if (a->family == 6)
        inet_ntop(AF_INET6, a->bytes, buf, (socklen_t)len);
    return buf;
}

static int
cmp_ifname(const void *pa, const void *pb)
{
    const struct fs_sflow_ifname *a = pa, *b = pb;
    return a->ifindex < b->ifindex ? -1 : a->ifindex > b->ifindex;
}

/* Reads an address leaf; a value that is no literal is reported at its key. */
static void
addr_leaf(const struct lyd_node *n, const char *key, struct sflow_addr *out, bool *has,
          struct fs_cfg_errs *errs)
{
    const struct lyd_node *leaf = fs_cfg_kid(n, key);
    *has = false;
    if (!leaf)
        return;
    if (fs_sflow_parse_addr(fs_cfg_value(leaf), out) != 0)
        fs_cfg_node_err(errs, leaf, false, "%s is not an IPv4 or IPv6 address literal",
                        fs_cfg_value(leaf));
    else
        *has = true;
}

int
fs_sflow_config_build(const struct lyd_node *n, void **dcfg, struct fs_cfg_errs *errs)
{
    struct fs_sflow_cfg *c = calloc(1, sizeof *c);
    bool has_listen = false;
    size_t cap = 0;
    int rc = 0;

    *dcfg = c;
    if (!c)
        return -1;
    addr_leaf(n, "listen", &c->listen, &has_listen, errs);
    if (!has_listen)
        fs_sflow_parse_addr("::", &c->listen);
    c->port = (uint16_t)fs_cfg_long(n, "port", 6343);
    addr_leaf(n, "agent", &c->agent, &c->has_agent, errs);
    if (!fs_cfg_kid(n, "agent")) {
        /* The agent defaults to the target's address, which must then be a literal:
         * datagrams carry the agent's address, never a name. */
        const struct lyd_node *target = lyd_parent(n);
        const char *addr = target ? fs_cfg_cval(target, "address") : NULL;
        if (addr && fs_sflow_parse_addr(addr, &c->agent) != 0)
            fs_cfg_node_err(errs, n, true,
                            "agent is required: the target's address %s is not an IP "
                            "literal, and sFlow datagrams name their agent by address",
                            addr);
    }
    for (const struct lyd_node *e = fs_cfg_next(n, NULL, "sources"); e && rc == 0;
         e = fs_cfg_next(n, e, "sources")) {
        struct sflow_addr *g = realloc(c->sources, (c->n_sources + 1) * sizeof *g);
        if (!g) {
            rc = -1;
            break;
        }
        c->sources = g;
        if (fs_sflow_parse_addr(fs_cfg_value(e), &c->sources[c->n_sources]) != 0)
            fs_cfg_node_err(errs, e, false, "%s is not an IPv4 or IPv6 address literal",
                            fs_cfg_value(e));
        else
            c->n_sources++;
    }
    c->has_sub_agent = fs_cfg_kid(n, "sub_agent") != NULL;
    c->sub_agent = (uint32_t)fs_cfg_long(n, "sub_agent", 0);
    c->interval_us = fs_cfg_duration_us(n, "interval", US_PER_S);
    c->counter_interval_us = fs_cfg_duration_us(n, "counter_interval", 30 * US_PER_S);
    c->max_ports = (uint32_t)fs_cfg_long(n, "max_ports", 256);
    if (c->interval_us <= 0)
        fs_cfg_node_err(errs, fs_cfg_kid(n, "interval"), false, "interval must be positive");
    if (c->counter_interval_us <= 0)
        fs_cfg_node_err(errs, fs_cfg_kid(n, "counter_interval"), false,
                        "counter_interval must be positive");
    for (const struct lyd_node *e = fs_cfg_next(n, NULL, "interface_names"); e && rc == 0;
         e = fs_cfg_next(n, e, "interface_names")) {
        if (c->n_ifnames == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct fs_sflow_ifname *g = realloc(c->ifnames, ncap * sizeof *g);
            if (!g) {
                rc = -1;
                break;
            }
            c->ifnames = g;
            cap = ncap;
        }
        struct fs_sflow_ifname *f = &c->ifnames[c->n_ifnames];
        f->ifindex = (uint32_t)fs_cfg_long(e, "ifindex", 0);
        f->name = NULL;
        if (fs_cfg_strdup(&f->name, e, "name") != 0)
            rc = -1;
        else
            c->n_ifnames++;
    }
    if (c->n_ifnames > 1)
        qsort(c->ifnames, c->n_ifnames, sizeof *c->ifnames, cmp_ifname);
    return rc;
}

void
fs_sflow_config_free(void *dcfg)
{
    struct fs_sflow_cfg *c = dcfg;
    if (!c)
        return;
    for (size_t i = 0; i < c->n_ifnames; i++)
        free(c->ifnames[i].name);
    free(c->ifnames);
    free(c->sources);
    free(c);
}

static bool
addr_equal(const struct sflow_addr *a, const struct sflow_addr *b)
{
    size_t n = a->family == 4 ? 4 : 16;
    return a->family == b->family && (a->family == 0 || !memcmp(a->bytes, b->bytes, n));
}

bool
fs_sflow_config_equal(const void *pa, const void *pb)
{
    const struct fs_sflow_cfg *a = pa, *b = pb;
    bool eq;
    if (!a || !b)
        return a == b;
    eq = addr_equal(&a->listen, &b->listen) && a->port == b->port && a->has_agent == b->has_agent &&
         (!a->has_agent || addr_equal(&a->agent, &b->agent)) &&
         a->has_sub_agent == b->has_sub_agent && a->sub_agent == b->sub_agent &&
         a->interval_us == b->interval_us && a->counter_interval_us == b->counter_interval_us &&
         a->max_ports == b->max_ports && a->n_ifnames == b->n_ifnames &&
         a->n_sources == b->n_sources;
    for (size_t i = 0; eq && i < a->n_sources; i++)
        eq = addr_equal(&a->sources[i], &b->sources[i]);
    for (size_t i = 0; eq && i < a->n_ifnames; i++)
        eq = a->ifnames[i].ifindex == b->ifnames[i].ifindex &&
             fs_cfg_str_equal(a->ifnames[i].name, b->ifnames[i].name);
    return eq;
}

int64_t
fs_sflow_config_interval(const void *dcfg)
{
    const struct fs_sflow_cfg *c = dcfg;
    int64_t v = US_PER_S;
    if (c)
        v = c->interval_us > c->counter_interval_us ? c->interval_us : c->counter_interval_us;
    return v > 0 ? v : US_PER_S;
}
