/*
 * libFuzzer target for the SNMP varbind -> sample mapping (drivers/snmp/map.c): whatever a
 * hostile agent could send. The input is a list of varbinds, each:
 *   byte 0      type (mod the number of fs_snmp_vt values)
 *   byte 1      OID root: 0-6 one of the walked tables/scalars, else raw sub-identifiers
 *   byte 2      number of extra sub-identifiers (mod 24)
 *   4 bytes     each extra sub-identifier (little endian; 0xffffffff and 0 included)
 *   8 bytes     value (integer/counter)
 *   byte        string length (strings and OID values take the next bytes)
 * A 0xff type byte starts a new PDU; 0xfd cuts the cycle short (as at a deadline); 0xfe ends the
 * cycle and starts another on the same per-target state (so reboot, discontinuity and map refresh
 * paths run too).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

static void
e_reset(void *a, enum fs_reset_kind k, const char *iface)
{
    (void)a;
    if ((unsigned)k >= FS_RESET_KIND_COUNT || (iface && strlen(iface) > 1000))
        abort();
}
static void
e_begin(void *a, int64_t ts)
{
    (void)a;
    (void)ts;
}
static void
check_labels(const struct fs_label *l, size_t n)
{
    if (n > 3)
        abort();
    for (size_t i = 0; i < n; i++)
        if (!l[i].name || !l[i].value || strlen(l[i].value) > 256)
            abort();
}
static void
e_counter(void *a, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
          unsigned bits, double scale)
{
    (void)a;
    (void)raw;
    if ((unsigned)m >= FS_METRIC_COUNT || (bits != 32 && bits != 64) || !(scale > 0))
        abort();
    check_labels(l, n);
}
static void
e_gauge(void *a, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    (void)a;
    (void)v;
    if ((unsigned)m >= FS_METRIC_COUNT)
        abort();
    check_labels(l, n);
}
static void
e_end(void *a)
{
    (void)a;
}

static void
e_agent_restart(void *a)
{
    (void)a;
}
static void
e_max_rate(void *a, const char *iface, double r)
{
    (void)a;
    if (!iface || strlen(iface) >= FS_SNMP_NAME_MAX || !(r > 0))
        abort();
}
static void
e_note(void *a, const char *msg)
{
    (void)a;
    if (!msg)
        abort();
}

static const unsigned long roots[7][12] = {
    {1, 3, 6, 1, 2, 1, 2, 2, 1},
    {1, 3, 6, 1, 2, 1, 31, 1, 1, 1},
    {1, 3, 6, 1, 4, 1, 33049, 15, 1, 4, 1},
    {1, 3, 6, 1, 4, 1, 33049, 15, 1, 2, 1},
    {1, 3, 6, 1, 4, 1, 33049, 15, 1, 5, 1},
    {1, 3, 6, 1, 2, 1, 1},
    {1, 3, 6, 1, 2, 1, 25, 1},
};
static const size_t root_len[7] = {9, 10, 11, 11, 11, 7, 8};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll p = {0};
    struct fs_snmp_emit e = {.reset = e_reset,
                             .begin = e_begin,
                             .counter = e_counter,
                             .gauge = e_gauge,
                             .end = e_end,
                             .agent_restart = e_agent_restart,
                             .max_rate = e_max_rate,
                             .note = e_note};
    struct fs_snmp_req_oid req[32];
    unsigned long oidv[64], valoid[64];
    size_t i = 0;
    int64_t ts = 1;

    fs_snmp_tmap_init(&tm, size > 0 ? (int)(data[0] % 3) - 1 : -1);
    fs_snmp_poll_reset(&p);
    for (int ph = 0; ph < FS_SNMP_PH_COUNT; ph++)
        fs_snmp_phase_oids((enum fs_snmp_phase)ph, &tm, &p, req, 32);
    fs_snmp_poll_pdu(&p, ts++);
    while (i + 3 <= size) {
        uint8_t t = data[i], r = data[i + 1], n = data[i + 2] % 24;
        i += 3;
        if (t == 0xff) {
            fs_snmp_poll_pdu(&p, ts++);
            continue;
        }
        if (t == 0xfd) { /* the driver cuts the cycle (deadline) */
            fs_snmp_poll_cut(&p);
            continue;
        }
        if (t == 0xfe) {
            fs_snmp_poll_finish(&tm, &p, &e);
            fs_snmp_poll_reset(&p);
            for (int ph = 0; ph < FS_SNMP_PH_COUNT; ph++)
                fs_snmp_phase_oids((enum fs_snmp_phase)ph, &tm, &p, req, 32);
            fs_snmp_poll_pdu(&p, ts++);
            continue;
        }
        size_t len = 0;
        if (r < 7) {
            memcpy(oidv, roots[r], root_len[r] * sizeof(unsigned long));
            len = root_len[r];
        }
        for (uint8_t k = 0; k < n && i + 4 <= size && len < 64; k++, i += 4)
            oidv[len++] = (unsigned long)data[i] | (unsigned long)data[i + 1] << 8 |
                          (unsigned long)data[i + 2] << 16 | (unsigned long)data[i + 3] << 24;
        uint64_t v = 0;
        for (int k = 0; k < 8 && i < size; k++, i++)
            v |= (uint64_t)data[i] << (8 * k);
        size_t sl = i < size ? data[i++] : 0;
        if (sl > size - i)
            sl = size - i;
        struct fs_snmp_vb vb = {.oid = oidv,
                                .oid_len = len,
                                .type = (enum fs_snmp_vt)(t % (FS_VT_ENDOFMIBVIEW + 1)),
                                .i = (int64_t)v,
                                .u = v};
        if (vb.type == FS_VT_OCTETS) {
            vb.str = data + i;
            vb.str_len = sl;
        } else if (vb.type == FS_VT_OID) {
            size_t k = 0;
            for (; k < sl / 2 && k < 64; k++)
                valoid[k] = (unsigned long)data[i + 2 * k] | (unsigned long)data[i + 2 * k + 1]
                                                                 << 8;
            vb.oidv = valoid;
            vb.oidv_len = k;
        }
        i += sl;
        if (fs_snmp_poll_add(&p, &tm, &vb) == -1)
            break;
    }
    fs_snmp_poll_finish(&tm, &p, &e);
    char desc[512];
    fs_snmp_tmap_describe(&tm, desc, sizeof(desc));
    fs_snmp_poll_free(&p);
    fs_snmp_tmap_free(&tm);
    return 0;
}
