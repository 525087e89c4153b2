/* SNMP varbinds -> samples; see map.h. Pure: no I/O, no net-snmp. */
#include "map.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Internal column ids. The eight HC columns and their 32-bit twins keep the same order,
 * so twin = col + (C_IN_OCT - C_HC_IN_OCT) and fallback_mask bit i = HC column i. */
enum col {
    C_NONE = 0,
    C_IFNAME,
    C_IFALIAS,
    C_IFDESCR,
    C_HC_IN_OCT,
    C_HC_IN_UC,
    C_HC_IN_MC,
    C_HC_IN_BC,
    C_HC_OUT_OCT,
    C_HC_OUT_UC,
    C_HC_OUT_MC,
    C_HC_OUT_BC,
    C_IN_OCT,
    C_IN_UC,
    C_IN_MC,
    C_IN_BC,
    C_OUT_OCT,
    C_OUT_UC,
    C_OUT_MC,
    C_OUT_BC,
    C_IN_DISC,
    C_IN_ERR,
    C_OUT_DISC,
    C_OUT_ERR,
    C_OPER,
    C_ADMIN,
    C_LASTCHANGE,
    C_HIGHSPEED,
    C_SPEED,
    C_DISCTIME,
    C_PORT_TXWAIT,
    C_TC_UQDEPTH, /* first column indexed by (ifIndex, TC/priority) */
    C_TC_UNOBUF,
    C_TC_WRED,
    C_PFC_RXPKTS,
    C_PFC_RXDUR,
    C_PFC_TXPKTS,
    C_PFC_TXDUR,
    C_COUNT
};

#define N_HC 8
#define TWIN_OFFSET (C_IN_OCT - C_HC_IN_OCT)

enum vkind { VK_STRING, VK_COUNTER, VK_GAUGE, VK_ENUM, VK_TICKS };

enum table { T_IF, T_IFX, T_QOS_PFC, T_QOS_TC, T_QOS_PORT };

struct coldef {
    uint8_t id;
    uint8_t table;
    uint8_t len;
    unsigned long oid[12];
};

#define IFT(c)                                                                                     \
    T_IF, 10,                                                                                      \
    {                                                                                              \
        1, 3, 6, 1, 2, 1, 2, 2, 1, c                                                               \
    }
#define IFX(c)                                                                                     \
    T_IFX, 11,                                                                                     \
    {                                                                                              \
        1, 3, 6, 1, 2, 1, 31, 1, 1, 1, c                                                           \
    }
#define QOS(t, tab, c)                                                                             \
    tab, 12,                                                                                       \
    {                                                                                              \
        1, 3, 6, 1, 4, 1, 33049, 15, 1, t, 1, c                                                    \
    }

/* Column OIDs: IF-MIB (RFC 2863) and MELLANOX-QOS-MIB (onyx-facts.md 4.3, 4.6); the value
 * kind of each column is coldef_kind(). */
static const struct coldef cols[C_COUNT] = {
    [C_IFNAME] = {C_IFNAME, IFX(1)},
    [C_IFALIAS] = {C_IFALIAS, IFX(18)},
    [C_IFDESCR] = {C_IFDESCR, IFT(2)},
    [C_HC_IN_OCT] = {C_HC_IN_OCT, IFX(6)},
    [C_HC_IN_UC] = {C_HC_IN_UC, IFX(7)},
    [C_HC_IN_MC] = {C_HC_IN_MC, IFX(8)},
    [C_HC_IN_BC] = {C_HC_IN_BC, IFX(9)},
    [C_HC_OUT_OCT] = {C_HC_OUT_OCT, IFX(10)},
    [C_HC_OUT_UC] = {C_HC_OUT_UC, IFX(11)},
    [C_HC_OUT_MC] = {C_HC_OUT_MC, IFX(12)},
    [C_HC_OUT_BC] = {C_HC_OUT_BC, IFX(13)},
    [C_IN_OCT] = {C_IN_OCT, IFT(10)},
    [C_IN_UC] = {C_IN_UC, IFT(11)},
    [C_IN_MC] = {C_IN_MC, IFX(2)},
    [C_IN_BC] = {C_IN_BC, IFX(3)},
    [C_OUT_OCT] = {C_OUT_OCT, IFT(16)},
    [C_OUT_UC] = {C_OUT_UC, IFT(17)},
    [C_OUT_MC] = {C_OUT_MC, IFX(4)},
    [C_OUT_BC] = {C_OUT_BC, IFX(5)},
    [C_IN_DISC] = {C_IN_DISC, IFT(13)},
    [C_IN_ERR] = {C_IN_ERR, IFT(14)},
    [C_OUT_DISC] = {C_OUT_DISC, IFT(19)},
    [C_OUT_ERR] = {C_OUT_ERR, IFT(20)},
    [C_OPER] = {C_OPER, IFT(8)},
    [C_ADMIN] = {C_ADMIN, IFT(7)},
    [C_LASTCHANGE] = {C_LASTCHANGE, IFT(9)},
    [C_HIGHSPEED] = {C_HIGHSPEED, IFX(15)},
    [C_SPEED] = {C_SPEED, IFT(5)},
    [C_DISCTIME] = {C_DISCTIME, IFX(19)},
    [C_PORT_TXWAIT] = {C_PORT_TXWAIT, QOS(5, T_QOS_PORT, 5)},
    [C_TC_UQDEPTH] = {C_TC_UQDEPTH, QOS(4, T_QOS_TC, 6)},
    [C_TC_UNOBUF] = {C_TC_UNOBUF, QOS(4, T_QOS_TC, 8)},
    [C_TC_WRED] = {C_TC_WRED, QOS(4, T_QOS_TC, 9)},
    [C_PFC_RXPKTS] = {C_PFC_RXPKTS, QOS(2, T_QOS_PFC, 3)},
    [C_PFC_RXDUR] = {C_PFC_RXDUR, QOS(2, T_QOS_PFC, 4)},
    [C_PFC_TXPKTS] = {C_PFC_TXPKTS, QOS(2, T_QOS_PFC, 5)},
    [C_PFC_TXDUR] = {C_PFC_TXDUR, QOS(2, T_QOS_PFC, 6)},
};

static enum vkind
coldef_kind(int c)
{
    switch (c) {
    case C_IFNAME:
    case C_IFALIAS:
    case C_IFDESCR:
        return VK_STRING;
    case C_OPER:
    case C_ADMIN:
        return VK_ENUM;
    case C_LASTCHANGE:
    case C_DISCTIME:
        return VK_TICKS;
    case C_HIGHSPEED:
    case C_SPEED:
    case C_TC_UQDEPTH:
        return VK_GAUGE;
    default:
        return VK_COUNTER;
    }
}

/* Scalars of the SCALARS phase. */
static const unsigned long oid_sysdescr[] = {1, 3, 6, 1, 2, 1, 1, 1, 0};
static const unsigned long oid_sysobjid[] = {1, 3, 6, 1, 2, 1, 1, 2, 0};
static const unsigned long oid_sysuptime[] = {1, 3, 6, 1, 2, 1, 1, 3, 0};
static const unsigned long oid_iftlc[] = {1, 3, 6, 1, 2, 1, 31, 1, 5, 0};
/* HOST-RESOURCES-MIB hrSystemUptime: the host's uptime, which an agent restart leaves. */
static const unsigned long oid_hrsysuptime[] = {1, 3, 6, 1, 2, 1, 25, 1, 1, 0};

/* MELLANOX-PRODUCTS-MIB sysObjectIDs (switchXFamily = 1.3.6.1.4.1.33049.1.1.1). */
static const unsigned long oid_switchx[] = {1, 3, 6, 1, 4, 1, 33049, 1, 1, 1};
static const struct {
    unsigned long id;
    const char *model;
} products[] = {
    {2010, "SN2010"}, {2100, "SN2100"},    {2410, "SN2410"}, {2700, "SN2700"},    {27002, "SN2700"},
    {2740, "SN2740"}, {3420, "SN3420"},    {3700, "SN3700"}, {370013, "SN3700C"}, {3800, "SN3800"},
    {4600, "SN4600"}, {460013, "SN4600C"}, {4700, "SN4700"},
};

/* Bytes per shared-buffer cell, per model: the one place queue depth in cells may turn
 * into bytes. Empty on purpose: Spectrum reports its cell size through firmware and no
 * source we could verify states it per model, so queue depth is exported in cells
 * (fabric_queue_depth_cells) until an entry is added here from a trusted source. */
static const struct {
    const char *model;
    unsigned bytes;
} cell_sizes[] = {
    {NULL, 0},
};

static const char *const small_num[FS_SNMP_MAX_TC] = {"0", "1", "2",  "3",  "4",  "5",  "6",  "7",
                                                      "8", "9", "10", "11", "12", "13", "14", "15"};

static bool
oid_has_prefix(const unsigned long *oid, size_t len, const unsigned long *pfx, size_t plen)
{
    return len >= plen && memcmp(oid, pfx, plen * sizeof(*oid)) == 0;
}

static bool
oid_equal(const unsigned long *a, size_t alen, const unsigned long *b, size_t blen)
{
    return alen == blen && memcmp(a, b, alen * sizeof(*a)) == 0;
}

const char *
fs_snmp_model_from_objid(const unsigned long *oid, size_t len)
{
    size_t plen = sizeof(oid_switchx) / sizeof(oid_switchx[0]);
    if (!oid || len != plen + 1 || !oid_has_prefix(oid, len, oid_switchx, plen))
        return NULL;
    for (size_t i = 0; i < sizeof(products) / sizeof(products[0]); i++)
        if (products[i].id == oid[plen])
            return products[i].model;
    return NULL;
}

unsigned
fs_snmp_cell_bytes(const char *model)
{
    for (size_t i = 0; model && i < sizeof(cell_sizes) / sizeof(cell_sizes[0]); i++)
        if (cell_sizes[i].model && strcmp(cell_sizes[i].model, model) == 0)
            return cell_sizes[i].bytes;
    return 0;
}

/* Length of the valid UTF-8 character at s (n bytes left), 0 if it is not one: no
 * overlong forms, no surrogates, nothing past U+10FFFF, no C0/C1 control or DEL. */
static size_t
utf8_char_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c >= 0x20 && c < 0x7f)
        return 1;
    size_t len;
    unsigned cp;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0))
        return 0;
    return len;
}

/* Copies an agent's string for labels and log lines: valid UTF-8 is kept (port names in
 * any script), each invalid byte or control character becomes '?', and a string longer
 * than cap - 1 bytes is cut between characters. */
static void
copy_clean(char *dst, size_t cap, const unsigned char *src, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_char_len(src + i, n - i);
        if (l == 0) {
            if (o + 1 >= cap)
                break;
            dst[o++] = '?';
            i++;
            continue;
        }
        if (o + l >= cap)
            break;
        memcpy(dst + o, src + i, l);
        o += l;
        i += l;
    }
    dst[o] = '\0';
}

void
fs_snmp_tmap_init(struct fs_snmp_tmap *tm, int qos_index_base)
{
    memset(tm, 0, sizeof(*tm));
    tm->qos_base_cfg = (qos_index_base == 0 || qos_index_base == 1) ? qos_index_base : -1;
    tm->qos_base = tm->qos_base_cfg;
    snprintf(tm->model, sizeof(tm->model), "unknown");
    snprintf(tm->os, sizeof(tm->os), "unknown");
    snprintf(tm->version, sizeof(tm->version), "unknown");
}

void
fs_snmp_tmap_free(struct fs_snmp_tmap *tm)
{
    if (!tm)
        return;
    free(tm->ifs);
    tm->ifs = NULL;
    tm->n_ifs = 0;
    tm->map_valid = false;
}

void
fs_snmp_poll_reset(struct fs_snmp_poll *p)
{
    for (size_t i = 0; i < p->n_srecs; i++)
        free(p->srecs[i].s);
    p->n_recs = 0;
    p->n_srecs = 0;
    p->n_pdus = 0;
    p->cur_pdu = 0;
    p->have_uptime = p->have_iftlc = p->have_descr = p->have_objid = p->have_hrup = false;
    p->uptime = p->uptime_pdu = p->iftlc = p->hrup = 0;
    p->phase = FS_SNMP_PH_SCALARS;
    p->cut = p->map_cut = p->truncated = p->map_limited = false;
    p->n_suspect = 0;
    p->descr[0] = '\0';
    p->objid_len = 0;
    p->did_map = p->unknown_index = p->qos_walked = false;
    p->qos_rows = 0;
    p->anomalies = 0;
    p->varbinds = 0;
}

void
fs_snmp_poll_free(struct fs_snmp_poll *p)
{
    if (!p)
        return;
    fs_snmp_poll_reset(p);
    free(p->recs);
    free(p->srecs);
    free(p->pdu_ts);
    free(p->suspect);
    memset(p, 0, sizeof(*p));
}

void
fs_snmp_poll_cut(struct fs_snmp_poll *p)
{
    p->cut = true;
    if (p->did_map && p->phase == FS_SNMP_PH_IFMAP)
        p->map_cut = true;
}

int
fs_snmp_poll_pdu(struct fs_snmp_poll *p, int64_t ts_us)
{
    if (p->n_pdus >= FS_SNMP_MAX_PDUS)
        return -1;
    if (p->n_pdus == p->cap_pdus) {
        uint32_t ncap = p->cap_pdus ? p->cap_pdus * 2 : 64;
        int64_t *n = realloc(p->pdu_ts, ncap * sizeof(*n));
        if (!n)
            return -1;
        p->pdu_ts = n;
        p->cap_pdus = ncap;
    }
    p->pdu_ts[p->n_pdus] = ts_us;
    p->cur_pdu = p->n_pdus++;
    return 0;
}

/* Finds the column of a row OID and its index; false if the OID is not one of ours. */
static bool
classify(const unsigned long *oid, size_t len, int *col, uint32_t *ifindex, uint32_t *sub)
{
    static const unsigned long pfx_if[] = {1, 3, 6, 1, 2, 1, 2, 2, 1};
    static const unsigned long pfx_ifx[] = {1, 3, 6, 1, 2, 1, 31, 1, 1, 1};
    static const unsigned long pfx_qos[] = {1, 3, 6, 1, 4, 1, 33049, 15, 1};
    int table;
    unsigned long c, idx1, idx2 = 0;

    if (len == 11 && oid_has_prefix(oid, len, pfx_if, 9)) {
        table = T_IF;
        c = oid[9];
        idx1 = oid[10];
    } else if (len == 12 && oid_has_prefix(oid, len, pfx_ifx, 10)) {
        table = T_IFX;
        c = oid[10];
        idx1 = oid[11];
    } else if ((len == 13 || len == 14) && oid_has_prefix(oid, len, pfx_qos, 9) && oid[10] == 1) {
        if (oid[9] == 5 && len == 13)
            table = T_QOS_PORT;
        else if (oid[9] == 4 && len == 14)
            table = T_QOS_TC;
        else if (oid[9] == 2 && len == 14)
            table = T_QOS_PFC;
        else
            return false;
        c = oid[11];
        idx1 = oid[12];
        if (len == 14)
            idx2 = oid[13];
    } else {
        return false;
    }
    /* ifIndex is 1..2147483647 (RFC 2863); anything else is not a row of ours. */
    if (idx1 < 1 || idx1 > 0x7fffffffUL || idx2 > 0xffffffffUL)
        return false;
    for (int i = 1; i < C_COUNT; i++) {
        if (cols[i].table == table && cols[i].oid[cols[i].len - 1] == c) {
            *col = i;
            *ifindex = (uint32_t)idx1;
            *sub = (uint32_t)idx2;
            return true;
        }
    }
    return false;
}

static const struct fs_snmp_ifent *
find_if(const struct fs_snmp_ifent *ifs, size_t n, uint32_t ifindex)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ifs[mid].ifindex == ifindex)
            return &ifs[mid];
        if (ifs[mid].ifindex < ifindex)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int
add_rec(struct fs_snmp_poll *p, int col, uint32_t ifindex, uint32_t sub, uint64_t u, unsigned bits)
{
    if (p->n_recs >= FS_SNMP_MAX_RECS) {
        p->truncated = true;
        return -1;
    }
    if (p->n_recs == p->cap_recs) {
        size_t ncap = p->cap_recs ? p->cap_recs * 2 : 1024;
        struct fs_snmp_rec *n = realloc(p->recs, ncap * sizeof(*n));
        if (!n)
            return -1;
        p->recs = n;
        p->cap_recs = ncap;
    }
    struct fs_snmp_rec *r = &p->recs[p->n_recs++];
    r->ifindex = ifindex;
    r->sub = sub;
    r->col = (uint16_t)col;
    r->bits = (uint8_t)bits;
    r->pad = 0;
    r->pdu = p->cur_pdu;
    r->u = u;
    return 1;
}

static int
add_srec(struct fs_snmp_poll *p, int col, uint32_t ifindex, const unsigned char *s, size_t n)
{
    size_t cap = col == C_IFALIAS ? FS_SNMP_ALIAS_MAX : FS_SNMP_NAME_MAX;
    if (p->n_srecs >= 3 * FS_SNMP_MAX_IFS) {
        p->truncated = p->map_limited = true;
        return -1;
    }
    if (p->n_srecs == p->cap_srecs) {
        size_t ncap = p->cap_srecs ? p->cap_srecs * 2 : 256;
        struct fs_snmp_srec *ns = realloc(p->srecs, ncap * sizeof(*ns));
        if (!ns)
            return -1;
        p->srecs = ns;
        p->cap_srecs = ncap;
    }
    char *copy = malloc(cap);
    if (!copy)
        return -1;
    copy_clean(copy, cap, s, n);
    p->srecs[p->n_srecs].ifindex = ifindex;
    p->srecs[p->n_srecs].col = (uint16_t)col;
    p->srecs[p->n_srecs].s = copy;
    p->n_srecs++;
    return 1;
}

/* The ifName column walked with the data (no map walk yet in this cycle): an ifIndex
 * that now carries another name was reassigned, maybe without ifTableLastChange moving;
 * its rows must not count for the old port. The map is walked after the data. */
static int
check_name(struct fs_snmp_poll *p, const struct fs_snmp_tmap *tm, uint32_t ifindex,
           const unsigned char *s, size_t n)
{
    char now[FS_SNMP_NAME_MAX];
    copy_clean(now, sizeof(now), s, n);
    const struct fs_snmp_ifent *e = tm ? find_if(tm->ifs, tm->n_ifs, ifindex) : NULL;
    if (e && strcmp(e->raw, now) == 0)
        return 1;
    p->unknown_index = true;
    if (!e)
        return 1; /* a new ifIndex: its rows are dropped until the map has it */
    if (p->n_suspect == p->cap_suspect) {
        size_t ncap = p->cap_suspect ? p->cap_suspect * 2 : 16;
        if (ncap > FS_SNMP_MAX_IFS)
            return -1;
        uint32_t *ns = realloc(p->suspect, ncap * sizeof(*ns));
        if (!ns)
            return -1;
        p->suspect = ns;
        p->cap_suspect = ncap;
    }
    p->suspect[p->n_suspect++] = ifindex;
    return 1;
}

static int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* p->suspect is sorted when the cycle finishes (a switch may rename every port). */
static bool
is_suspect(const struct fs_snmp_poll *p, uint32_t ifindex)
{
    return p->n_suspect &&
           bsearch(&ifindex, p->suspect, p->n_suspect, sizeof(*p->suspect), cmp_u32);
}

static int
add_scalar(struct fs_snmp_poll *p, const struct fs_snmp_vb *vb)
{
    if (oid_equal(vb->oid, vb->oid_len, oid_sysuptime, 9)) {
        if (vb->type != FS_VT_TIMETICKS || vb->u > 0xffffffffULL)
            goto bad;
        p->have_uptime = true;
        p->uptime = (uint32_t)vb->u;
        p->uptime_pdu = p->cur_pdu;
        return 1;
    }
    if (oid_equal(vb->oid, vb->oid_len, oid_sysdescr, 9)) {
        if (vb->type != FS_VT_OCTETS || (!vb->str && vb->str_len))
            goto bad;
        copy_clean(p->descr, sizeof(p->descr), vb->str, vb->str_len);
        p->have_descr = true;
        return 1;
    }
    if (oid_equal(vb->oid, vb->oid_len, oid_sysobjid, 9)) {
        if (vb->type != FS_VT_OID || vb->oidv_len > FS_SNMP_OID_MAX || (!vb->oidv && vb->oidv_len))
            goto bad;
        if (vb->oidv_len)
            memcpy(p->objid, vb->oidv, vb->oidv_len * sizeof(*vb->oidv));
        p->objid_len = vb->oidv_len;
        p->have_objid = true;
        return 1;
    }
    if (oid_equal(vb->oid, vb->oid_len, oid_hrsysuptime, 10)) {
        if (vb->type != FS_VT_TIMETICKS || vb->u > 0xffffffffULL)
            goto bad;
        p->have_hrup = true;
        p->hrup = (uint32_t)vb->u;
        return 1;
    }
    if (oid_equal(vb->oid, vb->oid_len, oid_iftlc, 10)) {
        if (vb->type != FS_VT_TIMETICKS || vb->u > 0xffffffffULL)
            goto bad;
        p->have_iftlc = true;
        p->iftlc = (uint32_t)vb->u;
        return 1;
    }
    return 0;
bad:
    p->anomalies++;
    return 0;
}

int
fs_snmp_poll_add(struct fs_snmp_poll *p, const struct fs_snmp_tmap *tm, const struct fs_snmp_vb *vb)
{
    int col;
    uint32_t ifindex, sub;
    uint64_t u = 0;
    unsigned bits = 0;

    if (!vb || !vb->oid || vb->oid_len == 0 || vb->oid_len > FS_SNMP_OID_MAX)
        return 0;
    p->varbinds++;
    /* Exceptions mark a missing column or row: handled per column, never an error. */
    if (vb->type == FS_VT_NOSUCHOBJECT || vb->type == FS_VT_NOSUCHINSTANCE ||
        vb->type == FS_VT_ENDOFMIBVIEW)
        return 0;
    if (vb->oid_len <= 10 && vb->oid[vb->oid_len - 1] == 0)
        return add_scalar(p, vb);
    if (!classify(vb->oid, vb->oid_len, &col, &ifindex, &sub))
        return 0;

    /* Past the interfaces kept under FS_SNMP_MAX_IFS: nothing of that row is used. */
    if (tm && tm->if_limited && !p->did_map && ifindex > tm->max_ifindex) {
        p->truncated = true;
        return -2;
    }
    switch (coldef_kind(col)) {
    case VK_STRING:
        if (vb->type != FS_VT_OCTETS || (!vb->str && vb->str_len))
            goto bad;
        if (col == C_IFNAME && !p->did_map)
            return check_name(p, tm, ifindex, vb->str, vb->str_len);
        return add_srec(p, col, ifindex, vb->str, vb->str_len);
    case VK_COUNTER:
        if (vb->type == FS_VT_COUNTER32 && vb->u <= 0xffffffffULL)
            bits = 32;
        else if (vb->type == FS_VT_COUNTER64)
            bits = 64;
        else
            goto bad;
        u = vb->u;
        break;
    case VK_GAUGE:
        if (vb->type == FS_VT_GAUGE32 || vb->type == FS_VT_COUNTER32 || vb->type == FS_VT_COUNTER64)
            u = vb->u;
        else if (vb->type == FS_VT_INTEGER && vb->i >= 0)
            u = (uint64_t)vb->i;
        else
            goto bad;
        break;
    case VK_ENUM:
        /* ifOperStatus/ifAdminStatus: up(1) .. lowerLayerDown(7) */
        if (vb->type != FS_VT_INTEGER || vb->i < 1 || vb->i > 7)
            goto bad;
        u = (uint64_t)vb->i;
        break;
    case VK_TICKS:
        if (vb->type != FS_VT_TIMETICKS || vb->u > 0xffffffffULL)
            goto bad;
        u = vb->u;
        break;
    }
    if (col >= C_TC_UQDEPTH || col == C_PORT_TXWAIT) {
        p->qos_rows++;
    } else {
        const struct fs_snmp_ifent *ifs = tm ? tm->ifs : NULL;
        size_t n = tm ? tm->n_ifs : 0;
        if (!find_if(ifs, n, ifindex) && !p->did_map)
            p->unknown_index = true;
    }
    return add_rec(p, col, ifindex, sub, u, bits);
bad:
    p->anomalies++;
    return 0;
}

static size_t
put_cols(struct fs_snmp_req_oid *out, size_t n, size_t max, int c)
{
    if (n < max) {
        out[n].oid = cols[c].oid;
        out[n].len = cols[c].len;
        n++;
    }
    return n;
}

/* Counts the rows of an HC column to tell whether some interface lacks it. */
static size_t
count_col(const struct fs_snmp_poll *p, int c)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_recs; i++)
        n += p->recs[i].col == c;
    return n;
}

static size_t
map_size(const struct fs_snmp_tmap *tm, const struct fs_snmp_poll *p)
{
    if (!p->did_map)
        return tm->n_ifs;
    /* Interfaces named by the walk in this cycle (not yet merged into tm). */
    size_t n = 0;
    for (size_t i = 0; i < p->n_srecs; i++)
        n += p->srecs[i].col == C_IFNAME;
    return n;
}

size_t
fs_snmp_phase_oids(enum fs_snmp_phase ph, const struct fs_snmp_tmap *tm, struct fs_snmp_poll *p,
                   struct fs_snmp_req_oid *out, size_t max)
{
    size_t n = 0;
    p->phase = ph;
    switch (ph) {
    case FS_SNMP_PH_SCALARS:
        if (max < 5)
            return 0;
        out[0] = (struct fs_snmp_req_oid){oid_sysuptime, 9};
        out[1] = (struct fs_snmp_req_oid){oid_sysdescr, 9};
        out[2] = (struct fs_snmp_req_oid){oid_sysobjid, 9};
        out[3] = (struct fs_snmp_req_oid){oid_iftlc, 10};
        out[4] = (struct fs_snmp_req_oid){oid_hrsysuptime, 10};
        return 5;
    case FS_SNMP_PH_IFMAP: {
        bool reboot = p->have_uptime && tm->uptime_known && p->uptime < tm->uptime;
        bool changed = p->have_iftlc && tm->iftlc_known && p->iftlc != tm->iftlc;
        /* The ifIndex map may have changed: first poll, reboot, ifTableLastChange moved,
         * or a data row named an ifIndex we do not know (then walked after the data). */
        if (p->did_map || !(!tm->map_valid || reboot || changed || p->unknown_index))
            return 0;
        for (size_t i = 0; i < p->n_srecs; i++)
            free(p->srecs[i].s);
        p->n_srecs = 0;
        p->did_map = true;
        n = put_cols(out, n, max, C_IFNAME);
        n = put_cols(out, n, max, C_IFALIAS);
        n = put_cols(out, n, max, C_IFDESCR);
        return n;
    }
    case FS_SNMP_PH_IFDATA:
        for (int c = C_HC_IN_OCT; c <= C_HC_OUT_BC; c++)
            n = put_cols(out, n, max, c);
        for (int i = 0; i < N_HC; i++)
            if (tm->fallback_mask & (1u << i))
                n = put_cols(out, n, max, C_HC_IN_OCT + i + TWIN_OFFSET);
        for (int c = C_IN_DISC; c <= C_DISCTIME; c++)
            n = put_cols(out, n, max, c);
        if (!p->did_map)
            n = put_cols(out, n, max, C_IFNAME);
        return n;
    case FS_SNMP_PH_IFFALLBACK: {
        size_t want = map_size(tm, p);
        for (int i = 0; i < N_HC; i++) {
            if (tm->fallback_mask & (1u << i))
                continue; /* already walked with the data */
            if (count_col(p, C_HC_IN_OCT + i) < want)
                n = put_cols(out, n, max, C_HC_IN_OCT + i + TWIN_OFFSET);
        }
        return n;
    }
    case FS_SNMP_PH_QOS:
        if (tm->qos_absent && tm->qos_skip > 0)
            return 0;
        p->qos_walked = true;
        n = put_cols(out, n, max, C_TC_UQDEPTH);
        n = put_cols(out, n, max, C_TC_UNOBUF);
        n = put_cols(out, n, max, C_TC_WRED);
        for (int c = C_PFC_RXPKTS; c <= C_PFC_TXDUR; c++)
            n = put_cols(out, n, max, c);
        n = put_cols(out, n, max, C_PORT_TXWAIT);
        return n;
    case FS_SNMP_PH_COUNT:
        break;
    }
    return 0;
}

/* ---- finishing a cycle ---- */

static int
cmp_srec(const void *a, const void *b)
{
    const struct fs_snmp_srec *x = a, *y = b;
    if (x->ifindex != y->ifindex)
        return x->ifindex < y->ifindex ? -1 : 1;
    return 0;
}

static int
cmp_ifent_name(const void *a, const void *b)
{
    const struct fs_snmp_ifent *x = *(const struct fs_snmp_ifent *const *)a;
    const struct fs_snmp_ifent *y = *(const struct fs_snmp_ifent *const *)b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->ifindex < y->ifindex ? -1 : x->ifindex > y->ifindex;
}

static int
cmp_ifent_name_only(const void *a, const void *b)
{
    const struct fs_snmp_ifent *x = *(const struct fs_snmp_ifent *const *)a;
    const struct fs_snmp_ifent *y = *(const struct fs_snmp_ifent *const *)b;
    return strcmp(x->name, y->name);
}

static void
add_suffix(struct fs_snmp_ifent *en)
{
    char sfx[16];
    int sl = snprintf(sfx, sizeof(sfx), "#%u", en->ifindex);
    size_t room = sizeof(en->name) - 1 - (size_t)sl;
    if (strlen(en->name) > room) {
        /* cut between UTF-8 characters, not inside one */
        while (room > 0 && ((unsigned char)en->name[room] & 0xc0) == 0x80)
            room--;
        en->name[room] = '\0';
    }
    strcat(en->name, sfx);
    en->dup = true;
}

/* Two ifIndexes must never share a series: of the holders of one name, the one that
 * exported it plainly before keeps it (else the lowest ifIndex); the others get
 * "#<ifIndex>" appended. Repeated in case a suffixed name meets a real one. */
static void
make_unique(struct fs_snmp_tmap *tm, struct fs_snmp_ifent *ifs, size_t n,
            struct fs_snmp_ifent **order)
{
    size_t dups = 0;
    for (int round = 0; round < 4; round++) {
        bool clash = false;
        for (size_t i = 0; i < n; i++)
            order[i] = &ifs[i];
        if (n)
            qsort(order, n, sizeof(*order), cmp_ifent_name);
        for (size_t i = 0; i < n;) {
            size_t j = i + 1;
            while (j < n && strcmp(order[j]->name, order[i]->name) == 0)
                j++;
            if (j - i > 1) {
                clash = true;
                size_t owner = i;
                for (size_t m = i; m < j; m++) {
                    const struct fs_snmp_ifent *old =
                        find_if(tm->ifs, tm->n_ifs, order[m]->ifindex);
                    if (old && !old->dup && strcmp(old->name, order[m]->name) == 0) {
                        owner = m;
                        break;
                    }
                }
                for (size_t m = i; m < j; m++) {
                    if (m == owner)
                        continue;
                    if (!order[m]->dup)
                        dups++;
                    add_suffix(order[m]);
                }
            }
            i = j;
        }
        if (!clash)
            break;
    }
    tm->dup_names = dups;
}

static const char *
first_dup(const struct fs_snmp_ifent *ifs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ifs[i].dup)
            return ifs[i].ifindex_s;
    return "?";
}

/* Builds the new ifIndex map from the strings of the IFMAP walk; keeps the
 * discontinuity state of interfaces that stay. A walk that was cut keeps the old entries
 * past the last ifIndex it reached. Names are made unique; a name that moved (another
 * ifIndex now exports it, or this ifIndex exports another) is a discontinuity for it. */
static int
rebuild_map(struct fs_snmp_tmap *tm, struct fs_snmp_poll *p, const struct fs_snmp_emit *e)
{
    struct fs_snmp_ifent *ifs = NULL;
    const struct fs_snmp_ifent **by_name = NULL;
    struct fs_snmp_ifent **order = NULL;
    int rc = -1;

    if (p->n_srecs)
        qsort(p->srecs, p->n_srecs, sizeof(*p->srecs), cmp_srec);
    size_t walked = 0;
    for (size_t i = 0; i < p->n_srecs; i++)
        if (i == 0 || p->srecs[i].ifindex != p->srecs[i - 1].ifindex)
            walked++;
    uint32_t last_walked = p->n_srecs ? p->srecs[p->n_srecs - 1].ifindex : 0;
    size_t kept_old = 0;
    if (p->map_cut)
        for (size_t i = 0; i < tm->n_ifs; i++)
            kept_old += tm->ifs[i].ifindex > last_walked;
    size_t total = walked + kept_old, n = total;
    if (n > FS_SNMP_MAX_IFS)
        n = FS_SNMP_MAX_IFS;
    ifs = calloc(n ? n : 1, sizeof(*ifs));
    order = calloc(n ? n : 1, sizeof(*order));
    by_name = calloc(tm->n_ifs ? tm->n_ifs : 1, sizeof(*by_name));
    if (!ifs || !order || !by_name)
        goto out;
    size_t k = 0;
    char buf[FS_SNMP_NAME_MAX];
    for (size_t i = 0; i < p->n_srecs && k < n;) {
        uint32_t idx = p->srecs[i].ifindex;
        struct fs_snmp_ifent *en = &ifs[k++];
        const char *name = NULL, *descr = NULL, *alias = NULL;
        for (; i < p->n_srecs && p->srecs[i].ifindex == idx; i++) {
            const char *s = p->srecs[i].s;
            if (p->srecs[i].col == C_IFNAME)
                name = s;
            else if (p->srecs[i].col == C_IFDESCR)
                descr = s;
            else
                alias = s;
        }
        en->ifindex = idx;
        snprintf(en->ifindex_s, sizeof(en->ifindex_s), "%u", idx);
        snprintf(en->raw, sizeof(en->raw), "%s", name ? name : "");
        if (name && *name)
            snprintf(buf, sizeof(buf), "%s", name);
        else if (descr && *descr)
            snprintf(buf, sizeof(buf), "%s", descr);
        else
            snprintf(buf, sizeof(buf), "if%u", idx);
        /* The core normalizes too ("1/1" -> "Eth1/1"): collisions are judged on its names. */
        fs_ifname_normalize(buf, en->name, sizeof(en->name));
        snprintf(en->alias, sizeof(en->alias), "%s", alias ? alias : "");
    }
    for (size_t i = 0; i < tm->n_ifs && k < n; i++) {
        if (p->map_cut && tm->ifs[i].ifindex > last_walked) {
            ifs[k] = tm->ifs[i];
            /* its name is decided again below */
            if (ifs[k].dup) {
                char *h = strrchr(ifs[k].name, '#');
                if (h)
                    *h = '\0';
                ifs[k].dup = false;
            }
            k++;
        }
    }
    tm->if_limited = total > n || p->map_limited;
    tm->max_ifindex = k ? ifs[k - 1].ifindex : 0;

    make_unique(tm, ifs, k, order);

    /* Old entries by exported name, to tell where a name was before. */
    for (size_t i = 0; i < tm->n_ifs; i++)
        by_name[i] = &tm->ifs[i];
    if (tm->n_ifs)
        qsort(by_name, tm->n_ifs, sizeof(*by_name), cmp_ifent_name_only);
    size_t moved = 0;
    for (size_t i = 0; i < k; i++) {
        struct fs_snmp_ifent *en = &ifs[i];
        const struct fs_snmp_ifent *old = find_if(tm->ifs, tm->n_ifs, en->ifindex);
        struct fs_snmp_ifent key = {.ifindex = 0};
        const struct fs_snmp_ifent *kp = &key;
        snprintf(key.name, sizeof(key.name), "%s", en->name);
        const struct fs_snmp_ifent **hit =
            tm->n_ifs ? bsearch(&kp, by_name, tm->n_ifs, sizeof(*by_name), cmp_ifent_name_only)
                      : NULL;
        bool renamed = old && strcmp(old->name, en->name) != 0;
        bool taken = hit && (*hit)->ifindex != en->ifindex;
        if (old && !renamed) {
            en->disc_known = old->disc_known;
            en->disc_time = old->disc_time;
        }
        if (renamed || taken) {
            moved++;
            tm->resets_disc++;
            e->reset(e->arg, FS_RESET_DISCONTINUITY, en->name);
        }
    }
    tm->renames += moved;
    if (e->note && tm->dup_names > tm->dup_logged) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "%zu interfaces share a name with another ifIndex (e.g. ifIndex %s): exported "
                 "as <name>#<ifIndex>",
                 tm->dup_names, first_dup(ifs, k));
        e->note(e->arg, msg);
        tm->dup_logged = tm->dup_names;
    }
    free(tm->ifs);
    tm->ifs = ifs;
    tm->n_ifs = k;
    ifs = NULL;
    /* A cut walk leaves the map to be walked again next cycle. */
    tm->map_valid = !p->map_cut;
    rc = 0;
out:
    free(ifs);
    free(order);
    free(by_name);
    return rc;
}

static void
parse_descr(struct fs_snmp_tmap *tm, const char *d)
{
    static const struct {
        const char *needle, *os;
    } oses[] = {{"onyx", "onyx"},
                {"mlnx-os", "mlnx-os"},
                {"cumulus", "cumulus"},
                {"sonic", "sonic"},
                {"linux", "linux"}};
    snprintf(tm->os, sizeof(tm->os), "unknown");
    for (size_t i = 0; i < sizeof(oses) / sizeof(oses[0]); i++) {
        if (strcasestr(d, oses[i].needle)) {
            snprintf(tm->os, sizeof(tm->os), "%s", oses[i].os);
            break;
        }
    }
    /* The version is the first token that starts with a digit right after a non-word
     * byte or a 'v' ("SWv3.10.4706", "Onyx 3.9.3124") and contains a dot. */
    snprintf(tm->version, sizeof(tm->version), "unknown");
    for (size_t i = 0; d[i]; i++) {
        if (!isdigit((unsigned char)d[i]))
            continue;
        if (i > 0 && isalnum((unsigned char)d[i - 1]) && d[i - 1] != 'v' && d[i - 1] != 'V')
            continue;
        size_t j = i;
        bool dot = false;
        while (d[j] &&
               (isalnum((unsigned char)d[j]) || d[j] == '.' || d[j] == '-' || d[j] == '_')) {
            dot |= d[j] == '.';
            j++;
        }
        if (dot) {
            size_t len = j - i;
            if (len >= sizeof(tm->version))
                len = sizeof(tm->version) - 1;
            memcpy(tm->version, d + i, len);
            tm->version[len] = '\0';
            break;
        }
        i = j ? j - 1 : j;
    }
}

/* One sample waiting for its batch. */
struct pend {
    uint32_t pdu;
    uint32_t seq;
    uint16_t metric;
    uint8_t kind; /* 0 counter, 1 gauge */
    uint8_t bits;
    int8_t dir;   /* -1 none, 0 rx, 1 tx */
    int8_t tc;    /* -1 none, else tc/priority */
    uint8_t info; /* port_info or device_info labels */
    const struct fs_snmp_ifent *ife;
    double scale;
    uint64_t u;
    double d;
};

struct pendv {
    struct pend *v;
    size_t n, cap;
    bool oom;
};

static void
push(struct pendv *pv, struct pend s)
{
    if (pv->n == pv->cap) {
        size_t ncap = pv->cap ? pv->cap * 2 : 1024;
        struct pend *n = realloc(pv->v, ncap * sizeof(*n));
        if (!n) {
            pv->oom = true;
            return;
        }
        pv->v = n;
        pv->cap = ncap;
    }
    s.seq = (uint32_t)pv->n;
    pv->v[pv->n++] = s;
}

static void
push_counter(struct pendv *pv, uint32_t pdu, enum fs_metric m, const struct fs_snmp_ifent *e,
             int dir, int tc, uint64_t u, unsigned bits, double scale)
{
    push(pv, (struct pend){.pdu = pdu,
                           .metric = (uint16_t)m,
                           .kind = 0,
                           .bits = (uint8_t)bits,
                           .dir = (int8_t)dir,
                           .tc = (int8_t)tc,
                           .ife = e,
                           .scale = scale,
                           .u = u});
}

static void
push_gauge(struct pendv *pv, uint32_t pdu, enum fs_metric m, const struct fs_snmp_ifent *e, int dir,
           int tc, double d)
{
    push(pv, (struct pend){.pdu = pdu,
                           .metric = (uint16_t)m,
                           .kind = 1,
                           .dir = (int8_t)dir,
                           .tc = (int8_t)tc,
                           .ife = e,
                           .d = d});
}

static int
cmp_rec(const void *a, const void *b)
{
    const struct fs_snmp_rec *x = a, *y = b;
    bool xs = x->col >= C_TC_UQDEPTH, ys = y->col >= C_TC_UQDEPTH;
    if (x->ifindex != y->ifindex)
        return x->ifindex < y->ifindex ? -1 : 1;
    if (xs != ys)
        return xs ? 1 : -1;
    if (xs && x->sub != y->sub)
        return x->sub < y->sub ? -1 : 1;
    if (x->col != y->col)
        return x->col < y->col ? -1 : 1;
    /* The later PDU wins for a repeated row: keep arrival order. */
    return x->pdu < y->pdu ? -1 : x->pdu > y->pdu;
}

static int
cmp_pend(const void *a, const void *b)
{
    const struct pend *x = a, *y = b;
    if (x->pdu != y->pdu)
        return x->pdu < y->pdu ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The values of one row (ifIndex, or ifIndex+TC), the last received per column. */
struct row {
    bool has[C_COUNT];
    uint64_t u[C_COUNT];
    uint8_t bits[C_COUNT];
    uint32_t pdu[C_COUNT];
};

static uint32_t
max3(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* The counter of a direction: HC column if present, else its 32-bit twin. */
static bool
pick(const struct row *r, int hc, uint64_t *u, unsigned *bits, uint32_t *pdu)
{
    int c = r->has[hc] ? hc : (r->has[hc + TWIN_OFFSET] ? hc + TWIN_OFFSET : 0);
    if (!c)
        return false;
    *u = r->u[c];
    *bits = r->bits[c];
    *pdu = r->pdu[c];
    return true;
}

/* The interface's line rate in octets/s from ifHighSpeed (Mb/s), else ifSpeed (b/s,
 * which saturates at 2^32-1); 0 if unknown. */
static double
line_rate(const struct row *r)
{
    if (r->has[C_HIGHSPEED] && r->u[C_HIGHSPEED] > 0)
        return (double)r->u[C_HIGHSPEED] * 1e6 / 8;
    if (r->has[C_SPEED] && r->u[C_SPEED] > 0 && r->u[C_SPEED] < 0xffffffffULL)
        return (double)r->u[C_SPEED] / 8;
    return 0;
}

static void
emit_if_row(const struct fs_snmp_tmap *tm, const struct row *r, const struct fs_snmp_ifent *e,
            uint32_t first_pdu, struct pendv *pv)
{
    static const int oct[2] = {C_HC_IN_OCT, C_HC_OUT_OCT};
    static const int pk[2][3] = {{C_HC_IN_UC, C_HC_IN_MC, C_HC_IN_BC},
                                 {C_HC_OUT_UC, C_HC_OUT_MC, C_HC_OUT_BC}};
    static const int disc[2] = {C_IN_DISC, C_OUT_DISC}, err[2] = {C_IN_ERR, C_OUT_ERR};
    uint64_t u;
    unsigned bits;
    uint32_t pdu;
    (void)tm;

    push_gauge(pv, first_pdu, FS_M_PORT_INFO, e, -1, -1, 1.0);
    for (int d = 0; d < 2; d++) {
        if (pick(r, oct[d], &u, &bits, &pdu))
            push_counter(pv, pdu, FS_M_PORT_BYTES, e, d, -1, u, bits, 1.0);
        uint64_t pu[3] = {0};
        unsigned pb[3] = {0};
        uint32_t pp[3] = {0};
        bool all = true;
        for (int k = 0; k < 3; k++)
            all = pick(r, pk[d][k], &pu[k], &pb[k], &pp[k]) && all;
        /* Only the full sum is the catalogue's meaning. Mixed or 32-bit columns are summed
         * modulo 2^32 and reported as a 32-bit counter: the core's single-wrap unwrap is
         * exact for the sum as long as the whole interval's increase is below 2^32. */
        if (all) {
            uint32_t mp = max3(pp[0], pp[1], pp[2]);
            if (pb[0] == 64 && pb[1] == 64 && pb[2] == 64)
                push_counter(pv, mp, FS_M_PORT_PACKETS, e, d, -1, pu[0] + pu[1] + pu[2], 64, 1.0);
            else
                push_counter(pv, mp, FS_M_PORT_PACKETS, e, d, -1,
                             (pu[0] + pu[1] + pu[2]) & 0xffffffffULL, 32, 1.0);
        }
        if (r->has[disc[d]])
            push_counter(pv, r->pdu[disc[d]], FS_M_PORT_DISCARDS, e, d, -1, r->u[disc[d]],
                         r->bits[disc[d]], 1.0);
        if (r->has[err[d]])
            push_counter(pv, r->pdu[err[d]], FS_M_PORT_ERRORS, e, d, -1, r->u[err[d]],
                         r->bits[err[d]], 1.0);
    }
    if (r->has[C_OPER])
        push_gauge(pv, r->pdu[C_OPER], FS_M_PORT_OPER_UP, e, -1, -1, r->u[C_OPER] == 1);
    if (r->has[C_ADMIN])
        push_gauge(pv, r->pdu[C_ADMIN], FS_M_PORT_ADMIN_UP, e, -1, -1, r->u[C_ADMIN] == 1);
    if (r->has[C_HIGHSPEED] && r->u[C_HIGHSPEED] > 0)
        push_gauge(pv, r->pdu[C_HIGHSPEED], FS_M_PORT_SPEED, e, -1, -1,
                   (double)r->u[C_HIGHSPEED] * 1e6);
    else if (r->has[C_SPEED])
        push_gauge(pv, r->pdu[C_SPEED], FS_M_PORT_SPEED, e, -1, -1, (double)r->u[C_SPEED]);
    else if (r->has[C_HIGHSPEED])
        push_gauge(pv, r->pdu[C_HIGHSPEED], FS_M_PORT_SPEED, e, -1, -1, 0.0);
    /* mellanoxQoSPortTxWaitMicroseconds; the port table's "ticks" column is not used. */
    if (r->has[C_PORT_TXWAIT])
        push_counter(pv, r->pdu[C_PORT_TXWAIT], FS_M_PORT_TX_WAIT_SECONDS, e, -1, -1,
                     r->u[C_PORT_TXWAIT], r->bits[C_PORT_TXWAIT], 1e-6);
}

static void
emit_qos_row(const struct fs_snmp_tmap *tm, const struct row *r, const struct fs_snmp_ifent *e,
             uint32_t sub, struct pendv *pv)
{
    if (tm->qos_base < 0 || sub < (uint32_t)tm->qos_base)
        return;
    uint32_t tc = sub - (uint32_t)tm->qos_base;
    if (tc >= FS_SNMP_MAX_TC)
        return;
    if (r->has[C_TC_UQDEPTH]) {
        if (tm->cell_bytes)
            push_gauge(pv, r->pdu[C_TC_UQDEPTH], FS_M_QUEUE_DEPTH, e, -1, (int)tc,
                       (double)r->u[C_TC_UQDEPTH] * tm->cell_bytes);
        else
            push_gauge(pv, r->pdu[C_TC_UQDEPTH], FS_M_QUEUE_DEPTH_CELLS, e, -1, (int)tc,
                       (double)r->u[C_TC_UQDEPTH]);
    }
    if (r->has[C_TC_UNOBUF])
        push_counter(pv, r->pdu[C_TC_UNOBUF], FS_M_QUEUE_NO_BUFFER_DROPPED, e, -1, (int)tc,
                     r->u[C_TC_UNOBUF], r->bits[C_TC_UNOBUF], 1.0);
    if (r->has[C_TC_WRED])
        push_counter(pv, r->pdu[C_TC_WRED], FS_M_QUEUE_WRED_DROPPED, e, -1, (int)tc,
                     r->u[C_TC_WRED], r->bits[C_TC_WRED], 1.0);
    static const int pk[2] = {C_PFC_RXPKTS, C_PFC_TXPKTS}, du[2] = {C_PFC_RXDUR, C_PFC_TXDUR};
    for (int d = 0; d < 2; d++) {
        if (r->has[pk[d]])
            push_counter(pv, r->pdu[pk[d]], FS_M_PFC_PAUSE_FRAMES, e, d, (int)tc, r->u[pk[d]],
                         r->bits[pk[d]], 1.0);
        /* PFC pause duration is in milliseconds (MELLANOX-QOS-MIB). */
        if (r->has[du[d]])
            push_counter(pv, r->pdu[du[d]], FS_M_PFC_PAUSE_SECONDS, e, d, (int)tc, r->u[du[d]],
                         r->bits[du[d]], 1e-3);
    }
}

static void
detect_qos_base(struct fs_snmp_tmap *tm, const struct fs_snmp_poll *p)
{
    if (tm->qos_base_cfg >= 0) {
        tm->qos_base = tm->qos_base_cfg;
        return;
    }
    bool any = false;
    uint32_t min = UINT32_MAX;
    for (size_t i = 0; i < p->n_recs; i++) {
        if (p->recs[i].col >= C_TC_UQDEPTH) {
            any = true;
            if (p->recs[i].sub < min)
                min = p->recs[i].sub;
        }
    }
    /* A row with index 0 proves base 0. Without one, the lowest index present is taken
     * as TC 0, so base 1 is the answer whenever index 1 exists; once base 0 was seen it
     * stays (a TC 0 row that disappears does not shift every TC by one). */
    if (!any)
        return;
    if (min == 0)
        tm->qos_base = 0;
    else if (tm->qos_base < 0 && min == 1)
        tm->qos_base = 1;
}

static const char *const dir_names[2] = {"rx", "tx"};

static void
emit_pend(const struct fs_snmp_tmap *tm, const struct pend *s, const struct fs_snmp_emit *e)
{
    struct fs_label l[3];
    size_t n = 0;
    enum fs_metric m = (enum fs_metric)s->metric;
    if (m == FS_M_DEVICE_INFO) {
        l[0] = (struct fs_label){"model", tm->model};
        l[1] = (struct fs_label){"os", tm->os};
        l[2] = (struct fs_label){"version", tm->version};
        n = 3;
    } else if (s->ife) {
        l[n++] = (struct fs_label){"interface", s->ife->name};
        if (m == FS_M_PORT_INFO) {
            l[n++] = (struct fs_label){"alias", s->ife->alias};
            l[n++] = (struct fs_label){"ifindex", s->ife->ifindex_s};
        }
        if (s->dir >= 0)
            l[n++] = (struct fs_label){"direction", dir_names[s->dir]};
        if (s->tc >= 0)
            l[n++] = (struct fs_label){
                m == FS_M_PFC_PAUSE_FRAMES || m == FS_M_PFC_PAUSE_SECONDS ? "priority" : "tc",
                small_num[s->tc]};
    }
    if (s->kind == 0)
        e->counter(e->arg, m, l, n, s->u, s->bits, s->scale);
    else
        e->gauge(e->arg, m, l, n, s->d);
}

size_t
fs_snmp_poll_finish(struct fs_snmp_tmap *tm, struct fs_snmp_poll *p, const struct fs_snmp_emit *e)
{
    struct pendv pv = {0};
    size_t emitted = 0;
    bool uptime_back = p->have_uptime && tm->uptime_known && p->uptime < tm->uptime;
    /* The agent restarted, the device did not: its own uptime went on. */
    bool agent_only = uptime_back && p->have_hrup && tm->hrup_known && p->hrup >= tm->hrup;

    /* Reset evidence comes before the first batch (sink.h). */
    if (uptime_back) {
        if (agent_only) {
            tm->agent_restarts++;
            if (e->agent_restart)
                e->agent_restart(e->arg);
            e->reset(e->arg, FS_RESET_DISCONTINUITY, NULL);
        } else {
            tm->resets_reboot++;
            e->reset(e->arg, FS_RESET_REBOOT, NULL);
        }
        /* ifCounterDiscontinuityTime restarts with sysUpTime: not a second reset. */
        for (size_t i = 0; i < tm->n_ifs; i++)
            tm->ifs[i].disc_known = false;
    }
    if (p->did_map && rebuild_map(tm, p, e) != 0)
        goto out;
    if (p->have_objid) {
        const char *model = fs_snmp_model_from_objid(p->objid, p->objid_len);
        snprintf(tm->model, sizeof(tm->model), "%s", model ? model : "unknown");
        tm->cell_bytes = fs_snmp_cell_bytes(model);
    }
    if (p->have_descr)
        parse_descr(tm, p->descr);
    detect_qos_base(tm, p);
    /* A QoS walk cut short proves nothing about the MIB being there. */
    if (p->qos_walked && !(p->cut && p->phase == FS_SNMP_PH_QOS && p->qos_rows == 0)) {
        tm->qos_absent = p->qos_rows == 0;
        /* A switch without the QoS MIB is asked again only every 30 cycles. */
        tm->qos_skip = tm->qos_absent ? 30 : 0;
    } else if (tm->qos_skip > 0) {
        tm->qos_skip--;
    }

    if (p->n_recs)
        qsort(p->recs, p->n_recs, sizeof(*p->recs), cmp_rec);
    if (p->n_suspect)
        qsort(p->suspect, p->n_suspect, sizeof(*p->suspect), cmp_u32);
    for (size_t i = 0; i < p->n_recs; i++) {
        const struct fs_snmp_rec *r = &p->recs[i];
        if (r->col != C_DISCTIME)
            continue;
        struct fs_snmp_ifent *ife = (struct fs_snmp_ifent *)find_if(tm->ifs, tm->n_ifs, r->ifindex);
        if (!ife)
            continue;
        if (ife->disc_known && ife->disc_time != (uint32_t)r->u) {
            tm->resets_disc++;
            e->reset(e->arg, FS_RESET_DISCONTINUITY, ife->name);
        }
        ife->disc_known = true;
        ife->disc_time = (uint32_t)r->u;
    }

    /* Fallback columns: remember which HC columns are missing so the next cycle walks
     * their 32-bit twins with the data instead of in a second round. */
    for (int i = 0; i < N_HC; i++) {
        size_t hc = count_col(p, C_HC_IN_OCT + i);
        size_t lo = count_col(p, C_HC_IN_OCT + i + TWIN_OFFSET);
        if (lo > 0 && hc < tm->n_ifs)
            tm->fallback_mask |= 1u << i;
        else if (hc >= tm->n_ifs)
            tm->fallback_mask &= ~(1u << i);
    }

    if (p->have_uptime || p->have_descr || p->have_objid) {
        uint32_t pdu = p->have_uptime ? p->uptime_pdu : 0;
        push_gauge(&pv, pdu, FS_M_DEVICE_INFO, NULL, -1, -1, 1.0);
        if (p->have_uptime)
            push_gauge(&pv, pdu, FS_M_DEVICE_UPTIME, NULL, -1, -1, p->uptime / 100.0);
    }

    struct row row;
    for (size_t i = 0; i < p->n_recs;) {
        const struct fs_snmp_rec *r0 = &p->recs[i];
        bool qos = r0->col >= C_TC_UQDEPTH;
        uint32_t first_pdu = UINT32_MAX;
        memset(row.has, 0, sizeof(row.has));
        size_t j = i;
        for (; j < p->n_recs; j++) {
            const struct fs_snmp_rec *r = &p->recs[j];
            if (r->ifindex != r0->ifindex || (r->col >= C_TC_UQDEPTH) != qos ||
                (qos && r->sub != r0->sub))
                break;
            row.has[r->col] = true;
            row.u[r->col] = r->u;
            row.bits[r->col] = r->bits;
            row.pdu[r->col] = r->pdu;
            if (r->pdu < first_pdu)
                first_pdu = r->pdu;
        }
        const struct fs_snmp_ifent *ife = find_if(tm->ifs, tm->n_ifs, r0->ifindex);
        /* Rows of an ifIndex whose name changed count only under a map walked since. */
        if (ife &&
            (p->did_map ? p->map_cut && is_suspect(p, r0->ifindex) : is_suspect(p, r0->ifindex)))
            ife = NULL;
        if (ife) {
            if (qos) {
                emit_qos_row(tm, &row, ife, r0->sub, &pv);
            } else {
                double rate = line_rate(&row);
                if (rate > 0 && e->max_rate)
                    e->max_rate(e->arg, ife->name, rate);
                emit_if_row(tm, &row, ife, first_pdu, &pv);
            }
        }
        i = j;
    }
    if (pv.oom)
        goto out;

    if (pv.n)
        qsort(pv.v, pv.n, sizeof(*pv.v), cmp_pend);
    for (size_t i = 0; i < pv.n;) {
        uint32_t pdu = pv.v[i].pdu;
        e->begin(e->arg, pdu < p->n_pdus ? p->pdu_ts[pdu] : 0);
        for (; i < pv.n && pv.v[i].pdu == pdu; i++) {
            emit_pend(tm, &pv.v[i], e);
            emitted++;
        }
        e->end(e->arg);
    }
out:
    if (p->have_uptime) {
        tm->uptime_known = true;
        tm->uptime = p->uptime;
    }
    /* Judged only against the previous poll's value: unknown if it was missing. */
    tm->hrup_known = p->have_hrup;
    tm->hrup = p->hrup;
    if (p->truncated)
        tm->truncated_cycles++;
    if (p->have_iftlc) {
        tm->iftlc_known = true;
        tm->iftlc = p->iftlc;
    }
    tm->anomalies += p->anomalies;
    tm->last_varbinds = p->varbinds;
    tm->last_pdus = p->n_pdus;
    free(pv.v);
    return emitted;
}

size_t
fs_snmp_tmap_describe(const struct fs_snmp_tmap *tm, char *buf, size_t len)
{
    if (!buf || len == 0)
        return 0;
    int n = snprintf(
        buf, len,
        "\"qos_index_base\":%d,\"qos_index_base_config\":\"%s\",\"qos_mib\":%s,"
        "\"interfaces\":%zu,\"model\":\"%s\",\"queue_depth_unit\":\"%s\","
        "\"hc_fallback_mask\":%u,\"anomalies\":%llu,\"last_varbinds\":%llu,"
        "\"last_pdus\":%u,\"reboots\":%llu,\"agent_restarts\":%llu,"
        "\"duplicate_names\":%zu,\"renamed_interfaces\":%llu,"
        "\"interface_limit_reached\":%s,\"truncated_cycles\":%llu",
        tm->qos_base, tm->qos_base_cfg < 0 ? "auto" : (tm->qos_base_cfg ? "1" : "0"),
        tm->qos_absent ? "false" : "true", tm->n_ifs, tm->model, tm->cell_bytes ? "bytes" : "cells",
        tm->fallback_mask, (unsigned long long)tm->anomalies, (unsigned long long)tm->last_varbinds,
        tm->last_pdus, (unsigned long long)tm->resets_reboot,
        (unsigned long long)tm->agent_restarts, tm->dup_names, (unsigned long long)tm->renames,
        tm->if_limited ? "true" : "false", (unsigned long long)tm->truncated_cycles);
    if (n < 0) {
        buf[0] = '\0';
        return 0;
    }
    return (size_t)n < len ? (size_t)n : len - 1;
}
