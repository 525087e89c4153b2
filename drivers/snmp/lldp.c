/* LLDP-MIB rows -> neighbours (lldp.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lldp.h"

/* lldpObjects = 1.0.8802.1.1.2.1; lldpLocalSystemData = .3, lldpRemTable entry = .4.1.1. */
#define LLDP_OBJ 1, 0, 8802, 1, 1, 2, 1
static const unsigned long oid_loc_chassis_subtype[] = {LLDP_OBJ, 3, 1, 0};
static const unsigned long oid_loc_chassis_id[] = {LLDP_OBJ, 3, 2, 0};
static const unsigned long oid_loc_sys_name[] = {LLDP_OBJ, 3, 3, 0};
static const unsigned long oid_loc_port_entry[] = {LLDP_OBJ, 3, 7, 1};
static const unsigned long oid_rem_entry[] = {LLDP_OBJ, 4, 1, 1};
#define ENTRY_LEN 10 /* both entries; a column adds one sub-identifier */
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Columns of the entries (LLDP-MIB). */
enum { LOC_ID_SUBTYPE = 2, LOC_ID = 3, LOC_DESC = 4 };
enum {
    REM_CHASSIS_SUBTYPE = 4,
    REM_CHASSIS_ID = 5,
    REM_PORT_SUBTYPE = 6,
    REM_PORT_ID = 7,
    REM_PORT_DESC = 8,
    REM_SYS_NAME = 9
};
static const unsigned long loc_cols[] = {LOC_ID_SUBTYPE, LOC_ID, LOC_DESC};
static const unsigned long rem_cols[] = {REM_CHASSIS_SUBTYPE, REM_CHASSIS_ID, REM_PORT_SUBTYPE,
                                         REM_PORT_ID,         REM_PORT_DESC,  REM_SYS_NAME};

/* Subtypes (LldpChassisIdSubtype, LldpPortIdSubtype) that say how an id is encoded. */
#define CHASSIS_MAC 4
#define CHASSIS_NETADDR 5
#define PORT_MAC 3
#define PORT_NETADDR 4
#define PORT_IFNAME 5

void
fs_snmp_lldp_reset(struct fs_snmp_lldp *l)
{
    l->n_locs = l->n_rems = 0;
    l->local_chassis_subtype = 0;
    l->local_chassis_id.len = 0;
    l->local_sys_name[0] = '\0';
    l->have_local_chassis_id = l->have_local_sys_name = false;
    l->seen = l->truncated = false;
    l->anomalies = 0;
}

void
fs_snmp_lldp_free(struct fs_snmp_lldp *l)
{
    free(l->locs);
    free(l->rems);
    memset(l, 0, sizeof *l);
}

size_t
fs_snmp_lldp_scalars(struct fs_snmp_req_oid *out, size_t max)
{
    const struct fs_snmp_req_oid all[] = {
        {oid_loc_chassis_subtype, N(oid_loc_chassis_subtype)},
        {oid_loc_chassis_id, N(oid_loc_chassis_id)},
        {oid_loc_sys_name, N(oid_loc_sys_name)},
    };
    size_t n = 0;
    for (; n < N(all) && n < max; n++)
        out[n] = all[n];
    return n;
}

/* Column roots live here: the driver copies them when a walk begins. */
static unsigned long col_oids[N(loc_cols) + N(rem_cols)][ENTRY_LEN + 1];

size_t
fs_snmp_lldp_columns(struct fs_snmp_req_oid *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < N(loc_cols) + N(rem_cols) && n < max; i++, n++) {
        bool loc = i < N(loc_cols);
        memcpy(col_oids[i], loc ? oid_loc_port_entry : oid_rem_entry,
               ENTRY_LEN * sizeof(unsigned long));
        col_oids[i][ENTRY_LEN] = loc ? loc_cols[i] : rem_cols[i - N(loc_cols)];
        out[n].oid = col_oids[i];
        out[n].len = ENTRY_LEN + 1;
    }
    return n;
}

static bool
oid_is(const struct fs_snmp_vb *vb, const unsigned long *o, size_t len)
{
    return vb->oid_len == len && memcmp(vb->oid, o, len * sizeof *o) == 0;
}

static bool
oid_under(const struct fs_snmp_vb *vb, const unsigned long *root, size_t len)
{
    return vb->oid_len > len && memcmp(vb->oid, root, len * sizeof *root) == 0;
}

static void
hex_text(const unsigned char *b, size_t len, char *out, size_t outlen)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < len && o + 3 < outlen; i++)
        o += (size_t)snprintf(out + o, outlen - o, i ? ":%02x" : "%02x", b[i]);
}

const char *
fs_snmp_lldp_id_text(bool chassis, int subtype, const unsigned char *b, size_t len, char *out,
                     size_t outlen)
{
    /* Some agents count a terminating NUL in the length. */
    while (len > 0 && b[len - 1] == '\0')
        len--;
    bool mac = subtype == (chassis ? CHASSIS_MAC : PORT_MAC);
    bool netaddr = subtype == (chassis ? CHASSIS_NETADDR : PORT_NETADDR);
    if (mac) {
        hex_text(b, len, out, outlen);
        goto out;
    }
    /* A network address: an IANA address family octet (1 IPv4, 2 IPv6), then the address. */
    if (netaddr && ((len == 5 && b[0] == 1) || (len == 17 && b[0] == 2))) {
        if (inet_ntop(b[0] == 1 ? AF_INET : AF_INET6, b + 1, out, (socklen_t)outlen))
            goto out;
    }
    bool printable = len > 0;
    for (size_t i = 0; i < len && printable; i++)
        printable = b[i] >= 0x20 && b[i] != 0x7f;
    if (printable) {
        size_t n = len < outlen - 1 ? len : outlen - 1;
        memcpy(out, b, n);
        out[n] = '\0';
    } else {
        hex_text(b, len, out, outlen);
    }
out:
    return out;
}

/* Text of an OCTET STRING varbind into out: bytes as they are (the sink makes them valid
 * UTF-8), cut, trailing NULs dropped. */
static void
octets_text(const struct fs_snmp_vb *vb, char *out, size_t outlen)
{
    size_t len = vb->str_len;
    while (len > 0 && vb->str[len - 1] == '\0')
        len--;
    size_t n = len < outlen - 1 ? len : outlen - 1;
    if (n)
        memcpy(out, vb->str, n);
    out[n] = '\0';
}

/* Keeps an id's bytes (cut at FS_LLDP_ID_MAX): columns may come in any order, and its
 * subtype says how to print it. */
static void
id_keep(struct fs_snmp_lldp_id *id, const struct fs_snmp_vb *vb)
{
    id->len = vb->str_len < sizeof id->b ? vb->str_len : sizeof id->b;
    if (id->len)
        memcpy(id->b, vb->str, id->len);
}

static struct fs_snmp_lldp_loc *
loc_row(struct fs_snmp_lldp *l, uint32_t num)
{
    struct fs_snmp_lldp_loc *r = NULL;
    for (size_t i = l->n_locs; i-- > 0 && !r;)
        if (l->locs[i].num == num)
            r = &l->locs[i];
    if (r || l->n_locs >= FS_LLDP_MAX_ROWS)
        goto out;
    if (l->n_locs == l->cap_locs) {
        size_t cap = l->cap_locs ? 2 * l->cap_locs : 32;
        struct fs_snmp_lldp_loc *g = realloc(l->locs, cap * sizeof *g);
        if (!g)
            goto out;
        l->locs = g;
        l->cap_locs = cap;
    }
    r = &l->locs[l->n_locs++];
    memset(r, 0, sizeof *r);
    r->num = num;
out:
    return r;
}

static struct fs_snmp_lldp_rem *
rem_row(struct fs_snmp_lldp *l, uint32_t tm, uint32_t port, uint32_t idx)
{
    struct fs_snmp_lldp_rem *r = NULL;
    /* Newest first: the walk fills one row's columns close together. */
    for (size_t i = l->n_rems; i-- > 0 && !r;) {
        struct fs_snmp_lldp_rem *c = &l->rems[i];
        if (c->timemark == tm && c->local_port == port && c->index == idx)
            r = c;
    }
    if (r || l->n_rems >= FS_LLDP_MAX_ROWS)
        goto out;
    if (l->n_rems == l->cap_rems) {
        size_t cap = l->cap_rems ? 2 * l->cap_rems : 32;
        struct fs_snmp_lldp_rem *g = realloc(l->rems, cap * sizeof *g);
        if (!g)
            goto out;
        l->rems = g;
        l->cap_rems = cap;
    }
    r = &l->rems[l->n_rems++];
    memset(r, 0, sizeof *r);
    r->timemark = tm;
    r->local_port = port;
    r->index = idx;
out:
    return r;
}

static bool
index_ok(unsigned long v)
{
    return v <= UINT32_MAX;
}

int
fs_snmp_lldp_add(struct fs_snmp_lldp *l, const struct fs_snmp_vb *vb)
{
    int rc = 0;
    bool octets = vb->type == FS_VT_OCTETS, integer = vb->type == FS_VT_INTEGER;
    /* noSuchObject, noSuchInstance, endOfMibView: an agent without LLDP-MIB, silently. */
    if (vb->type == FS_VT_NOSUCHOBJECT || vb->type == FS_VT_NOSUCHINSTANCE ||
        vb->type == FS_VT_ENDOFMIBVIEW)
        goto out;
    if (oid_is(vb, oid_loc_chassis_subtype, N(oid_loc_chassis_subtype))) {
        if (!integer)
            goto anomaly;
        l->local_chassis_subtype = (int)vb->i;
        l->seen = true;
        rc = 1;
        goto out;
    }
    if (oid_is(vb, oid_loc_chassis_id, N(oid_loc_chassis_id))) {
        if (!octets)
            goto anomaly;
        id_keep(&l->local_chassis_id, vb);
        l->have_local_chassis_id = true;
        l->seen = true;
        rc = 1;
        goto out;
    }
    if (oid_is(vb, oid_loc_sys_name, N(oid_loc_sys_name))) {
        if (!octets)
            goto anomaly;
        octets_text(vb, l->local_sys_name, sizeof l->local_sys_name);
        l->have_local_sys_name = true;
        l->seen = true;
        rc = 1;
        goto out;
    }
    if (oid_under(vb, oid_loc_port_entry, ENTRY_LEN)) {
        if (vb->oid_len != ENTRY_LEN + 2 || !index_ok(vb->oid[ENTRY_LEN + 1]))
            goto anomaly;
        unsigned long col = vb->oid[ENTRY_LEN];
        if ((col == LOC_ID_SUBTYPE && !integer) || ((col == LOC_ID || col == LOC_DESC) && !octets))
            goto anomaly;
        if (col != LOC_ID_SUBTYPE && col != LOC_ID && col != LOC_DESC)
            goto out;
        struct fs_snmp_lldp_loc *r = loc_row(l, (uint32_t)vb->oid[ENTRY_LEN + 1]);
        if (!r) {
            l->truncated = true;
            rc = -1;
            goto out;
        }
        l->seen = true;
        if (col == LOC_ID_SUBTYPE)
            r->id_subtype = (int)vb->i;
        else if (col == LOC_ID)
            id_keep(&r->id, vb);
        else
            octets_text(vb, r->desc, sizeof r->desc);
        rc = 1;
        goto out;
    }
    if (oid_under(vb, oid_rem_entry, ENTRY_LEN)) {
        if (vb->oid_len != ENTRY_LEN + 4 || !index_ok(vb->oid[ENTRY_LEN + 1]) ||
            !index_ok(vb->oid[ENTRY_LEN + 2]) || !index_ok(vb->oid[ENTRY_LEN + 3]))
            goto anomaly;
        unsigned long col = vb->oid[ENTRY_LEN];
        bool int_col = col == REM_CHASSIS_SUBTYPE || col == REM_PORT_SUBTYPE;
        bool str_col = col == REM_CHASSIS_ID || col == REM_PORT_ID || col == REM_PORT_DESC ||
                       col == REM_SYS_NAME;
        if (!int_col && !str_col)
            goto out;
        if ((int_col && !integer) || (str_col && !octets))
            goto anomaly;
        struct fs_snmp_lldp_rem *r =
            rem_row(l, (uint32_t)vb->oid[ENTRY_LEN + 1], (uint32_t)vb->oid[ENTRY_LEN + 2],
                    (uint32_t)vb->oid[ENTRY_LEN + 3]);
        if (!r) {
            l->truncated = true;
            rc = -1;
            goto out;
        }
        l->seen = true;
        switch (col) {
        case REM_CHASSIS_SUBTYPE:
            r->chassis_subtype = (int)vb->i;
            break;
        case REM_PORT_SUBTYPE:
            r->port_subtype = (int)vb->i;
            break;
        case REM_CHASSIS_ID:
            id_keep(&r->chassis_id, vb);
            break;
        case REM_PORT_ID:
            id_keep(&r->port_id, vb);
            break;
        case REM_PORT_DESC:
            octets_text(vb, r->port_desc, sizeof r->port_desc);
            break;
        default:
            octets_text(vb, r->sys_name, sizeof r->sys_name);
            break;
        }
        rc = 1;
        goto out;
    }
    goto out;
anomaly:
    l->anomalies++;
out:
    return rc;
}

/* The exported name of the interface of tm whose ifName (as received or as exported) is
 * s, or NULL. */
static const char *
if_by_name(const struct fs_snmp_tmap *tm, const char *s)
{
    if (!*s)
        return NULL;
    for (size_t i = 0; i < tm->n_ifs; i++)
        if (strcmp(tm->ifs[i].raw, s) == 0 || strcmp(tm->ifs[i].name, s) == 0)
            return tm->ifs[i].name;
    return NULL;
}

/* The exported name of ifIndex idx, or NULL (tm->ifs is sorted by ifindex). */
static const char *
if_by_index(const struct fs_snmp_tmap *tm, uint32_t idx)
{
    size_t lo = 0, hi = tm->n_ifs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tm->ifs[mid].ifindex < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < tm->n_ifs && tm->ifs[lo].ifindex == idx ? tm->ifs[lo].name : NULL;
}

/* The local port of LLDP port number num, named as the counters name it (lldp.h). */
static const char *
local_port_name(const struct fs_snmp_lldp *l, const struct fs_snmp_tmap *tm, uint32_t num,
                char *buf, size_t len)
{
    const struct fs_snmp_lldp_loc *loc = NULL;
    const char *name;
    char id[FS_LLDP_TEXT_MAX] = "";
    for (size_t i = 0; i < l->n_locs && !loc; i++)
        if (l->locs[i].num == num)
            loc = &l->locs[i];
    if (loc)
        fs_snmp_lldp_id_text(false, loc->id_subtype, loc->id.b, loc->id.len, id, sizeof id);
    if ((loc && ((name = if_by_name(tm, id)) || (name = if_by_name(tm, loc->desc)))) ||
        (name = if_by_index(tm, num)))
        goto out;
    if (loc && loc->id_subtype == PORT_IFNAME && *id)
        snprintf(buf, len, "%s", id);
    else if (loc && *loc->desc)
        snprintf(buf, len, "%s", loc->desc);
    else if (*id)
        snprintf(buf, len, "%s", id);
    else
        snprintf(buf, len, "lldp-port-%u", num);
    name = buf;
out:
    return name;
}

size_t
fs_snmp_lldp_finish(struct fs_snmp_lldp *l, const struct fs_snmp_tmap *tm,
                    const struct fs_snmp_lldp_emit *e)
{
    size_t n = 0;
    char ch[FS_LLDP_TEXT_MAX], pid[FS_LLDP_TEXT_MAX], lbuf[FS_LLDP_TEXT_MAX];
    if (e->local && (l->have_local_chassis_id || l->have_local_sys_name)) {
        fs_snmp_lldp_id_text(true, l->local_chassis_subtype, l->local_chassis_id.b,
                             l->local_chassis_id.len, ch, sizeof ch);
        e->local(e->arg, ch, l->local_sys_name);
    }
    for (size_t i = 0; i < l->n_rems; i++) {
        const struct fs_snmp_lldp_rem *r = &l->rems[i];
        fs_snmp_lldp_id_text(true, r->chassis_subtype, r->chassis_id.b, r->chassis_id.len, ch,
                             sizeof ch);
        if (!*ch && !*r->sys_name) {
            l->anomalies++; /* nothing to name the neighbour by */
            continue;
        }
        fs_snmp_lldp_id_text(false, r->port_subtype, r->port_id.b, r->port_id.len, pid, sizeof pid);
        /* An interface-name id is the port's name; other ids (a MAC, lldpd's default) are
         * not, and the description usually is (lldpd sends the ifName there). */
        const char *port = r->port_subtype == PORT_IFNAME && *pid ? pid
                           : *r->port_desc                        ? r->port_desc
                                                                  : pid;
        struct fs_lldp_neighbor nb = {
            .local_port = local_port_name(l, tm, r->local_port, lbuf, sizeof lbuf),
            .chassis_id = ch,
            .sys_name = r->sys_name,
            .port = port,
            .port_id = pid,
            .port_descr = r->port_desc,
        };
        if (e->neighbor)
            e->neighbor(e->arg, &nb);
        n++;
    }
    return n;
}
