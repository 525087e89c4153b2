/*
 * ONYX CLI parser throughput. Prints `BENCH <name> <value> <unit>` lines.
 *
 * Workload: the outputs of one full poll of a 64-port switch, generated here in the
 * layouts the parsers read: `show interfaces ethernet` as text (the 3.6.1102 block per
 * port, counters near 2^60) and as `| json-print` in the >= 3.6.6000 layout, plus the
 * per-TC and PFC blocks (8 commands each, all ports). Each is parsed repeatedly for about
 * 0.5 s; MB/s = input bytes parsed / wall time.
 *   onyx_parse_text_mb_per_s   interfaces text + tc + pfc text
 *   onyx_parse_json_mb_per_s   interfaces JSON
 *   onyx_parse_mb_per_s        both together (total bytes / total time); goal >= 200
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parse.h"

#define PORTS 64

struct sb {
    char *p;
    size_t n, cap;
};

static void add(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
static void
add(struct sb *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int w = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if ((size_t)w < b->cap - b->n) {
            b->n += (size_t)w;
            return;
        }
        b->cap = b->cap * 2 + 4096;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *const names[] = {"packets",           "unicast packets", "multicast packets",
                                    "broadcast packets", "bytes",           "error packets",
                                    "discard packets"};

static void
gen_text(struct sb *b)
{
    for (int p = 1; p <= PORTS; p++) {
        add(b,
            "Eth1/%d\n  Admin state: Enabled\n  Operational state: Up\n"
            "  Last change in operational status: Never\n  Description: N\\A\n"
            "  Mac address: 7c:fe:90:f8:e6:98\n  MTU: 9216 bytes(Maximum packet size 9238 bytes)\n"
            "  Fec: auto\n  Flow-control: receive off send off\n  Actual speed: 100 Gbps\n"
            "  Width reduction mode: Not supported\n  Switchport mode: access\n"
            "  MAC learning mode: Enabled\n"
            "  Last clearing of \"show interface\" counters : Never\n"
            "  60 seconds ingress rate: 1 bits/sec, 0 bytes/sec, 0 packets/sec\n"
            "  60 seconds egress rate: 0 bits/sec, 0 bytes/sec, 0 packets/sec\n\n",
            p);
        for (int d = 0; d < 2; d++) {
            add(b, "%s\n", d ? "Tx" : "Rx");
            for (size_t k = 0; k < 7; k++)
                add(b, "  %-20llu %s\n",
                    1152921504606846976ULL + (unsigned long long)(p * 7919 + k), names[k]);
            add(b, "\n");
        }
        add(b, "\n");
    }
}

static void
gen_tc_pfc(struct sb *tc, struct sb *pfc, int idx)
{
    for (int p = 1; p <= PORTS; p++) {
        add(tc,
            "Eth1/%d:\n  TC %d:\n    Tx\n      %-20llu packets\n      %-20llu bytes\n"
            "      %-20d unicast no buffer discard\n      %-20d queue depth (bytes)\n"
            "      %-20d max queue depth (bytes)\n\n",
            p, idx, 123456789ULL * (unsigned)p, 987654321ULL * (unsigned)p, 0, 0, 0);
        add(pfc,
            "Eth1/%d:\n  PFC %d:\n    Rx\n      %-20d pause packets\n"
            "      %-20d pause duration (usec)\n    Tx\n      %-20d pause packets\n"
            "      %-20d pause duration (usec)\n\n",
            p, idx, p, p * 100, 0, 0);
    }
}

static void
gen_json(struct sb *b)
{
    add(b, "[\n");
    for (int p = 1; p <= PORTS; p++) {
        add(b,
            "  {\n    \"Eth1/%d\": [\n      {\n        \"Admin state\": \"Enabled\",\n"
            "        \"Operational state\": \"Up\",\n        \"Actual speed\": \"100 Gbps\",\n"
            "        \"Description\": \"N\\\\A\",\n        \"MTU\": \"9216 bytes\",\n",
            p);
        for (int d = 0; d < 2; d++) {
            add(b, "        \"%s\": {\n", d ? "Tx" : "Rx");
            for (size_t k = 0; k < 7; k++)
                add(b, "          \"%s\": \"%llu\"%s\n", names[k],
                    1152921504606846976ULL + (unsigned long long)(p * 7919 + k), k < 6 ? "," : "");
            add(b, "        }%s\n", d ? "" : ",");
        }
        add(b, "      }\n    ]\n  }%s\n", p < PORTS ? "," : "");
    }
    add(b, "]\n");
}

int
main(void)
{
    struct sb text = {0}, json = {0}, tc[8] = {{0}}, pfc[8] = {{0}};
    gen_text(&text);
    gen_json(&json);
    for (int i = 0; i < 8; i++)
        gen_tc_pfc(&tc[i], &pfc[i], i);
    struct onyx_samples s = {0};
    char err[128];

    double t0 = now_s(), tbytes = 0;
    size_t iters = 0, expect = 0;
    while (now_s() - t0 < 0.5) {
        onyx_samples_clear(&s);
        if (onyx_parse_interfaces_text(text.p, text.n, &s, err, sizeof(err)) != 0)
            return fprintf(stderr, "text: %s\n", err), 1;
        tbytes += (double)text.n;
        for (int i = 0; i < 8; i++) {
            if (onyx_parse_tc_counters(tc[i].p, tc[i].n, &s, err, sizeof(err)) != 0 ||
                onyx_parse_pfc_counters(pfc[i].p, pfc[i].n, &s, err, sizeof(err)) != 0)
                return fprintf(stderr, "tc/pfc: %s\n", err), 1;
            tbytes += (double)(tc[i].n + pfc[i].n);
        }
        iters++;
        expect = s.n;
    }
    double ttime = now_s() - t0;
    /* 64 ports x (3 gauges + 8 counters) + 8 x 64 x (5 TC + 4 PFC) samples per poll */
    if (expect != (size_t)PORTS * 11 + 8 * PORTS * 9)
        return fprintf(stderr, "unexpected sample count %zu\n", expect), 1;

    t0 = now_s();
    double jbytes = 0;
    while (now_s() - t0 < 0.5) {
        onyx_samples_clear(&s);
        if (onyx_parse_interfaces_json(json.p, json.n, &s, err, sizeof(err)) != 0)
            return fprintf(stderr, "json: %s\n", err), 1;
        jbytes += (double)json.n;
    }
    double jtime = now_s() - t0;
    if (s.n != (size_t)PORTS * 11)
        return fprintf(stderr, "unexpected JSON sample count %zu\n", s.n), 1;

    printf("BENCH onyx_parse_text_mb_per_s %.1f MB/s\n", tbytes / ttime / 1e6);
    printf("BENCH onyx_parse_json_mb_per_s %.1f MB/s\n", jbytes / jtime / 1e6);
    printf("BENCH onyx_parse_mb_per_s %.1f MB/s\n", (tbytes + jbytes) / (ttime + jtime) / 1e6);
    fprintf(stderr, "poll output: text %zu B + tc/pfc %zu B, json %zu B; %zu text polls\n", text.n,
            8 * (tc[0].n + pfc[0].n), json.n, iters);
    onyx_samples_free(&s);
    free(text.p);
    free(json.p);
    for (int i = 0; i < 8; i++) {
        free(tc[i].p);
        free(pfc[i].p);
    }
    return 0;
}
