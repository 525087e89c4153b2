/*
 * snmp-harness: drives the SNMP driver directly (store + sink + fs_driver_snmp, no daemon)
 * for the integration tests and benchmarks. Test-only.
 *
 *   snmp-harness --port P [--address A] (--community-file F | --v3-user U --auth-file F
 *                [--priv-file F] [--auth-proto sha256|sha|md5|sha512] [--priv-proto aes|des]
 *                [--weak])
 *                [--targets N] [--interval-ms I] [--timeout-ms T] [--retries R]
 *                [--max-rep M] [--polls K] [--qos-base -1|0|1] [--include RE] [--exclude RE]
 *                [--grep RE] [--print-metrics] [--render-each] [--quiet] [--deadline-ms D]
 *                [--clock-max-offset-us U]
 *
 * Every interval it starts one cycle on each target (deadline D, by default 90 % of the
 * interval; a round that overruns the interval starts the next one at once) and
 * waits for all of them; --render-each renders /metrics once per round (as a scrape
 * would). --grep prints, after each round, the /metrics lines matching RE prefixed with
 * "poll N ". At the end: a SUMMARY line with results by kind, overruns, the wall time
 * per round and the process CPU time (user+system), and the driver's detail of target 0.
 */
#include <getopt.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/buf.h"
#include "driver.h"
#include "http/expo.h"
#include "snmp_config.h"
#include "poll_harness.h"
#include "store/store.h"

extern const struct fs_driver fs_driver_snmp;

struct detail_out {
    char *buf;
    size_t len;
};

static int
first_detail(void *arg, const struct fs_instance_info *in)
{
    struct detail_out *o = arg;
    snprintf(o->buf, o->len, "%s", in->driver_detail ? in->driver_detail : "");
    return 1; /* the first instance is target 0 */
}

/* The driver's detail of target 0, as /api/v1/targets shows it (fs_sink_set_detail). */
static void
target0_detail(struct fs_store *st, char *buf, size_t len)
{
    struct detail_out o = {buf, len};
    buf[0] = '\0';
    fs_store_foreach_instance(st, first_detail, &o);
}

int
main(int argc, char **argv)
{
    static const struct option lo[] = {{"port", 1, 0, 'p'},
                                       {"address", 1, 0, 'a'},
                                       {"community-file", 1, 0, 'c'},
                                       {"v3-user", 1, 0, 'u'},
                                       {"auth-file", 1, 0, 'A'},
                                       {"priv-file", 1, 0, 'X'},
                                       {"auth-proto", 1, 0, 'H'},
                                       {"priv-proto", 1, 0, 'P'},
                                       {"weak", 0, 0, 'w'},
                                       {"targets", 1, 0, 'n'},
                                       {"interval-ms", 1, 0, 'i'},
                                       {"timeout-ms", 1, 0, 't'},
                                       {"retries", 1, 0, 'r'},
                                       {"max-rep", 1, 0, 'm'},
                                       {"polls", 1, 0, 'k'},
                                       {"qos-base", 1, 0, 'b'},
                                       {"include", 1, 0, 'I'},
                                       {"exclude", 1, 0, 'E'},
                                       {"grep", 1, 0, 'g'},
                                       {"print-metrics", 0, 0, 'M'},
                                       {"render-each", 0, 0, 'R'},
                                       {"quiet", 0, 0, 'q'},
                                       {"deadline-ms", 1, 0, 'D'},
                                       {"clock-max-offset-us", 1, 0, 'O'},
                                       {0, 0, 0, 0}};
    struct fs_snmp_cfg sc = {.port = 161,
                             .version = FS_SNMP_V2C,
                             .interval_us = 1000000,
                             .timeout_us = 2000000,
                             .retries = 1,
                             .max_repetitions = 50,
                             .qos_index_base = -1,
                             .auth_protocol = FS_AUTH_NONE,
                             .priv_protocol = FS_PRIV_NONE};
    const char *address = "127.0.0.1", *include = NULL, *exclude = NULL, *grep = NULL;
    int ntargets = 1, polls = 3, c;
    int64_t deadline_us = 0, clock_max_offset_us = 0;
    bool print_metrics = false, render_each = false, quiet = false;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'p':
            sc.port = (uint16_t)atoi(optarg);
            break;
        case 'a':
            address = optarg;
            break;
        case 'c':
            sc.community.file = optarg;
            break;
        case 'u':
            sc.version = FS_SNMP_V3;
            sc.user = optarg;
            break;
        case 'A':
            sc.auth_password.file = optarg;
            if (sc.auth_protocol == FS_AUTH_NONE)
                sc.auth_protocol = FS_AUTH_SHA256;
            break;
        case 'X':
            sc.priv_password.file = optarg;
            if (sc.priv_protocol == FS_PRIV_NONE)
                sc.priv_protocol = FS_PRIV_AES128;
            break;
        case 'H':
            sc.auth_protocol = !strcmp(optarg, "md5")      ? FS_AUTH_MD5
                               : !strcmp(optarg, "sha")    ? FS_AUTH_SHA
                               : !strcmp(optarg, "sha512") ? FS_AUTH_SHA512
                                                           : FS_AUTH_SHA256;
            break;
        case 'P':
            sc.priv_protocol = !strcmp(optarg, "des") ? FS_PRIV_DES : FS_PRIV_AES128;
            break;
        case 'w':
            sc.allow_weak_crypto = true;
            break;
        case 'n':
            ntargets = atoi(optarg);
            break;
        case 'i':
            sc.interval_us = atoll(optarg) * 1000;
            break;
        case 't':
            sc.timeout_us = atoll(optarg) * 1000;
            break;
        case 'r':
            sc.retries = atoi(optarg);
            break;
        case 'm':
            sc.max_repetitions = atoi(optarg);
            break;
        case 'k':
            polls = atoi(optarg);
            break;
        case 'b':
            sc.qos_index_base = atoi(optarg);
            break;
        case 'I':
            include = optarg;
            break;
        case 'E':
            exclude = optarg;
            break;
        case 'g':
            grep = optarg;
            break;
        case 'M':
            print_metrics = true;
            break;
        case 'R':
            render_each = true;
            break;
        case 'q':
            quiet = true;
            break;
        case 'D':
            deadline_us = atoll(optarg) * 1000;
            break;
        case 'O':
            clock_max_offset_us = atoll(optarg);
            break;
        default:
            fprintf(stderr, "snmp-harness: bad arguments (see the source header)\n");
            return 2;
        }
    }
    if (ntargets < 1 || polls < 1) {
        fprintf(stderr, "snmp-harness: --targets and --polls must be >= 1\n");
        return 2;
    }
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 512u << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof(err));
    if (!st) {
        fprintf(stderr, "store: %s\n", err);
        return 1;
    }
    fs_store_set_clock_max_offset(st, clock_max_offset_us); /* <= 0: the default */
    struct fs_target_cfg *tc = calloc((size_t)ntargets, sizeof(*tc));
    struct fs_sink **sinks = calloc((size_t)ntargets, sizeof(*sinks));
    void **ts = calloc((size_t)ntargets, sizeof(*ts));
    regex_t grep_re;
    if (grep && regcomp(&grep_re, grep, REG_EXTENDED | REG_NOSUB) != 0) {
        fprintf(stderr, "bad --grep regex\n");
        return 2;
    }
    void *ds = NULL;
    if (fs_driver_snmp.init(&ds, err, sizeof(err)) != 0) {
        fprintf(stderr, "init: %s\n", err);
        return 1;
    }
    for (int i = 0; i < ntargets; i++) {
        char name[32];
        snprintf(name, sizeof(name), "sim%d", i);
        tc[i].name = strdup(name);
        tc[i].address = strdup(address);
        tc[i].staleness_intervals = 3;
        if (include) {
            tc[i].iface_include = (char *)include;
            regcomp(&tc[i].iface_include_re, include, REG_EXTENDED | REG_NOSUB);
        }
        if (exclude) {
            tc[i].iface_exclude = (char *)exclude;
            regcomp(&tc[i].iface_exclude_re, exclude, REG_EXTENDED | REG_NOSUB);
        }
        sinks[i] = fs_store_sink_add(st, &tc[i], "snmp", sc.interval_us);
        fs_sink_set_done_cb(sinks[i], fs_ph_done, NULL);
        if (fs_driver_snmp.target_add(ds, &tc[i], &sc, sinks[i], &ts[i], err, sizeof(err)) != 0) {
            fprintf(stderr, "target_add: %s\n", err);
            return 1;
        }
    }
    struct fs_buf b;
    fs_buf_init(&b, 256u << 20);
    double cpu0 = fs_ph_cpu_ms();
    int64_t wall_sum = 0, wall_max = 0;
    unsigned long overruns = 0, varbinds = 0;
    for (int k = 1; k <= polls; k++) {
        int64_t t0 = fs_ph_mono_us();
        int64_t deadline = t0 + (deadline_us > 0 ? deadline_us : sc.interval_us * 9 / 10);
        fs_ph_round_begin((size_t)ntargets);
        for (int i = 0; i < ntargets; i++) {
            fs_sink_cycle_begin(sinks[i], (uint64_t)k);
            int rc = fs_driver_snmp.cycle_start(ds, ts[i], (uint64_t)k, deadline);
            if (rc != 0) {
                fs_sink_count_overrun(sinks[i]);
                overruns++;
                fs_ph_round_skip();
            }
        }
        fs_ph_round_wait();
        int64_t wall = fs_ph_mono_us() - t0;
        wall_sum += wall;
        if (wall > wall_max)
            wall_max = wall;
        char detail[2048];
        target0_detail(st, detail, sizeof(detail));
        const char *vb = strstr(detail, "\"last_varbinds\":");
        if (vb)
            varbinds += strtoul(vb + 16, NULL, 10) * (unsigned long)ntargets;
        if (render_each || grep || (print_metrics && k == polls)) {
            fs_buf_reset(&b);
            fs_expo_render(st, &b);
            if (grep)
                fs_ph_grep_print(&b, &grep_re, k);
        }
        if (!quiet)
            fprintf(stderr,
                    "poll %d: wall %.1f ms ok=%lu timeout=%lu auth=%lu protocol=%lu parse=%lu\n", k,
                    wall / 1e3, fs_ph_result_count(0), fs_ph_result_count(1), fs_ph_result_count(2),
                    fs_ph_result_count(3), fs_ph_result_count(4));
        fflush(stdout);
        int64_t next = t0 + sc.interval_us;
        int64_t now = fs_ph_mono_us();
        if (k < polls && next > now)
            usleep((useconds_t)(next - now));
    }
    double cpu = fs_ph_cpu_ms() - cpu0;
    if (print_metrics)
        fwrite(b.data, 1, b.len, stdout);
    char detail[2048];
    target0_detail(st, detail, sizeof(detail));
    printf("SUMMARY targets=%d polls=%d ok=%lu timeout=%lu auth=%lu protocol=%lu parse=%lu "
           "overruns=%lu wall_ms_avg=%.2f wall_ms_max=%.2f cpu_ms=%.1f varbinds=%lu\n",
           ntargets, polls, fs_ph_result_count(0), fs_ph_result_count(1), fs_ph_result_count(2),
           fs_ph_result_count(3), fs_ph_result_count(4), overruns, wall_sum / 1e3 / polls,
           wall_max / 1e3, cpu, varbinds);
    printf("DETAIL {%s}\n", detail);
    for (int i = 0; i < ntargets; i++) {
        fs_driver_snmp.target_remove(ds, ts[i]);
        fs_store_sink_remove(st, sinks[i]);
        if (include)
            regfree(&tc[i].iface_include_re);
        if (exclude)
            regfree(&tc[i].iface_exclude_re);
        free(tc[i].name);
        free(tc[i].address);
    }
    fs_driver_snmp.shutdown(ds);
    fs_store_free(st);
    fs_buf_free(&b);
    if (grep)
        regfree(&grep_re);
    free(tc);
    free(sinks);
    free(ts);
    return fs_ph_result_count(FS_POLL_OK) == (unsigned long)ntargets * (unsigned long)polls ? 0 : 1;
}
