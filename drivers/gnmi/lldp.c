/* The gNMI driver's LLDP neighbour mirror (see lldp.h). */
#include "lldp.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies s into a fixed field, cut at its size (the sink cuts between characters). */
static bool
set_str(char *dst, const char *s)
{
    char tmp[FS_GNMI_LLDP_STR_MAX];
    snprintf(tmp, sizeof tmp, "%s", s ? s : "");
    if (strcmp(dst, tmp) == 0)
        return false;
    memcpy(dst, tmp, sizeof tmp);
    return true;
}

/* The stored form of a key, so that lookups compare like with like. */
static bool
same_key(const char *stored, const char *key)
{
    char tmp[FS_GNMI_LLDP_STR_MAX];
    snprintf(tmp, sizeof tmp, "%s", key ? key : "");
    return strcmp(stored, tmp) == 0;
}

static struct fs_gnmi_lldp_nb *
find(struct fs_gnmi_lldp *l, const char *iface, const char *id)
{
    for (size_t i = 0; i < l->n; i++)
        if (same_key(l->v[i].iface, iface) && same_key(l->v[i].id, id))
            return &l->v[i];
    return NULL;
}

/* Removes the neighbours matching iface (NULL: any) and id (NULL: any). */
static size_t
remove_matching(struct fs_gnmi_lldp *l, const char *iface, const char *id)
{
    size_t w = 0, gone = 0;
    for (size_t i = 0; i < l->n; i++) {
        bool match =
            (!iface || same_key(l->v[i].iface, iface)) && (!id || same_key(l->v[i].id, id));
        if (match)
            gone++;
        else
            l->v[w++] = l->v[i];
    }
    l->n = w;
    return gone;
}

int
fs_gnmi_lldp_apply(struct fs_gnmi_lldp *l, const struct fs_gnmi_lldp_event *ev)
{
    int rc = 0;
    struct fs_gnmi_lldp_nb *nb = NULL;
    switch (ev->kind) {
    case FS_GNMI_LLDP_LOCAL_CHASSIS:
        rc = set_str(l->local_chassis, ev->value);
        break;
    case FS_GNMI_LLDP_LOCAL_NAME:
        rc = set_str(l->local_name, ev->value);
        break;
    case FS_GNMI_LLDP_NB_DELETE:
        rc = remove_matching(l, ev->iface, ev->id) > 0;
        break;
    case FS_GNMI_LLDP_NB_FIELD:
        if (!ev->iface || !ev->id || !ev->iface[0] || (unsigned)ev->field >= FS_GNMI_LLDP_FIELDS) {
            rc = -1;
            break;
        }
        nb = find(l, ev->iface, ev->id);
        if (!nb && l->n == FS_GNMI_LLDP_MAX) {
            l->over++;
            l->overflown = true;
            rc = -1;
            break;
        }
        if (!nb && l->n == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 16;
            struct fs_gnmi_lldp_nb *g = realloc(l->v, cap * sizeof *g);
            if (!g) {
                l->over++;
                l->overflown = true;
                rc = -1;
                break;
            }
            l->v = g;
            l->cap = cap;
        }
        if (!nb) {
            nb = &l->v[l->n++];
            memset(nb, 0, sizeof *nb);
            set_str(nb->iface, ev->iface);
            set_str(nb->id, ev->id);
            rc = 1;
        }
        nb->stale = false;
        if (set_str(nb->f[ev->field], ev->value))
            rc = 1;
        break;
    }
    return rc;
}

void
fs_gnmi_lldp_mark_stale(struct fs_gnmi_lldp *l)
{
    for (size_t i = 0; i < l->n; i++)
        l->v[i].stale = true;
}

size_t
fs_gnmi_lldp_sweep(struct fs_gnmi_lldp *l)
{
    size_t w = 0, gone = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].stale)
            gone++;
        else
            l->v[w++] = l->v[i];
    }
    l->n = w;
    l->overflown = false;
    return gone;
}

/* aa:bb:cc:dd:ee:ff or aa-bb-..., any case: an id that names no interface. */
static bool
looks_mac(const char *s)
{
    if (strlen(s) != 17)
        return false;
    for (size_t i = 0; i < 17; i++) {
        if (i % 3 == 2 ? (s[i] != ':' && s[i] != '-') : !isxdigit((unsigned char)s[i]))
            return false;
    }
    return true;
}

const char *
fs_gnmi_lldp_port(const struct fs_gnmi_lldp_nb *nb)
{
    const char *id = nb->f[FS_GNMI_LLDP_PORT_ID], *type = nb->f[FS_GNMI_LLDP_PORT_ID_TYPE];
    const char *descr = nb->f[FS_GNMI_LLDP_PORT_DESCR];
    /* openconfig-lldp-types:PortIdType; identities may come module-qualified */
    const char *colon = strrchr(type, ':');
    const char *t = colon ? colon + 1 : type;
    bool ifname = id[0] && (strcmp(t, "INTERFACE_NAME") == 0 || strcmp(t, "INTERFACE_ALIAS") == 0 ||
                            (!t[0] && !looks_mac(id)));
    if (ifname)
        return id;
    return descr[0] ? descr : id;
}

size_t
fs_gnmi_lldp_report(const struct fs_gnmi_lldp *l, struct fs_sink *sink)
{
    size_t n = 0;
    if (l->local_chassis[0] || l->local_name[0])
        fs_sink_lldp_local(sink, l->local_chassis, l->local_name);
    for (size_t i = 0; i < l->n; i++) {
        const struct fs_gnmi_lldp_nb *nb = &l->v[i];
        if (!nb->f[FS_GNMI_LLDP_CHASSIS_ID][0] && !nb->f[FS_GNMI_LLDP_SYS_NAME][0])
            continue; /* not all of it has arrived (or the target sends no identity) */
        struct fs_lldp_neighbor n1 = {
            .local_port = nb->iface,
            .chassis_id = nb->f[FS_GNMI_LLDP_CHASSIS_ID],
            .sys_name = nb->f[FS_GNMI_LLDP_SYS_NAME],
            .port = fs_gnmi_lldp_port(nb),
            .port_id = nb->f[FS_GNMI_LLDP_PORT_ID],
            .port_descr = nb->f[FS_GNMI_LLDP_PORT_DESCR],
        };
        if (fs_sink_lldp_neighbor(sink, &n1) == 0)
            n++;
    }
    return n;
}

void
fs_gnmi_lldp_free(struct fs_gnmi_lldp *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}
