/* lldpctl's JSON and the neighbours body (lldp.h), with json-c. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "hostagent/lldp.h"

/* Length of the well-formed UTF-8 character at s (n > 0 bytes left; RFC 3629's table:
 * no overlong forms, no surrogates, nothing past U+10FFFF), 0 when there is none. */
static size_t
utf8_char(const unsigned char *s, size_t n)
{
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        len = 3;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        len = 4;
    if (!len || n < len)
        return 0;
    if (s[0] == 0xE0)
        lo = 0xA0;
    else if (s[0] == 0xED)
        hi = 0x9F;
    else if (s[0] == 0xF0)
        lo = 0x90;
    else if (s[0] == 0xF4)
        hi = 0x8F;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

/* Copies s into dst (FS_HOST_EVENTS_MAX_NBR_STR + 1 bytes), whole characters only. A
 * switch may send a sysName or port description that is not UTF-8 (LLDP does not say),
 * lldpctl passes its bytes on and json-c keeps them, but the collector refuses a body
 * that is not UTF-8: each byte that starts no character becomes '?'. */
static void
copy_cut(char *dst, const char *s)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)u), o = 0;
    for (size_t i = 0; i < n;) {
        size_t c = utf8_char(u + i, n - i);
        size_t w = c ? c : 1;
        if (o + w > FS_HOST_EVENTS_MAX_NBR_STR)
            break;
        if (c)
            memcpy(dst + o, u + i, c);
        else
            dst[o] = '?';
        o += w;
        i += w;
    }
    dst[o] = '\0';
}

/* Member key of o when it is a string, else NULL. */
static const char *
str_member(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static json_object *
obj_member(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
        !json_object_is_type(v, json_type_object))
        return NULL;
    return v;
}

/* One neighbour: interface nic, its object io. False when it lacks what names it. */
static bool
neighbor_of(const char *nic, json_object *io, struct fs_agent_lldp_nbr *d)
{
    memset(d, 0, sizeof *d);
    copy_cut(d->nic, nic);
    json_object *ch = obj_member(io, "chassis");
    if (ch) {
        json_object *id = obj_member(ch, "id");
        if (id) {
            /* No sysName sent: the chassis object is the chassis itself. */
            copy_cut(d->chassis_id, str_member(id, "value"));
        } else {
            json_object_object_foreach(ch, name, co)
            {
                copy_cut(d->sys_name, name);
                copy_cut(d->chassis_id, str_member(obj_member(co, "id"), "value"));
                break; /* one chassis per neighbour */
            }
        }
    }
    json_object *port = obj_member(io, "port");
    json_object *pid = obj_member(port, "id");
    const char *ptype = str_member(pid, "type"), *pval = str_member(pid, "value");
    const char *descr = str_member(port, "descr");
    copy_cut(d->port_id, pval);
    copy_cut(d->port_descr, descr);
    copy_cut(d->port, ptype && pval && *pval && strcmp(ptype, "ifname") == 0 ? pval
                      : descr && *descr                                      ? descr
                                                                             : pval);
    return d->nic[0] && d->port[0] && (d->chassis_id[0] || d->sys_name[0]);
}

int
fs_agent_lldp_parse(const char *text, size_t len, struct fs_agent_lldp_nbr *out, size_t max,
                    size_t *n, size_t *dropped, char *errbuf, size_t errlen)
{
    int rc = -1;
    json_tokener *tok = NULL;
    json_object *root = NULL;
    *n = 0;
    *dropped = 0;
    if (len > FS_AGENT_LLDP_MAX_BYTES) {
        snprintf(errbuf, errlen, "lldpctl output larger than %d bytes", FS_AGENT_LLDP_MAX_BYTES);
        goto out;
    }
    if (!(tok = json_tokener_new_ex(FS_AGENT_LLDP_DEPTH))) {
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    root = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tok);
    if (!root || je != json_tokener_success) {
        snprintf(errbuf, errlen, "lldpctl output is not JSON: %s at byte %zu",
                 je == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(je),
                 json_tokener_get_parse_end(tok));
        goto out;
    }
    for (size_t i = json_tokener_get_parse_end(tok); i < len; i++)
        if (!strchr(" \t\r\n", text[i])) {
            snprintf(errbuf, errlen, "lldpctl output: text after the document at byte %zu", i);
            goto out;
        }
    json_object *lldp = obj_member(root, "lldp");
    if (!lldp) {
        snprintf(errbuf, errlen, "lldpctl output: lldp: missing or not an object");
        goto out;
    }
    json_object *ifs = NULL;
    if (!json_object_object_get_ex(lldp, "interface", &ifs) || !ifs) {
        rc = 0; /* no neighbour at all */
        goto out;
    }
    /* One neighbour: an object; several: a list of objects. */
    bool list = json_object_is_type(ifs, json_type_array);
    size_t count = list ? json_object_array_length(ifs) : 1;
    if (!list && !json_object_is_type(ifs, json_type_object)) {
        snprintf(errbuf, errlen, "lldpctl output: lldp.interface: not an object or a list");
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        json_object *e = list ? json_object_array_get_idx(ifs, i) : ifs;
        if (!e || !json_object_is_type(e, json_type_object)) {
            snprintf(errbuf, errlen, "lldpctl output: lldp.interface[%zu]: not an object", i);
            goto out;
        }
        json_object_object_foreach(e, nic, io)
        {
            if (*n >= max) {
                (*dropped)++;
                continue;
            }
            if (neighbor_of(nic, io, &out[*n]))
                (*n)++;
            else
                (*dropped)++;
        }
    }
    rc = 0;
out:
    if (rc != 0) {
        *n = 0;
        *dropped = 0;
    }
    json_object_put(root);
    if (tok)
        json_tokener_free(tok);
    return rc;
}

/* Adds key: s to o unless s is empty. -1 when out of memory. */
static int
add_str(json_object *o, const char *key, const char *s, bool always)
{
    if (!*s && !always)
        return 0;
    json_object *v = json_object_new_string(s);
    return v && json_object_object_add(o, key, v) == 0 ? 0 : -1;
}

int
fs_agent_lldp_body(const char *host, int64_t interval_s, const struct fs_agent_lldp_nbr *v,
                   size_t n, char **body, size_t *len, char *errbuf, size_t errlen)
{
    int rc = -1;
    json_object *root = json_object_new_object(), *nb = json_object_new_object(),
                *list = json_object_new_array();
    *body = NULL;
    *len = 0;
    if (!root || !nb || !list) {
        json_object_put(nb);
        json_object_put(list);
        goto out;
    }
    /* Once added, root owns nb and nb owns list. */
    if (json_object_object_add(root, "neighbors", nb) != 0) {
        json_object_put(nb);
        json_object_put(list);
        goto out;
    }
    if (json_object_object_add(nb, "list", list) != 0) {
        json_object_put(list);
        goto out;
    }
    if (add_str(nb, "host", host, true) != 0 ||
        json_object_object_add(nb, "interval_s", json_object_new_int64(interval_s)) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_new_object();
        if (!o || json_object_array_add(list, o) != 0) {
            json_object_put(o);
            goto out;
        }
        if (add_str(o, "nic", v[i].nic, true) || add_str(o, "chassis_id", v[i].chassis_id, false) ||
            add_str(o, "sys_name", v[i].sys_name, false) || add_str(o, "port", v[i].port, true) ||
            add_str(o, "port_id", v[i].port_id, false) ||
            add_str(o, "port_descr", v[i].port_descr, false))
            goto out;
    }
    size_t l = 0;
    const char *s = json_object_to_json_string_length(root, JSON_C_TO_STRING_PLAIN, &l);
    if (!s || !(*body = strdup(s)))
        goto out;
    *len = l;
    rc = 0;
out:
    if (rc != 0)
        snprintf(errbuf, errlen, "out of memory");
    json_object_put(root);
    return rc;
}
