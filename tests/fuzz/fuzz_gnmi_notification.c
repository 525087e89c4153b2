/*
 * libFuzzer: a hostile gNMI target's Notification bytes -> protobuf-c unpack -> mapping.
 * One map lives across inputs (small cache bound) so the cache, deletes and JSON paths
 * see sequences of notifications, as on a real stream. An ACL map and a user mapping are
 * configured so every resolution branch is reachable.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gnmi/map.h"

static uint64_t sink_sum;

static void
f_counter(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
          double scale)
{
    (void)arg;
    (void)scale;
    for (size_t i = 0; i < n; i++)
        sink_sum += strlen(l[i].name) + strlen(l[i].value);
    sink_sum += raw + (uint64_t)m;
}

static void
f_gauge(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    f_counter(arg, m, l, n, (uint64_t)(v == v ? 1 : 0), 1);
}

static void
f_deleted(void *arg, enum fs_metric m, const struct fs_label *l, size_t n)
{
    f_counter(arg, m, l, n, 0, 1);
}

static const struct fs_gnmi_emit fuzz_emit = {NULL, f_counter, f_gauge, f_deleted,
                                              NULL, NULL,      NULL,    NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fs_gnmi_map *m;
    if (!m) {
        static struct fs_gnmi_acl_rule acl[] = {{"ROCE", 10, "roce"}, {"ALL", -1, "all"}};
        static struct fs_gnmi_label_src ls[] = {{"interface", "name", NULL},
                                                {"direction", NULL, "rx"}};
        static struct fs_gnmi_user_map um = {"/interfaces/interface/*/state/counters/in-fcs-errors",
                                             "fabric_port_errors_total",
                                             FS_GNMI_COUNTER,
                                             0,
                                             ls,
                                             2};
        /* ACL entries named by description too (their table and the cache clearing) */
        static const char *const names[] = {"roce", "sockets"};
        struct fs_gnmi_map_opts o = {.user_maps = &um,
                                     .n_user_maps = 1,
                                     .acl_rules = acl,
                                     .n_acl_rules = 2,
                                     .cache_max = 512,
                                     .rule_names = names,
                                     .n_rule_names = 2,
                                     .acl_description_prefix = "fs:",
                                     .expose_unmapped = true}; /* expose: render_path too */
        char err[256];
        m = fs_gnmi_map_new(&o, err, sizeof err);
        if (!m) {
            fprintf(stderr, "fs_gnmi_map_new: %s\n", err);
            abort();
        }
    }
    Gnmi__Notification *n = gnmi__notification__unpack(NULL, size, data);
    if (!n)
        return 0;
    fs_gnmi_map_notification(m, n, 1, &fuzz_emit, NULL);
    gnmi__notification__free_unpacked(n, NULL);
    return 0;
}
