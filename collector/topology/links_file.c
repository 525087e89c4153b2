/* Links files in sFlow-RT's topology shape (links_file.h), read with json-c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "topology/links_file.h"
#include "topology/topology.h"

void
fs_static_links_free(struct fs_static_link *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].a_node);
        free(v[i].a_port);
        free(v[i].b_node);
        free(v[i].b_port);
    }
    free(v);
}

/* Copies link member key of lo into *dst: a string of 1..FS_TOPO_STR_MAX - 1 bytes
 * without NUL, else -1 with errbuf naming links.NAME.KEY. */
static int
member(json_object *lo, const char *name, const char *key, char **dst, char *errbuf, size_t errlen)
{
    int rc = -1;
    json_object *v = NULL;
    if (!json_object_object_get_ex(lo, key, &v) || !v) {
        snprintf(errbuf, errlen, "links.%.64s.%s: missing", name, key);
        goto out;
    }
    if (!json_object_is_type(v, json_type_string)) {
        snprintf(errbuf, errlen, "links.%.64s.%s: not a string", name, key);
        goto out;
    }
    const char *s = json_object_get_string(v);
    size_t l = (size_t)json_object_get_string_len(v);
    if (l == 0 || l >= FS_TOPO_STR_MAX || memchr(s, '\0', l)) {
        snprintf(errbuf, errlen, "links.%.64s.%s: not 1..%d bytes without NUL", name, key,
                 FS_TOPO_STR_MAX - 1);
        goto out;
    }
    if (!(*dst = strdup(s))) {
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    rc = 0;
out:
    return rc;
}

int
fs_links_json_parse(const char *text, size_t len, struct fs_static_link **out, size_t *n,
                    char *errbuf, size_t errlen)
{
    int rc = -1;
    json_object *root = NULL, *links = NULL;
    struct fs_static_link *v = NULL;
    size_t nv = 0;
    json_tokener *tok = NULL;

    *out = NULL;
    *n = 0;
    if (len > FS_LINKS_FILE_MAX_BYTES) {
        snprintf(errbuf, errlen, "larger than %d bytes", FS_LINKS_FILE_MAX_BYTES);
        goto out;
    }
    if (len > (size_t)INT32_MAX || !(tok = json_tokener_new_ex(FS_LINKS_FILE_DEPTH))) {
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    root = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tok);
    if (!root || je != json_tokener_success) {
        snprintf(errbuf, errlen, "not JSON: %s at byte %zu",
                 je == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(je),
                 json_tokener_get_parse_end(tok));
        goto out;
    }
    /* Only whitespace may follow the document (a second one is a broken file). */
    for (size_t i = json_tokener_get_parse_end(tok); i < len; i++)
        if (!strchr(" \t\r\n", text[i])) {
            snprintf(errbuf, errlen, "not JSON: text after the document at byte %zu", i);
            goto out;
        }
    if (!json_object_is_type(root, json_type_object)) {
        snprintf(errbuf, errlen, "not a JSON object");
        goto out;
    }
    if (!json_object_object_get_ex(root, "links", &links) || !links) {
        snprintf(errbuf, errlen, "links: missing");
        goto out;
    }
    if (!json_object_is_type(links, json_type_object)) {
        snprintf(errbuf, errlen, "links: not an object (name -> link)");
        goto out;
    }
    size_t count = (size_t)json_object_object_length(links);
    if (count > FS_TOPO_MAX_STATIC) {
        snprintf(errbuf, errlen, "links: %zu links, at most %d", count, FS_TOPO_MAX_STATIC);
        goto out;
    }
    if (count && !(v = calloc(count, sizeof *v))) {
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    json_object_object_foreach(links, name, lo)
    {
        if (!lo || !json_object_is_type(lo, json_type_object)) {
            snprintf(errbuf, errlen, "links.%.64s: not an object", name);
            goto out;
        }
        struct fs_static_link *l = &v[nv++];
        if (member(lo, name, "node1", &l->a_node, errbuf, errlen) != 0 ||
            member(lo, name, "port1", &l->a_port, errbuf, errlen) != 0 ||
            member(lo, name, "node2", &l->b_node, errbuf, errlen) != 0 ||
            member(lo, name, "port2", &l->b_port, errbuf, errlen) != 0)
            goto out;
        if (strcmp(l->a_node, l->b_node) == 0 && strcmp(l->a_port, l->b_port) == 0) {
            snprintf(errbuf, errlen, "links.%.64s: both ends are %.64s %.64s", name, l->a_node,
                     l->a_port);
            goto out;
        }
    }
    *out = v;
    *n = nv;
    v = NULL;
    rc = 0;
out:
    fs_static_links_free(v, nv);
    json_object_put(root);
    if (tok)
        json_tokener_free(tok);
    return rc;
}
