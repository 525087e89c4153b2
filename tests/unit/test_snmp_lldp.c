/* LLDP-MIB rows -> neighbours (drivers/snmp/lldp.c): lldpd's shape (MAC port ids, the
 * ifName in the description, port numbers that are ifIndexes), ONYX's (interface-name
 * port ids), the local port named as the counters name it, ids made printable, and an
 * agent's junk skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "lldp.h"

#define LLDP 1, 0, 8802, 1, 1, 2, 1

static void
add_int(struct fs_snmp_lldp *l, const unsigned long *oid, size_t len, int64_t v, int want)
{
    struct fs_snmp_vb vb = {.oid = oid, .oid_len = len, .type = FS_VT_INTEGER, .i = v};
    assert_int_equal(fs_snmp_lldp_add(l, &vb), want);
}

static void
add_str(struct fs_snmp_lldp *l, const unsigned long *oid, size_t len, const void *s, size_t n,
        int want)
{
    struct fs_snmp_vb vb = {
        .oid = oid, .oid_len = len, .type = FS_VT_OCTETS, .str = s, .str_len = n};
    assert_int_equal(fs_snmp_lldp_add(l, &vb), want);
}

#define OID(...)                                                                                   \
    (const unsigned long[]){__VA_ARGS__},                                                          \
        sizeof((unsigned long[]){__VA_ARGS__}) / sizeof(unsigned long)

struct got {
    char local_chassis[64], local_name[64];
    char lport[8][64], chassis[8][64], sys[8][64], port[8][64];
    size_t n;
};

static void
on_local(void *arg, const char *chassis, const char *name)
{
    struct got *g = arg;
    snprintf(g->local_chassis, sizeof g->local_chassis, "%s", chassis);
    snprintf(g->local_name, sizeof g->local_name, "%s", name);
}

static void
on_nb(void *arg, const struct fs_lldp_neighbor *n)
{
    struct got *g = arg;
    assert_true(g->n < 8);
    snprintf(g->lport[g->n], 64, "%s", n->local_port);
    snprintf(g->chassis[g->n], 64, "%s", n->chassis_id);
    snprintf(g->sys[g->n], 64, "%s", n->sys_name);
    snprintf(g->port[g->n], 64, "%s", n->port);
    g->n++;
}

/* A map of three interfaces: lo (1), swp1 (2), swp2 (3). */
static void
tmap3(struct fs_snmp_tmap *tm, struct fs_snmp_ifent *ifs)
{
    memset(tm, 0, sizeof *tm);
    memset(ifs, 0, 3 * sizeof *ifs);
    const char *names[] = {"lo", "swp1", "swp2"};
    for (int i = 0; i < 3; i++) {
        ifs[i].ifindex = (uint32_t)i + 1;
        snprintf(ifs[i].name, sizeof ifs[i].name, "%s", names[i]);
        snprintf(ifs[i].raw, sizeof ifs[i].raw, "%s", names[i]);
    }
    tm->ifs = ifs;
    tm->n_ifs = 3;
}

static const unsigned char mac1[] = {0x3e, 0x84, 0x07, 0x52, 0x79, 0xff};
static const unsigned char mac2[] = {0x52, 0x4a, 0xc4, 0xb7, 0xad, 0x80};
static const unsigned char macl[] = {0x12, 0x72, 0xc7, 0x7a, 0xc1, 0xae};

/* What lldpd 1.0.16 serves through snmpd (walked in the test rig). */
static void
test_lldpd_shape(void **state)
{
    (void)state;
    struct fs_snmp_lldp l = {0};
    struct fs_snmp_tmap tm;
    struct fs_snmp_ifent ifs[3];
    tmap3(&tm, ifs);
    fs_snmp_lldp_reset(&l);
    add_int(&l, OID(LLDP, 3, 1, 0), 4, 1);
    add_str(&l, OID(LLDP, 3, 2, 0), macl, 6, 1);
    add_str(&l, OID(LLDP, 3, 3, 0), "sw1", 3, 1);
    /* lldpLocPortTable: port numbers 2 and 3, ids are MACs, descriptions the ifNames. */
    add_int(&l, OID(LLDP, 3, 7, 1, 2, 2), 3, 1);
    add_int(&l, OID(LLDP, 3, 7, 1, 2, 3), 3, 1);
    add_str(&l, OID(LLDP, 3, 7, 1, 3, 2), macl, 6, 1);
    add_str(&l, OID(LLDP, 3, 7, 1, 4, 2), "swp1", 4, 1);
    add_str(&l, OID(LLDP, 3, 7, 1, 4, 3), "swp2", 4, 1);
    /* lldpRemTable: timemark 500, local ports 2 and 3. The id of row 2 comes before its
     * subtype: columns may arrive in any order. */
    add_str(&l, OID(LLDP, 4, 1, 1, 5, 500, 2, 1), mac1, 6, 1);
    add_int(&l, OID(LLDP, 4, 1, 1, 4, 500, 2, 1), 4, 1);
    add_int(&l, OID(LLDP, 4, 1, 1, 4, 500, 3, 2), 4, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 5, 500, 3, 2), mac2, 6, 1);
    add_int(&l, OID(LLDP, 4, 1, 1, 6, 500, 2, 1), 3, 1);
    add_int(&l, OID(LLDP, 4, 1, 1, 6, 500, 3, 2), 3, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 7, 500, 2, 1), mac1, 6, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 7, 500, 3, 2), mac2, 6, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 8, 500, 2, 1), "eth0", 4, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 8, 500, 3, 2), "eth0", 4, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 9, 500, 2, 1), "host1", 5, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 9, 500, 3, 2), "host2\0", 6, 1); /* a counted NUL */
    /* lldpRemSysDesc and the like are not ours: ignored, not anomalies. */
    add_str(&l, OID(LLDP, 4, 1, 1, 10, 500, 2, 1), "Debian", 6, 0);
    assert_true(l.seen);
    struct got g = {0};
    struct fs_snmp_lldp_emit e = {&g, on_local, on_nb};
    assert_int_equal(fs_snmp_lldp_finish(&l, &tm, &e), 2);
    assert_string_equal(g.local_chassis, "12:72:c7:7a:c1:ae");
    assert_string_equal(g.local_name, "sw1");
    assert_string_equal(g.lport[0], "swp1");
    assert_string_equal(g.chassis[0], "3e:84:07:52:79:ff");
    assert_string_equal(g.sys[0], "host1");
    assert_string_equal(g.port[0], "eth0");
    assert_string_equal(g.lport[1], "swp2");
    assert_string_equal(g.sys[1], "host2");
    assert_int_equal(l.anomalies, 0);
    fs_snmp_lldp_free(&l);
}

/* ONYX's shape: interface-name port ids; a local port only known by ifIndex; one not
 * known at all. */
static void
test_names_and_fallbacks(void **state)
{
    (void)state;
    struct fs_snmp_lldp l = {0};
    struct fs_snmp_tmap tm;
    struct fs_snmp_ifent ifs[3];
    tmap3(&tm, ifs);
    fs_snmp_lldp_reset(&l);
    /* Port 9: id "swp2" (interfaceName) matches the map though its number does not. */
    add_int(&l, OID(LLDP, 3, 7, 1, 2, 9), 5, 1);
    add_str(&l, OID(LLDP, 3, 7, 1, 3, 9), "swp2", 4, 1);
    add_int(&l, OID(LLDP, 4, 1, 1, 6, 0, 9, 1), 5, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 7, 0, 9, 1), "Eth1/11", 7, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 8, 0, 9, 1), "sw-test03", 9, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 9, 0, 9, 1), "sw-test03", 9, 1);
    /* Port 2: no lldpLocPortTable row; ifIndex 2 is swp1. Chassis id a local string. */
    add_int(&l, OID(LLDP, 4, 1, 1, 4, 0, 2, 1), 7, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 5, 0, 2, 1), "chassis-7", 9, 1);
    add_str(&l, OID(LLDP, 4, 1, 1, 7, 0, 2, 1), "p\x01q", 3, 1);
    /* Port 77: nothing known. */
    add_str(&l, OID(LLDP, 4, 1, 1, 9, 0, 77, 1), "far", 3, 1);
    /* A row with neither chassis id nor sysName: skipped, counted. */
    add_str(&l, OID(LLDP, 4, 1, 1, 8, 0, 3, 5), "x", 1, 1);
    struct got g = {0};
    struct fs_snmp_lldp_emit e = {&g, on_local, on_nb};
    assert_int_equal(fs_snmp_lldp_finish(&l, &tm, &e), 3);
    assert_string_equal(g.local_chassis, ""); /* no local identity read: not called */
    assert_string_equal(g.lport[0], "swp2");
    assert_string_equal(g.port[0], "Eth1/11"); /* the interface-name id, not the description */
    assert_string_equal(g.lport[1], "swp1");
    assert_string_equal(g.chassis[1], "chassis-7");
    assert_string_equal(g.port[1], "70:01:71"); /* not printable: hex */
    assert_string_equal(g.lport[2], "lldp-port-77");
    assert_int_equal(l.anomalies, 1);
    fs_snmp_lldp_free(&l);
}

/* An agent without LLDP-MIB, and one that sends junk. */
static void
test_absent_and_junk(void **state)
{
    (void)state;
    struct fs_snmp_lldp l = {0};
    fs_snmp_lldp_reset(&l);
    struct fs_snmp_vb nso = {
        .oid = (const unsigned long[]){LLDP, 3, 3, 0}, .oid_len = 10, .type = FS_VT_NOSUCHOBJECT};
    assert_int_equal(fs_snmp_lldp_add(&l, &nso), 0);
    assert_false(l.seen);
    assert_int_equal(l.anomalies, 0);
    add_str(&l, OID(LLDP, 3, 1, 0), "x", 1, 0);                     /* wrong type */
    add_int(&l, OID(LLDP, 4, 1, 1, 9, 0, 2, 1), 5, 0);              /* wrong type */
    add_str(&l, OID(LLDP, 4, 1, 1, 9, 0, 2), "short index", 11, 0); /* wrong index */
    add_str(&l, OID(LLDP, 3, 7, 1, 4, 2, 9), "long index", 10, 0);
    assert_int_equal(l.anomalies, 4);
    /* The row bound: a truncated read. */
    int rc = 1;
    for (unsigned long i = 0; i <= FS_LLDP_MAX_ROWS && rc == 1; i++) {
        struct fs_snmp_vb vb = {.oid = (const unsigned long[]){LLDP, 4, 1, 1, 9, 0, 1, i},
                                .oid_len = 14,
                                .type = FS_VT_OCTETS,
                                .str = (const unsigned char *)"n",
                                .str_len = 1};
        rc = fs_snmp_lldp_add(&l, &vb);
    }
    assert_int_equal(rc, -1);
    assert_true(l.truncated);
    fs_snmp_lldp_reset(&l);
    assert_false(l.truncated);
    assert_int_equal(l.n_rems, 0);
    fs_snmp_lldp_free(&l);
}

static void
test_id_text(void **state)
{
    (void)state;
    char out[64];
    const unsigned char v4[] = {1, 192, 0, 2, 1};
    assert_string_equal(fs_snmp_lldp_id_text(true, 5, v4, sizeof v4, out, sizeof out), "192.0.2.1");
    assert_string_equal(fs_snmp_lldp_id_text(false, 4, v4, sizeof v4, out, sizeof out),
                        "192.0.2.1");
    assert_string_equal(fs_snmp_lldp_id_text(false, 3, mac1, 6, out, sizeof out),
                        "3e:84:07:52:79:ff");
    assert_string_equal(
        fs_snmp_lldp_id_text(true, 7, (const unsigned char *)"abc\0", 4, out, sizeof out), "abc");
    assert_string_equal(
        fs_snmp_lldp_id_text(true, 7, (const unsigned char *)"", 0, out, sizeof out), "");
    /* Cut to the buffer. */
    char small[8];
    assert_string_equal(fs_snmp_lldp_id_text(true, 4, mac1, 6, small, sizeof small), "3e:84");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lldpd_shape),
        cmocka_unit_test(test_names_and_fallbacks),
        cmocka_unit_test(test_absent_and_junk),
        cmocka_unit_test(test_id_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
