/*
 * onyx-snmp-sim: a simulated NVIDIA Spectrum switch (ONYX) as an AgentX subagent of a
 * real snmpd. Test-only; never shipped.
 *
 * Serves, under the snmpd it attaches to:
 *   system group (sysDescr, sysObjectID = MELLANOX-PRODUCTS-MIB SN2700, sysUpTime),
 *   IF-MIB ifNumber, ifTable, ifXTable, ifTableLastChange for N ports Eth1/1..Eth1/N,
 *   MELLANOX-QOS-MIB (1.3.6.1.4.1.33049.15.1) PFC, TC and port tables.
 * Counters are functions of the time since the simulated boot, so they advance at the
 * configured rates without any timer. Events:
 *   SIGUSR1              reboot: sysUpTime restarts at 0, every counter restarts at 0
 *   SIGUSR2              toggles the congestion event on --cong-port/--cong-tc: unicast
 *                        queue depth ramps up and WRED discards rise while it lasts
 *   --wrap-port P        port P has no 64-bit (HC) columns, and its 32-bit octet counters
 *                        start 8 s short of 2^32 at --wrap-rate-bps, so they wrap soon
 *   --cong-at S --cong-for D   a scripted congestion event S seconds after start
 *   --scenario FILE      the counters follow tests/sim/scenario.py's formulas for that
 *                        scenario JSON (ports, rate_bps, packet_bytes, counter_base,
 *                        boot_epoch_s, tc_share, congestion), the same numbers the ONYX CLI
 *                        simulator prints for that file, so SNMP and CLI polls of one
 *                        simulated switch agree. Read once at start (SIGUSR1 still reboots).
 *                        Queue depth is queue_bytes / 96 cells (the simulator's cell size).
 * The ifIndex of Eth1/N is 100+N (not N) so that a poller must use the ifIndex map.
 * The TC/priority index base of the QoS tables is --qos-base (default 1).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <math.h>

#include <net-snmp/net-snmp-config.h>
#include <net-snmp/net-snmp-includes.h>
#include <net-snmp/agent/net-snmp-agent-includes.h>

#define MAX_PORTS 1024
#define NTC 8

static struct {
    int ports;
    int qos_base;
    bool qos;
    double rate_bps; /* per port, scaled by (port % 4 + 1) / 4 */
    int wrap_port;
    double wrap_rate_bps;
    int cong_port, cong_tc;
    double cong_at, cong_for;
    int down_port;
    const char *socket;
    const char *pidfile;
} opt = {64, 1, true, 10e9, 0, 1e9, 49, 3, -1, 0, 64, NULL, NULL};

static volatile sig_atomic_t want_reboot, want_cong_toggle, want_stop;
static double boot; /* time of the simulated boot (monotonic s) */
static double start_time;
static bool congested;
static double cong_start; /* since-boot seconds when the current congestion began */
static double wred_base;  /* WRED discards accumulated by earlier congestion */
static double depth_when_ended;

/* The shared scenario (--scenario): see tests/sim/scenario.py for the formulas. */
static struct {
    bool on;
    double rate_bps;
    uint64_t packet_bytes, base;
    double tc_share[NTC];
    double period, duration, phase, ecn_pps, wred_pps, pfc_pps, queue_bytes;
    /* "busy": the fabric around the incident (queue depth only: SNMP carries no ECN) */
    bool busy;
    uint64_t busy_seed;
    double share, max_ecn_pps, bursty_share, bursts_per_hour, burst_s, queue_bytes_per_pps,
        burst_queue_bytes;
} scen = {false, 10e9, 1000, 0, {0.4, 0, 0, 0.6, 0, 0, 0, 0}, 30, 2, 10, 200000, 1000, 500, 12e6,
          false, 1, 0.6, 50000, 0.3, 12, 3, 40, 4e6};

/* scenario.py's splitmix64 and unit(): the same bits, so both simulators agree. */
static uint64_t
splitmix64(uint64_t x)
{
    uint64_t z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double
unit(uint64_t h)
{
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

/* scenario.py busy_queue(p, t): queue bytes of port p's busy background at t. */
static uint64_t
busy_queue(int p, double t)
{
    if (!scen.busy)
        return 0;
    uint64_t h = splitmix64(scen.busy_seed * 1000003 + (uint64_t)p);
    uint64_t h2 = splitmix64(h), h3 = splitmix64(h2), h4 = splitmix64(h3);
    double level = unit(h) < scen.share ? scen.max_ecn_pps * unit(h2) : 0.0;
    double f1 = 2 * M_PI * unit(h3), f2 = 2 * M_PI * unit(h4);
    bool bursty = unit(splitmix64(h4)) < scen.bursty_share;
    double w1 = 2 * M_PI / 7.3, w2 = 2 * M_PI / 61.0;
    double rate = level * (1 + 0.2 * sin(w1 * t + f1) + 0.1 * sin(w2 * t + f2));
    double q = rate * scen.queue_bytes_per_pps;
    if (bursty) {
        double slot = 3600.0 / scen.bursts_per_hour;
        double k = floor(t / slot);
        uint64_t hk = splitmix64(scen.busy_seed * 7919 + (uint64_t)p * 104729 +
                                 (uint64_t)k * 1299709);
        double s0 = (k + unit(hk) * 0.9) * slot;
        if (s0 <= t && t < s0 + scen.burst_s)
            q += scen.burst_queue_bytes;
    }
    return (uint64_t)q;
}

static double
jnum(struct json_object *o, const char *k, double dflt)
{
    struct json_object *v;
    if (!o || !json_object_object_get_ex(o, k, &v))
        return dflt;
    return json_object_get_double(v);
}

static double
realtime_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Loads FILE; *boot_epoch gets boot_epoch_s or -1. 0 on success. */
static int
scenario_load(const char *path, double *boot_epoch)
{
    struct json_object *d = json_object_from_file(path), *c = NULL, *share;
    if (!d) {
        fprintf(stderr, "onyx-snmp-sim: cannot read scenario %s\n", path);
        return -1;
    }
    scen.on = true;
    opt.ports = (int)jnum(d, "ports", 64);
    scen.rate_bps = jnum(d, "rate_bps", 10e9);
    opt.rate_bps = scen.rate_bps;
    scen.packet_bytes = (uint64_t)jnum(d, "packet_bytes", 1000);
    struct json_object *b;
    /* counter_base may pass 2^53: read it as a 64-bit integer, not a double */
    if (json_object_object_get_ex(d, "counter_base", &b))
        scen.base = (uint64_t)json_object_get_uint64(b);
    *boot_epoch = jnum(d, "boot_epoch_s", -1);
    if (json_object_object_get_ex(d, "tc_share", &share) &&
        json_object_is_type(share, json_type_array))
        for (int i = 0; i < NTC; i++)
            scen.tc_share[i] =
                i < (int)json_object_array_length(share)
                    ? json_object_get_double(json_object_array_get_idx(share, (size_t)i))
                    : 0;
    json_object_object_get_ex(d, "congestion", &c);
    opt.cong_port = (int)jnum(c, "port", 49);
    opt.cong_tc = (int)jnum(c, "tc", 3);
    scen.period = jnum(c, "period_s", 30);
    scen.duration = jnum(c, "duration_s", 2);
    scen.phase = jnum(c, "phase_s", 10);
    scen.ecn_pps = jnum(c, "ecn_pps", 200000);
    scen.wred_pps = jnum(c, "wred_pps", 1000);
    scen.pfc_pps = jnum(c, "pfc_pps", 500);
    scen.queue_bytes = jnum(c, "queue_bytes", 12000000);
    struct json_object *bz = NULL;
    if (json_object_object_get_ex(d, "busy", &bz) && json_object_is_type(bz, json_type_object)) {
        scen.busy = true;
        scen.busy_seed = (uint64_t)jnum(bz, "seed", 1);
        scen.share = jnum(bz, "share", 0.6);
        scen.max_ecn_pps = jnum(bz, "max_ecn_pps", 50000);
        scen.bursty_share = jnum(bz, "bursty_share", 0.3);
        scen.bursts_per_hour = jnum(bz, "bursts_per_hour", 12);
        scen.burst_s = jnum(bz, "burst_s", 3);
        scen.queue_bytes_per_pps = jnum(bz, "queue_bytes_per_pps", 40);
        scen.burst_queue_bytes = jnum(bz, "burst_queue_bytes", 4e6);
    }
    json_object_put(d);
    return 0;
}

static double
surge_seconds(double t)
{
    double x = t - scen.phase;
    if (x <= 0)
        return 0;
    double full = floor(x / scen.period), rem = x - full * scen.period;
    return full * scen.duration + (rem < scen.duration ? rem : scen.duration);
}

static bool
in_surge(double t)
{
    double x = t - scen.phase;
    return x >= 0 && fmod(x, scen.period) < scen.duration;
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double
since_boot(void)
{
    return now_s() - boot;
}

/* ---- the counters ---- */

static double
port_rate_Bps(int p)
{
    if (p == opt.wrap_port)
        return opt.wrap_rate_bps / 8;
    return opt.rate_bps / 8 * ((p % 4) + 1) / 4;
}

static uint64_t
scen_octets_raw(int p)
{
    return (uint64_t)(scen.rate_bps / 8 * ((p % 4) + 1) / 4 * since_boot());
}

static uint64_t
octets(int p, int dir)
{
    if (scen.on)
        return scen_octets_raw(p) + scen.base;
    double t = since_boot();
    uint64_t v = (uint64_t)(port_rate_Bps(p) * t * (dir ? 0.9 : 1.0));
    if (p == opt.wrap_port && dir == 0)
        v += 0x100000000ULL - (uint64_t)(port_rate_Bps(p) * 8); /* wraps 8 s after boot */
    return v;
}

static uint64_t
ucast(int p, int dir)
{
    if (scen.on)
        return scen_octets_raw(p) / scen.packet_bytes + scen.base;
    return octets(p, dir) / 1000;
}

static uint64_t
mcast(int p, int dir)
{
    if (scen.on)
        return scen.base;
    return octets(p, dir) / 100000;
}

static uint64_t
bcast(int p, int dir)
{
    if (scen.on)
        return scen.base;
    return octets(p, dir) / 1000000;
}

static double
cong_elapsed(void)
{
    return congested ? since_boot() - cong_start : 0;
}

static uint64_t
queue_depth_cells(int p, int tc)
{
    if (scen.on) {
        if (tc != opt.cong_tc)
            return 0;
        double t = since_boot();
        uint64_t q = busy_queue(p, t);
        if (p == opt.cong_port && in_surge(t))
            q += (uint64_t)scen.queue_bytes;
        return q / 96;
    }
    if (p != opt.cong_port || tc != opt.cong_tc)
        return (p % 7 == 0 && tc == 0) ? 3 : 0;
    if (!congested)
        return 0;
    double d = 2000.0 * cong_elapsed(); /* +2000 cells/s up to 60000 */
    return (uint64_t)(d > 60000 ? 60000 : d);
}

static uint64_t
wred(int p, int tc)
{
    if (scen.on)
        return (p == opt.cong_port && tc == opt.cong_tc
                    ? (uint64_t)(scen.wred_pps * surge_seconds(since_boot()))
                    : 0) +
               scen.base;
    if (p != opt.cong_port || tc != opt.cong_tc)
        return 0;
    return (uint64_t)(wred_base + 50000.0 * cong_elapsed());
}

static uint64_t
pfc_pkts(int p, int prio, int dir)
{
    if (scen.on) /* rx pause frames on the congested port's priority = tc; none sent */
        return (dir == 0 && p == opt.cong_port && prio == opt.cong_tc
                    ? (uint64_t)(scen.pfc_pps * surge_seconds(since_boot()))
                    : 0) +
               scen.base;
    if (prio != 3)
        return 0;
    return (uint64_t)(since_boot() * (dir ? 2 : 5) * ((p % 3) + 1));
}

static uint64_t
pfc_ms(int p, int prio, int dir)
{
    if (scen.on) /* 100 us per frame, in ms (MELLANOX-QOS-MIB's unit) */
        return (pfc_pkts(p, prio, dir) - scen.base) / 10 + scen.base;
    return pfc_pkts(p, prio, dir) / 2;
}

/* ---- a generic table: prefix.column.index... with fixed-length indexes ---- */

enum vt { V_ABSENT, V_INT, V_STR, V_C32, V_G32, V_TT, V_C64 };

struct val {
    enum vt t;
    uint64_t u;
    long i;
    char s[64];
};

struct table {
    const char *name;
    oid prefix[16];
    size_t plen;
    const int *cols;
    int ncols;
    int idxlen; /* 1 or 2 */
    void (*get)(int col, const oid *idx, struct val *v);
};

static int
row_port(oid ifindex)
{
    int p = (int)ifindex - 100;
    return (p >= 1 && p <= opt.ports) ? p : 0;
}

static void
if_get(int col, const oid *idx, struct val *v)
{
    int p = row_port(idx[0]);
    v->t = V_ABSENT;
    if (!p)
        return;
    switch (col) {
    case 1:
        v->t = V_INT;
        v->i = (long)idx[0];
        break;
    case 2:
        v->t = V_STR;
        snprintf(v->s, sizeof(v->s), "Eth1/%d", p);
        break;
    case 3:
        v->t = V_INT;
        v->i = 6;
        break;
    case 4:
        v->t = V_INT;
        v->i = 9216;
        break;
    case 5:
        v->t = V_G32;
        v->u = 4294967295u;
        break;
    case 7:
        v->t = V_INT;
        v->i = 1;
        break;
    case 8:
        v->t = V_INT;
        v->i = p == opt.down_port ? 2 : 1;
        break;
    case 9:
        v->t = V_TT;
        v->u = 100;
        break;
    case 10:
        v->t = V_C32;
        v->u = octets(p, 0) & 0xffffffffu;
        break;
    case 11:
        v->t = V_C32;
        v->u = ucast(p, 0) & 0xffffffffu;
        break;
    case 13:
        v->t = V_C32;
        v->u = (uint64_t)(since_boot() * (p % 5)) & 0xffffffffu;
        break;
    case 14:
        v->t = V_C32;
        v->u = p == 7 ? (uint64_t)since_boot() : 0;
        break;
    case 16:
        v->t = V_C32;
        v->u = octets(p, 1) & 0xffffffffu;
        break;
    case 17:
        v->t = V_C32;
        v->u = ucast(p, 1) & 0xffffffffu;
        break;
    case 19:
        v->t = V_C32;
        v->u = 0;
        break;
    case 20:
        v->t = V_C32;
        v->u = 0;
        break;
    default:
        break;
    }
}

static void
ifx_get(int col, const oid *idx, struct val *v)
{
    int p = row_port(idx[0]);
    v->t = V_ABSENT;
    if (!p)
        return;
    bool hc = p != opt.wrap_port;
    switch (col) {
    case 1:
        v->t = V_STR;
        snprintf(v->s, sizeof(v->s), "Eth1/%d", p);
        break;
    case 2:
        v->t = V_C32;
        v->u = mcast(p, 0) & 0xffffffffu;
        break;
    case 3:
        v->t = V_C32;
        v->u = bcast(p, 0) & 0xffffffffu;
        break;
    case 4:
        v->t = V_C32;
        v->u = mcast(p, 1) & 0xffffffffu;
        break;
    case 5:
        v->t = V_C32;
        v->u = bcast(p, 1) & 0xffffffffu;
        break;
    case 6:
        if (hc) {
            v->t = V_C64;
            v->u = octets(p, 0);
        }
        break;
    case 7:
        if (hc) {
            v->t = V_C64;
            v->u = ucast(p, 0);
        }
        break;
    case 8:
        if (hc) {
            v->t = V_C64;
            v->u = mcast(p, 0);
        }
        break;
    case 9:
        if (hc) {
            v->t = V_C64;
            v->u = bcast(p, 0);
        }
        break;
    case 10:
        if (hc) {
            v->t = V_C64;
            v->u = octets(p, 1);
        }
        break;
    case 11:
        if (hc) {
            v->t = V_C64;
            v->u = ucast(p, 1);
        }
        break;
    case 12:
        if (hc) {
            v->t = V_C64;
            v->u = mcast(p, 1);
        }
        break;
    case 13:
        if (hc) {
            v->t = V_C64;
            v->u = bcast(p, 1);
        }
        break;
    case 14:
        v->t = V_INT;
        v->i = 1;
        break;
    case 15:
        v->t = V_G32;
        v->u = p == opt.wrap_port ? 1000 : 100000;
        break;
    case 16:
        v->t = V_INT;
        v->i = 1;
        break;
    case 17:
        v->t = V_INT;
        v->i = 1;
        break;
    case 18:
        v->t = V_STR;
        snprintf(v->s, sizeof(v->s), p > 48 ? "uplink spine%d" : "gpu-node%02d", p);
        break;
    case 19:
        v->t = V_TT;
        v->u = 0;
        break;
    default:
        break;
    }
}

static int
row_tc(oid sub)
{
    long tc = (long)sub - opt.qos_base;
    return (tc >= 0 && tc < NTC) ? (int)tc : -1;
}

static void
pfc_get(int col, const oid *idx, struct val *v)
{
    int p = row_port(idx[0]), pr = row_tc(idx[1]);
    v->t = V_ABSENT;
    if (!p || pr < 0)
        return;
    switch (col) {
    case 1:
        v->t = V_INT;
        v->i = (long)idx[0];
        break;
    case 2:
        v->t = V_INT;
        v->i = (long)idx[1];
        break;
    case 3:
        v->t = V_C64;
        v->u = pfc_pkts(p, pr, 0);
        break;
    case 4:
        v->t = V_C64;
        v->u = pfc_ms(p, pr, 0);
        break;
    case 5:
        v->t = V_C64;
        v->u = pfc_pkts(p, pr, 1);
        break;
    case 6:
        v->t = V_C64;
        v->u = pfc_ms(p, pr, 1);
        break;
    default:
        break;
    }
}

static void
tc_get(int col, const oid *idx, struct val *v)
{
    int p = row_port(idx[0]), tc = row_tc(idx[1]);
    v->t = V_ABSENT;
    if (!p || tc < 0)
        return;
    switch (col) {
    case 1:
        v->t = V_INT;
        v->i = (long)idx[0];
        break;
    case 2:
        v->t = V_INT;
        v->i = (long)idx[1];
        break;
    case 3:
        v->t = V_C64;
        v->u = scen.on
                   ? (uint64_t)((double)(ucast(p, 1) - scen.base) * scen.tc_share[tc]) + scen.base
               : tc == 0 ? ucast(p, 1)
                         : 0;
        break;
    case 4:
        v->t = V_C64;
        v->u = scen.on
                   ? (uint64_t)((double)(octets(p, 1) - scen.base) * scen.tc_share[tc]) + scen.base
               : tc == 0 ? octets(p, 1)
                         : 0;
        break;
    case 5:
        v->t = V_C64;
        v->u = 0;
        break;
    case 6:
        v->t = V_C64;
        v->u = queue_depth_cells(p, tc);
        break;
    case 7:
        v->t = V_C64;
        v->u = 0;
        break;
    case 8:
        v->t = V_C64;
        v->u = 0;
        break;
    case 9:
        v->t = V_C64;
        v->u = wred(p, tc);
        break;
    default:
        break;
    }
}

static void
port_get(int col, const oid *idx, struct val *v)
{
    int p = row_port(idx[0]);
    v->t = V_ABSENT;
    if (!p)
        return;
    switch (col) {
    case 1:
        v->t = V_INT;
        v->i = (long)idx[0];
        break;
    case 2:
        v->t = V_C64;
        v->u = pfc_pkts(p, 3, 0);
        break;
    case 3:
        v->t = V_C64;
        v->u = pfc_pkts(p, 3, 1);
        break;
    case 4:
        v->t = V_C64;
        v->u = pfc_ms(p, 3, 1) * 7;
        break; /* "ticks" */
    case 5:
        v->t = V_C64;
        v->u = pfc_ms(p, 3, 1) * 1000;
        break;
    default:
        break;
    }
}

static const int if_cols[] = {1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 13, 14, 16, 17, 19, 20};
static const int ifx_cols[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
static const int pfc_cols[] = {1, 2, 3, 4, 5, 6};
static const int tc_cols[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
static const int port_cols[] = {1, 2, 3, 4, 5};

#define NCOLS(a) (int)(sizeof(a) / sizeof(a[0]))
static struct table tables[] = {
    {"ifTable", {1, 3, 6, 1, 2, 1, 2, 2, 1}, 9, if_cols, NCOLS(if_cols), 1, if_get},
    {"ifXTable", {1, 3, 6, 1, 2, 1, 31, 1, 1, 1}, 10, ifx_cols, NCOLS(ifx_cols), 1, ifx_get},
    {"mlnxQosPfc",
     {1, 3, 6, 1, 4, 1, 33049, 15, 1, 2, 1},
     11,
     pfc_cols,
     NCOLS(pfc_cols),
     2,
     pfc_get},
    {"mlnxQosTc", {1, 3, 6, 1, 4, 1, 33049, 15, 1, 4, 1}, 11, tc_cols, NCOLS(tc_cols), 2, tc_get},
    {"mlnxQosPort",
     {1, 3, 6, 1, 4, 1, 33049, 15, 1, 5, 1},
     11,
     port_cols,
     NCOLS(port_cols),
     1,
     port_get},
};

/* Row index tuples in OID order: ifIndex 101..100+N, then TC index base..base+7. */
static int
row_count(const struct table *t)
{
    return t->idxlen == 1 ? opt.ports : opt.ports * NTC;
}

static void
row_index(const struct table *t, int r, oid *idx)
{
    if (t->idxlen == 1) {
        idx[0] = (oid)(101 + r);
    } else {
        idx[0] = (oid)(101 + r / NTC);
        idx[1] = (oid)(opt.qos_base + r % NTC);
    }
}

/* Compares the index tuple idx (length k) with an OID remainder rem (length m). */
static int
cmp_idx(const oid *idx, int k, const oid *rem, size_t m)
{
    for (int i = 0; i < k && (size_t)i < m; i++)
        if (idx[i] != rem[i])
            return idx[i] < rem[i] ? -1 : 1;
    return (size_t)k > m ? 1 : ((size_t)k == m ? 0 : -1);
}

/* First row whose tuple is greater than rem (binary search); row_count if none. */
static int
first_row_after(const struct table *t, const oid *rem, size_t m)
{
    int lo = 0, hi = row_count(t);
    oid idx[2];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        row_index(t, mid, idx);
        if (cmp_idx(idx, t->idxlen, rem, m) > 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void
set_val(netsnmp_variable_list *vb, const struct val *v)
{
    switch (v->t) {
    case V_INT:
        snmp_set_var_typed_integer(vb, ASN_INTEGER, v->i);
        break;
    case V_STR:
        snmp_set_var_typed_value(vb, ASN_OCTET_STR, v->s, strlen(v->s));
        break;
    case V_C32:
    case V_G32:
    case V_TT:
        snmp_set_var_typed_integer(vb,
                                   v->t == V_C32   ? ASN_COUNTER
                                   : v->t == V_G32 ? ASN_GAUGE
                                                   : ASN_TIMETICKS,
                                   (long)v->u);
        break;
    case V_C64: {
        struct counter64 c = {.high = (u_long)(v->u >> 32), .low = (u_long)(v->u & 0xffffffffu)};
        snmp_set_var_typed_value(vb, ASN_COUNTER64, &c, sizeof(c));
        break;
    }
    case V_ABSENT:
        break;
    }
}

static void apply_events(void);

/* GET and GETNEXT for one table (GETBULK arrives as repeated GETNEXT). */
static int
table_handler(netsnmp_mib_handler *h, netsnmp_handler_registration *reg,
              netsnmp_agent_request_info *ri, netsnmp_request_info *reqs)
{
    const struct table *t = reg->my_reg_void;
    (void)h;
    apply_events();
    for (netsnmp_request_info *r = reqs; r; r = r->next) {
        netsnmp_variable_list *vb = r->requestvb;
        const oid *name = vb->name;
        size_t len = vb->name_length;
        struct val v;
        if (ri->mode == MODE_GET) {
            int ci = -1;
            if (len == t->plen + 1 + (size_t)t->idxlen &&
                snmp_oid_compare(name, t->plen, t->prefix, t->plen) == 0)
                for (int i = 0; i < t->ncols; i++)
                    if ((oid)t->cols[i] == name[t->plen])
                        ci = i;
            v.t = V_ABSENT;
            if (ci >= 0)
                t->get(t->cols[ci], name + t->plen + 1, &v);
            if (v.t == V_ABSENT)
                netsnmp_set_request_error(ri, r, SNMP_NOSUCHINSTANCE);
            else
                set_val(vb, &v);
            continue;
        }
        if (ri->mode != MODE_GETNEXT)
            continue;
        /* Where the request points relative to prefix.col.index */
        int ci = 0;
        const oid *rem = NULL;
        size_t m = 0;
        int c = snmp_oid_compare(name, len < t->plen ? len : t->plen, t->prefix, t->plen);
        if (len >= t->plen && c == 0) {
            if (len > t->plen) {
                while (ci < t->ncols && (oid)t->cols[ci] < name[t->plen])
                    ci++;
                if (ci < t->ncols && (oid)t->cols[ci] == name[t->plen]) {
                    rem = name + t->plen + 1;
                    m = len - t->plen - 1;
                }
            }
        } else if (c > 0 || (c == 0 && len >= t->plen)) {
            ci = t->ncols;
        }
        bool found = false;
        oid out[MAX_OID_LEN];
        for (; ci < t->ncols && !found; ci++, rem = NULL, m = 0) {
            int row = rem ? first_row_after(t, rem, m) : 0;
            for (; row < row_count(t); row++) {
                oid idx[2];
                row_index(t, row, idx);
                t->get(t->cols[ci], idx, &v);
                if (v.t == V_ABSENT)
                    continue;
                memcpy(out, t->prefix, t->plen * sizeof(oid));
                out[t->plen] = (oid)t->cols[ci];
                memcpy(out + t->plen + 1, idx, (size_t)t->idxlen * sizeof(oid));
                snmp_set_var_objid(vb, out, t->plen + 1 + (size_t)t->idxlen);
                set_val(vb, &v);
                found = true;
                break;
            }
        }
        /* Past the table the varbind stays unanswered (ASN_NULL): the agent core then
         * moves on to the next registered subtree. (ASN_PRIV_RETRY would ask for the
         * same subtree again and loop.) */
        (void)found;
    }
    return SNMP_ERR_NOERROR;
}

/* ---- scalars ---- */

static const oid sysobjid_sn2700[] = {1, 3, 6, 1, 4, 1, 33049, 1, 1, 1, 2700};

static int
scalar_handler(netsnmp_mib_handler *h, netsnmp_handler_registration *reg,
               netsnmp_agent_request_info *ri, netsnmp_request_info *reqs)
{
    (void)h;
    apply_events();
    if (ri->mode != MODE_GET)
        return SNMP_ERR_NOERROR;
    long which = (long)(intptr_t)reg->my_reg_void;
    for (netsnmp_request_info *r = reqs; r; r = r->next) {
        netsnmp_variable_list *vb = r->requestvb;
        switch (which) {
        case 1: {
            const char *d = "NVIDIA Onyx Switch Management, SN2700, Onyx SWv3.10.4706 (simulated)";
            snmp_set_var_typed_value(vb, ASN_OCTET_STR, d, strlen(d));
            break;
        }
        case 2:
            snmp_set_var_typed_value(vb, ASN_OBJECT_ID, sysobjid_sn2700, sizeof(sysobjid_sn2700));
            break;
        case 3:
            snmp_set_var_typed_integer(vb, ASN_TIMETICKS,
                                       (long)((uint64_t)(since_boot() * 100) & 0xffffffffu));
            break;
        case 4:
            snmp_set_var_typed_integer(vb, ASN_INTEGER, opt.ports);
            break;
        case 5:
            snmp_set_var_typed_integer(vb, ASN_TIMETICKS, 0);
            break;
        case 6: {
            const char *n = "sim-tor1";
            snmp_set_var_typed_value(vb, ASN_OCTET_STR, n, strlen(n));
            break;
        }
        }
    }
    return SNMP_ERR_NOERROR;
}

static int
reg_scalar(const char *name, const oid *o, size_t len, long which)
{
    netsnmp_handler_registration *reg =
        netsnmp_create_handler_registration(name, scalar_handler, o, len, HANDLER_CAN_RONLY);
    if (!reg)
        return -1;
    reg->my_reg_void = (void *)(intptr_t)which;
    reg->priority = 10; /* before anything of the master's own at the same OID */
    return netsnmp_register_scalar(reg) == MIB_REGISTERED_OK ? 0 : -1;
}

static int
reg_table(struct table *t)
{
    netsnmp_handler_registration *reg = netsnmp_create_handler_registration(
        t->name, table_handler, t->prefix, t->plen, HANDLER_CAN_RONLY);
    if (!reg)
        return -1;
    reg->my_reg_void = t;
    reg->priority = 10;
    return netsnmp_register_handler(reg) == MIB_REGISTERED_OK ? 0 : -1;
}

/* ---- events ---- */

static void
on_signal(int sig)
{
    if (sig == SIGUSR1)
        want_reboot = 1;
    else if (sig == SIGUSR2)
        want_cong_toggle = 1;
    else
        want_stop = 1;
}

static void
set_congestion(bool on)
{
    if (on == congested)
        return;
    if (on) {
        cong_start = since_boot();
    } else {
        wred_base += 50000.0 * cong_elapsed();
        depth_when_ended = (double)queue_depth_cells(opt.cong_port, opt.cong_tc);
    }
    congested = on;
    fprintf(stderr, "onyx-snmp-sim: congestion %s on Eth1/%d tc %d\n", on ? "begins" : "ends",
            opt.cong_port, opt.cong_tc);
}

static void
apply_events(void)
{
    if (want_reboot) {
        want_reboot = 0;
        boot = now_s();
        congested = false;
        wred_base = 0;
        fprintf(stderr, "onyx-snmp-sim: simulated reboot\n");
    }
    if (want_cong_toggle) {
        want_cong_toggle = 0;
        set_congestion(!congested);
    }
    if (opt.cong_at >= 0) {
        double t = now_s() - start_time;
        if (t >= opt.cong_at && t < opt.cong_at + opt.cong_for)
            set_congestion(true);
        else if (t >= opt.cong_at + opt.cong_for && congested) {
            set_congestion(false);
            opt.cong_at = -1;
        }
    }
}

static void
usage(void)
{
    fprintf(stderr,
            "usage: onyx-snmp-sim -x AGENTX_SOCKET [--ports N] [--qos-base 0|1] [--no-qos]\n"
            "       [--rate-bps R] [--wrap-port P] [--wrap-rate-bps R] [--down-port P]\n"
            "       [--cong-port P] [--cong-tc T] [--cong-at S] [--cong-for D] [--pidfile F]\n"
            "       [--scenario SCENARIO.json]\n"
            "signals: USR1 reboot, USR2 toggle congestion, TERM/INT stop\n");
}

int
main(int argc, char **argv)
{
    static const struct option lo[] = {{"agentx", required_argument, NULL, 'x'},
                                       {"ports", required_argument, NULL, 'n'},
                                       {"qos-base", required_argument, NULL, 'b'},
                                       {"no-qos", no_argument, NULL, 'Q'},
                                       {"rate-bps", required_argument, NULL, 'r'},
                                       {"wrap-port", required_argument, NULL, 'w'},
                                       {"wrap-rate-bps", required_argument, NULL, 'W'},
                                       {"down-port", required_argument, NULL, 'd'},
                                       {"cong-port", required_argument, NULL, 'p'},
                                       {"cong-tc", required_argument, NULL, 't'},
                                       {"cong-at", required_argument, NULL, 'a'},
                                       {"cong-for", required_argument, NULL, 'f'},
                                       {"pidfile", required_argument, NULL, 'P'},
                                       {"scenario", required_argument, NULL, 'S'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int c;
    const char *scenario_path = NULL;
    double boot_epoch = -1;
    while ((c = getopt_long(argc, argv, "x:n:h", lo, NULL)) != -1) {
        switch (c) {
        case 'x':
            opt.socket = optarg;
            break;
        case 'n':
            opt.ports = atoi(optarg);
            break;
        case 'b':
            opt.qos_base = atoi(optarg) ? 1 : 0;
            break;
        case 'Q':
            opt.qos = false;
            break;
        case 'r':
            opt.rate_bps = atof(optarg);
            break;
        case 'w':
            opt.wrap_port = atoi(optarg);
            break;
        case 'W':
            opt.wrap_rate_bps = atof(optarg);
            break;
        case 'd':
            opt.down_port = atoi(optarg);
            break;
        case 'p':
            opt.cong_port = atoi(optarg);
            break;
        case 't':
            opt.cong_tc = atoi(optarg);
            break;
        case 'a':
            opt.cong_at = atof(optarg);
            break;
        case 'f':
            opt.cong_for = atof(optarg);
            break;
        case 'P':
            opt.pidfile = optarg;
            break;
        case 'S':
            scenario_path = optarg;
            break;
        default:
            usage();
            return c == 'h' ? 0 : 2;
        }
    }
    if (scenario_path && scenario_load(scenario_path, &boot_epoch) != 0)
        return 2;
    if (!opt.socket || opt.ports < 1 || opt.ports > MAX_PORTS) {
        usage();
        return 2;
    }
    start_time = boot = now_s();
    if (scen.on && boot_epoch >= 0) /* the scenario's boot, on the monotonic clock */
        boot = now_s() - (realtime_s() - boot_epoch);

    /* A subagent that reads no config or MIB files and keeps no persistent state. */
    snmp_enable_stderrlog();
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DONT_READ_CONFIGS, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DONT_PERSIST_STATE, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DISABLE_PERSISTENT_LOAD, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DISABLE_PERSISTENT_SAVE, 1);
    netsnmp_set_mib_directory("");
    setenv("MIBS", "", 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_APPLICATION_ID, NETSNMP_DS_AGENT_ROLE, 1);
    netsnmp_ds_set_string(NETSNMP_DS_APPLICATION_ID, NETSNMP_DS_AGENT_X_SOCKET, opt.socket);
    netsnmp_ds_set_int(NETSNMP_DS_APPLICATION_ID, NETSNMP_DS_AGENT_AGENTX_PING_INTERVAL, 1);
    if (init_agent("onyx-snmp-sim") != 0) {
        fprintf(stderr, "onyx-snmp-sim: init_agent failed\n");
        return 1;
    }
    static const oid o_descr[] = {1, 3, 6, 1, 2, 1, 1, 1}, o_objid[] = {1, 3, 6, 1, 2, 1, 1, 2},
                     o_uptime[] = {1, 3, 6, 1, 2, 1, 1, 3}, o_ifnum[] = {1, 3, 6, 1, 2, 1, 2, 1},
                     o_iftlc[] = {1, 3, 6, 1, 2, 1, 31, 1, 5}, o_name[] = {1, 3, 6, 1, 2, 1, 1, 5};
    int bad = reg_scalar("sysDescr", o_descr, 8, 1) | reg_scalar("sysObjectID", o_objid, 8, 2) |
              reg_scalar("sysUpTime", o_uptime, 8, 3) | reg_scalar("ifNumber", o_ifnum, 8, 4) |
              reg_scalar("ifTableLastChange", o_iftlc, 9, 5) | reg_scalar("sysName", o_name, 8, 6);
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
        if (opt.qos || i < 2)
            bad |= reg_table(&tables[i]);
    if (bad) {
        fprintf(stderr, "onyx-snmp-sim: registration failed\n");
        return 1;
    }
    init_snmp("onyx-snmp-sim");
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (opt.pidfile) {
        FILE *f = fopen(opt.pidfile, "w");
        if (f) {
            fprintf(f, "%ld\n", (long)getpid());
            fclose(f);
        }
    }
    fprintf(stderr, "onyx-snmp-sim: %d ports, qos base %d, agentx %s\n", opt.ports, opt.qos_base,
            opt.socket);
    while (!want_stop) {
        agent_check_and_process(1);
        apply_events();
    }
    snmp_shutdown("onyx-snmp-sim");
    return 0;
}
