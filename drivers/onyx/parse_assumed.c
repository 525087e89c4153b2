/*
 * ONYX output layouts that are NOT verified against a real switch.
 *
 * onyx-facts.md has no capture of these outputs (section 7, "Not found"). Each parser
 * below implements ONE explicit assumption, written here and nowhere else; the ONYX
 * simulator (tests/sim/onyx/onyx_sim.py) prints exactly these layouts. If a real device
 * differs, this file is the only one to change.
 *
 * | command                                        | assumption (UNVERIFIED)                     |
 * |------------------------------------------------|---------------------------------------------|
 * | show interfaces ethernet counters tc N         | A1: the layout the facts DERIVE from a      |
 * | show interfaces ethernet counters pfc prio N   |     third-party parser: per port `Eth1/N:`, |
 * |                                                |     then `TC N:` / `PFC N:`, optional `Rx` /|
 * |                                                |     `Tx` lines, then `<value>  <name>` lines|
 * |                                                |     (names below). Queue depth and its      |
 * |                                                |     watermark are assumed in the TC block   |
 * |                                                |     as `queue depth (bytes)` and            |
 * |                                                |     `max queue depth (bytes)`; PFC pause    |
 * |                                                |     time as `pause duration (usec)` (msec   |
 * |                                                |     accepted when the name says so).        |
 * | show clock                                     | A2: `Time: HH:MM:SS[.frac]`, `Date:         |
 * |                                                |     YYYY/MM/DD`, optional `UTC offset:`     |
 * |                                                |     (`same as UTC` or `+HH:MM`/`-HHMM`).    |
 * | show telemetry flows                           | A3: a table, one row per flow rule; header  |
 * |                                                |     `Rule  Packets  Bytes  ECN-marked       |
 * |                                                |     Dropped  Queue-depth`, columns found by |
 * |                                                |     header name (any order, extra columns   |
 * |                                                |     ignored), a dashed ruler optional.      |
 * | show interfaces ethernet <p> congestion-control| A4: the JSON form's elements as blocks: a   |
 * | (text form; its JSON form is VERBATIM)         |     title line `Interface ethernet 1/1` or  |
 * |                                                |     `TC-N`, then indented `Key: value` lines|
 * |                                                |     with the JSON form's keys (`ECN marked  |
 * |                                                |     packets`, `Mode`, `RED dropped packets`,|
 * |                                                |     ...); key padding free.                 |
 * | show ipv4 access-lists NAME                    | A5: one line per entry holding             |
 * | (the per-entry counters of the flow-rule ACL)  |     `seq-number N`, its counters on that    |
 * |                                                |     line or the indented lines below it up  |
 * |                                                |     to the next entry: a number next to the |
 * |                                                |     word packets and one next to bytes      |
 * |                                                |     (`1234 packets`, `packets: 1234`, `Bytes|
 * |                                                |     = 9`), any case, any order.             |
 * | WJH time stamps (Sample Window, raw Timestamp) | A6: the device's local time in the zone     |
 * |                                                |     `show clock` states on its `UTC offset` |
 * |                                                |     line (the tables print no zone).        |
 * | show lldp interfaces ethernet remote           | A7: the JSON form's elements (facts 2.9, a  |
 * | (text form; only its JSON form is in the       |     third-party sample) as blocks: a port   |
 * |  facts, and that from a third party's test)    |     line `Eth1/1`, maybe `Eth1/1 (Po100)`   |
 * |                                                |     or `Eth1/1:`, then `Key : value` lines  |
 * |                                                |     with the JSON form's keys (`Remote      |
 * |                                                |     chassis id`, `Remote port-id`, `Remote  |
 * |                                                |     port description`, `Remote system name`,|
 * |                                                |     `port id subtype`), any case and        |
 * |                                                |     padding; a line may carry more `key :   |
 * |                                                |     value` pairs after ` ; ` (`... ; port id|
 * |                                                |     subtype : Interface Name (5)`); `Remote |
 * |                                                |     Index` starts another neighbour of the  |
 * |                                                |     same port. Other lines are ignored;     |
 * |                                                |     `N/A` / `Not Advertised` read as absent.|
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "parse.h"
#include "parse_int.h"

/* ---------------- A1: per-TC and PFC counters ---------------- */

enum group { G_NONE, G_TC, G_PFC };

static int
parse_grouped(const char *text, size_t len, struct onyx_samples *out, enum group want, char *errbuf,
              size_t errlen)
{
    size_t pos = 0, ll;
    const char *ls;
    char port[ONYX_LABEL_VALUE_MAX] = "";
    char idx[8] = "";
    const char *dir = NULL;
    size_t blocks = 0;
    while (onyx_next_line(text, len, &pos, &ls, &ll)) {
        const char *t = ls;
        size_t tn = ll;
        onyx_trim(&t, &tn);
        if (tn == 0)
            continue;
        if (t[tn - 1] == ':' && onyx_is_port_name(t, tn - 1)) {
            size_t n = tn - 1 < sizeof(port) ? tn - 1 : sizeof(port) - 1;
            memcpy(port, t, n);
            port[n] = '\0';
            idx[0] = '\0';
            dir = NULL;
            continue;
        }
        const char *kw = want == G_TC ? "TC" : "PFC";
        size_t kwn = strlen(kw);
        if (tn > kwn + 2 && strncasecmp(t, kw, kwn) == 0 && t[kwn] == ' ' && t[tn - 1] == ':') {
            uint64_t v;
            size_t used;
            if (port[0] && onyx_parse_u64(t + kwn + 1, tn - kwn - 2, &v, &used) && v < 16) {
                snprintf(idx, sizeof(idx), "%u", (unsigned)v);
                dir = want == G_TC ? "tx" : NULL;
                blocks++;
            } else {
                idx[0] = '\0';
            }
            continue;
        }
        if (onyx_eq(t, tn, "Rx") || onyx_eq(t, tn, "Tx")) {
            dir = (t[0] == 'R' || t[0] == 'r') ? "rx" : "tx";
            continue;
        }
        if (!port[0] || !idx[0] || !isdigit((unsigned char)t[0]))
            continue;
        uint64_t v;
        size_t used;
        if (!onyx_parse_u64(t, tn, &v, &used))
            continue;
        const char *name = t + used;
        size_t nn = tn - used;
        onyx_trim(&name, &nn);
        int rc = 0;
        if (want == G_TC) {
            if (onyx_eq(name, nn, "packets"))
                rc = onyx_add_counter(out, FS_M_QUEUE_TX_PACKETS, v, 1, "interface", port, "tc",
                                      idx, NULL, NULL);
            else if (onyx_eq(name, nn, "bytes"))
                rc = onyx_add_counter(out, FS_M_QUEUE_TX_BYTES, v, 1, "interface", port, "tc", idx,
                                      NULL, NULL);
            else if (onyx_eq(name, nn, "unicast no buffer discard"))
                rc = onyx_add_counter(out, FS_M_QUEUE_NO_BUFFER_DROPPED, v, 1, "interface", port,
                                      "tc", idx, NULL, NULL);
            else if (onyx_eq(name, nn, "wred discard"))
                rc = onyx_add_counter(out, FS_M_QUEUE_WRED_DROPPED, v, 1, "interface", port, "tc",
                                      idx, NULL, NULL);
            else if (onyx_eq(name, nn, "ecn marked packets"))
                rc = onyx_add_counter(out, FS_M_QUEUE_ECN_MARKED, v, 1, "interface", port, "tc",
                                      idx, NULL, NULL);
            else if (onyx_eq(name, nn, "queue depth (bytes)"))
                rc = onyx_add_gauge(out, FS_M_QUEUE_DEPTH, (double)v, "interface", port, "tc", idx,
                                    NULL, NULL);
            else if (onyx_eq(name, nn, "max queue depth (bytes)"))
                rc = onyx_add_gauge(out, FS_M_QUEUE_DEPTH_MAX, (double)v, "interface", port, "tc",
                                    idx, NULL, NULL);
        } else if (dir) {
            if (onyx_eq(name, nn, "pause packets"))
                rc = onyx_add_counter(out, FS_M_PFC_PAUSE_FRAMES, v, 1, "interface", port,
                                      "direction", dir, "priority", idx);
            else if (nn >= 14 && strncasecmp(name, "pause duration", 14) == 0) {
                double scale = 1e-6;
                for (size_t i = 0; i + 4 <= nn; i++)
                    if (strncasecmp(name + i, "msec", 4) == 0)
                        scale = 1e-3;
                rc = onyx_add_counter(out, FS_M_PFC_PAUSE_SECONDS, v, scale, "interface", port,
                                      "direction", dir, "priority", idx);
            }
        }
        if (rc < 0) {
            onyx_errf(errbuf, errlen, "out of memory");
            return -1;
        }
    }
    if (blocks == 0) {
        onyx_errf(errbuf, errlen,
                  want == G_TC ? "counters tc: no `TC N:` block"
                               : "counters pfc: no `PFC N:` block");
        return -1;
    }
    return 0;
}

int
onyx_parse_tc_counters(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                       size_t errlen)
{
    return parse_grouped(text, len, out, G_TC, errbuf, errlen);
}

int
onyx_parse_pfc_counters(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                        size_t errlen)
{
    return parse_grouped(text, len, out, G_PFC, errbuf, errlen);
}

/* ---------------- A2: show clock ---------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (no time zone involved). */
static int64_t
days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* A `UTC offset` value: "+01:00", "-0530" (at most 14 h); "same as UTC" and anything else
 * is not one. */
static bool
utc_offset_value(const char *val, int64_t *offset_s)
{
    int oh = 0, om = 0;
    char sign = val[0];
    if ((sign == '+' || sign == '-') &&
        (sscanf(val + 1, "%2d:%2d", &oh, &om) >= 1 || sscanf(val + 1, "%2d%2d", &oh, &om) >= 1) &&
        oh >= 0 && oh <= 14 && om >= 0 && om <= 59) {
        *offset_s = (sign == '-' ? -1 : 1) * (oh * 3600 + om * 60);
        return true;
    }
    return false;
}

int
onyx_parse_clock(const char *text, size_t len, int64_t *device_us, int64_t *resolution_us,
                 char *errbuf, size_t errlen)
{
    size_t pos = 0, kn, vn;
    const char *k, *v;
    int hh = -1, mi = 0, ss = 0, y = -1, mo = 0, dd = 0;
    int64_t frac_us = 0, res = 1000000, offset_s = 0;
    while (onyx_next_field(text, len, &pos, &k, &kn, &v, &vn)) {
        char val[64];
        size_t n = vn < sizeof(val) - 1 ? vn : sizeof(val) - 1;
        memcpy(val, v, n);
        val[n] = '\0';
        if (onyx_eq(k, kn, "Time")) {
            char frac[16] = "";
            int got = sscanf(val, "%d:%d:%d.%15[0-9]", &hh, &mi, &ss, frac);
            if (got < 3) {
                hh = -1;
                continue;
            }
            if (got == 4) {
                size_t fd = strlen(frac);
                int64_t f = 0, r = 1000000;
                for (size_t i = 0; i < fd && i < 6; i++) {
                    f = f * 10 + (frac[i] - '0');
                    r /= 10;
                }
                for (size_t i = fd; i < 6; i++)
                    f *= 10;
                frac_us = f;
                res = r ? r : 1;
            }
        } else if (onyx_eq(k, kn, "Date")) {
            if (sscanf(val, "%d/%d/%d", &y, &mo, &dd) != 3 &&
                sscanf(val, "%d-%d-%d", &y, &mo, &dd) != 3)
                y = -1;
        } else if (onyx_eq(k, kn, "UTC offset")) {
            utc_offset_value(val, &offset_s);
        }
    }
    /* Every field bounded (a year or minute of %d is any int) before it is scaled to µs. */
    if (hh < 0 || y < 1970 || y > 9999 || mo < 1 || mo > 12 || dd < 1 || dd > 31 || hh > 23 ||
        mi < 0 || mi > 59 || ss < 0 || ss > 60) {
        onyx_errf(errbuf, errlen, "show clock: no Time/Date lines in range");
        return -1;
    }
    int64_t secs = days_from_civil(y, (unsigned)mo, (unsigned)dd) * 86400 + hh * 3600 + mi * 60 +
                   ss - offset_s;
    *device_us = secs * 1000000 + frac_us;
    *resolution_us = res;
    return 0;
}

/* ---------------- A3: show telemetry flows ---------------- */

#define FLOW_MAX_COLS 16

enum flow_col { FC_OTHER, FC_RULE, FC_PACKETS, FC_BYTES, FC_ECN, FC_DROPPED, FC_QDEPTH };

static enum flow_col
flow_col_kind(const char *s, size_t n)
{
    char low[32];
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < sizeof(low); i++)
        if (isalnum((unsigned char)s[i]))
            low[o++] = (char)tolower((unsigned char)s[i]);
    low[o] = '\0';
    if (!strcmp(low, "rule") || !strcmp(low, "flowrule") || !strcmp(low, "name"))
        return FC_RULE;
    if (!strcmp(low, "packets"))
        return FC_PACKETS;
    if (!strcmp(low, "bytes"))
        return FC_BYTES;
    if (!strcmp(low, "ecnmarked"))
        return FC_ECN;
    if (!strcmp(low, "dropped"))
        return FC_DROPPED;
    if (!strcmp(low, "queuedepth"))
        return FC_QDEPTH;
    return FC_OTHER;
}

int
onyx_parse_telemetry_flows(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                           size_t errlen)
{
    size_t pos = 0, ll;
    const char *ls;
    enum flow_col cols[FLOW_MAX_COLS];
    size_t ncols = 0;
    bool have_header = false;
    while (onyx_next_line(text, len, &pos, &ls, &ll)) {
        const char *tok[FLOW_MAX_COLS];
        size_t tokn[FLOW_MAX_COLS], nt = 0, i = 0;
        while (i < ll && nt < FLOW_MAX_COLS) {
            while (i < ll && isspace((unsigned char)ls[i]))
                i++;
            if (i >= ll)
                break;
            tok[nt] = ls + i;
            while (i < ll && !isspace((unsigned char)ls[i]))
                i++;
            tokn[nt] = (size_t)(ls + i - tok[nt]);
            nt++;
        }
        if (nt == 0 || tok[0][0] == '-')
            continue;
        if (!have_header) {
            if (flow_col_kind(tok[0], tokn[0]) != FC_RULE)
                continue;
            for (size_t c = 0; c < nt; c++)
                cols[c] = flow_col_kind(tok[c], tokn[c]);
            ncols = nt;
            have_header = true;
            continue;
        }
        if (nt != ncols)
            continue; /* a wrapped or foreign line */
        char rule[ONYX_LABEL_VALUE_MAX];
        rule[0] = '\0';
        for (size_t c = 0; c < nt; c++)
            if (cols[c] == FC_RULE)
                snprintf(rule, sizeof(rule), "%.*s", (int)tokn[c], tok[c]);
        if (!rule[0])
            continue;
        for (size_t c = 0; c < nt; c++) {
            uint64_t v;
            size_t used;
            if (cols[c] == FC_RULE || cols[c] == FC_OTHER ||
                !onyx_parse_u64(tok[c], tokn[c], &v, &used) || used != tokn[c])
                continue; /* N\A or garbage */
            int rc = 0;
            switch (cols[c]) {
            case FC_PACKETS:
                rc = onyx_add_counter(out, FS_M_FLOW_RULE_PACKETS, v, 1, "rule", rule, NULL, NULL,
                                      NULL, NULL);
                break;
            case FC_BYTES:
                rc = onyx_add_counter(out, FS_M_FLOW_RULE_BYTES, v, 1, "rule", rule, NULL, NULL,
                                      NULL, NULL);
                break;
            case FC_ECN:
                rc = onyx_add_counter(out, FS_M_FLOW_RULE_ECN_MARKED, v, 1, "rule", rule, NULL,
                                      NULL, NULL, NULL);
                break;
            case FC_DROPPED:
                rc = onyx_add_counter(out, FS_M_FLOW_RULE_DROPPED, v, 1, "rule", rule, "reason",
                                      "congestion", NULL, NULL);
                break;
            default: /* queue depth: no per-rule metric in the catalogue */
                break;
            }
            if (rc < 0) {
                onyx_errf(errbuf, errlen, "out of memory");
                return -1;
            }
        }
    }
    if (!have_header) {
        onyx_errf(errbuf, errlen, "show telemetry flows: no header line");
        return -1;
    }
    return 0;
}

/* ---------------- A4: congestion-control, text form ---------------- */

int
onyx_parse_congestion_text(const char *text, size_t len, struct onyx_samples *out,
                           struct onyx_tc_profile *profiles, size_t *n_profiles, char *errbuf,
                           size_t errlen)
{
    size_t pos = 0, ll;
    const char *ls;
    char port[ONYX_LABEL_VALUE_MAX] = "";
    char tc[8] = "";
    struct onyx_tc_profile *prof = NULL;
    int rc = 0;
    if (n_profiles)
        *n_profiles = 0;
    while (rc == 0 && onyx_next_line(text, len, &pos, &ls, &ll)) {
        const char *t = ls;
        size_t tn = ll;
        onyx_trim(&t, &tn);
        if (tn == 0)
            continue;
        if (!isspace((unsigned char)ls[0])) { /* a block title */
            static const char ifp[] = "Interface ethernet ";
            uint64_t v;
            size_t used;
            tc[0] = '\0';
            prof = NULL;
            if (tn > sizeof(ifp) - 1 && strncasecmp(t, ifp, sizeof(ifp) - 1) == 0) {
                const char *n = t + sizeof(ifp) - 1;
                size_t nn = tn - (sizeof(ifp) - 1);
                snprintf(port, sizeof(port), "%s%.*s", isdigit((unsigned char)n[0]) ? "Eth" : "",
                         (int)nn, n);
            } else if (port[0] && tn > 3 && strncasecmp(t, "TC-", 3) == 0 &&
                       onyx_parse_u64(t + 3, tn - 3, &v, &used) && used == tn - 3 && v < 16) {
                snprintf(tc, sizeof(tc), "%u", (unsigned)v);
                if (profiles && n_profiles && *n_profiles < 8) {
                    prof = &profiles[(*n_profiles)++];
                    memset(prof, 0, sizeof(*prof));
                    prof->tc = (int)v;
                }
            }
            continue;
        }
        const char *colon = memchr(t, ':', tn);
        if (!port[0] || !colon)
            continue;
        const char *k = t, *v = colon + 1;
        size_t kn = (size_t)(colon - t), vn = tn - kn - 1;
        onyx_trim(&k, &kn);
        onyx_trim(&v, &vn);
        uint64_t n;
        size_t used;
        bool num = onyx_parse_u64(v, vn, &n, &used) && used == vn;
        if (!tc[0]) {
            if (num && onyx_eq(k, kn, "ECN marked packets"))
                rc = onyx_add_counter(out, FS_M_PORT_ECN_MARKED, n, 1.0, "interface", port, NULL,
                                      NULL, NULL, NULL);
            continue;
        }
        if (num && onyx_eq(k, kn, "RED dropped packets"))
            rc = onyx_add_counter(out, FS_M_QUEUE_WRED_DROPPED, n, 1.0, "interface", port, "tc", tc,
                                  NULL, NULL);
        else if (prof && onyx_eq(k, kn, "Mode"))
            snprintf(prof->mode, sizeof(prof->mode), "%.*s", (int)vn, v);
        else if (prof && onyx_eq(k, kn, "Threshold mode"))
            snprintf(prof->threshold_mode, sizeof(prof->threshold_mode), "%.*s", (int)vn, v);
        else if (prof && onyx_eq(k, kn, "Minimum threshold"))
            snprintf(prof->min, sizeof(prof->min), "%.*s", (int)vn, v);
        else if (prof && onyx_eq(k, kn, "Maximum threshold"))
            snprintf(prof->max, sizeof(prof->max), "%.*s", (int)vn, v);
    }
    if (rc < 0)
        onyx_errf(errbuf, errlen, "out of memory");
    else if (!port[0]) {
        onyx_errf(errbuf, errlen, "congestion-control: no `Interface ethernet` block");
        rc = -1;
    }
    return rc;
}

/* ---------------- A6: WJH timestamps ---------------- */

int
onyx_parse_clock_utc_offset(const char *text, size_t len, int64_t *offset_s)
{
    size_t pos = 0, kn, vn;
    const char *k, *v;
    *offset_s = 0;
    while (onyx_next_field(text, len, &pos, &k, &kn, &v, &vn)) {
        if (!onyx_eq(k, kn, "UTC offset") || vn < 2 || vn > 16)
            continue;
        char val[17];
        memcpy(val, v, vn);
        val[vn] = '\0';
        if (utc_offset_value(val, offset_s))
            return 0;
    }
    return -1;
}

int
onyx_parse_wjh_time(const char *stamp, int64_t utc_offset_s, int64_t *device_us)
{
    int y, mo, dd, hh, mi, ss, used = 0;
    char frac[8] = "";
    if (sscanf(stamp, "%d/%d/%d %d:%d:%d%n", &y, &mo, &dd, &hh, &mi, &ss, &used) != 6)
        return -1;
    if (stamp[used] == '.' && sscanf(stamp + used + 1, "%6[0-9]", frac) != 1)
        return -1;
    if (y < 100)
        y += 2000; /* the raw table prints two digits (21/06/16) */
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || dd < 1 || dd > 31 || hh < 0 || hh > 23 ||
        mi < 0 || mi > 59 || ss < 0 || ss > 60)
        return -1;
    int64_t us = 0;
    size_t fd = strlen(frac);
    for (size_t i = 0; i < 6; i++)
        us = us * 10 + (i < fd ? frac[i] - '0' : 0);
    *device_us = (days_from_civil(y, (unsigned)mo, (unsigned)dd) * 86400 + hh * 3600 + mi * 60 +
                  ss - utc_offset_s) *
                     1000000 +
                 us;
    return 0;
}

/* ---------------- A5: ACL entry counters ---------------- */

/* The number that belongs to the word at token index i of toks: the one after it when a
 * ':' or '=' follows the word ("Packets: 12"), else the one before it ("12 packets"),
 * else the one right after it ("packets 12"). */
static bool
number_near(char toks[][64], size_t n, size_t i, uint64_t *v)
{
    size_t used;
    if (i + 2 < n && (!strcmp(toks[i + 1], ":") || !strcmp(toks[i + 1], "=")))
        return onyx_parse_u64(toks[i + 2], strlen(toks[i + 2]), v, &used) &&
               used == strlen(toks[i + 2]);
    if (i > 0 && onyx_parse_u64(toks[i - 1], strlen(toks[i - 1]), v, &used) &&
        used == strlen(toks[i - 1]))
        return true;
    return i + 1 < n && onyx_parse_u64(toks[i + 1], strlen(toks[i + 1]), v, &used) &&
           used == strlen(toks[i + 1]);
}

int
onyx_parse_acl_counters(const char *text, size_t len, uint64_t *pk, uint64_t *by, bool *seen,
                        size_t n_entries, char *errbuf, size_t errlen)
{
    size_t pos = 0, ll;
    const char *ls;
    long cur = -1; /* entry index of the current seq-number, -1: none or not ours */
    size_t entries = 0;
    for (size_t k = 0; k < n_entries; k++) {
        pk[k] = by[k] = 0;
        seen[k] = false;
    }
    while (onyx_next_line(text, len, &pos, &ls, &ll)) {
        /* tokens: words and numbers, with ':' '=' ',' '(' ')' as separators (':' and '='
         * kept as tokens of their own) */
        char toks[48][64];
        size_t n = 0;
        for (size_t i = 0; i < ll && n < 48;) {
            char ch = ls[i];
            if (ch == ' ' || ch == '\t' || ch == ',' || ch == '(' || ch == ')' || ch == '[' ||
                ch == ']') {
                i++;
                continue;
            }
            size_t a = i;
            if (ch == ':' || ch == '=')
                i++;
            else
                while (i < ll && !strchr(" \t,()[]:=", ls[i]))
                    i++;
            size_t tn = i - a < 63 ? i - a : 63;
            memcpy(toks[n], ls + a, tn);
            toks[n][tn] = '\0';
            n++;
        }
        for (size_t i = 0; i + 1 < n; i++) {
            if (strcasecmp(toks[i], "seq-number") != 0)
                continue;
            uint64_t seq;
            size_t used;
            cur = -1;
            if (onyx_parse_u64(toks[i + 1], strlen(toks[i + 1]), &seq, &used) && seq % 10 == 0 &&
                seq >= 10 && seq / 10 <= n_entries) {
                cur = (long)(seq / 10 - 1);
                entries++;
            }
            break;
        }
        if (cur < 0)
            continue;
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            if (!strncasecmp(toks[i], "packet", 6) && number_near(toks, n, i, &v)) {
                pk[cur] = v;
                seen[cur] = true;
            } else if (!strncasecmp(toks[i], "byte", 4) && number_near(toks, n, i, &v)) {
                by[cur] = v;
            }
        }
    }
    if (entries == 0) {
        onyx_errf(errbuf, errlen, "access-list counters: no entry of the flow rules");
        return -1;
    }
    return 0;
}

/* ---------------- A7: LLDP neighbours ---------------- */

/* Whether the key (n bytes) is lit: case-insensitive, runs of spaces and '-' alike
 * ("Remote port-id" = "remote port id"). */
static bool
lldp_key_is(const char *k, size_t n, const char *lit)
{
    size_t i = 0, j = 0;
    while (i < n && lit[j]) {
        bool ks = k[i] == ' ' || k[i] == '-' || k[i] == '\t', ls = lit[j] == ' ' || lit[j] == '-';
        if (ks && ls) {
            while (i < n && (k[i] == ' ' || k[i] == '-' || k[i] == '\t'))
                i++;
            j++;
            continue;
        }
        if (tolower((unsigned char)k[i]) != tolower((unsigned char)lit[j]))
            return false;
        i++;
        j++;
    }
    return i == n && !lit[j];
}

static void
lldp_set(char *dst, size_t cap, const char *v, size_t n)
{
    onyx_trim(&v, &n);
    if ((n == 3 && strncasecmp(v, "N/A", 3) == 0) ||
        (n == 14 && strncasecmp(v, "Not Advertised", 14) == 0))
        n = 0;
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static bool
lldp_is_mac(const char *s)
{
    if (strlen(s) != 17)
        return false;
    for (size_t i = 0; i < 17; i++)
        if (i % 3 == 2 ? (s[i] != ':' && s[i] != '-') : !isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* One `key : value` pair into r (unknown keys ignored). */
static void
lldp_pair(struct onyx_lldp_remote *r, const char *k, size_t kn, const char *v, size_t vn)
{
    onyx_trim(&k, &kn);
    if (lldp_key_is(k, kn, "Remote chassis id"))
        lldp_set(r->chassis_id, sizeof r->chassis_id, v, vn);
    else if (lldp_key_is(k, kn, "Remote port id"))
        lldp_set(r->port_id, sizeof r->port_id, v, vn);
    else if (lldp_key_is(k, kn, "port id subtype"))
        lldp_set(r->port_subtype, sizeof r->port_subtype, v, vn);
    else if (lldp_key_is(k, kn, "Remote port description"))
        lldp_set(r->port_descr, sizeof r->port_descr, v, vn);
    else if (lldp_key_is(k, kn, "Remote system name"))
        lldp_set(r->sys_name, sizeof r->sys_name, v, vn);
}

/* Hands r to cb when it names a system; returns whether it counted. */
static bool
lldp_flush(struct onyx_lldp_remote *r, void (*cb)(const struct onyx_lldp_remote *, void *),
           void *arg)
{
    if (!r->local_port[0] || (!r->chassis_id[0] && !r->sys_name[0]))
        return false;
    bool ifname = r->port_id[0] && (strcasestr(r->port_subtype, "Interface Name") ||
                                    strstr(r->port_subtype, "(5)") ||
                                    strcasestr(r->port_subtype, "Interface Alias") ||
                                    (!r->port_subtype[0] && !lldp_is_mac(r->port_id)));
    const char *port = ifname ? r->port_id : r->port_descr[0] ? r->port_descr : r->port_id;
    snprintf(r->port, sizeof r->port, "%s", port);
    cb(r, arg);
    return true;
}

/* A port block's title: `Eth1/1`, `Eth1/1:`, `Eth1/1 (Po100)`; the port into out. */
static bool
lldp_title(const char *t, size_t n, char *out, size_t cap)
{
    size_t pn = 0;
    while (pn < n && t[pn] != ' ' && t[pn] != '\t' && t[pn] != ':' && t[pn] != '(')
        pn++;
    if (pn == 0 || !onyx_is_port_name(t, pn))
        return false;
    const char *rest = t + pn;
    size_t rn = n - pn;
    onyx_trim(&rest, &rn);
    if (rn > 0 && rest[0] == ':') {
        rest++;
        rn--;
        onyx_trim(&rest, &rn);
    }
    if (rn > 0 && !(rest[0] == '(' && rest[rn - 1] == ')'))
        return false; /* `Eth1/1 something`: a line of another shape */
    if (pn >= cap)
        pn = cap - 1;
    memcpy(out, t, pn);
    out[pn] = '\0';
    return true;
}

int
onyx_parse_lldp_remote(const char *text, size_t len,
                       void (*cb)(const struct onyx_lldp_remote *r, void *arg), void *arg,
                       bool *truncated, char *errbuf, size_t errlen)
{
    int rc = 0;
    size_t pos = 0, ll, blocks = 0, nonblank = 0;
    const char *ls;
    struct onyx_lldp_remote cur;
    bool any = false; /* cur holds a field since it started */
    memset(&cur, 0, sizeof cur);
    if (truncated)
        *truncated = false;
    while (onyx_next_line(text, len, &pos, &ls, &ll)) {
        const char *t = ls;
        size_t tn = ll;
        onyx_trim(&t, &tn);
        if (tn == 0)
            continue;
        nonblank++;
        char port[ONYX_LABEL_VALUE_MAX];
        const char *colon = memchr(t, ':', tn);
        bool titled = lldp_title(t, tn, port, sizeof port);
        if (titled) {
            if (any && lldp_flush(&cur, cb, arg))
                rc++;
            memset(&cur, 0, sizeof cur);
            any = false;
            snprintf(cur.local_port, sizeof cur.local_port, "%s", port);
            blocks++;
        } else if (colon && cur.local_port[0]) {
            size_t kn = (size_t)(colon - t);
            const char *k = t;
            onyx_trim(&k, &kn);
            if (lldp_key_is(k, kn, "Remote Index")) {
                /* another neighbour of the same port */
                if (any && lldp_flush(&cur, cb, arg))
                    rc++;
                memcpy(port, cur.local_port, sizeof port);
                memset(&cur, 0, sizeof cur);
                memcpy(cur.local_port, port, sizeof cur.local_port);
                any = false;
                continue;
            }
            /* `k : v [; k : v]...`: values hold colons (MAC addresses), keys do not */
            const char *seg = t;
            size_t left = tn;
            while (left > 0) {
                const char *semi = NULL;
                for (size_t i = 0; i + 2 < left && !semi; i++)
                    if (seg[i] == ' ' && seg[i + 1] == ';' && seg[i + 2] == ' ')
                        semi = seg + i;
                size_t sn = semi ? (size_t)(semi - seg) : left;
                const char *c = memchr(seg, ':', sn);
                if (c) {
                    lldp_pair(&cur, seg, (size_t)(c - seg), c + 1, sn - (size_t)(c - seg) - 1);
                    any = true;
                }
                if (!semi)
                    break;
                left -= sn + 3;
                seg = semi + 3;
            }
        }
        if (rc >= ONYX_LLDP_MAX) {
            if (truncated)
                *truncated = true;
            any = false;
            break;
        }
    }
    if (any && rc < ONYX_LLDP_MAX && lldp_flush(&cur, cb, arg))
        rc++;
    if (blocks == 0 && nonblank > 0) {
        char m[160];
        snprintf(m, sizeof m, "lldp remote: no port block in %zu non-blank lines (layout A7)",
                 nonblank);
        onyx_errf(errbuf, errlen, m);
        rc = -1;
    }
    return rc;
}
