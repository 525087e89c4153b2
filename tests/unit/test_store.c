/* The store: counter monotonicity across wraps and resets, interface names and filters,
 * labels, staleness and source precedence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "store/store.h"

static int64_t
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct fixture {
    struct fs_store *st;
    struct fs_target_cfg t;
    struct fs_kv labels[2];
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    char err[128];
    struct fs_ring_opts ro = {.memory_limit = 16 << 20, .retention_us = 3600LL * 1000000};
    f->st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(f->st);
    f->t.name = "tor1";
    f->t.address = "127.0.0.1";
    f->labels[0] = (struct fs_kv){"pod", "p1"};
    f->labels[1] = (struct fs_kv){"rack", "r12"};
    f->t.labels = f->labels;
    f->t.n_labels = 2;
    /* As the configuration fills it: cli before snmp (default ranks). */
    static char *const precedence[] = {"cli", "snmp"};
    f->t.source_precedence = (char **)precedence;
    f->t.n_source_precedence = 2;
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    fs_store_free(f->st);
    if (f->t.iface_include)
        regfree(&f->t.iface_include_re);
    if (f->t.iface_exclude)
        regfree(&f->t.iface_exclude_re);
    free(f);
    return 0;
}

struct found {
    const char *name;
    const char *labels;
    bool exported_only;
    int n;
    uint64_t u;
    double d;
    uint32_t id;
    char text[512];
};

static int
find_cb(void *arg, const struct fs_series_info *s)
{
    struct found *f = arg;
    if (strcmp(s->name, f->name) != 0)
        return 0;
    if (f->labels && !strstr(s->labels_text, f->labels))
        return 0;
    f->n++;
    f->u = s->u;
    f->d = s->d;
    f->id = s->id;
    snprintf(f->text, sizeof f->text, "%s", s->labels_text);
    return 0;
}

static struct found
find(struct fs_store *st, const char *name, const char *labels, bool exported_only)
{
    struct found f = {.name = name, .labels = labels, .exported_only = exported_only};
    fs_store_foreach_series(st, exported_only, find_cb, &f);
    return f;
}

static void
push_bytes(struct fs_sink *s, int64_t ts, const char *iface, uint64_t raw, unsigned bits)
{
    struct fs_label l[] = {{"interface", iface}, {"direction", "rx"}};
    fs_sink_begin(s, ts);
    fs_sink_counter(s, FS_M_PORT_BYTES, l, 2, raw, bits);
    fs_sink_end(s);
}

static void
test_labels_and_normalization(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    assert_non_null(s);
    push_bytes(s, now_us(), "ethernet 1/7", 5, 64);
    struct found r = find(f->st, "fabric_port_bytes_total", NULL, true);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.text, "target=\"tor1\",pod=\"p1\",rack=\"r12\",interface=\"Eth1/7\","
                                "direction=\"rx\",source=\"snmp\"");
    /* "1/7" and "Eth1/7" are the same port: still one series. */
    push_bytes(s, now_us(), "1/7", 6, 64);
    push_bytes(s, now_us(), "Eth1/7", 7, 64);
    r = find(f->st, "fabric_port_bytes_total", NULL, true);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.u, 7);
    assert_int_equal(fs_store_series_count(f->st), 1);
}

static void
test_ifname_normalize(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(fs_ifname_normalize("1/1", b, sizeof b), "Eth1/1");
    assert_string_equal(fs_ifname_normalize("ethernet 1/1", b, sizeof b), "Eth1/1");
    assert_string_equal(fs_ifname_normalize("Ethernet1/49", b, sizeof b), "Eth1/49");
    assert_string_equal(fs_ifname_normalize("Eth1/16/3", b, sizeof b), "Eth1/16/3");
    assert_string_equal(fs_ifname_normalize("swp1", b, sizeof b), "swp1");
    assert_string_equal(fs_ifname_normalize("mgmt0", b, sizeof b), "mgmt0");
    assert_string_equal(fs_ifname_normalize("eth0", b, sizeof b), "eth0");
    assert_string_equal(fs_ifname_normalize("1/", b, sizeof b), "1/");
}

static void
test_label_escaping(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    struct fs_label l[] = {
        {"interface", "Eth1/1"}, {"alias", "up\"link\\to\nspine"}, {"ifindex", "1"}};
    fs_sink_begin(s, now_us());
    fs_sink_gauge(s, FS_M_PORT_INFO, l, 3, 1);
    fs_sink_end(s);
    struct found r = find(f->st, "fabric_port_info", NULL, true);
    assert_int_equal(r.n, 1);
    assert_non_null(strstr(r.text, "alias=\"up\\\"link\\\\to\\nspine\""));
}

static int
resets_cb(void *arg, const struct fs_instance_info *in)
{
    memcpy(arg, in->counter_resets, sizeof in->counter_resets);
    return 1;
}

static void
test_counter_wrap32(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(s, t, "Eth1/1", UINT32_MAX - 10, 32);
    push_bytes(s, t + 1, "Eth1/1", 5, 32); /* wrapped: +16 */
    struct found r = find(f->st, "fabric_port_bytes_total", NULL, true);
    assert_int_equal(r.u, (uint64_t)UINT32_MAX + 6);
    /* The ring holds the monotonic values too. */
    struct fs_ring_sample out[4];
    long n = fs_store_read(f->st, r.id, 0, INT64_MAX, out, 4, NULL);
    assert_int_equal(n, 2);
    assert_int_equal(out[0].v.u, UINT32_MAX - 10);
    assert_int_equal(out[1].v.u, (uint64_t)UINT32_MAX + 6);
    uint64_t resets[FS_RESET_KIND_COUNT] = {0};
    fs_store_foreach_instance(f->st, resets_cb, resets);
    assert_int_equal(resets[FS_RESET_WRAP], 1);
}

static void
test_counter_reboot_and_cleared(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(s, t, "Eth1/1", 1000, 64);
    push_bytes(s, t + 1, "Eth1/2", 50, 64);
    /* The device rebooted: counters restart; the exposed value keeps growing. */
    fs_sink_counter_reset(s, FS_RESET_REBOOT, NULL);
    push_bytes(s, t + 2, "Eth1/1", 30, 64);
    struct found r = find(f->st, "fabric_port_bytes_total", "Eth1/1", true);
    assert_int_equal(r.u, 1030);
    /* A reboot where the counter already passed its old value still counts from zero. */
    push_bytes(s, t + 3, "Eth1/2", 70, 64);
    r = find(f->st, "fabric_port_bytes_total", "Eth1/2", true);
    assert_int_equal(r.u, 120);
    /* A 64-bit counter going down without a declared reset: cleared, rebased. */
    push_bytes(s, t + 4, "Eth1/1", 10, 64);
    r = find(f->st, "fabric_port_bytes_total", "Eth1/1", true);
    assert_int_equal(r.u, 1040);
    uint64_t resets[FS_RESET_KIND_COUNT] = {0};
    fs_store_foreach_instance(f->st, resets_cb, resets);
    assert_int_equal(resets[FS_RESET_REBOOT], 1);
    assert_int_equal(resets[FS_RESET_CLEARED], 1);
    assert_int_equal(resets[FS_RESET_WRAP], 0);
}

static void
test_counter_interface_discontinuity(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(s, t, "Eth1/1", 500, 32);
    push_bytes(s, t + 1, "Eth1/2", 500, 32);
    fs_sink_counter_reset(s, FS_RESET_DISCONTINUITY, "1/1");
    push_bytes(s, t + 2, "Eth1/1", 600, 32); /* counted from zero: +600 */
    push_bytes(s, t + 3, "Eth1/2", 600, 32); /* unaffected: +100 */
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, 1100);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/2", true).u, 600);
}

static void
test_interface_filters(void **state)
{
    struct fixture *f = *state;
    f->t.iface_include = "^Eth";
    f->t.iface_exclude = "^Eth1/6[34]$";
    assert_int_equal(regcomp(&f->t.iface_include_re, f->t.iface_include, REG_EXTENDED | REG_NOSUB),
                     0);
    assert_int_equal(regcomp(&f->t.iface_exclude_re, f->t.iface_exclude, REG_EXTENDED | REG_NOSUB),
                     0);
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(s, t, "1/63", 1, 64);
    push_bytes(s, t + 1, "1/62", 1, 64);
    push_bytes(s, t + 2, "mgmt0", 1, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, true).n, 1);
    assert_non_null(strstr(find(f->st, "fabric_port_bytes_total", NULL, true).text, "Eth1/62"));
    /* Samples without an interface label are not filtered. */
    fs_sink_begin(s, t + 3);
    fs_sink_gauge(s, FS_M_DEVICE_UPTIME, NULL, 0, 42);
    fs_sink_end(s);
    assert_int_equal(find(f->st, "fabric_device_uptime_seconds", NULL, true).n, 1);
}

static void
test_staleness(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    push_bytes(s, now_us() - 10 * 1000000, "Eth1/1", 1, 64); /* 10 intervals ago */
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, true).n, 0);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, false).n, 1);
    push_bytes(s, now_us(), "Eth1/1", 2, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, true).n, 1);
}

static void
test_source_precedence(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *snmp = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    struct fs_sink *cli = fs_store_sink_add(f->st, &f->t, "cli", 1000000);
    int64_t t = now_us();
    push_bytes(snmp, t, "Eth1/1", 100, 64);
    fs_sink_begin(snmp, t);
    fs_sink_gauge(snmp, FS_M_DEVICE_UPTIME, NULL, 0, 5);
    fs_sink_end(snmp);
    push_bytes(cli, t, "Eth1/1", 101, 64);
    /* cli outranks snmp for port bytes; uptime only snmp has, so snmp's stays. */
    struct found r = find(f->st, "fabric_port_bytes_total", NULL, true);
    assert_int_equal(r.n, 1);
    assert_non_null(strstr(r.text, "source=\"cli\""));
    assert_int_equal(find(f->st, "fabric_device_uptime_seconds", NULL, true).n, 1);
    f->t.expose_all_sources = true;
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, true).n, 2);
}

static int
health_cb(void *arg, const struct fs_instance_info *in)
{
    struct fs_instance_info *out = arg;
    *out = *in;
    out->last_error = NULL;
    out->driver_detail = NULL;
    return 1;
}

static void
test_health(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    struct fs_instance_info in;
    fs_sink_cycle_begin(s, 1);
    fs_sink_done(s, 1, FS_POLL_TIMEOUT, "no answer");
    fs_sink_cycle_begin(s, 2);
    fs_sink_done(s, 2, FS_POLL_AUTH, NULL);
    fs_sink_count_overrun(s);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.state, FS_INST_DOWN);
    assert_int_equal(in.consecutive_failures, 2);
    assert_int_equal(in.poll_errors[0], 1);
    assert_int_equal(in.poll_errors[1], 1);
    assert_int_equal(in.poll_errors[4], 1);
    assert_int_equal(in.poll_count, 2);
    assert_int_equal(in.poll_hist[FS_POLL_BUCKETS], 2);
    fs_sink_cycle_begin(s, 3);
    fs_sink_done(s, 3, FS_POLL_OK, NULL);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.state, FS_INST_UP);
    assert_int_equal(in.consecutive_failures, 0);
    /* Clock: the tighter measurement wins. */
    int64_t t = now_us();
    fs_sink_clock(s, t + 5000, t - 1000, t + 1000);
    fs_sink_clock(s, t + 9000, t - 100000, t + 100000);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_true(in.clock_known);
    assert_true(in.clock_offset_seconds > 0.0049 && in.clock_offset_seconds < 0.0051);
}

static int
scale_cb(void *arg, const struct fs_series_info *s)
{
    *(double *)arg = s->scale;
    return 1;
}

static void
test_scaled_counter(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    struct fs_label l[] = {{"interface", "Eth1/1"}, {"direction", "rx"}, {"priority", "3"}};
    int64_t t = now_us();
    fs_sink_begin(s, t);
    fs_sink_counter_scaled(s, FS_M_PFC_PAUSE_SECONDS, l, 3, 1500, 64, 1e-3);
    fs_sink_end(s);
    fs_sink_counter_reset(s, FS_RESET_REBOOT, NULL);
    fs_sink_begin(s, t + 1);
    fs_sink_counter_scaled(s, FS_M_PFC_PAUSE_SECONDS, l, 3, 250, 64, 1e-3);
    fs_sink_end(s);
    struct found r = find(f->st, "fabric_pfc_pause_seconds_total", NULL, true);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.u, 1750); /* exact milliseconds, monotonic across the reboot */
    double scale = 0;
    fs_store_foreach_series(f->st, true, scale_cb, &scale);
    assert_true(scale == 1e-3);
}

static void
test_dead_series_swept(void **state)
{
    (void)state;
    char err[128];
    struct fs_ring_opts ro = {.memory_limit = 16 << 20, .retention_us = 2000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    struct fs_target_cfg t = {.name = "tor9", .address = "::1"};
    struct fs_sink *s = fs_store_sink_add(st, &t, "snmp", 100000);
    push_bytes(s, now_us() - 10 * 1000000, "Eth1/1", 1, 64); /* older than the retention */
    push_bytes(s, now_us(), "Eth1/2", 1, 64);
    fs_sink_done(s, 0, FS_POLL_OK, NULL); /* first sweep is one period away */
    assert_int_equal(fs_store_series_count(st), 2);
    struct timespec d = {.tv_sec = 1, .tv_nsec = 100000000};
    nanosleep(&d, NULL);
    push_bytes(s, now_us(), "Eth1/2", 2, 64);
    fs_sink_done(s, 0, FS_POLL_OK, NULL);
    assert_int_equal(fs_store_series_count(st), 1);
    assert_int_equal(find(st, "fabric_port_bytes_total", NULL, false).n, 1);
    /* The survivor still works, and a dead one comes back as a new series. */
    push_bytes(s, now_us(), "Eth1/1", 5, 64);
    assert_int_equal(find(st, "fabric_port_bytes_total", "Eth1/1", true).u, 5);
    assert_int_equal(find(st, "fabric_port_bytes_total", "Eth1/2", true).u, 2);
    fs_store_free(st);
}

static void
test_remove_frees_series(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *a = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    struct fs_sink *b = fs_store_sink_add(f->st, &f->t, "cli", 1000000);
    push_bytes(a, now_us(), "Eth1/1", 1, 64);
    push_bytes(b, now_us(), "Eth1/2", 1, 64);
    assert_int_equal(fs_store_series_count(f->st), 2);
    fs_store_sink_remove(f->st, a);
    assert_int_equal(fs_store_series_count(f->st), 1);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, false).n, 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_labels_and_normalization, setup, teardown),
        cmocka_unit_test(test_ifname_normalize),
        cmocka_unit_test_setup_teardown(test_label_escaping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counter_wrap32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counter_reboot_and_cleared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counter_interface_discontinuity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interface_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_staleness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_source_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scaled_counter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_frees_series, setup, teardown),
        cmocka_unit_test(test_dead_series_swept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
