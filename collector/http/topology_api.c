/* GET /api/v1/topology (topology_api.h): JSON built with json-c, as /api/v1/targets is. */
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "http/topology_api.h"

int
fs_topology_query_parse(const struct fs_query_arg *args, size_t n, struct fs_topology_query *q,
                        char *err, size_t errlen)
{
    int rc = -1;
    bool seen_node = false, seen_source = false;
    memset(q, 0, sizeof *q);
    for (size_t i = 0; i < n; i++) {
        const char *k = args[i].key, *v = args[i].value;
        char *dst;
        bool *seen;
        if (strcmp(k, "node") == 0) {
            dst = q->node;
            seen = &seen_node;
        } else if (strcmp(k, "source") == 0) {
            dst = q->source;
            seen = &seen_source;
        } else {
            snprintf(err, errlen, "unknown parameter \"%.64s\" (node, source)", k);
            goto out;
        }
        if (*seen) {
            snprintf(err, errlen, "parameter \"%s\" given twice", k);
            goto out;
        }
        *seen = true;
        if (!v || !*v || strlen(v) >= FS_TOPO_STR_MAX) {
            snprintf(err, errlen, "parameter \"%s\": 1 to %d bytes", k, FS_TOPO_STR_MAX - 1);
            goto out;
        }
        memcpy(dst, v, strlen(v) + 1);
    }
    rc = 0;
out:
    return rc;
}

static json_object *
jtime(int64_t us)
{
    char ts[48];
    fs_api_format_rfc3339(us, ts, sizeof ts);
    return json_object_new_string(ts);
}

static json_object *
jend(const struct fs_topo_end *e)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "node", json_object_new_string(e->node));
    json_object_object_add(o, "port", json_object_new_string(e->port));
    json_object_object_add(o, "kind", json_object_new_string(e->is_target ? "target" : "remote"));
    return o;
}

/* Whether l passes q's filters. */
static bool
link_kept(const struct fs_topo_link *l, const struct fs_topology_query *q)
{
    if (*q->node && strcmp(l->a.node, q->node) != 0 && strcmp(l->b.node, q->node) != 0)
        return false;
    if (!*q->source)
        return true;
    for (size_t i = 0; i < l->n_sources; i++)
        if (strcmp(l->sources[i].source, q->source) == 0)
            return true;
    return false;
}

static json_object *
jlink(const struct fs_topo_link *l, int64_t now_us)
{
    json_object *o = json_object_new_object(), *srcs = json_object_new_array();
    json_object_object_add(o, "a", jend(&l->a));
    json_object_object_add(o, "b", jend(&l->b));
    for (size_t i = 0; i < l->n_sources; i++) {
        const struct fs_topo_source *s = &l->sources[i];
        json_object *so = json_object_new_object();
        json_object_object_add(so, "source", json_object_new_string(s->source));
        json_object_object_add(so, "reported_by", json_object_new_string(s->reporter));
        json_object_object_add(so, "first_seen", jtime(s->first_seen_us));
        json_object_object_add(so, "last_seen", jtime(s->last_seen_us));
        json_object_object_add(so, "hold_s", json_object_new_double((double)s->hold_us / 1e6));
        json_object_array_add(srcs, so);
    }
    json_object_object_add(o, "sources", srcs);
    json_object_object_add(o, "first_seen", jtime(l->first_seen_us));
    json_object_object_add(o, "last_seen", jtime(l->last_seen_us));
    /* A wall clock stepped back reads as age 0, never negative (topology.h). */
    int64_t age = now_us > l->last_seen_us ? now_us - l->last_seen_us : 0;
    char as[32];
    snprintf(as, sizeof as, "%.3f", (double)age / 1e6);
    json_object_object_add(o, "age_s", json_object_new_double_s((double)age / 1e6, as));
    return o;
}

int
fs_api_topology(struct fs_topo *t, const struct fs_topology_query *q, int64_t now_us,
                struct fs_buf *out)
{
    int status = 500;
    char err[128] = "";
    struct fs_topo_snap s;
    json_object *root = NULL;
    if (fs_topo_snapshot(t, now_us, &s, err, sizeof err) != 0) {
        fs_api_error_json(out, err);
        goto out;
    }
    root = json_object_new_object();
    json_object *data = json_object_new_object(), *nodes = json_object_new_array(),
                *links = json_object_new_array();
    bool filtered = *q->node || *q->source;
    for (size_t i = 0; i < s.n_links; i++) {
        if (!link_kept(&s.links[i], q))
            continue;
        json_object_array_add(links, jlink(&s.links[i], now_us));
    }
    for (size_t i = 0; i < s.n_nodes; i++) {
        const struct fs_topo_node *n = &s.nodes[i];
        bool used = !filtered;
        for (size_t k = 0; k < s.n_links && !used; k++)
            used = link_kept(&s.links[k], q) && (strcmp(s.links[k].a.node, n->name) == 0 ||
                                                 strcmp(s.links[k].b.node, n->name) == 0);
        if (!used)
            continue;
        json_object *o = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(n->name));
        json_object_object_add(o, "kind",
                               json_object_new_string(n->is_target ? "target" : "remote"));
        json_object_object_add(o, "chassis_id", json_object_new_string(n->chassis_id));
        json_object_object_add(o, "sys_name", json_object_new_string(n->sys_name));
        json_object_array_add(nodes, o);
    }
    json_object_object_add(data, "time", jtime(now_us));
    json_object_object_add(data, "nodes", nodes);
    json_object_object_add(data, "links", links);
    json_object_object_add(root, "status", json_object_new_string("success"));
    json_object_object_add(root, "data", data);
    fs_buf_puts(out, json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE));
    fs_buf_puts(out, "\n");
    status = out->overflow ? 500 : 200;
out:
    json_object_put(root);
    fs_topo_snap_free(&s);
    return status;
}
