/* Unit tests of the SNMP varbind -> sample mapping (drivers/snmp/map.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "map.h"

/* ---- a recording emitter ---- */

struct rec_sample {
    enum fs_metric m;
    char labels[256]; /* "name=value,..." in the order given */
    int counter;
    uint64_t u;
    unsigned bits;
    double scale;
    double d;
    int64_t ts;
};

struct recorder {
    struct rec_sample s[4096];
    size_t n;
    int64_t ts;
    int in_batch;
    int batches;
    int resets[FS_RESET_KIND_COUNT];
    char reset_iface[64];
    char reset_ifaces[512]; /* every interface reset, "a;b;" */
    int agent_restarts;
    int rates;
    char rate_iface[64];
    double rate;
    int notes;
};

static void
r_agent_restart(void *arg)
{
    struct recorder *r = arg;
    assert_false(r->in_batch);
    r->agent_restarts++;
}

static void
r_max_rate(void *arg, const char *iface, double v)
{
    struct recorder *r = arg;
    assert_false(r->in_batch);
    r->rates++;
    snprintf(r->rate_iface, sizeof(r->rate_iface), "%s", iface);
    r->rate = v;
}

static void
r_note(void *arg, const char *msg)
{
    struct recorder *r = arg;
    assert_non_null(msg);
    r->notes++;
}

static void
r_reset(void *arg, enum fs_reset_kind k, const char *iface)
{
    struct recorder *r = arg;
    assert_false(r->in_batch);
    r->resets[k]++;
    snprintf(r->reset_iface, sizeof(r->reset_iface), "%s", iface ? iface : "");
    size_t o = strlen(r->reset_ifaces);
    snprintf(r->reset_ifaces + o, sizeof(r->reset_ifaces) - o, "%s;", iface ? iface : "*");
}

static void
r_begin(void *arg, int64_t ts)
{
    struct recorder *r = arg;
    assert_false(r->in_batch);
    r->in_batch = 1;
    r->ts = ts;
    r->batches++;
}

static void
put_labels(char *out, size_t cap, const struct fs_label *l, size_t n)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s=%s", i ? "," : "", l[i].name, l[i].value);
}

static void
r_counter(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
          unsigned bits, double scale)
{
    struct recorder *r = arg;
    assert_true(r->in_batch);
    assert_true(r->n < 4096);
    struct rec_sample *s = &r->s[r->n++];
    s->m = m;
    put_labels(s->labels, sizeof(s->labels), l, n);
    s->counter = 1;
    s->u = raw;
    s->bits = bits;
    s->scale = scale;
    s->ts = r->ts;
}

static void
r_gauge(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    struct recorder *r = arg;
    assert_true(r->in_batch);
    assert_true(r->n < 4096);
    struct rec_sample *s = &r->s[r->n++];
    s->m = m;
    put_labels(s->labels, sizeof(s->labels), l, n);
    s->counter = 0;
    s->d = v;
    s->ts = r->ts;
}

static void
r_end(void *arg)
{
    struct recorder *r = arg;
    assert_true(r->in_batch);
    r->in_batch = 0;
}

static const struct rec_sample *
find(const struct recorder *r, enum fs_metric m, const char *labels)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->s[i].m == m && strcmp(r->s[i].labels, labels) == 0)
            return &r->s[i];
    return NULL;
}

/* ---- varbind builders ---- */

static unsigned long oidbuf[64][16];
static int oidn;

static struct fs_snmp_vb
vb_u(const unsigned long *pfx, size_t plen, unsigned long i1, long i2, enum fs_snmp_vt t,
     uint64_t u)
{
    unsigned long *o = oidbuf[oidn++ % 64];
    memcpy(o, pfx, plen * sizeof(*o));
    size_t n = plen;
    o[n++] = i1;
    if (i2 >= 0)
        o[n++] = (unsigned long)i2;
    struct fs_snmp_vb vb = {.oid = o, .oid_len = n, .type = t, .u = u, .i = (int64_t)u};
    return vb;
}

static struct fs_snmp_vb
vb_s(const unsigned long *pfx, size_t plen, unsigned long i1, const char *s)
{
    struct fs_snmp_vb vb = vb_u(pfx, plen, i1, -1, FS_VT_OCTETS, 0);
    vb.str = (const unsigned char *)s;
    vb.str_len = strlen(s);
    return vb;
}

#define IFX(c) ((const unsigned long[]){1, 3, 6, 1, 2, 1, 31, 1, 1, 1, c}), 11
#define IFT(c) ((const unsigned long[]){1, 3, 6, 1, 2, 1, 2, 2, 1, c}), 10
#define QOS(t, c) ((const unsigned long[]){1, 3, 6, 1, 4, 1, 33049, 15, 1, t, 1, c}), 12

static const unsigned long o_uptime[] = {1, 3, 6, 1, 2, 1, 1, 3, 0};
static const unsigned long o_descr[] = {1, 3, 6, 1, 2, 1, 1, 1, 0};
static const unsigned long o_objid[] = {1, 3, 6, 1, 2, 1, 1, 2, 0};
static const unsigned long v_sn2700[] = {1, 3, 6, 1, 4, 1, 33049, 1, 1, 1, 2700};

static void
add(struct fs_snmp_poll *p, struct fs_snmp_tmap *tm, struct fs_snmp_vb vb)
{
    assert_true(fs_snmp_poll_add(p, tm, &vb) >= 0);
}

static void
scalars(struct fs_snmp_poll *p, struct fs_snmp_tmap *tm, uint32_t uptime, int64_t ts)
{
    struct fs_snmp_req_oid req[8];
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_SCALARS, tm, p, req, 8), 5);
    assert_int_equal(fs_snmp_poll_pdu(p, ts), 0);
    struct fs_snmp_vb u = {.oid = o_uptime, .oid_len = 9, .type = FS_VT_TIMETICKS, .u = uptime};
    struct fs_snmp_vb d = {.oid = o_descr, .oid_len = 9, .type = FS_VT_OCTETS};
    const char *descr = "NVIDIA Onyx SN2700, SWv3.10.4706\x01";
    d.str = (const unsigned char *)descr;
    d.str_len = strlen(descr);
    struct fs_snmp_vb o = {
        .oid = o_objid, .oid_len = 9, .type = FS_VT_OID, .oidv = v_sn2700, .oidv_len = 11};
    add(p, tm, u);
    add(p, tm, d);
    add(p, tm, o);
}

static void
ifmap(struct fs_snmp_poll *p, struct fs_snmp_tmap *tm, int64_t ts)
{
    struct fs_snmp_req_oid req[8];
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_IFMAP, tm, p, req, 8), 3);
    assert_int_equal(fs_snmp_poll_pdu(p, ts), 0);
    add(p, tm, vb_s(IFX(1), 1, "Eth1/1"));
    add(p, tm, vb_s(IFX(1), 2, "Eth1/2"));
    add(p, tm, vb_s(IFX(18), 1, "uplink \"spine1\"\n"));
    add(p, tm, vb_s(IFT(2), 3, "mgmt0")); /* no ifName: named by ifDescr */
}

static void
data(struct fs_snmp_poll *p, struct fs_snmp_tmap *tm, int64_t ts, uint64_t base)
{
    assert_int_equal(fs_snmp_poll_pdu(p, ts), 0);
    for (unsigned long i = 1; i <= 2; i++) {
        add(p, tm, vb_u(IFX(6), i, -1, FS_VT_COUNTER64, base + 1000 * i));
        add(p, tm, vb_u(IFX(10), i, -1, FS_VT_COUNTER64, base + 2000 * i));
        add(p, tm, vb_u(IFX(7), i, -1, FS_VT_COUNTER64, base + 10));
        add(p, tm, vb_u(IFX(8), i, -1, FS_VT_COUNTER64, base + 20));
        add(p, tm, vb_u(IFX(9), i, -1, FS_VT_COUNTER64, base + 30));
        add(p, tm, vb_u(IFX(11), i, -1, FS_VT_COUNTER64, 5));
        /* no out-multicast for Eth1/1: its tx packets must not be exported */
        if (i == 2)
            add(p, tm, vb_u(IFX(12), i, -1, FS_VT_COUNTER64, 6));
        add(p, tm, vb_u(IFX(13), i, -1, FS_VT_COUNTER64, 7));
        add(p, tm, vb_u(IFT(8), i, -1, FS_VT_INTEGER, i == 1 ? 1 : 2));
        add(p, tm, vb_u(IFT(7), i, -1, FS_VT_INTEGER, 1));
        add(p, tm, vb_u(IFX(15), i, -1, FS_VT_GAUGE32, 100000));
        add(p, tm, vb_u(IFT(13), i, -1, FS_VT_COUNTER32, 4000000000u));
        add(p, tm, vb_u(IFX(19), i, -1, FS_VT_TIMETICKS, 0));
    }
    /* mgmt0 has only 32-bit octets */
    add(p, tm, vb_u(IFT(10), 3, -1, FS_VT_COUNTER32, 123));
}

static void
qos(struct fs_snmp_poll *p, struct fs_snmp_tmap *tm, int64_t ts, int base)
{
    struct fs_snmp_req_oid req[16];
    assert_true(fs_snmp_phase_oids(FS_SNMP_PH_QOS, tm, p, req, 16) > 0);
    assert_int_equal(fs_snmp_poll_pdu(p, ts), 0);
    for (int tc = 0; tc < 8; tc++) {
        add(p, tm, vb_u(QOS(4, 6), 1, tc + base, FS_VT_COUNTER64, tc == 3 ? 5000 : 0));
        add(p, tm, vb_u(QOS(4, 9), 1, tc + base, FS_VT_COUNTER64, tc == 3 ? 77 : 0));
        add(p, tm, vb_u(QOS(2, 4), 1, tc + base, FS_VT_COUNTER64, 1500));
        add(p, tm, vb_u(QOS(2, 5), 1, tc + base, FS_VT_COUNTER64, 9));
    }
    add(p, tm, vb_u(QOS(5, 5), 1, -1, FS_VT_COUNTER64, 2500000));
}

static struct fs_snmp_emit
emitter(struct recorder *r)
{
    struct fs_snmp_emit e = {.arg = r,
                             .reset = r_reset,
                             .begin = r_begin,
                             .counter = r_counter,
                             .gauge = r_gauge,
                             .end = r_end,
                             .agent_restart = r_agent_restart,
                             .max_rate = r_max_rate,
                             .note = r_note};
    return e;
}

static void
test_full_poll(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    fs_snmp_tmap_init(&tm, -1);
    fs_snmp_poll_reset(&p);
    scalars(&p, &tm, 1000, 100);
    ifmap(&p, &tm, 200);
    data(&p, &tm, 300, 0);
    qos(&p, &tm, 400, 1);
    struct fs_snmp_emit e = emitter(r);
    size_t n = fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(n, r->n);
    assert_int_equal(r->batches, 3); /* scalars, data, qos: one batch per PDU */

    const struct rec_sample *s =
        find(r, FS_M_DEVICE_INFO, "model=SN2700,os=onyx,version=3.10.4706");
    assert_non_null(s);
    assert_int_equal(s->ts, 100);
    s = find(r, FS_M_DEVICE_UPTIME, "");
    assert_non_null(s);
    assert_true(s->d == 10.0);

    s = find(r, FS_M_PORT_BYTES, "interface=Eth1/2,direction=rx");
    assert_non_null(s);
    assert_int_equal(s->u, 2000);
    assert_int_equal(s->bits, 64);
    assert_int_equal(s->ts, 300);
    s = find(r, FS_M_PORT_BYTES, "interface=mgmt0,direction=rx");
    assert_non_null(s);
    assert_int_equal(s->u, 123);
    assert_int_equal(s->bits, 32);

    s = find(r, FS_M_PORT_PACKETS, "interface=Eth1/1,direction=rx");
    assert_non_null(s);
    assert_int_equal(s->u, 60);
    assert_null(find(r, FS_M_PORT_PACKETS, "interface=Eth1/1,direction=tx"));
    s = find(r, FS_M_PORT_PACKETS, "interface=Eth1/2,direction=tx");
    assert_non_null(s);
    assert_int_equal(s->u, 18);

    s = find(r, FS_M_PORT_DISCARDS, "interface=Eth1/1,direction=rx");
    assert_non_null(s);
    assert_int_equal(s->bits, 32);
    assert_non_null(find(r, FS_M_PORT_OPER_UP, "interface=Eth1/1"));
    assert_true(find(r, FS_M_PORT_OPER_UP, "interface=Eth1/1")->d == 1.0);
    assert_true(find(r, FS_M_PORT_OPER_UP, "interface=Eth1/2")->d == 0.0);
    assert_true(find(r, FS_M_PORT_SPEED, "interface=Eth1/1")->d == 100e9);
    /* the alias is cleaned of control bytes */
    assert_non_null(find(r, FS_M_PORT_INFO, "interface=Eth1/1,alias=uplink \"spine1\"?,ifindex=1"));

    /* QoS rows 1..8 are TCs 0..7 (auto base 1); depth in cells as no cell size is known */
    assert_int_equal(tm.qos_base, 1);
    s = find(r, FS_M_QUEUE_DEPTH_CELLS, "interface=Eth1/1,tc=3");
    assert_non_null(s);
    assert_true(s->d == 5000);
    assert_null(find(r, FS_M_QUEUE_DEPTH, "interface=Eth1/1,tc=3"));
    s = find(r, FS_M_QUEUE_WRED_DROPPED, "interface=Eth1/1,tc=3");
    assert_non_null(s);
    assert_int_equal(s->u, 77);
    s = find(r, FS_M_PFC_PAUSE_SECONDS, "interface=Eth1/1,direction=rx,priority=7");
    assert_non_null(s);
    assert_true(s->scale == 1e-3);
    assert_non_null(find(r, FS_M_PFC_PAUSE_FRAMES, "interface=Eth1/1,direction=tx,priority=0"));
    s = find(r, FS_M_PORT_TX_WAIT_SECONDS, "interface=Eth1/1");
    assert_non_null(s);
    assert_true(s->scale == 1e-6);

    /* The mgmt0 octets were 32-bit only: the next cycle walks the twin with the data. */
    assert_true(tm.fallback_mask & 1u);
    char desc[512];
    assert_true(fs_snmp_tmap_describe(&tm, desc, sizeof(desc)) > 0);
    assert_non_null(strstr(desc, "\"qos_index_base\":1"));

    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static void
test_reboot_and_discontinuity(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    struct fs_snmp_req_oid req[8];
    fs_snmp_tmap_init(&tm, 0);

    fs_snmp_poll_reset(&p);
    scalars(&p, &tm, 5000, 1);
    ifmap(&p, &tm, 2);
    data(&p, &tm, 3, 100);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(r->resets[FS_RESET_REBOOT], 0);

    /* second poll: map cached, a discontinuity on Eth1/2 */
    memset(r, 0, sizeof(*r));
    fs_snmp_poll_reset(&p);
    scalars(&p, &tm, 6000, 10);
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_IFMAP, &tm, &p, req, 8), 0);
    assert_int_equal(fs_snmp_poll_pdu(&p, 11), 0);
    add(&p, &tm, vb_u(IFX(19), 2, -1, FS_VT_TIMETICKS, 5500));
    add(&p, &tm, vb_u(IFX(6), 2, -1, FS_VT_COUNTER64, 5));
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(r->resets[FS_RESET_DISCONTINUITY], 1);
    assert_string_equal(r->reset_iface, "Eth1/2");

    /* third poll: sysUpTime went backwards -> reboot, and the map is walked again */
    memset(r, 0, sizeof(*r));
    fs_snmp_poll_reset(&p);
    scalars(&p, &tm, 300, 20);
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_IFMAP, &tm, &p, req, 8), 3);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(r->resets[FS_RESET_REBOOT], 1);
    assert_int_equal(r->resets[FS_RESET_DISCONTINUITY], 0);

    /* an unknown ifIndex in the data asks for a map refresh */
    fs_snmp_poll_reset(&p);
    scalars(&p, &tm, 400, 30);
    assert_int_equal(fs_snmp_poll_pdu(&p, 31), 0);
    add(&p, &tm, vb_u(IFX(6), 99, -1, FS_VT_COUNTER64, 5));
    assert_true(p.unknown_index);
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_IFMAP, &tm, &p, req, 8), 3);

    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static void
test_hostile_values(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    fs_snmp_tmap_init(&tm, -1);
    fs_snmp_poll_reset(&p);
    ifmap(&p, &tm, 1);
    assert_int_equal(fs_snmp_poll_pdu(&p, 2), 0);
    /* wrong types in counter, enum and gauge columns */
    struct fs_snmp_vb v = vb_u(IFX(6), 1, -1, FS_VT_OCTETS, 0);
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 0);
    v = vb_u(IFT(8), 1, -1, FS_VT_INTEGER, 0);
    v.i = -5;
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 0);
    v = vb_u(IFX(15), 1, -1, FS_VT_INTEGER, 0);
    v.i = -1;
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 0);
    v = vb_u(IFT(13), 1, -1, FS_VT_COUNTER32, 1ULL << 40); /* not a 32-bit value */
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 0);
    assert_int_equal(p.anomalies, 4);
    /* exceptions are not anomalies */
    v = vb_u(IFX(6), 1, -1, FS_VT_NOSUCHINSTANCE, 0);
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 0);
    assert_int_equal(p.anomalies, 4);
    /* ifIndex 0 and out-of-range indexes are not rows; nor are longer OIDs */
    v = vb_u(IFX(6), 0, -1, FS_VT_COUNTER64, 1);
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 0);
    v = vb_u(IFX(6), 0xffffffffUL, -1, FS_VT_COUNTER64, 1);
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 0);
    v = vb_u(IFX(6), 1, 7, FS_VT_COUNTER64, 1);
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 0);
    unsigned long huge[300];
    for (int i = 0; i < 300; i++)
        huge[i] = 1;
    v.oid = huge;
    v.oid_len = 300;
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 0);
    /* TC index 40 with base 0 is beyond the exported range: dropped quietly */
    v = vb_u(QOS(4, 9), 1, 0, FS_VT_COUNTER64, 1);
    add(&p, &tm, v);
    v = vb_u(QOS(4, 9), 1, 40, FS_VT_COUNTER64, 1);
    add(&p, &tm, v);
    /* the same row twice: the later value wins */
    add(&p, &tm, vb_u(IFX(10), 1, -1, FS_VT_COUNTER64, 1));
    add(&p, &tm, vb_u(IFX(10), 1, -1, FS_VT_COUNTER64, 2));
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(tm.qos_base, 0);
    assert_non_null(find(r, FS_M_QUEUE_WRED_DROPPED, "interface=Eth1/1,tc=0"));
    assert_int_equal(find(r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=tx")->u, 2);
    for (size_t i = 0; i < r->n; i++)
        assert_null(strstr(r->s[i].labels, "tc=40"));
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static void
test_mixed_width_packets_and_config_base(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    fs_snmp_tmap_init(&tm, 1); /* configured base 1: index 0 rows are not TCs */
    fs_snmp_poll_reset(&p);
    ifmap(&p, &tm, 1);
    assert_int_equal(fs_snmp_poll_pdu(&p, 2), 0);
    add(&p, &tm, vb_u(IFX(7), 1, -1, FS_VT_COUNTER64, 0x1fffffffeULL));
    add(&p, &tm, vb_u(IFX(2), 1, -1, FS_VT_COUNTER32, 3)); /* 32-bit multicast */
    add(&p, &tm, vb_u(IFX(9), 1, -1, FS_VT_COUNTER64, 1));
    add(&p, &tm, vb_u(QOS(4, 9), 1, 0, FS_VT_COUNTER64, 1));
    add(&p, &tm, vb_u(QOS(4, 9), 1, 1, FS_VT_COUNTER64, 1));
    fs_snmp_poll_finish(&tm, &p, &e);
    const struct rec_sample *s = find(r, FS_M_PORT_PACKETS, "interface=Eth1/1,direction=rx");
    assert_non_null(s);
    assert_int_equal(s->bits, 32);
    assert_int_equal(s->u, (0x1fffffffeULL + 3 + 1) & 0xffffffffULL);
    assert_int_equal(tm.qos_base, 1);
    assert_non_null(find(r, FS_M_QUEUE_WRED_DROPPED, "interface=Eth1/1,tc=0"));
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static const unsigned long o_hrup[] = {1, 3, 6, 1, 2, 1, 25, 1, 1, 0};

/* A poll of the scalars only, with hrSystemUptime when hrup >= 0. */
static void
scalar_poll(struct fs_snmp_tmap *tm, struct fs_snmp_poll *p, const struct fs_snmp_emit *e,
            uint32_t uptime, long long hrup)
{
    fs_snmp_poll_reset(p);
    scalars(p, tm, uptime, 1);
    if (hrup >= 0) {
        struct fs_snmp_vb h = {
            .oid = o_hrup, .oid_len = 10, .type = FS_VT_TIMETICKS, .u = (uint64_t)hrup};
        add(p, tm, h);
    }
    fs_snmp_poll_finish(tm, p, e);
}

static void
test_agent_restart_is_not_a_reboot(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    fs_snmp_tmap_init(&tm, -1);

    scalar_poll(&tm, &p, &e, 5000, 900000);
    /* sysUpTime back, hrSystemUptime on: the agent restarted, not the device */
    scalar_poll(&tm, &p, &e, 100, 900600);
    assert_int_equal(r->agent_restarts, 1);
    assert_int_equal(r->resets[FS_RESET_REBOOT], 0);
    assert_int_equal(r->resets[FS_RESET_DISCONTINUITY], 1);
    assert_string_equal(r->reset_ifaces, "*;"); /* the whole target, not one interface */
    assert_int_equal(tm.agent_restarts, 1);

    /* both went back: a reboot of the device */
    memset(r, 0, sizeof(*r));
    scalar_poll(&tm, &p, &e, 50, 40);
    assert_int_equal(r->agent_restarts, 0);
    assert_int_equal(r->resets[FS_RESET_REBOOT], 1);
    assert_int_equal(r->resets[FS_RESET_DISCONTINUITY], 0);

    /* no hrSystemUptime now: a sysUpTime going back cannot be told apart, a reboot */
    memset(r, 0, sizeof(*r));
    scalar_poll(&tm, &p, &e, 20, -1);
    assert_int_equal(r->resets[FS_RESET_REBOOT], 1);
    assert_int_equal(r->agent_restarts, 0);
    /* hrSystemUptime back again, but the previous poll had none: still a reboot */
    memset(r, 0, sizeof(*r));
    scalar_poll(&tm, &p, &e, 10, 1000);
    assert_int_equal(r->resets[FS_RESET_REBOOT], 1);
    /* sysUpTime going on, hrSystemUptime alone going back (its own wrap): nothing */
    memset(r, 0, sizeof(*r));
    scalar_poll(&tm, &p, &e, 20, 500);
    assert_int_equal(r->resets[FS_RESET_REBOOT] + r->resets[FS_RESET_DISCONTINUITY], 0);
    assert_int_equal(r->agent_restarts, 0);

    char desc[1024];
    fs_snmp_tmap_describe(&tm, desc, sizeof(desc));
    assert_non_null(strstr(desc, "\"agent_restarts\":1"));
    assert_non_null(strstr(desc, "\"reboots\":3"));
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

/* One IFMAP walk of (ifIndex, ifName) pairs. */
static void
map_walk(struct fs_snmp_tmap *tm, struct fs_snmp_poll *p, const uint32_t *idx,
         const char *const *names, size_t n)
{
    struct fs_snmp_req_oid req[8];
    if (!p->did_map)
        tm->map_valid = false; /* as when ifTableLastChange moved */
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_IFMAP, tm, p, req, 8), 3);
    assert_int_equal(fs_snmp_poll_pdu(p, 5), 0);
    for (size_t i = 0; i < n; i++)
        add(p, tm, vb_s(IFX(1), idx[i], names[i]));
}

static const char *
name_of(const struct fs_snmp_tmap *tm, uint32_t ifindex)
{
    for (size_t i = 0; i < tm->n_ifs; i++)
        if (tm->ifs[i].ifindex == ifindex)
            return tm->ifs[i].name;
    return NULL;
}

static void
test_duplicate_names_get_unique_series(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    char long1[100], long2[100];
    memset(long1, 'x', 80);
    long1[80] = '\0';
    memcpy(long2, long1, sizeof(long1));
    long2[70] = 'y'; /* differs only past the 63 bytes kept */
    fs_snmp_tmap_init(&tm, -1);

    const uint32_t idx[] = {1, 105, 7, 8, 20, 21};
    const char *names[] = {"1/1", "Eth1/1", "Eth1/5", "Eth1/5", long1, long2};
    fs_snmp_poll_reset(&p);
    map_walk(&tm, &p, idx, names, 6);
    assert_int_equal(fs_snmp_poll_pdu(&p, 6), 0);
    add(&p, &tm, vb_u(IFX(6), 1, -1, FS_VT_COUNTER64, 111));
    add(&p, &tm, vb_u(IFX(6), 105, -1, FS_VT_COUNTER64, 222));
    fs_snmp_poll_finish(&tm, &p, &e);

    assert_string_equal(name_of(&tm, 1), "Eth1/1");
    assert_string_equal(name_of(&tm, 105), "Eth1/1#105");
    assert_string_equal(name_of(&tm, 7), "Eth1/5");
    assert_string_equal(name_of(&tm, 8), "Eth1/5#8");
    assert_int_equal(strlen(name_of(&tm, 20)), FS_SNMP_NAME_MAX - 1);
    assert_int_equal(strlen(name_of(&tm, 21)), FS_SNMP_NAME_MAX - 1);
    assert_non_null(strstr(name_of(&tm, 21), "#21"));
    assert_int_equal(tm.dup_names, 3);
    assert_int_equal(r->notes, 1);
    assert_int_equal(find(r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=rx")->u, 111);
    assert_int_equal(find(r, FS_M_PORT_BYTES, "interface=Eth1/1#105,direction=rx")->u, 222);
    assert_int_equal(r->resets[FS_RESET_DISCONTINUITY], 0); /* the first map moves nothing */
    char desc[1024];
    fs_snmp_tmap_describe(&tm, desc, sizeof(desc));
    assert_non_null(strstr(desc, "\"duplicate_names\":3"));

    /* The same map again: the same names, no reset, no second log line. */
    memset(r, 0, sizeof(*r));
    fs_snmp_poll_reset(&p);
    map_walk(&tm, &p, idx, names, 6);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_string_equal(name_of(&tm, 105), "Eth1/1#105");
    assert_int_equal(r->resets[FS_RESET_DISCONTINUITY], 0);
    assert_int_equal(r->notes, 0);

    /* ifIndex 1 goes, 2 comes with the same name: the plain name moved to another
     * ifIndex (a discontinuity for it); 105 keeps its suffix. */
    memset(r, 0, sizeof(*r));
    const uint32_t idx2[] = {2, 105};
    const char *names2[] = {"Ethernet1/1", "Eth1/1"};
    fs_snmp_poll_reset(&p);
    map_walk(&tm, &p, idx2, names2, 2);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_string_equal(name_of(&tm, 2), "Eth1/1");
    assert_string_equal(name_of(&tm, 105), "Eth1/1#105");
    assert_int_equal(r->resets[FS_RESET_DISCONTINUITY], 1);
    assert_string_equal(r->reset_ifaces, "Eth1/1;");

    /* A real port named like a suffixed one still gets a series of its own. */
    const uint32_t idx3[] = {2, 105, 300};
    const char *names3[] = {"Eth1/1", "Eth1/1", "Eth1/1#105"};
    fs_snmp_poll_reset(&p);
    map_walk(&tm, &p, idx3, names3, 3);
    fs_snmp_poll_finish(&tm, &p, &e);
    for (size_t i = 0; i < tm.n_ifs; i++)
        for (size_t j = i + 1; j < tm.n_ifs; j++)
            assert_string_not_equal(tm.ifs[i].name, tm.ifs[j].name);
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static void
test_reassigned_ifindex_is_not_the_old_port(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    struct fs_snmp_req_oid req[40];
    fs_snmp_tmap_init(&tm, -1);
    const uint32_t idx[] = {1, 2};
    const char *names[] = {"Eth1/1", "Eth1/2"};
    fs_snmp_poll_reset(&p);
    map_walk(&tm, &p, idx, names, 2);
    fs_snmp_poll_finish(&tm, &p, &e);

    /* Next cycle: no map walk; the data walk carries ifName, and ifIndex 2 is now Eth1/9. */
    memset(r, 0, sizeof(*r));
    fs_snmp_poll_reset(&p);
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_IFMAP, &tm, &p, req, 40), 0);
    size_t n = fs_snmp_phase_oids(FS_SNMP_PH_IFDATA, &tm, &p, req, 40);
    bool has_ifname = false;
    for (size_t i = 0; i < n; i++)
        has_ifname |= req[i].len == 11 && req[i].oid[9] == 1 && req[i].oid[10] == 1;
    assert_true(has_ifname);
    assert_int_equal(fs_snmp_poll_pdu(&p, 7), 0);
    add(&p, &tm, vb_s(IFX(1), 1, "Eth1/1"));
    add(&p, &tm, vb_s(IFX(1), 2, "Eth1/9"));
    add(&p, &tm, vb_u(IFX(6), 1, -1, FS_VT_COUNTER64, 10));
    add(&p, &tm, vb_u(IFX(6), 2, -1, FS_VT_COUNTER64, 5));
    assert_true(p.unknown_index);
    /* cut before the map could be walked again: ifIndex 2's rows count for nobody */
    fs_snmp_poll_cut(&p);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_non_null(find(r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=rx"));
    assert_null(find(r, FS_M_PORT_BYTES, "interface=Eth1/2,direction=rx"));
    assert_null(find(r, FS_M_PORT_BYTES, "interface=Eth1/9,direction=rx"));

    /* Again, and this time the map is walked after the data (as the driver does). */
    memset(r, 0, sizeof(*r));
    fs_snmp_poll_reset(&p);
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_IFMAP, &tm, &p, req, 40), 0);
    fs_snmp_phase_oids(FS_SNMP_PH_IFDATA, &tm, &p, req, 40);
    assert_int_equal(fs_snmp_poll_pdu(&p, 8), 0);
    add(&p, &tm, vb_s(IFX(1), 2, "Eth1/9"));
    add(&p, &tm, vb_u(IFX(6), 2, -1, FS_VT_COUNTER64, 6));
    const char *names2[] = {"Eth1/1", "Eth1/9"};
    map_walk(&tm, &p, idx, names2, 2);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(find(r, FS_M_PORT_BYTES, "interface=Eth1/9,direction=rx")->u, 6);
    assert_null(find(r, FS_M_PORT_BYTES, "interface=Eth1/2,direction=rx"));
    assert_int_equal(r->resets[FS_RESET_DISCONTINUITY], 1);
    assert_string_equal(r->reset_ifaces, "Eth1/9;");
    assert_int_equal(tm.renames, 1);
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static void
test_interface_limit_is_a_truncation(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    struct fs_snmp_req_oid req[8];
    char name[32];
    fs_snmp_tmap_init(&tm, -1);
    fs_snmp_poll_reset(&p);
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_IFMAP, &tm, &p, req, 8), 3);
    assert_int_equal(fs_snmp_poll_pdu(&p, 1), 0);
    int rc = 1;
    uint32_t i;
    for (i = 1; i <= 3 * FS_SNMP_MAX_IFS + 10 && rc >= 0; i++) {
        snprintf(name, sizeof(name), "swp%u", i);
        struct fs_snmp_vb v = vb_s(IFX(1), i, name);
        rc = fs_snmp_poll_add(&p, &tm, &v);
    }
    assert_int_equal(rc, -1); /* the walk's bound: the driver ends the phase there */
    assert_true(p.truncated);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(tm.n_ifs, FS_SNMP_MAX_IFS);
    assert_true(tm.if_limited);
    assert_int_equal(tm.max_ifindex, FS_SNMP_MAX_IFS);
    assert_int_equal(tm.truncated_cycles, 1);

    /* Next cycle: rows past the kept interfaces end their column, not the cycle, and do
     * not ask for the map again. */
    fs_snmp_poll_reset(&p);
    assert_int_equal(fs_snmp_poll_pdu(&p, 2), 0);
    struct fs_snmp_vb v = vb_u(IFX(6), FS_SNMP_MAX_IFS, -1, FS_VT_COUNTER64, 1);
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), 1);
    v = vb_u(IFX(6), FS_SNMP_MAX_IFS + 1, -1, FS_VT_COUNTER64, 1);
    assert_int_equal(fs_snmp_poll_add(&p, &tm, &v), -2);
    assert_false(p.unknown_index);
    assert_int_equal(fs_snmp_phase_oids(FS_SNMP_PH_IFMAP, &tm, &p, req, 8), 0);
    memset(r, 0, sizeof(*r));
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_non_null(find(r, FS_M_PORT_BYTES, "interface=swp4096,direction=rx"));
    assert_int_equal(tm.truncated_cycles, 2);
    char desc[1024];
    fs_snmp_tmap_describe(&tm, desc, sizeof(desc));
    assert_non_null(strstr(desc, "\"interface_limit_reached\":true"));
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static void
test_line_rate_and_width_per_sample(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    fs_snmp_tmap_init(&tm, -1);
    fs_snmp_poll_reset(&p);
    ifmap(&p, &tm, 1);
    assert_int_equal(fs_snmp_poll_pdu(&p, 2), 0);
    add(&p, &tm, vb_u(IFX(15), 1, -1, FS_VT_GAUGE32, 100000)); /* 100 Gb/s */
    add(&p, &tm, vb_u(IFX(6), 1, -1, FS_VT_COUNTER64, 5000000000ULL));
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(r->rates, 1);
    assert_string_equal(r->rate_iface, "Eth1/1");
    assert_true(r->rate == 100e9 / 8);
    assert_int_equal(find(r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=rx")->bits, 64);

    /* The HC column went away: the 32-bit twin is reported as 32 bits, never as the HC
     * value's continuation; ifSpeed alone gives the rate. */
    memset(r, 0, sizeof(*r));
    fs_snmp_poll_reset(&p);
    assert_int_equal(fs_snmp_poll_pdu(&p, 3), 0);
    add(&p, &tm, vb_u(IFT(5), 1, -1, FS_VT_GAUGE32, 1000000000)); /* ifSpeed 1 Gb/s */
    add(&p, &tm, vb_u(IFT(10), 1, -1, FS_VT_COUNTER32, 705032704));
    fs_snmp_poll_finish(&tm, &p, &e);
    const struct rec_sample *s = find(r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=rx");
    assert_non_null(s);
    assert_int_equal(s->bits, 32);
    assert_int_equal(s->u, 705032704);
    assert_true(r->rate == 1e9 / 8);
    assert_true(find(r, FS_M_PORT_SPEED, "interface=Eth1/1")->d == 1e9);

    /* A saturated ifSpeed without ifHighSpeed says nothing about the rate. */
    memset(r, 0, sizeof(*r));
    fs_snmp_poll_reset(&p);
    assert_int_equal(fs_snmp_poll_pdu(&p, 4), 0);
    add(&p, &tm, vb_u(IFT(5), 1, -1, FS_VT_GAUGE32, 0xffffffffULL));
    add(&p, &tm, vb_u(IFT(10), 1, -1, FS_VT_COUNTER32, 5));
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(r->rates, 0);
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static void
test_cut_map_walk_keeps_the_rest(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    fs_snmp_tmap_init(&tm, -1);
    const uint32_t idx[] = {1, 2, 3};
    const char *names[] = {"Eth1/1", "Eth1/2", "Eth1/3"};
    fs_snmp_poll_reset(&p);
    map_walk(&tm, &p, idx, names, 3);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_true(tm.map_valid);

    /* An unknown ifIndex forces a walk, which the deadline cuts after ifIndex 1. */
    fs_snmp_poll_reset(&p);
    assert_int_equal(fs_snmp_poll_pdu(&p, 2), 0);
    add(&p, &tm, vb_u(IFX(6), 9, -1, FS_VT_COUNTER64, 1));
    add(&p, &tm, vb_u(IFX(6), 3, -1, FS_VT_COUNTER64, 33));
    map_walk(&tm, &p, idx, names, 1);
    fs_snmp_poll_cut(&p);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_int_equal(tm.n_ifs, 3);
    assert_false(tm.map_valid); /* walked again next cycle */
    assert_int_equal(find(r, FS_M_PORT_BYTES, "interface=Eth1/3,direction=rx")->u, 33);
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static void
test_utf8_names_kept(void **state)
{
    (void)state;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct recorder *r = calloc(1, sizeof(*r));
    struct fs_snmp_emit e = emitter(r);
    char longname[128] = "";
    for (int i = 0; i < 40; i++)
        strcat(longname, "\xd0\x96"); /* 80 bytes of Cyrillic Zhe */
    fs_snmp_tmap_init(&tm, -1);
    const uint32_t idx[] = {1, 2, 3, 4};
    const char *names[] = {"\xe7\xab\xaf\xe5\x8f\xa3"
                           "1",
                           "bad\xff\xc0\x80x", longname, longname};
    fs_snmp_poll_reset(&p);
    map_walk(&tm, &p, idx, names, 4);
    fs_snmp_poll_finish(&tm, &p, &e);
    assert_string_equal(name_of(&tm, 1), "\xe7\xab\xaf\xe5\x8f\xa3"
                                         "1");       /* kept as sent */
    assert_string_equal(name_of(&tm, 2), "bad???x"); /* invalid bytes, overlong NUL */
    assert_int_equal(strlen(name_of(&tm, 3)), 62);   /* cut between characters */
    /* the clash of the cut names is resolved, the suffix cut between characters too */
    const char *n4 = name_of(&tm, 4);
    assert_non_null(strstr(n4, "#4"));
    assert_int_equal((strlen(n4) - 2) % 2, 0);
    assert_string_not_equal(name_of(&tm, 3), n4);
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    free(r);
}

static void
test_models(void **state)
{
    (void)state;
    const unsigned long c[] = {1, 3, 6, 1, 4, 1, 33049, 1, 1, 1, 370013};
    const unsigned long bad[] = {1, 3, 6, 1, 4, 1, 33049, 1, 1, 1, 370013, 1};
    assert_string_equal(fs_snmp_model_from_objid(c, 11), "SN3700C");
    assert_null(fs_snmp_model_from_objid(bad, 12));
    assert_null(fs_snmp_model_from_objid(NULL, 0));
    assert_int_equal(fs_snmp_cell_bytes("SN2700"), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_poll),
        cmocka_unit_test(test_reboot_and_discontinuity),
        cmocka_unit_test(test_hostile_values),
        cmocka_unit_test(test_mixed_width_packets_and_config_base),
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_agent_restart_is_not_a_reboot),
        cmocka_unit_test(test_duplicate_names_get_unique_series),
        cmocka_unit_test(test_reassigned_ifindex_is_not_the_old_port),
        cmocka_unit_test(test_interface_limit_is_a_truncation),
        cmocka_unit_test(test_line_rate_and_width_per_sample),
        cmocka_unit_test(test_cut_map_walk_keeps_the_rest),
        cmocka_unit_test(test_utf8_names_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
