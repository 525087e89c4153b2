/*
 * hostile-snmp-agent: a small SNMPv2c agent that breaks the rules a collector relies on,
 * for tests/integration/test_snmp_hostile.sh. Test-only. PDUs are parsed and built by
 * net-snmp (a server session on a UDP transport); the MIB is a handful of computed rows.
 *
 *   hostile-snmp-agent --port P --community-file F [options]
 *
 * Every counter is a function of time: port k (0-based) counts (k+1) MB/s in octets
 * (half of that out) and a thousandth of it in packets, from --base (default 0) at its
 * last zero (start, a --reboot or a --clear). Options (S in seconds):
 *   --base N            counters start at N (above 2^32: the 32-bit columns differ)
 *   --dup-names         ifNames "1/1" and "Eth1/1" (both Eth1/1 once normalized), twice
 *                       "Eth1/5", and two 80-byte names equal in their first 70 bytes
 *   --rename-every S    ifIndex 2 alternates between port "Eth1/2" (counting from 0)
 *                       and port "Eth1/9" (counting from 10^12), ifTableLastChange fixed
 *   --hc-flap S         the HC columns of the first port are there for S, gone for S
 *                       (only the 32-bit ones answer); its HC multicast column likewise
 *   --clear-every S     the first port has no HC columns, 1 Gb/s, and its counters are
 *                       cleared to 0 every S (a drop that is no wrap at that speed)
 *   --restart-every S   the agent "restarts": sysUpTime goes back to 0, counters and
 *                       hrSystemUptime go on
 *   --reboot-every S    the device "reboots": sysUpTime, hrSystemUptime and counters
 *                       restart from 0
 *   --no-hr             no hrSystemUptime (HOST-RESOURCES-MIB absent)
 *   --bad-reqid N       every Nth response carries a wrong request id
 *   --nonincr           the ifHCOutOctets column answers the requested OID again
 *   --endless           the ifName column never ends (ghost rows from ifIndex 1000)
 *   --delay-ms D        every response is sent D ms late (a slow agent)
 *   --slow-vendor-ms D  requests into the enterprise subtree (1.3.6.1.4.1: vendor tables
 *                       such as MELLANOX-QOS-MIB) are answered D ms late (a slow table)
 *   --pfc               MELLANOX-QOS-MIB's PFC table for every port and priorities 0..7:
 *                       port k pauses priority 3 for (k+1) ms a second, in (k+1) frames
 * SIGUSR1 toggles --clear on demand: the first port's counters are cleared at once.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include <net-snmp/net-snmp-config.h>
#include <net-snmp/net-snmp-includes.h>

#define MAX_ENTS 1024
#define MAX_VB_PER_RESPONSE 400
#define NPORTS_MAX 8
#define GHOST_BASE 1000

struct ent {
    oid o[MAX_OID_LEN];
    size_t len;
    u_char type;
    uint64_t u;
    char s[100];
    const oid *ov;
    size_t ovlen;
};

struct port {
    uint32_t ifindex;
    char name[100];
    uint64_t offset; /* added to the port's counters */
    bool hc;         /* HC columns answer */
    bool hc_mcast;   /* ifHCInMulticastPkts answers */
    uint32_t highspeed;
    double zero; /* time its counters last started from --base */
};

static struct {
    char community[256];
    uint64_t base;
    bool dup_names, no_hr, nonincr, endless, pfc;
    double rename_every, hc_flap, clear_every, restart_every, reboot_every;
    unsigned bad_reqid;
    unsigned delay_ms, slow_vendor_ms;
} opt;

static struct ent tab[MAX_ENTS];
static size_t ntab;
static double t0;
static volatile sig_atomic_t want_clear;
static double manual_clear_at = -1;
static unsigned long responses;

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Responses held back (--delay-ms, --slow-vendor-ms): the agent keeps answering others. */
#define MAX_LATE 256
static struct {
    double due;
    netsnmp_session *s;
    netsnmp_pdu *r;
} late[MAX_LATE];
static size_t n_late;

static void
send_due(void)
{
    double now = now_s();
    for (size_t i = 0; i < n_late;) {
        if (late[i].due <= now) {
            if (snmp_send(late[i].s, late[i].r) == 0)
                snmp_free_pdu(late[i].r);
            late[i] = late[--n_late];
        } else {
            i++;
        }
    }
}

static void
on_usr1(int sig)
{
    (void)sig;
    want_clear = 1;
}

static struct ent *
put(const oid *pfx, size_t plen, long idx, u_char type)
{
    if (ntab >= MAX_ENTS)
        return NULL;
    struct ent *e = &tab[ntab++];
    memset(e, 0, sizeof(*e));
    memcpy(e->o, pfx, plen * sizeof(oid));
    e->len = plen;
    if (idx >= 0)
        e->o[e->len++] = (oid)idx;
    e->type = type;
    return e;
}

static void
put_u(const oid *pfx, size_t plen, long idx, u_char type, uint64_t u)
{
    struct ent *e = put(pfx, plen, idx, type);
    if (e)
        e->u = u;
}

static void
put_s(const oid *pfx, size_t plen, long idx, const char *s)
{
    struct ent *e = put(pfx, plen, idx, ASN_OCTET_STR);
    if (e)
        snprintf(e->s, sizeof(e->s), "%s", s);
}

static int
cmp_ent(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    return snmp_oid_compare(x->o, x->len, y->o, y->len);
}

static const oid o_sysdescr[] = {1, 3, 6, 1, 2, 1, 1, 1, 0};
static const oid o_sysobjid[] = {1, 3, 6, 1, 2, 1, 1, 2, 0};
static const oid o_sysuptime[] = {1, 3, 6, 1, 2, 1, 1, 3, 0};
static const oid o_hrup[] = {1, 3, 6, 1, 2, 1, 25, 1, 1, 0};
static const oid o_iftlc[] = {1, 3, 6, 1, 2, 1, 31, 1, 5, 0};
static const oid v_objid[] = {1, 3, 6, 1, 4, 1, 8072, 3, 2, 10};
static const oid o_ift[] = {1, 3, 6, 1, 2, 1, 2, 2, 1};     /* + column, ifIndex */
static const oid o_ifx[] = {1, 3, 6, 1, 2, 1, 31, 1, 1, 1}; /* + column, ifIndex */
static const oid o_ifname[] = {1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1};
static const oid o_hcout[] = {1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 10};
/* MELLANOX-QOS-MIB PFC table entry: + column, ifIndex, priority */
static const oid o_pfc[] = {1, 3, 6, 1, 4, 1, 33049, 15, 1, 2, 1};

static void
col(const oid *tbl, size_t tlen, oid c, uint32_t ifindex, u_char type, uint64_t u)
{
    oid o[MAX_OID_LEN];
    memcpy(o, tbl, tlen * sizeof(oid));
    o[tlen] = c;
    put_u(o, tlen + 1, ifindex, type, u);
}

static void
col_s(const oid *tbl, size_t tlen, oid c, uint32_t ifindex, const char *s)
{
    oid o[MAX_OID_LEN];
    memcpy(o, tbl, tlen * sizeof(oid));
    o[tlen] = c;
    put_s(o, tlen + 1, ifindex, s);
}

static double
last_multiple(double t, double every)
{
    return every > 0 ? (double)(long long)(t / every) * every : 0;
}

/* The ports and their state at time t (seconds since start). */
static size_t
ports_at(double t, struct port *p)
{
    size_t n = 0;
    double reboot_zero = last_multiple(t, opt.reboot_every);
    if (opt.dup_names) {
        static const uint32_t idx[] = {1, 105, 7, 8, 20, 21};
        for (size_t i = 0; i < 6; i++) {
            memset(&p[n], 0, sizeof(p[n]));
            p[n].ifindex = idx[i];
            if (i < 4) {
                static const char *const nm[] = {"1/1", "Eth1/1", "Eth1/5", "Eth1/5"};
                snprintf(p[n].name, sizeof(p[n].name), "%s", nm[i]);
            } else {
                memset(p[n].name, 'x', 80);
                p[n].name[80] = '\0';
                if (i == 5)
                    p[n].name[70] = 'y';
            }
            n++;
        }
    } else {
        size_t np = opt.rename_every > 0 ? 2 : 4;
        for (size_t i = 0; i < np; i++) {
            memset(&p[n], 0, sizeof(p[n]));
            p[n].ifindex = (uint32_t)i + 1;
            snprintf(p[n].name, sizeof(p[n].name), "Eth1/%zu", i + 1);
            n++;
        }
        if (opt.rename_every > 0 && ((long long)(t / opt.rename_every)) % 2 == 1) {
            snprintf(p[1].name, sizeof(p[1].name), "Eth1/9");
            p[1].offset = 1000000000000ULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        p[i].hc = p[i].hc_mcast = true;
        p[i].highspeed = 100000;
        p[i].zero = reboot_zero;
    }
    if (opt.hc_flap > 0 && ((long long)(t / opt.hc_flap)) % 2 == 1)
        p[0].hc = p[0].hc_mcast = false;
    if (opt.clear_every > 0 || manual_clear_at >= 0) {
        p[0].hc = p[0].hc_mcast = false;
        p[0].highspeed = 1000;
        double z = last_multiple(t, opt.clear_every);
        if (manual_clear_at > z)
            z = manual_clear_at;
        if (z > p[0].zero)
            p[0].zero = z;
    }
    return n;
}

static void
build(void)
{
    struct port ports[NPORTS_MAX];
    double t = now_s() - t0;
    size_t n = ports_at(t, ports);
    double agent_zero = last_multiple(t, opt.restart_every);
    double reboot_zero = last_multiple(t, opt.reboot_every);
    if (reboot_zero > agent_zero)
        agent_zero = reboot_zero;
    ntab = 0;
    put_s(o_sysdescr, 9, -1, "hostile test agent (Linux)");
    struct ent *e = put(o_sysobjid, 9, -1, ASN_OBJECT_ID);
    e->ov = v_objid;
    e->ovlen = sizeof(v_objid) / sizeof(oid);
    put_u(o_sysuptime, 9, -1, ASN_TIMETICKS, (uint64_t)((t - agent_zero) * 100) + 1);
    if (!opt.no_hr)
        put_u(o_hrup, 10, -1, ASN_TIMETICKS, (uint64_t)((100000 + t - reboot_zero) * 100));
    put_u(o_iftlc, 10, -1, ASN_TIMETICKS, 0); /* never moves, whatever happens */
    for (size_t k = 0; k < n; k++) {
        const struct port *p = &ports[k];
        double rate = 1e6 * (double)(k + 1);
        double dt = t - p->zero;
        uint64_t in = opt.base + p->offset + (uint64_t)(rate * dt);
        uint64_t out = opt.base + p->offset + (uint64_t)(rate / 2 * dt);
        uint64_t uc = opt.base + p->offset + (uint64_t)(rate / 1000 * dt);
        uint64_t mc = (uint64_t)(rate / 4000 * dt), bc = (uint64_t)(rate / 8000 * dt);
        uint32_t x = p->ifindex;
        col_s(o_ift, 9, 2, x, p->name); /* ifDescr */
        col(o_ift, 9, 5, x, ASN_GAUGE,
            p->highspeed >= 4000 ? 0xffffffffU : p->highspeed * 1000000U);
        col(o_ift, 9, 7, x, ASN_INTEGER, 1);
        col(o_ift, 9, 8, x, ASN_INTEGER, 1);
        col(o_ift, 9, 10, x, ASN_COUNTER, in & 0xffffffffU);
        col(o_ift, 9, 11, x, ASN_COUNTER, uc & 0xffffffffU);
        col(o_ift, 9, 16, x, ASN_COUNTER, out & 0xffffffffU);
        col_s(o_ifx, 10, 1, x, p->name);
        col(o_ifx, 10, 2, x, ASN_COUNTER, mc & 0xffffffffU);
        col(o_ifx, 10, 3, x, ASN_COUNTER, bc & 0xffffffffU);
        if (p->hc) {
            col(o_ifx, 10, 6, x, ASN_COUNTER64, in);
            col(o_ifx, 10, 7, x, ASN_COUNTER64, uc);
            col(o_ifx, 10, 9, x, ASN_COUNTER64, bc);
            col(o_ifx, 10, 10, x, ASN_COUNTER64, out);
        }
        if (p->hc_mcast)
            col(o_ifx, 10, 8, x, ASN_COUNTER64, mc);
        col(o_ifx, 10, 15, x, ASN_GAUGE, p->highspeed);
        col_s(o_ifx, 10, 18, x, "hostile");
        if (opt.pfc) {
            oid o[MAX_OID_LEN];
            memcpy(o, o_pfc, sizeof(o_pfc));
            size_t len = sizeof(o_pfc) / sizeof(oid);
            o[len + 1] = x;
            for (oid c = 3; c <= 6; c++) {
                o[len] = c;
                for (uint32_t prio = 0; prio < 8; prio++) {
                    bool paused = prio == 3 && (c == 3 || c == 4);
                    /* frames (3) and milliseconds (4) received; none sent */
                    uint64_t v = paused ? (uint64_t)((double)(k + 1) * dt) : 0;
                    put_u(o, len + 2, prio, ASN_COUNTER64, v);
                }
            }
        }
    }
    qsort(tab, ntab, sizeof(tab[0]), cmp_ent);
}

static const struct ent *
get_exact(const oid *o, size_t len)
{
    for (size_t i = 0; i < ntab; i++)
        if (snmp_oid_compare(tab[i].o, tab[i].len, o, len) == 0)
            return &tab[i];
    return NULL;
}

/* The first row after o; ghost ifName rows too with --endless. */
static const struct ent *
get_next(const oid *o, size_t len)
{
    static struct ent ghost;
    const struct ent *best = NULL;
    for (size_t i = 0; i < ntab; i++) {
        if (snmp_oid_compare(tab[i].o, tab[i].len, o, len) > 0) {
            best = &tab[i];
            break;
        }
    }
    if (opt.endless) {
        size_t nl = sizeof(o_ifname) / sizeof(oid);
        long long idx = -1;
        if (len > nl && snmp_oid_compare(o, nl, o_ifname, nl) == 0)
            idx = (long long)o[nl] + 1 < GHOST_BASE ? GHOST_BASE : (long long)o[nl] + 1;
        else if (snmp_oid_compare(o, len, o_ifname, nl) < 0)
            idx = GHOST_BASE;
        oid g[MAX_OID_LEN];
        memcpy(g, o_ifname, sizeof(o_ifname));
        g[nl] = (oid)idx;
        if (idx >= 0 && idx < 0x7fffffff &&
            (!best || snmp_oid_compare(g, nl + 1, best->o, best->len) < 0)) {
            memset(&ghost, 0, sizeof(ghost));
            memcpy(ghost.o, g, (nl + 1) * sizeof(oid));
            ghost.len = nl + 1;
            ghost.type = ASN_OCTET_STR;
            snprintf(ghost.s, sizeof(ghost.s), "ghost%lld", idx);
            best = &ghost;
        }
    }
    return best;
}

static void
add_ent(netsnmp_pdu *r, const oid *name, size_t len, const struct ent *e)
{
    struct counter64 c64;
    long l;
    switch (e->type) {
    case ASN_OCTET_STR:
        snmp_pdu_add_variable(r, name, len, ASN_OCTET_STR, e->s, strlen(e->s));
        break;
    case ASN_OBJECT_ID:
        snmp_pdu_add_variable(r, name, len, ASN_OBJECT_ID, e->ov, e->ovlen * sizeof(oid));
        break;
    case ASN_COUNTER64:
        c64.high = (u_long)(e->u >> 32);
        c64.low = (u_long)(e->u & 0xffffffffU);
        snmp_pdu_add_variable(r, name, len, ASN_COUNTER64, &c64, sizeof(c64));
        break;
    default:
        l = (long)e->u;
        snmp_pdu_add_variable(r, name, len, e->type, &l, sizeof(l));
        break;
    }
}

/* GETNEXT of one varbind: the next row, or the requested OID again (--nonincr). */
static bool
next_into(netsnmp_pdu *r, const oid *o, size_t len, oid *nxt, size_t *nlen)
{
    size_t hl = sizeof(o_hcout) / sizeof(oid);
    const struct ent *e = get_next(o, len);
    if (opt.nonincr && len > hl && snmp_oid_compare(o, hl, o_hcout, hl) == 0) {
        const struct ent *same = get_exact(o, len);
        if (same) { /* answers the row asked from, not the one after it */
            add_ent(r, o, len, same);
            memcpy(nxt, o, len * sizeof(oid));
            *nlen = len;
            return true;
        }
    }
    if (!e) {
        snmp_pdu_add_variable(r, o, len, SNMP_ENDOFMIBVIEW, NULL, 0);
        return false;
    }
    add_ent(r, e->o, e->len, e);
    memcpy(nxt, e->o, e->len * sizeof(oid));
    *nlen = e->len;
    return true;
}

static int
on_pdu(int op, netsnmp_session *s, int reqid, netsnmp_pdu *pdu, void *magic)
{
    (void)reqid;
    (void)magic;
    if (op != NETSNMP_CALLBACK_OP_RECEIVED_MESSAGE || !pdu)
        return 1;
    if (pdu->version != SNMP_VERSION_2c || pdu->community_len != strlen(opt.community) ||
        memcmp(pdu->community, opt.community, pdu->community_len) != 0)
        return 1; /* like a real agent: a wrong community gets no answer */
    if (pdu->command != SNMP_MSG_GET && pdu->command != SNMP_MSG_GETNEXT &&
        pdu->command != SNMP_MSG_GETBULK)
        return 1;
    if (want_clear) {
        want_clear = 0;
        manual_clear_at = now_s() - t0;
    }
    build();
    long nonrep = pdu->command == SNMP_MSG_GETBULK ? pdu->non_repeaters : 0;
    long maxrep = pdu->command == SNMP_MSG_GETBULK ? pdu->max_repetitions : 1;
    netsnmp_pdu *r = snmp_clone_pdu(pdu);
    if (!r)
        return 1;
    snmp_free_varbind(r->variables);
    r->variables = NULL;
    r->command = SNMP_MSG_RESPONSE;
    r->errstat = 0;
    r->errindex = 0;
    if (pdu->command == SNMP_MSG_GET) {
        for (netsnmp_variable_list *v = pdu->variables; v; v = v->next_variable) {
            const struct ent *e = get_exact(v->name, v->name_length);
            if (e)
                add_ent(r, v->name, v->name_length, e);
            else
                snmp_pdu_add_variable(r, v->name, v->name_length, SNMP_NOSUCHOBJECT, NULL, 0);
        }
    } else {
        oid cur[64][MAX_OID_LEN];
        size_t curlen[64], nrep = 0, nvb = 0;
        long i = 0;
        for (netsnmp_variable_list *v = pdu->variables; v; v = v->next_variable, i++) {
            oid tmp[MAX_OID_LEN];
            size_t tl;
            if (i < nonrep) {
                next_into(r, v->name, v->name_length, tmp, &tl);
                nvb++;
            } else if (nrep < 64) {
                memcpy(cur[nrep], v->name, v->name_length * sizeof(oid));
                curlen[nrep++] = v->name_length;
            }
        }
        if (maxrep < 1)
            maxrep = 1;
        for (long rep = 0; rep < maxrep && nrep && nvb + nrep <= MAX_VB_PER_RESPONSE; rep++) {
            bool any = false;
            for (size_t j = 0; j < nrep; j++) {
                any |= next_into(r, cur[j], curlen[j], cur[j], &curlen[j]);
                nvb++;
            }
            if (!any)
                break;
        }
    }
    responses++;
    if (opt.bad_reqid && responses % opt.bad_reqid == 0)
        r->reqid += 1000; /* nobody asked for that */
    static const oid o_enterprises[] = {1, 3, 6, 1, 4, 1};
    double delay = opt.delay_ms / 1e3;
    if (opt.slow_vendor_ms && pdu->variables &&
        snmp_oid_compare(pdu->variables->name, pdu->variables->name_length, o_enterprises, 6) >= 0)
        delay += opt.slow_vendor_ms / 1e3;
    if (delay > 0 && n_late < MAX_LATE) { /* sent from the main loop when due */
        late[n_late].due = now_s() + delay;
        late[n_late].s = s;
        late[n_late++].r = r;
        return 1;
    }
    if (snmp_send(s, r) == 0)
        snmp_free_pdu(r);
    return 1;
}

static void
usage(void)
{
    fprintf(stderr, "usage: hostile-snmp-agent --port P --community-file F [options]\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"port", required_argument, NULL, 'p'},
        {"community-file", required_argument, NULL, 'c'},
        {"base", required_argument, NULL, 'b'},
        {"dup-names", no_argument, NULL, 'd'},
        {"rename-every", required_argument, NULL, 'r'},
        {"hc-flap", required_argument, NULL, 'h'},
        {"clear-every", required_argument, NULL, 'C'},
        {"restart-every", required_argument, NULL, 'R'},
        {"reboot-every", required_argument, NULL, 'B'},
        {"no-hr", no_argument, NULL, 'H'},
        {"bad-reqid", required_argument, NULL, 'q'},
        {"nonincr", no_argument, NULL, 'n'},
        {"endless", no_argument, NULL, 'e'},
        {"delay-ms", required_argument, NULL, 'D'},
        {"slow-vendor-ms", required_argument, NULL, 'V'},
        {"pfc", no_argument, NULL, 'P'},
        {NULL, 0, NULL, 0},
    };
    int port = 0, c;
    const char *cfile = NULL;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'p':
            port = atoi(optarg);
            break;
        case 'c':
            cfile = optarg;
            break;
        case 'b':
            opt.base = strtoull(optarg, NULL, 10);
            break;
        case 'd':
            opt.dup_names = true;
            break;
        case 'r':
            opt.rename_every = atof(optarg);
            break;
        case 'h':
            opt.hc_flap = atof(optarg);
            break;
        case 'C':
            opt.clear_every = atof(optarg);
            break;
        case 'R':
            opt.restart_every = atof(optarg);
            break;
        case 'B':
            opt.reboot_every = atof(optarg);
            break;
        case 'H':
            opt.no_hr = true;
            break;
        case 'q':
            opt.bad_reqid = (unsigned)atoi(optarg);
            break;
        case 'n':
            opt.nonincr = true;
            break;
        case 'e':
            opt.endless = true;
            break;
        case 'D':
            opt.delay_ms = (unsigned)atoi(optarg);
            break;
        case 'V':
            opt.slow_vendor_ms = (unsigned)atoi(optarg);
            break;
        case 'P':
            opt.pfc = true;
            break;
        default:
            usage();
        }
    }
    if (port <= 0 || !cfile)
        usage();
    FILE *f = fopen(cfile, "r");
    if (!f || !fgets(opt.community, sizeof(opt.community), f)) {
        fprintf(stderr, "hostile-snmp-agent: cannot read %s\n", cfile);
        return 1;
    }
    fclose(f);
    opt.community[strcspn(opt.community, "\r\n")] = '\0';

    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DONT_READ_CONFIGS, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DISABLE_PERSISTENT_LOAD, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DISABLE_PERSISTENT_SAVE, 1);
    netsnmp_set_mib_directory("");
    setenv("MIBS", "", 1);
    init_snmp("hostile-snmp-agent");
    char addr[64];
    snprintf(addr, sizeof(addr), "udp:127.0.0.1:%d", port);
    netsnmp_transport *tr = netsnmp_transport_open_server("hostile-snmp-agent", addr);
    if (!tr) {
        fprintf(stderr, "hostile-snmp-agent: cannot listen on %s\n", addr);
        return 1;
    }
    netsnmp_session sess;
    snmp_sess_init(&sess);
    sess.peername = SNMP_DEFAULT_PEERNAME;
    sess.version = SNMP_DEFAULT_VERSION;
    sess.callback = on_pdu;
    sess.isAuthoritative = SNMP_SESS_UNKNOWNAUTH;
    netsnmp_session *ss = snmp_add(&sess, tr, NULL, NULL);
    if (!ss) {
        fprintf(stderr, "hostile-snmp-agent: cannot add the session\n");
        return 1;
    }
    signal(SIGUSR1, on_usr1);
    t0 = now_s();
    fprintf(stderr, "hostile-snmp-agent: listening on %s\n", addr);
    for (;;) {
        int fds = 0, block = 1;
        fd_set fs;
        struct timeval tv = {1, 0};
        FD_ZERO(&fs);
        snmp_select_info(&fds, &fs, &tv, &block);
        double wait = 1.0, now = now_s();
        for (size_t i = 0; i < n_late; i++)
            if (late[i].due - now < wait)
                wait = late[i].due - now > 0 ? late[i].due - now : 0;
        tv.tv_sec = (time_t)wait;
        tv.tv_usec = (suseconds_t)((wait - (double)tv.tv_sec) * 1e6);
        int n = select(fds, &fs, NULL, NULL, &tv);
        if (n > 0)
            snmp_read(&fs);
        else if (n < 0 && errno != EINTR)
            break;
        send_due();
    }
    return 0;
}
