/*
 * fs-onyx-poll: drives the ONYX CLI driver directly (store + sink + driver entry points of
 * drivers/onyx/onyx_driver.h, no daemon) against a real sshd, for the integration tests
 * and the poll benchmark. Test-only.
 *
 *   fs-onyx-poll --port P --user U [--address A] [--password-file F] [--key-file F]
 *                --known-hosts F [--accept-new] [--enable-password-file F]
 *                [--targets N] [--polls K] [--interval-ms I] [--timeout-ms T]
 *                [--deadline-ms D] [--flow-rule NAME:udp|tcp|any:LO[-HI][:TC]]...
 *                [--grep RE] [--print-metrics] [--transcript FILE] [--wait-file F]
 *                [--back-to-back] [--render-each] [--apply-flow-rules] [--plan]
 *                [--max-output-bytes N] [--flow-rule-ports RE] [--login-ms L]
 *
 * Every interval it starts one cycle on each target (deadline D, default 90 % of the
 * interval) and waits for all of them. After each poll it prints
 *   `poll K result=<ok|timeout|auth|protocol|parse|partial> wall_ms=W rss_kib=R detail={..}`
 *   (target 0; R: this process's resident memory, VmRSS)
 * and, with --grep, the /metrics lines matching RE prefixed with `poll K `.
 * --wait-file F: before each poll after the first, waits until F exists and then deletes
 * it, so a test can change the simulated switch between polls without sleeping.
 * --login-ms L: poll 1, which also logs in and sets up the CLI session, gets L ms more
 * than the others (default 0): a test that needs poll 1 good on a loaded machine waits
 * for the session with a generous L instead of assuming the login is quick.
 * --back-to-back: each poll starts as soon as the previous one ended. --render-each: renders
 * /metrics after every poll (as a scrape would; always done with --grep).
 * --plan: reads the running config and prints the flow-rule plan (PLAN ... END PLAN),
 * touching nothing; --apply-flow-rules: installs the flow rules' ACLs (bound to the ports
 * --flow-rule-ports selects). A --flow-rule NAME ending in "-ce" matches CE-marked packets.
 * At the end: `SUMMARY ...` (results by kind, wall time per poll, process CPU time per
 * poll) and `DETAIL {...}` (target 0's driver detail).
 */
#include <getopt.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/expo.h"
#include "onyx_driver.h"
#include "poll_harness.h"
#include "store/store.h"
#include "util/buf.h"

/* This process's resident set (VmRSS), KiB; -1 when unknown. */
static long
rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

struct done_arg {
    int index;
};

static int
parse_rule(const char *s, struct fs_flow_rule *r)
{
    char name[64], proto[8];
    unsigned lo = 0, hi = 0;
    int tc = -1;
    memset(r, 0, sizeof(*r));
    const char *c1 = strchr(s, ':');
    if (!c1 || (size_t)(c1 - s) >= sizeof(name))
        return -1;
    memcpy(name, s, (size_t)(c1 - s));
    name[c1 - s] = '\0';
    if (sscanf(c1 + 1, "%7[a-z]:%u-%u:%d", proto, &lo, &hi, &tc) < 3) {
        hi = 0;
        if (sscanf(c1 + 1, "%7[a-z]:%u:%d", proto, &lo, &tc) < 2)
            return -1;
        hi = lo;
    }
    r->name = strdup(name);
    r->protocol = !strcmp(proto, "udp")   ? FS_PROTO_UDP
                  : !strcmp(proto, "tcp") ? FS_PROTO_TCP
                                          : FS_PROTO_ANY;
    r->dst_lo = (uint16_t)lo;
    r->dst_hi = (uint16_t)hi;
    r->tc = tc;
    size_t nl = strlen(name);
    r->ecn_ce = nl > 3 && !strcmp(name + nl - 3, "-ce");
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option lo[] = {{"port", 1, 0, 'p'},
                                       {"address", 1, 0, 'a'},
                                       {"user", 1, 0, 'u'},
                                       {"password-file", 1, 0, 'w'},
                                       {"key-file", 1, 0, 'k'},
                                       {"known-hosts", 1, 0, 'K'},
                                       {"accept-new", 0, 0, 'N'},
                                       {"enable-password-file", 1, 0, 'e'},
                                       {"targets", 1, 0, 'n'},
                                       {"polls", 1, 0, 'c'},
                                       {"interval-ms", 1, 0, 'i'},
                                       {"timeout-ms", 1, 0, 't'},
                                       {"deadline-ms", 1, 0, 'D'},
                                       {"flow-rule", 1, 0, 'f'},
                                       {"grep", 1, 0, 'g'},
                                       {"print-metrics", 0, 0, 'M'},
                                       {"transcript", 1, 0, 'T'},
                                       {"wait-file", 1, 0, 'W'},
                                       {"back-to-back", 0, 0, 'B'},
                                       {"render-each", 0, 0, 'R'},
                                       {"apply-flow-rules", 0, 0, 'A'},
                                       {"plan", 0, 0, 'L'},
                                       {"max-output-bytes", 1, 0, 'O'},
                                       {"flow-rule-ports", 1, 0, 'P'},
                                       {"login-ms", 1, 0, 'l'},
                                       {0, 0, 0, 0}};
    struct fs_onyx_cfg cfg;
    fs_onyx_cfg_defaults(&cfg);
    cfg.interval_us = 1000000;
    const char *address = "127.0.0.1", *grep = NULL, *transcript = NULL, *wait_file = NULL;
    int ntargets = 1, polls = 3, c;
    int64_t deadline_us = 0, login_us = 0;
    bool print_metrics = false, back_to_back = false, render_each = false;
    struct fs_flow_rule rules[8];
    size_t nrules = 0;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'p':
            cfg.port = (uint16_t)atoi(optarg);
            break;
        case 'a':
            address = optarg;
            break;
        case 'u':
            cfg.username = optarg;
            break;
        case 'w':
            cfg.password.file = optarg;
            break;
        case 'k':
            cfg.key_file = optarg;
            break;
        case 'K':
            cfg.known_hosts = optarg;
            break;
        case 'N':
            cfg.host_key_policy = FS_ONYX_HOSTKEY_ACCEPT_NEW;
            break;
        case 'e':
            cfg.enable_password.file = optarg;
            break;
        case 'n':
            ntargets = atoi(optarg);
            break;
        case 'c':
            polls = atoi(optarg);
            break;
        case 'i':
            cfg.interval_us = atoll(optarg) * 1000;
            break;
        case 't':
            cfg.timeout_us = atoll(optarg) * 1000;
            break;
        case 'D':
            deadline_us = atoll(optarg) * 1000;
            break;
        case 'l':
            login_us = atoll(optarg) * 1000;
            break;
        case 'f':
            if (nrules == 8 || parse_rule(optarg, &rules[nrules]) != 0) {
                fprintf(stderr, "fs-onyx-poll: bad --flow-rule %s\n", optarg);
                return 2;
            }
            nrules++;
            break;
        case 'g':
            grep = optarg;
            break;
        case 'M':
            print_metrics = true;
            break;
        case 'T':
            transcript = optarg;
            break;
        case 'W':
            wait_file = optarg;
            break;
        case 'B':
            back_to_back = true;
            break;
        case 'R':
            render_each = true;
            break;
        case 'A':
            cfg.apply_flow_rules = true;
            break;
        case 'L':
            cfg.plan_only = true;
            break;
        case 'O':
            cfg.max_output_bytes = (size_t)atoll(optarg);
            break;
        case 'P':
            cfg.flow_rule_ports = optarg; /* the driver copies it */
            break;
        default:
            fprintf(stderr, "fs-onyx-poll: bad arguments (see the source header)\n");
            return 2;
        }
    }
    cfg.flow_rules = rules;
    cfg.n_flow_rules = nrules;
    if (ntargets < 1 || polls < 1 || !cfg.username) {
        fprintf(stderr, "fs-onyx-poll: --user, --targets >= 1 and --polls >= 1 are required\n");
        return 2;
    }
    char err[256] = "";
    struct fs_ring_opts ro = {.memory_limit = 512u << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof(err));
    if (!st) {
        fprintf(stderr, "store: %s\n", err);
        return 1;
    }
    regex_t grep_re;
    if (grep && regcomp(&grep_re, grep, REG_EXTENDED | REG_NOSUB) != 0) {
        fprintf(stderr, "bad --grep regex\n");
        return 2;
    }
    FILE *tf = NULL;
    if (transcript && !(tf = fopen(transcript, "w"))) {
        fprintf(stderr, "cannot write %s\n", transcript);
        return 2;
    }
    struct fs_target_cfg *tc = calloc((size_t)ntargets, sizeof(*tc));
    struct fs_sink **sinks = calloc((size_t)ntargets, sizeof(*sinks));
    struct done_arg *da = calloc((size_t)ntargets, sizeof(*da));
    void **ts = calloc((size_t)ntargets, sizeof(*ts));
    void *ds = NULL;
    if (!tc || !sinks || !da || !ts || fs_onyx_init(&ds, err, sizeof(err)) != 0) {
        fprintf(stderr, "init: %s\n", err);
        return 1;
    }
    for (int i = 0; i < ntargets; i++) {
        char name[32];
        snprintf(name, sizeof(name), "onyx%d", i);
        tc[i].name = strdup(name);
        tc[i].address = strdup(address);
        tc[i].staleness_intervals = 3;
        da[i].index = i;
        sinks[i] = fs_store_sink_add(st, &tc[i], "cli", cfg.interval_us);
        fs_sink_set_done_cb(sinks[i], fs_ph_done, &da[i].index);
        if (fs_onyx_target_add(ds, tc[i].name, address, &cfg, sinks[i], &ts[i], err, sizeof(err)) !=
            0) {
            fprintf(stderr, "target_add: %s\n", err);
            return 1;
        }
        if (i == 0 && tf)
            fs_onyx_set_transcript(ds, ts[0], tf);
    }
    struct fs_buf b;
    fs_buf_init(&b, 256u << 20);
    double cpu0 = fs_ph_cpu_ms(), cpu_after_first = 0;
    int64_t wall_sum = 0, wall_max = 0;
    for (int k = 1; k <= polls; k++) {
        if (wait_file && k > 1) {
            while (access(wait_file, F_OK) != 0)
                usleep(20000);
            unlink(wait_file);
        }
        int64_t t0 = fs_ph_mono_us();
        int64_t deadline = t0 + (deadline_us > 0 ? deadline_us : cfg.interval_us * 9 / 10) +
                           (k == 1 ? login_us : 0);
        fs_ph_round_begin((size_t)ntargets);
        for (int i = 0; i < ntargets; i++) {
            fs_sink_cycle_begin(sinks[i], (uint64_t)k);
            if (fs_onyx_cycle_start(ds, ts[i], (uint64_t)k, deadline) != 0) {
                fs_sink_count_overrun(sinks[i]);
                fs_ph_round_skip();
            }
        }
        enum fs_poll_result r0 = fs_ph_round_wait();
        int64_t wall = fs_ph_mono_us() - t0;
        if (k > 1) { /* the first poll includes the SSH login */
            wall_sum += wall;
            if (wall > wall_max)
                wall_max = wall;
        } else {
            cpu_after_first = fs_ph_cpu_ms();
        }
        if (render_each || grep || (print_metrics && k == polls)) {
            fs_buf_reset(&b);
            fs_expo_render(st, &b);
        }
        char msg[2048] = "";
        {
            /* the cycle's message as the store keeps it is internal; the driver's log has
             * it too. Print the result and the target's detail. */
            fs_onyx_target_describe(ds, ts[0], msg, sizeof(msg));
        }
        printf("poll %d result=%s wall_ms=%.1f rss_kib=%ld detail={%s}\n", k,
               fs_ph_result_names[r0], wall / 1e3, rss_kib(), msg);
        if (grep)
            fs_ph_grep_print(&b, &grep_re, k);
        fflush(stdout);
        int64_t next = t0 + cfg.interval_us;
        int64_t now = fs_ph_mono_us();
        if (k < polls && next > now && !wait_file && !back_to_back)
            usleep((useconds_t)(next - now));
    }
    double cpu = fs_ph_cpu_ms() - (polls > 1 ? cpu_after_first : cpu0);
    if (print_metrics)
        fwrite(b.data, 1, b.len, stdout);
    char detail[2048];
    fs_onyx_target_describe(ds, ts[0], detail, sizeof(detail));
    int later = polls > 1 ? polls - 1 : 1;
    printf("SUMMARY targets=%d polls=%d ok=%lu timeout=%lu auth=%lu protocol=%lu parse=%lu "
           "partial=%lu wall_ms_avg=%.2f wall_ms_max=%.2f cpu_ms_per_poll=%.2f\n",
           ntargets, polls, fs_ph_result_count(0), fs_ph_result_count(1), fs_ph_result_count(2),
           fs_ph_result_count(3), fs_ph_result_count(4), fs_ph_result_count(5),
           wall_sum / 1e3 / later, wall_max / 1e3, cpu / later / ntargets);
    printf("DETAIL {%s}\n", detail);
    if (cfg.plan_only) {
        char plan[8192];
        if (fs_onyx_target_plan(ds, ts[0], plan, sizeof(plan)) == 0)
            printf("PLAN\n%sEND PLAN\n", plan);
        else
            printf("PLAN could not read the running config\n");
    }
    for (int i = 0; i < ntargets; i++) {
        fs_onyx_target_remove(ds, ts[i]);
        fs_store_sink_remove(st, sinks[i]);
        free(tc[i].name);
        free(tc[i].address);
    }
    fs_onyx_shutdown(ds);
    fs_store_free(st);
    fs_buf_free(&b);
    if (grep)
        regfree(&grep_re);
    if (tf)
        fclose(tf);
    for (size_t i = 0; i < nrules; i++)
        free(rules[i].name);
    free(tc);
    free(sinks);
    free(da);
    free(ts);
    return fs_ph_result_count(FS_POLL_OK) == (unsigned long)ntargets * (unsigned long)polls ? 0 : 1;
}
