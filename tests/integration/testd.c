/*
 * fs-testd: the collector's store, scheduler and HTTP endpoint fed by the test-only
 * driver (tests/support/test_driver.c) instead of real switches, for integration tests
 * that need known data behind /metrics and /api/v1/raw before any real driver is
 * involved. Prints "port N" once listening; stops on SIGTERM/SIGINT.
 *
 * With --config FILE, the remote_write receivers of that fabricscope configuration (its
 * other keys are ignored) are sent the ring's samples, as the daemon does.
 *
 * usage: fs-testd [--port P] [--targets N] [--ports M] [--interval-ms I] [--step S]
 *                 [--config FILE]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "export/remote_write.h"
#include "http/http.h"
#include "scheduler.h"
#include "store/store.h"
#include "test_driver.h"

int
main(int argc, char **argv)
{
    unsigned port = 0, targets = 2, ports = 8, interval_ms = 500;
    unsigned long long step = 1000;
    const char *config = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--targets") == 0)
            targets = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--ports") == 0)
            ports = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--interval-ms") == 0)
            interval_ms = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--step") == 0)
            step = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--config") == 0)
            config = argv[i + 1];
        else {
            fprintf(stderr, "fs-testd: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (targets == 0 || targets > 1000) {
        fprintf(stderr, "fs-testd: --targets must be 1..1000\n");
        return 2;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 64 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    struct fs_sched *sc = fs_sched_new(NULL, err, sizeof err);
    if (!st || !sc) {
        fprintf(stderr, "fs-testd: %s\n", err);
        return 1;
    }
    /* Senders first: every sample the targets produce is after their start. */
    struct fs_config *fcfg = NULL;
    struct fs_remote_write *rw = NULL;
    if (config) {
        char *errors = NULL;
        if (fs_config_load(config, NULL, &fcfg, &errors) != 0) {
            fprintf(stderr, "fs-testd: %s\n", errors ? errors : "bad configuration");
            return 1;
        }
        rw = fs_remote_write_new(st, err, sizeof err);
        if (!rw || fs_remote_write_apply(rw, fcfg->remote_write, fcfg->n_remote_write, NULL, 0, err,
                                         sizeof err) != 0) {
            fprintf(stderr, "fs-testd: %s\n", err);
            return 1;
        }
    }
    struct fs_target_cfg *cfg = calloc(targets, sizeof *cfg);
    char(*names)[32] = calloc(targets, 32);
    struct fs_sink **sinks = calloc(targets, sizeof *sinks);
    void **ts = calloc(targets, sizeof *ts);
    struct fs_sched_entry **es = calloc(targets, sizeof *es);
    struct fs_kv label = {"pod", "p1"};
    int64_t iv = (int64_t)interval_ms * 1000;
    for (unsigned i = 0; i < targets; i++) {
        snprintf(names[i], 32, "sim-tor%u", i + 1);
        cfg[i].name = names[i];
        cfg[i].address = "127.0.0.1";
        cfg[i].labels = &label;
        cfg[i].n_labels = 1;
        sinks[i] = fs_store_sink_add(st, &cfg[i], "testsrc", iv);
        if (fs_test_driver.target_add(NULL, &cfg[i], NULL, sinks[i], &ts[i], err, sizeof err) !=
            0) {
            fprintf(stderr, "fs-testd: %s\n", err);
            return 1;
        }
        struct fs_test_behavior b = {.ports = (int)ports, .step = step, .delay_us = 1000};
        fs_test_driver_set(ts[i], &b);
        es[i] = fs_sched_add(sc, &fs_test_driver, NULL, ts[i], sinks[i], names[i], iv);
    }
    struct fs_http_opts ho = {.host = "127.0.0.1", .port = (uint16_t)port};
    struct fs_http *h = fs_http_start(&ho, st, err, sizeof err);
    int rc = 0;
    if (!h) {
        /* The targets are polling: they are stopped before their configuration goes. */
        fprintf(stderr, "fs-testd: %s\n", err);
        rc = 1;
    } else {
        printf("port %u\n", fs_http_port(h));
        fflush(stdout);
        int sig;
        sigwait(&set, &sig);
    }
    fs_http_stop(h);
    fs_remote_write_free(rw);
    fs_config_free(fcfg);
    for (unsigned i = 0; i < targets; i++) {
        fs_sched_remove(sc, es[i]);
        fs_test_driver.target_remove(NULL, ts[i]);
        fs_sched_entry_free(sc, es[i]);
        fs_store_sink_remove(st, sinks[i]);
    }
    fs_sched_free(sc);
    fs_store_free(st);
    free(cfg);
    free(names);
    free(sinks);
    free(ts);
    free(es);
    return rc;
}
