/* The store: counter monotonicity across wraps, resets, width changes and clock steps;
 * interface names, UTF-8 and filters; labels, staleness and source precedence; removal
 * that keeps history; stale raw ids; the per-target series limit. Time is injected (a
 * fake clock): no test sleeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "http/api.h"
#include "http/expo.h"
#include "store/store.h"
#include "util/buf.h"

/* The fake clock every test's store reads. */
static int64_t fake_real = 1700000000000000LL, fake_mono = 1000000000LL;

static int64_t
clock_real(void *arg)
{
    (void)arg;
    return fake_real;
}

static int64_t
clock_mono(void *arg)
{
    (void)arg;
    return fake_mono;
}

static const struct fs_store_clock fake_clock = {clock_real, clock_mono, NULL};

static int64_t
now_us(void)
{
    return fake_real;
}

/* Both clocks move on by us. */
static void
advance(int64_t us)
{
    fake_real += us;
    fake_mono += us;
}

static struct fs_store *
store_new(uint64_t memory_limit, int64_t retention_us)
{
    char err[128];
    struct fs_ring_opts ro = {.memory_limit = memory_limit, .retention_us = retention_us};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(st);
    fs_store_set_clock(st, &fake_clock);
    return st;
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
    f->st = store_new(16 << 20, 3600LL * 1000000);
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
    uint32_t id, gen;
    bool exported;
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
    f->gen = s->gen;
    f->exported = s->exported;
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

/* Sums the latest values of the sink's fabric_queue_depth_bytes gauges (tc label per series). */
static int
sum_cb(void *arg, const struct fs_series_info *s)
{
    if (strcmp(s->name, "fabric_queue_depth_bytes") == 0)
        *(double *)arg += s->d;
    return 0;
}

/* Issue 34: the batch arrays shrink after a batch that made them grow, and grow again;
 * batches of changing sizes (large, larger, small, large) keep every sample. */
static void
test_batch_arrays_shrink_and_grow(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "gnmi", 1000000);
    assert_non_null(s);
    static const int sizes[] = {3000, 3500, 100, 7000, 3000, 7000};
    for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b++) {
        fs_sink_begin(s, now_us());
        for (int i = 0; i < sizes[b]; i++) {
            char tc[16];
            snprintf(tc, sizeof tc, "%d", i);
            struct fs_label l[] = {{"interface", "Ethernet1/1"}, {"tc", tc}};
            fs_sink_gauge(s, FS_M_QUEUE_DEPTH, l, 2, (double)(b + 1));
        }
        fs_sink_end(s);
        double sum = 0;
        fs_store_foreach_series(f->st, false, sum_cb, &sum);
        /* this batch's series hold b + 1; the others (only when larger ever came) their
         * last batch's value */
        double want = 0;
        for (int i = 0; i < 7000; i++) {
            double v = 0;
            for (size_t k = 0; k <= b; k++)
                if (i < sizes[k])
                    v = (double)(k + 1);
            want += v;
        }
        assert_true(sum == want);
        advance(1000000);
    }
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

/* The value pointer of the label named name in s's labels, and s's labels_text. */
struct shared_seen {
    const char *target;
    const char *iface_ptr;
    char text[256];
    int n;
};

static int
shared_cb(void *arg, const struct fs_series_info *s)
{
    struct shared_seen *w = arg;
    if (strcmp(s->name, "fabric_port_bytes_total") != 0 || !strstr(s->labels_text, w->target))
        return 0;
    for (size_t i = 0; i < s->n_labels; i++)
        if (!strcmp(s->labels[i].name, "interface"))
            w->iface_ptr = s->labels[i].value;
    snprintf(w->text, sizeof w->text, "%s", s->labels_text);
    w->n++;
    return 0;
}

static struct shared_seen
seen_of(struct fs_store *st, const char *target)
{
    struct shared_seen w = {.target = target};
    fs_store_foreach_series(st, false, shared_cb, &w);
    return w;
}

/*
 * Issue 34: a series' own labels are interned, so two targets' series of the same port
 * share one copy of its labels (the old store copied every label into every series), the
 * label set is freed with the last series holding it, and the text a reader gets is
 * still the whole label set.
 */
static void
test_label_sets_shared(void **state)
{
    (void)state;
    struct fs_store *st = store_new(16 << 20, 2000000);
    struct fs_kv rk[1] = {{"rack", "r7"}};
    struct fs_target_cfg a = {.name = "torA", .address = "::1"};
    struct fs_target_cfg b = {.name = "torB", .address = "::1", .labels = rk, .n_labels = 1};
    struct fs_sink *ka = fs_store_sink_add(st, &a, "snmp", 100000);
    struct fs_sink *kb = fs_store_sink_add(st, &b, "gnmi", 100000);
    push_bytes(ka, now_us(), "Eth1/1", 1, 64);
    push_bytes(kb, now_us(), "Eth1/1", 2, 64);
    push_bytes(kb, now_us(), "Eth1/2", 3, 64);
    assert_int_equal(fs_store_series_count(st), 3);
    assert_int_equal(fs_store_label_sets(st), 2);
    struct shared_seen sa = seen_of(st, "torA"), sb = seen_of(st, "torB");
    assert_int_equal(sa.n, 1);
    assert_int_equal(sb.n, 2);
    assert_non_null(sa.iface_ptr);
    /* one copy of "Eth1/1" for both targets */
    assert_ptr_equal(sa.iface_ptr, seen_of(st, "interface=\"Eth1/1").iface_ptr);
    assert_ptr_equal(sa.iface_ptr,
                     seen_of(st, "target=\"torB\",rack=\"r7\",interface=\"Eth1/1").iface_ptr);
    assert_string_equal(sa.text,
                        "target=\"torA\",interface=\"Eth1/1\",direction=\"rx\",source=\"snmp\"");
    assert_string_equal(
        seen_of(st, "interface=\"Eth1/2").text,
        "target=\"torB\",rack=\"r7\",interface=\"Eth1/2\",direction=\"rx\",source=\"gnmi\"");
    /* torA goes and its history ages out: the shared set stays for torB */
    fs_store_sink_remove(st, ka);
    for (int i = 0; i < 25; i++) {
        advance(100000);
        push_bytes(kb, now_us(), "Eth1/1", (uint64_t)(10 + i), 64);
        push_bytes(kb, now_us(), "Eth1/2", (uint64_t)(10 + i), 64);
        fs_sink_done(kb, 0, FS_POLL_OK, NULL);
    }
    assert_int_equal(fs_store_series_count(st), 2);
    assert_int_equal(seen_of(st, "torA").n, 0);
    assert_int_equal(fs_store_label_sets(st), 2);
    assert_int_equal(find(st, "fabric_port_bytes_total", "interface=\"Eth1/1", true).u, 34);
    /* Eth1/2 stops: swept past the retention (sweeps run every second), its set is
     * freed; Eth1/1's stays */
    for (int i = 0; i < 40; i++) {
        advance(100000);
        push_bytes(kb, now_us(), "Eth1/1", (uint64_t)(40 + i), 64);
        fs_sink_done(kb, 0, FS_POLL_OK, NULL);
    }
    assert_int_equal(fs_store_series_count(st), 1);
    assert_int_equal(fs_store_label_sets(st), 1);
    assert_string_equal(
        seen_of(st, "torB").text,
        "target=\"torB\",rack=\"r7\",interface=\"Eth1/1\",direction=\"rx\",source=\"gnmi\"");
    /* and a new series of it interns it again */
    push_bytes(kb, now_us(), "Eth1/2", 99, 64);
    assert_int_equal(fs_store_label_sets(st), 2);
    assert_int_equal(find(st, "fabric_port_bytes_total", "interface=\"Eth1/2", true).u, 99);
    fs_store_free(st);
}

/* Issue 34: sinks on their own threads intern the same label sets at once, while a
 * reader walks the series and each sink is removed from its thread (run under TSan). */
enum { CI_THREADS = 4, CI_ROUNDS = 30, CI_PORTS = 48 };
struct ci_arg {
    struct fs_store *st;
    struct fs_sink *sink;
};

static void *
ci_writer(void *arg_)
{
    struct ci_arg *a = arg_;
    for (int r = 0; r < CI_ROUNDS; r++) {
        fs_sink_begin(a->sink, now_us() + r);
        for (int p = 0; p < CI_PORTS; p++) {
            char ifn[32];
            /* half the ports keep their names, half are renamed every round */
            snprintf(ifn, sizeof ifn, p % 2 ? "Eth1/%d" : "Eth9/%d", p % 2 ? p : p + 100 * r);
            struct fs_label l[] = {{"interface", ifn}, {"direction", "tx"}};
            fs_sink_counter(a->sink, FS_M_PORT_BYTES, l, 2, (uint64_t)r, 64);
        }
        fs_sink_end(a->sink);
        fs_sink_done(a->sink, (uint64_t)r, FS_POLL_OK, NULL);
    }
    fs_store_sink_remove(a->st, a->sink);
    return NULL;
}

static int
ci_count(void *arg, const struct fs_series_info *s)
{
    (void)s;
    (*(size_t *)arg)++;
    return 0;
}

static void
test_label_sets_concurrent(void **state)
{
    (void)state;
    struct fs_store *st = store_new(64 << 20, 2000000);
    struct fs_target_cfg cfg[CI_THREADS + 1];
    char names[CI_THREADS + 1][16];
    struct ci_arg a[CI_THREADS];
    pthread_t th[CI_THREADS];
    memset(cfg, 0, sizeof cfg);
    for (int i = 0; i <= CI_THREADS; i++) {
        snprintf(names[i], sizeof names[i], "ci%d", i);
        cfg[i].name = names[i];
        cfg[i].address = "::1";
    }
    struct fs_sink *stays = fs_store_sink_add(st, &cfg[CI_THREADS], "snmp", 100000);
    push_bytes(stays, now_us(), "Eth1/1", 1, 64);
    for (int i = 0; i < CI_THREADS; i++) {
        a[i] = (struct ci_arg){st, fs_store_sink_add(st, &cfg[i], "snmp", 100000)};
        assert_non_null(a[i].sink);
    }
    for (int i = 0; i < CI_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, ci_writer, &a[i]), 0);
    size_t seen = 0;
    for (int k = 0; k < 200; k++)
        fs_store_foreach_series(st, false, ci_count, &seen);
    for (int i = 0; i < CI_THREADS; i++)
        pthread_join(th[i], NULL);
    /* every thread's series of a port share one set: 24 kept names + 24 x 30 renamed */
    size_t n = CI_THREADS * (CI_PORTS / 2 + CI_PORTS / 2 * CI_ROUNDS) + 1;
    assert_int_equal(fs_store_series_count(st), n);
    assert_int_equal(fs_store_label_sets(st), CI_PORTS / 2 + CI_PORTS / 2 * CI_ROUNDS + 1);
    /* the removed targets' history ages out: only the stay-behind's set is left */
    for (int i = 0; i < 40; i++) {
        advance(100000);
        push_bytes(stays, now_us(), "Eth1/1", (uint64_t)(2 + i), 64);
        fs_sink_done(stays, 0, FS_POLL_OK, NULL);
    }
    assert_int_equal(fs_store_series_count(st), 1);
    assert_int_equal(fs_store_label_sets(st), 1);
    fs_store_free(st);
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
    long n = fs_store_read(f->st, r.id, r.gen, 0, INT64_MAX, out, 4, NULL);
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
    /* A counter in the reset's scope that did not go down just continues: 50 -> 70 is
     * +20, not +70 (an agent restart under counters that kept counting). */
    push_bytes(s, t + 3, "Eth1/2", 70, 64);
    r = find(f->st, "fabric_port_bytes_total", "Eth1/2", true);
    assert_int_equal(r.u, 70);
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
    push_bytes(s, t + 2, "Eth1/1", 100, 32); /* lower: counted from zero, +100 (no wrap) */
    push_bytes(s, t + 3, "Eth1/2", 600, 32); /* not in the reset's scope: +100 */
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, 600);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/2", true).u, 600);
    /* The declaration covered one sample only: a later drop of a 32-bit counter with
     * no declaration is a wrap again. */
    push_bytes(s, t + 4, "Eth1/1", 50, 32);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u,
                     600 + 4294967296ULL - 100 + 50);
    uint64_t resets[FS_RESET_KIND_COUNT] = {0};
    fs_store_foreach_instance(f->st, resets_cb, resets);
    assert_int_equal(resets[FS_RESET_DISCONTINUITY], 1);
    assert_int_equal(resets[FS_RESET_WRAP], 1);
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
    /* A driver that reads each series every 4 polls (fs_sink_set_spread): a sample 10
       intervals old is within 3 x 4 intervals; back to every poll, it is stale again. */
    struct fs_sink *c = fs_store_sink_add(f->st, &f->t, "cli", 1000000);
    const char *e2 = "interface=\"Eth1/2\"";
    push_bytes(c, now_us() - 10 * 1000000, "Eth1/2", 1, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", e2, true).n, 0);
    fs_sink_set_spread(c, 4);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", e2, true).n, 1);
    fs_sink_set_spread(c, 1);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", e2, true).n, 0);
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
    f->t.expose_all_sources = false;

    /* Per-port flow-rule counts (as sFlow gives them) beside a preferred source's
     * per-device ones (as the CLI gives them): a breakdown is not a duplicate, both show;
     * a lower source's per-device counts of the same family are still hidden. */
    fs_sink_begin(cli, t);
    fs_sink_counter(cli, FS_M_FLOW_RULE_PACKETS, (struct fs_label[]){{"rule", "nccl"}}, 1, 500, 64);
    fs_sink_end(cli);
    fs_sink_begin(snmp, t);
    fs_sink_counter(snmp, FS_M_FLOW_RULE_PACKETS,
                    (struct fs_label[]){{"rule", "nccl"}, {"interface", "Eth1/1"}}, 2, 300, 64);
    fs_sink_counter(snmp, FS_M_FLOW_RULE_PACKETS, (struct fs_label[]){{"rule", "nccl"}}, 1, 499,
                    64);
    fs_sink_end(snmp);
    r = find(f->st, "fabric_flow_rule_packets_total", NULL, true);
    assert_int_equal(r.n, 2);
    r = find(f->st, "fabric_flow_rule_packets_total", "interface=\"Eth1/1\"", true);
    assert_int_equal(r.n, 1);
    assert_non_null(strstr(r.text, "source=\"snmp\""));
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

static int
health_err_cb(void *arg, const struct fs_instance_info *in)
{
    snprintf(arg, 256, "%s", in->last_error);
    return 1;
}

static int
count_instances_cb(void *arg, const struct fs_instance_info *in)
{
    (void)in;
    (*(int *)arg)++;
    return 0;
}

static int
two_cb(void *arg, const struct fs_instance_info *in)
{
    struct fs_instance_info *out = arg;
    out[in->source[0] == 's' ? 0 : 1] = *in;
    return 0;
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
    /* Clock: the bounds intersect, so the tighter measurement decides; the fake clock's
     * round readings make the filter assume a 1 ms resolution, which widens the bound
     * to [4, 7] ms but keeps the true offset (5 ms) inside it. */
    int64_t t = now_us();
    fs_sink_clock(s, t + 5000, t - 1000, t + 1000);
    fs_sink_clock(s, t + 9000, t - 100000, t + 100000);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_true(in.clock_known);
    assert_true(fabs(in.clock_offset_seconds - 0.005) <= in.clock_uncertainty_seconds + 1e-9);
    assert_true(in.clock_uncertainty_seconds <= 0.0016);
    assert_true(in.clock_offset_exceeded); /* 4 ms at the least: over the default 1 ms */
    fs_store_set_clock_max_offset(f->st, 10000);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_false(in.clock_offset_exceeded); /* 7 ms at the most: not over 10 ms */
    fs_store_set_clock_max_offset(f->st, 1000);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_true(in.clock_offset_exceeded); /* 4 ms at the least: over 1 ms */
}

/* fabricscope_target_last_sample_timestamp_seconds: the time the newest samples carry
 * in the ring (what a TSDB scraping /metrics stores beside them to place them at their
 * poll), absent before any sample; a batch stamped before the previous one is stored
 * 1 µs after it, and so is the gauge. */
static void
test_last_sample_timestamp(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    struct fs_buf out;
    fs_buf_init(&out, 1 << 20);
    fs_sink_cycle_begin(s, 1);
    fs_sink_done(s, 1, FS_POLL_OK, NULL); /* a cycle with no sample */
    assert_int_equal(fs_expo_render(f->st, &out), 0);
    assert_null(strstr(out.data, "fabricscope_target_last_sample_timestamp_seconds"));
    fs_buf_free(&out);
    push_bytes(s, 1796577661640799LL, "Eth1/7", 5, 64);
    push_bytes(s, 1796577661000000LL, "Eth1/8", 5, 64); /* the clock stepped back */
    struct fs_instance_info in;
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.last_sample_us, 1796577661640800LL);
    fs_buf_init(&out, 1 << 20);
    assert_int_equal(fs_expo_render(f->st, &out), 0);
    assert_non_null(
        strstr(out.data, "# TYPE fabricscope_target_last_sample_timestamp_seconds gauge\n"));
    assert_non_null(strstr(out.data, "fabricscope_target_last_sample_timestamp_seconds{"
                                     "target=\"tor1\",pod=\"p1\",rack=\"r12\","
                                     "source=\"snmp\"} 1796577661.6408\n"));
    fs_buf_free(&out);
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
    struct fs_store *st = store_new(16 << 20, 2000000);
    struct fs_target_cfg t = {.name = "tor9", .address = "::1"};
    struct fs_sink *s = fs_store_sink_add(st, &t, "snmp", 100000);
    push_bytes(s, now_us(), "Eth1/1", 1, 64);
    push_bytes(s, now_us(), "Eth1/2", 1, 64);
    fs_sink_done(s, 0, FS_POLL_OK, NULL); /* first sweep is one period away */
    assert_int_equal(fs_store_series_count(st), 2);
    advance(2100000); /* past the retention for Eth1/1, which gets no more samples */
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

/* Removal stops export at once but keeps the history readable by (id, gen). */
static void
test_remove_keeps_history(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *a = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    struct fs_sink *b = fs_store_sink_add(f->st, &f->t, "cli", 1000000);
    int64_t t = now_us();
    push_bytes(a, t, "Eth1/1", 1, 64);
    push_bytes(a, t + 1000, "Eth1/1", 2, 64);
    push_bytes(b, t, "Eth1/2", 1, 64);
    struct found r = find(f->st, "fabric_port_bytes_total", "Eth1/1", false);
    assert_int_equal(r.n, 1);
    fs_store_sink_remove(f->st, a);
    /* not exported, not an instance any more */
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).n, 0);
    struct found all = find(f->st, "fabric_port_bytes_total", "Eth1/1", false);
    assert_int_equal(all.n, 1);
    assert_false(all.exported);
    struct fs_instance_info in;
    int n_inst = 0;
    fs_store_foreach_instance(f->st, health_cb, &in);
    fs_store_foreach_instance(f->st, count_instances_cb, &n_inst);
    assert_int_equal(n_inst, 1);
    assert_string_equal(in.source, "cli");
    /* but the history reads */
    struct fs_ring_sample out[4];
    assert_int_equal(fs_store_read(f->st, all.id, all.gen, 0, INT64_MAX, out, 4, NULL), 2);
    assert_int_equal(out[1].v.u, 2);
    assert_int_equal(fs_store_series_count(f->st), 2);
}

/* Retention (by the monotonic clock) finally takes a removed instance's series. */
static void
test_removed_history_expires(void **state)
{
    (void)state;
    struct fs_store *st = store_new(16 << 20, 2000000);
    struct fs_target_cfg t1 = {.name = "gone", .address = "::1"};
    struct fs_target_cfg t2 = {.name = "stays", .address = "::1"};
    struct fs_sink *gone = fs_store_sink_add(st, &t1, "snmp", 100000);
    struct fs_sink *stays = fs_store_sink_add(st, &t2, "snmp", 100000);
    push_bytes(gone, now_us(), "Eth1/1", 1, 64);
    fs_store_sink_remove(st, gone);
    struct found r = find(st, "fabric_port_bytes_total", "gone", false);
    assert_int_equal(r.n, 1);
    for (int i = 0; i < 30; i++) { /* 3 s of polls of the other target */
        advance(100000);
        push_bytes(stays, now_us(), "Eth1/1", (uint64_t)i, 64);
        fs_sink_done(stays, 0, FS_POLL_OK, NULL);
    }
    assert_int_equal(find(st, "fabric_port_bytes_total", "gone", false).n, 0);
    struct fs_ring_sample out[4];
    assert_int_equal(fs_store_read(st, r.id, r.gen, 0, INT64_MAX, out, 4, NULL), -1);
    assert_int_equal(fs_store_series_count(st), 1);
    fs_store_free(st);
}

/*
 * Several removed instances, their histories ending at different times: each sweep frees
 * exactly those past retention, in one pass for all of them, and never a live series
 * (the per-metric lists keep the stay-behind target's and the younger removed ones').
 */
static void
test_removed_histories_expire_together(void **state)
{
    (void)state;
    struct fs_store *st = store_new(16 << 20, 2000000);
    struct fs_target_cfg cfg[5] = {{.name = "old1", .address = "::1"},
                                   {.name = "old2", .address = "::1"},
                                   {.name = "old3", .address = "::1"},
                                   {.name = "young", .address = "::1"},
                                   {.name = "stays", .address = "::1"}};
    struct fs_sink *k[5];
    for (int i = 0; i < 5; i++)
        k[i] = fs_store_sink_add(st, &cfg[i], "snmp", 100000);
    for (int i = 0; i < 5; i++) {
        push_bytes(k[i], now_us(), "Eth1/1", 1, 64);
        push_bytes(k[i], now_us(), "Eth1/2", 2, 64);
    }
    for (int i = 0; i < 3; i++)
        fs_store_sink_remove(st, k[i]);
    advance(1500000);
    push_bytes(k[3], now_us(), "Eth1/1", 3, 64); /* young: history 1.5 s younger */
    push_bytes(k[3], now_us(), "Eth1/2", 4, 64);
    fs_store_sink_remove(st, k[3]);
    assert_int_equal(fs_store_series_count(st), 10);
    for (int i = 0; i < 12; i++) { /* past old*'s retention, not young's */
        advance(100000);
        push_bytes(k[4], now_us(), "Eth1/1", (uint64_t)i, 64);
        push_bytes(k[4], now_us(), "Eth1/2", (uint64_t)i, 64);
        fs_sink_done(k[4], 0, FS_POLL_OK, NULL);
    }
    assert_int_equal(fs_store_series_count(st), 4);
    for (int i = 0; i < 3; i++)
        assert_int_equal(find(st, "fabric_port_bytes_total", cfg[i].name, false).n, 0);
    assert_int_equal(find(st, "fabric_port_bytes_total", "young", false).n, 2);
    assert_int_equal(find(st, "fabric_port_bytes_total", "stays", true).n, 2);
    for (int i = 0; i < 25; i++) { /* and past young's */
        advance(100000);
        push_bytes(k[4], now_us(), "Eth1/1", (uint64_t)(20 + i), 64);
        push_bytes(k[4], now_us(), "Eth1/2", (uint64_t)(20 + i), 64);
        fs_sink_done(k[4], 0, FS_POLL_OK, NULL);
    }
    assert_int_equal(find(st, "fabric_port_bytes_total", "young", false).n, 0);
    assert_int_equal(fs_store_series_count(st), 2);
    assert_int_equal(find(st, "fabric_port_bytes_total", "stays", true).n, 2);
    fs_store_free(st);
}

/* An id reused after a sweep is detected by its generation, not read as the new series. */
static void
test_stale_id_generation(void **state)
{
    (void)state;
    struct fs_store *st = store_new(16 << 20, 2000000);
    struct fs_target_cfg t = {.name = "tor9", .address = "::1"};
    struct fs_sink *s = fs_store_sink_add(st, &t, "snmp", 100000);
    push_bytes(s, now_us(), "Eth1/1", 111, 64);
    fs_sink_done(s, 0, FS_POLL_OK, NULL);
    struct found old = find(st, "fabric_port_bytes_total", "Eth1/1", false);
    advance(2100000);
    push_bytes(s, now_us(), "Eth1/2", 222, 64); /* a new series ... */
    fs_sink_done(s, 0, FS_POLL_OK, NULL);       /* ... and Eth1/1 is swept */
    push_bytes(s, now_us(), "Eth1/3", 333, 64); /* reuses Eth1/1's ring id */
    struct found fresh = find(st, "fabric_port_bytes_total", "Eth1/3", false);
    assert_int_equal(find(st, "fabric_port_bytes_total", "Eth1/1", false).n, 0);
    assert_int_equal(fresh.id, old.id);
    assert_int_not_equal(fresh.gen, old.gen);
    struct fs_ring_sample out[4];
    assert_int_equal(fs_store_read(st, old.id, old.gen, 0, INT64_MAX, out, 4, NULL), -1);
    assert_int_equal(fs_store_read(st, fresh.id, fresh.gen, 0, INT64_MAX, out, 4, NULL), 1);
    assert_int_equal(out[0].v.u, 333);
    fs_store_free(st);
}

static void
test_reset_without_drop_not_counted(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(s, t, "Eth1/1", 1000, 64);
    push_bytes(s, t + 1, "Eth1/2", 2000, 64);
    fs_sink_counter_reset(s, FS_RESET_REBOOT, NULL);
    push_bytes(s, t + 2, "Eth1/1", 1500, 64);
    push_bytes(s, t + 3, "Eth1/2", 2500, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, 1500);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/2", true).u, 2500);
    uint64_t resets[FS_RESET_KIND_COUNT] = {0};
    fs_store_foreach_instance(f->st, resets_cb, resets);
    assert_int_equal(resets[FS_RESET_REBOOT], 0);
    /* Now a real reboot: both go down; counted once for the declaration. */
    fs_sink_counter_reset(s, FS_RESET_REBOOT, NULL);
    push_bytes(s, t + 4, "Eth1/1", 10, 64);
    push_bytes(s, t + 5, "Eth1/2", 20, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, 1510);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/2", true).u, 2520);
    fs_store_foreach_instance(f->st, resets_cb, resets);
    assert_int_equal(resets[FS_RESET_REBOOT], 1);
    assert_int_equal(resets[FS_RESET_CLEARED], 0);
}

static void
test_agent_restart(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(s, t, "Eth1/1", 1000, 64);
    fs_sink_agent_restart(s);
    push_bytes(s, t + 1, "Eth1/1", 1200, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, 1200);
    struct fs_instance_info in;
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.agent_restarts, 1);
    for (int k = 0; k < FS_RESET_KIND_COUNT; k++)
        assert_int_equal(in.counter_resets[k], 0);
}

/* HC column gone: 64-bit -> 32-bit is a discontinuity, never an unwrap. */
static void
test_width_change_is_discontinuity(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(s, t, "Eth1/1", 5000000000000ULL, 64);
    push_bytes(s, t + 1, "Eth1/1", 7000, 32); /* the 32-bit column: lower, other width */
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, 5000000000000ULL);
    push_bytes(s, t + 2, "Eth1/1", 7100, 32);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, 5000000000100ULL);
    push_bytes(s, t + 3, "Eth1/1", 5000000000500ULL, 64); /* back: higher, still no jump */
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, 5000000000100ULL);
    uint64_t resets[FS_RESET_KIND_COUNT] = {0};
    fs_store_foreach_instance(f->st, resets_cb, resets);
    assert_int_equal(resets[FS_RESET_DISCONTINUITY], 2);
    assert_int_equal(resets[FS_RESET_WRAP], 0);
    assert_int_equal(resets[FS_RESET_CLEARED], 0);
}

static void
push_packets(struct fs_sink *s, const char *iface, uint64_t raw)
{
    struct fs_label l[] = {{"interface", iface}, {"direction", "rx"}};
    fs_sink_begin(s, now_us());
    fs_sink_counter(s, FS_M_PORT_PACKETS, l, 2, raw, 32);
    fs_sink_end(s);
}

/* A 32-bit drop is a wrap only when the line rate allows the implied increase. */
static void
test_wrap_plausibility(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    fs_sink_set_max_rate(s, "1/1", 1.25e9); /* 10 Gb/s, set under another spelling */
    push_bytes(s, now_us(), "Eth1/1", UINT32_MAX - 1000000000ULL, 32);
    advance(1000000);
    /* +1e9 + 1 + 5 octets in 1 s: under 1.1 x 1.25e9, a wrap */
    push_bytes(s, now_us(), "Eth1/1", 5, 32);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u,
                     (uint64_t)UINT32_MAX + 6);
    advance(1000000);
    push_bytes(s, now_us(), "Eth1/1", 3000000000ULL, 32); /* +3e9 in 1 s: growth is growth */
    advance(1000000);
    /* 3e9 -> 10 in 1 s would imply 1.29e9 + 10 > 1.1 x 1.25e9 ... no: 1.375e9; a wrap */
    push_bytes(s, now_us(), "Eth1/1", 10, 32);
    uint64_t v =
        (uint64_t)UINT32_MAX + 6 + (3000000000ULL - 5) + (4294967296ULL - 3000000000ULL) + 10;
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, v);
    advance(100000);
    /* 4e9 -> 7 in 0.1 s at 10 Gb/s: an implausible wrap, so a clear: + 7 */
    push_bytes(s, now_us(), "Eth1/1", 4000000000ULL, 32);
    v += 4000000000ULL - 10;
    advance(100000);
    push_bytes(s, now_us(), "Eth1/1", 7, 32);
    v += 7;
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).u, v);
    /* packets: the bound is rate / 64 per second (1.95e7 pkt/s at 10 Gb/s) */
    push_packets(s, "Eth1/1", UINT32_MAX - 100);
    advance(1000000);
    push_packets(s, "Eth1/1", 50); /* +151 in 1 s: a wrap */
    assert_int_equal(find(f->st, "fabric_port_packets_total", "Eth1/1", true).u,
                     (uint64_t)UINT32_MAX + 51);
    push_packets(s, "Eth1/1", 100000000);
    advance(1000000);
    push_packets(s, "Eth1/1", 10); /* +4.19e9 in 1 s > 2.1e7: a clear */
    assert_int_equal(find(f->st, "fabric_port_packets_total", "Eth1/1", true).u,
                     (uint64_t)UINT32_MAX + 51 + (100000000 - 50) + 10);
    /* unknown rate: every drop is a wrap, as before */
    push_bytes(s, now_us(), "Eth1/9", 100, 32);
    advance(1);
    push_bytes(s, now_us(), "Eth1/9", 50, 32);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/9", true).u, 4294967296ULL + 50);
    uint64_t resets[FS_RESET_KIND_COUNT] = {0};
    fs_store_foreach_instance(f->st, resets_cb, resets);
    assert_int_equal(resets[FS_RESET_WRAP], 4);
    assert_int_equal(resets[FS_RESET_CLEARED], 2);
}

static void
test_partial_cycle(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    struct fs_instance_info in;
    fs_sink_cycle_begin(s, 1);
    push_bytes(s, now_us(), "Eth1/1", 5, 64);
    fs_sink_done(s, 1, FS_POLL_PARTIAL, "deadline reached after 1200 of 4000 rows");
    char err[256] = "";
    fs_store_foreach_instance(f->st, health_err_cb, err);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.state, FS_INST_UP);
    assert_int_equal(in.consecutive_failures, 0);
    assert_int_equal(in.poll_errors[5], 1);
    assert_string_equal(fs_poll_error_kind_names[5], "partial");
    assert_string_equal(err, "deadline reached after 1200 of 4000 rows");
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).n, 1);
}

/* The realtime clock steps back an hour: batches still go in, stamped just after. */
static void
test_clock_step_back(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(s, t, "Eth1/1", 1, 64);
    push_bytes(s, t - 3600000000LL, "Eth1/1", 2, 64);
    push_bytes(s, t - 3599000000LL, "Eth1/1", 3, 64);
    push_bytes(s, t + 5, "Eth1/1", 4, 64);
    struct found r = find(f->st, "fabric_port_bytes_total", "Eth1/1", false);
    assert_int_equal(r.u, 4);
    struct fs_ring_sample out[8];
    assert_int_equal(fs_store_read(f->st, r.id, r.gen, INT64_MIN, INT64_MAX, out, 8, NULL), 4);
    assert_int_equal(out[0].ts_us, t);
    assert_int_equal(out[1].ts_us, t + 1);
    assert_int_equal(out[2].ts_us, t + 2);
    assert_int_equal(out[3].ts_us, t + 5);
    struct fs_instance_info in;
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.clock_steps, 1);
}

/* The realtime clock jumps forward past the retention: no live series is swept, no
 * exposed counter falls. */
static void
test_clock_jump_forward(void **state)
{
    (void)state;
    struct fs_store *st = store_new(16 << 20, 2000000);
    struct fs_target_cfg t = {.name = "tor9", .address = "::1"};
    struct fs_sink *s = fs_store_sink_add(st, &t, "snmp", 100000);
    push_bytes(s, now_us(), "Eth1/1", UINT32_MAX - 10, 32);
    push_bytes(s, now_us() + 1, "Eth1/1", 5, 32); /* unwrapped: above 2^32 */
    fs_sink_done(s, 0, FS_POLL_OK, NULL);
    uint64_t before = find(st, "fabric_port_bytes_total", "Eth1/1", false).u;
    for (int i = 0; i < 30; i++) {
        fake_real += 86400000000LL; /* a day per poll on the realtime clock */
        fake_mono += 100000;
        push_bytes(s, now_us(), "Eth1/1", 6 + (uint64_t)i, 32);
        fs_sink_done(s, 0, FS_POLL_OK, NULL);
        uint64_t v = find(st, "fabric_port_bytes_total", "Eth1/1", false).u;
        assert_true(v >= before);
        before = v;
    }
    assert_int_equal(fs_store_series_count(st), 1);
    assert_int_equal(before, (uint64_t)UINT32_MAX + 6 + 29 + 1);
    fs_store_free(st);
}

/* A switch renaming its ports every poll stays within the per-target series limit. */
static void
test_series_limit_under_churn(void **state)
{
    (void)state;
    struct fs_store *st = store_new(64 << 20, 5000000);
    fs_store_set_series_limit(st, 200); /* the churn alone would keep ~280 alive */
    struct fs_target_cfg t = {.name = "churn", .address = "::1"};
    struct fs_sink *a = fs_store_sink_add(st, &t, "snmp", 1000000);
    struct fs_sink *b = fs_store_sink_add(st, &t, "cli", 1000000); /* same target */
    uint64_t max_seen = 0;
    for (int poll = 0; poll < 60; poll++) {
        fs_sink_begin(a, now_us());
        for (int p = 0; p < 40; p++) {
            char name[32];
            snprintf(name, sizeof name, "p%d-%d", poll, p);
            struct fs_label l[] = {{"interface", name}, {"direction", "rx"}};
            fs_sink_counter(a, FS_M_PORT_BYTES, l, 2, (uint64_t)poll, 64);
        }
        fs_sink_end(a);
        push_bytes(b, now_us(), "Eth1/1", (uint64_t)poll, 64);
        fs_sink_done(a, 0, FS_POLL_OK, NULL);
        fs_sink_done(b, 0, FS_POLL_OK, NULL);
        uint64_t n = fs_store_series_count(st);
        if (n > max_seen)
            max_seen = n;
        advance(1000000);
    }
    assert_true(max_seen <= 200);
    struct fs_instance_info in[2];
    fs_store_foreach_instance(st, two_cb, in);
    assert_true(in[0].series_limit_dropped > 0);
    /* the sweep keeps making room: names of the last polls (p50..p59) are taken */
    assert_true(find(st, "fabric_port_bytes_total", "interface=\"p5", false).n > 0);
    assert_int_equal(find(st, "fabric_port_bytes_total", "Eth1/1", false).n, 1);
    fs_store_free(st);
}

static void
test_utf8_interface_names(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(s, t, "Uplink→spine-ü", 1, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "interface=\"Uplink→spine-ü\"", true).n,
                     1);
    push_bytes(s, t, "bad\xff\xc3(\x01x", 1, 64); /* invalid bytes, a control character */
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "interface=\"bad?\?(?x\"", true).n, 1);
    char b[16];
    /* cut between characters: "ééééééé" is 14 bytes, "éééééééé" 16 */
    assert_string_equal(fs_ifname_normalize("éééééééé", b, sizeof b), "ééééééé");
    assert_string_equal(fs_label_sanitize("\xed\xa0\x80", b, sizeof b), "???"); /* surrogate */
    assert_string_equal(fs_label_sanitize("\xc0\xaf", b, sizeof b), "??");      /* overlong */
    assert_string_equal(fs_label_sanitize("a\xc2\x85z", b, sizeof b), "a?z");   /* C1 NEL */
    assert_string_equal(fs_label_sanitize("日本", b, sizeof b), "日本");
    /* long names that differ only past byte 63 (e.g. made unique with an ifIndex
     * suffix) stay two series */
    char a1[200], a2[200];
    memset(a1, 'x', 150);
    snprintf(a1 + 150, sizeof a1 - 150, "#17");
    memset(a2, 'x', 150);
    snprintf(a2 + 150, sizeof a2 - 150, "#18");
    push_bytes(s, t + 1, a1, 1, 64);
    push_bytes(s, t + 1, a2, 2, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "#17\"", true).n, 1);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "#18\"", true).u, 2);
    /* and a reset of one of them touches that one only */
    fs_sink_counter_reset(s, FS_RESET_CLEARED, a1);
    push_bytes(s, t + 2, a1, 0, 64);
    push_bytes(s, t + 2, a2, 1, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "#17\"", true).u, 1);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "#18\"", true).u, 2 + 1);
}

/* End to end through the readers: a removed target's series leave /metrics, stay in
 * /api/v1/raw; a partial cycle's message shows in /api/v1/targets and the new self
 * metrics are exposed. */
static void
test_removed_target_readers(void **state)
{
    struct fixture *f = *state;
    struct fs_target_cfg t2 = {.name = "tor2", .address = "::1"};
    struct fs_sink *a = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    struct fs_sink *b = fs_store_sink_add(f->st, &t2, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(a, t, "Eth1/1", 41, 64);
    push_bytes(b, t, "Eth1/1", 42, 64);
    fs_sink_agent_restart(b);
    fs_sink_done(b, 0, FS_POLL_PARTIAL, "interface limit reached");
    fs_store_sink_remove(f->st, a);
    struct fs_buf out;
    fs_buf_init(&out, 1 << 20);
    assert_int_equal(fs_expo_render(f->st, &out), 0);
    assert_null(strstr(out.data, "target=\"tor1\""));
    assert_non_null(strstr(out.data, "target=\"tor2\""));
    assert_non_null(
        strstr(out.data, "fabricscope_agent_restarts_total{target=\"tor2\",source=\"snmp\"} 1"));
    assert_non_null(strstr(
        out.data,
        "fabricscope_poll_errors_total{target=\"tor2\",source=\"snmp\",kind=\"partial\"} 1"));
    assert_non_null(strstr(out.data, "fabricscope_clock_steps_total{"));
    assert_non_null(strstr(out.data, "fabricscope_series_limit_dropped_samples_total{"));
    assert_non_null(strstr(out.data, "fabricscope_ring_refused_samples_total 0"));
    fs_buf_free(&out);

    char qs[128], err[256];
    snprintf(qs, sizeof qs, "match[]=fabric_port_bytes_total&start=%lld&end=%lld",
             (long long)(t / 1000000 - 10), (long long)(t / 1000000 + 10));
    struct fs_raw_query q;
    assert_int_equal(fs_raw_query_parse_string(qs, strlen(qs), t, &q, err, sizeof err), 0);
    fs_buf_init(&out, 1 << 20);
    assert_int_equal(fs_api_raw(f->st, &q, &out, err, sizeof err), 0);
    assert_non_null(strstr(out.data, "\"target\":\"tor1\""));
    assert_non_null(strstr(out.data, "\"41\""));
    assert_non_null(strstr(out.data, "\"42\""));
    fs_raw_query_free(&q);
    fs_buf_free(&out);

    fs_buf_init(&out, 1 << 20);
    assert_int_equal(fs_api_targets(f->st, NULL, &out), 0);
    assert_null(strstr(out.data, "\"tor1\""));
    assert_non_null(strstr(out.data, "interface limit reached"));
    assert_non_null(strstr(out.data, "\"partial\":1"));
    assert_non_null(strstr(out.data, "\"state\":\"up\""));
    fs_buf_free(&out);
}

/* A stream that drops every 3 s and resyncs (gNMI's RESOURCE_EXHAUSTED over max_message)
 * is up between drops; it must still read as flapping, with its last error and time
 * kept and its reconnects counted, through the store, /api/v1/targets and /metrics;
 * after a stable period it reads up and clean again. */
static void
test_flapping(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "gnmi", 1000000);
    fs_store_sink_set_streaming(s, true);
    const char *why = "RESOURCE_EXHAUSTED: Received message larger than max (31457389 vs. "
                      "4194304)";
    struct fs_instance_info in;
    char err[256];
    fs_sink_done(s, 0, FS_POLL_OK, "synced");
    /* a failure before being up, and one drop: not flapping yet */
    for (int i = 0; i < 2; i++) {
        advance(3000000);
        fs_sink_done(s, 0, FS_POLL_PROTOCOL, why);
        advance(100000);
        fs_sink_done(s, 0, FS_POLL_OK, "synced");
    }
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.state, FS_INST_UP);
    assert_false(in.flapping);
    assert_string_equal(in.state_name, "up");
    assert_int_equal(in.reconnects, 2);
    assert_int_equal(in.recent_drops, 2);
    fs_store_foreach_instance(f->st, health_err_cb, err);
    assert_string_equal(err, why); /* kept while up: not stable for 60 s yet */
    /* the third drop within 5 minutes */
    advance(3000000);
    int64_t drop_us = now_us();
    fs_sink_done(s, 0, FS_POLL_PROTOCOL, why);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.state, FS_INST_DOWN); /* down wins while it is down */
    assert_string_equal(in.state_name, "down");
    advance(100000);
    fs_sink_done(s, 0, FS_POLL_OK, "synced");
    for (int i = 0; i < 5; i++) { /* updates flow: each a successful "cycle" */
        advance(200000);
        fs_sink_done(s, 0, FS_POLL_OK, NULL);
    }
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.state, FS_INST_UP);
    assert_true(in.flapping);
    assert_string_equal(in.state_name, "flapping");
    assert_int_equal(in.reconnects, 3);
    assert_int_equal(in.recent_drops, 3);
    assert_int_equal(in.last_error_us, drop_us);
    fs_store_foreach_instance(f->st, health_err_cb, err);
    assert_string_equal(err, why);

    struct fs_buf out;
    fs_buf_init(&out, 1 << 20);
    assert_int_equal(fs_api_targets(f->st, NULL, &out), 0);
    assert_non_null(strstr(out.data, "\"state\":\"flapping\""));
    assert_non_null(strstr(out.data, "\"flapping\":true"));
    assert_non_null(strstr(out.data, "\"reconnects\":3"));
    assert_non_null(strstr(out.data, "\"recent_drops\":3"));
    assert_non_null(strstr(out.data, "31457389 vs. 4194304"));
    assert_non_null(strstr(out.data, "\"last_error_time\":\"20"));
    fs_buf_free(&out);
    fs_buf_init(&out, 1 << 20);
    assert_int_equal(fs_expo_render(f->st, &out), 0);
    /* up while data flows between drops; the reconnects counted */
    assert_non_null(strstr(out.data, "fabricscope_target_up{target=\"tor1\",pod=\"p1\","
                                     "rack=\"r12\",source=\"gnmi\"} 1\n"));
    assert_non_null(strstr(out.data, "fabricscope_target_reconnects_total{target=\"tor1\","
                                     "pod=\"p1\",rack=\"r12\",source=\"gnmi\"} 3\n"));
    fs_buf_free(&out);

    /* stable for 60 s (3 intervals are less): the error is cleared, even with no cycle
     * since; still flapping while the drops are within 5 minutes */
    advance(60 * 1000000LL);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.last_error_us, 0);
    assert_true(in.flapping);
    fs_store_foreach_instance(f->st, health_err_cb, err);
    assert_string_equal(err, "");
    /* 5 minutes after the drops: up again */
    advance(FS_FLAP_WINDOW_US);
    fs_sink_done(s, 0, FS_POLL_OK, NULL);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_false(in.flapping);
    assert_string_equal(in.state_name, "up");
    assert_int_equal(in.recent_drops, 0);
    assert_int_equal(in.reconnects, 3);

    /* a target down for long, failing every cycle, is one drop when it comes back */
    for (int i = 0; i < 10; i++) {
        advance(1000000);
        fs_sink_done(s, 0, FS_POLL_TIMEOUT, NULL);
    }
    fs_sink_done(s, 0, FS_POLL_OK, NULL);
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_false(in.flapping);
    assert_int_equal(in.recent_drops, 1);
    assert_int_equal(in.reconnects, 4);
}

/* A reload that changes a target removes and re-adds it: the same label set keeps one
 * series, its history and its counter state; other static labels make other series. */
static void
test_readd_continues(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *a = fs_store_sink_add(f->st, &f->t, "snmp", 1000000);
    int64_t t = now_us();
    push_bytes(a, t, "Eth1/1", UINT32_MAX - 10, 32);
    struct found before = find(f->st, "fabric_port_bytes_total", NULL, false);
    fs_store_sink_remove(f->st, a);
    struct fs_target_cfg changed = f->t; /* another interval, same labels */
    struct fs_sink *b = fs_store_sink_add(f->st, &changed, "snmp", 500000);
    push_bytes(b, t + 1000, "Eth1/1", 5, 32); /* wrapped while we reloaded */
    struct found after = find(f->st, "fabric_port_bytes_total", NULL, true);
    assert_int_equal(after.n, 1);
    assert_int_equal(after.id, before.id);
    assert_int_equal(after.gen, before.gen);
    assert_int_equal(after.u, (uint64_t)UINT32_MAX + 6);
    struct fs_ring_sample out[4];
    assert_int_equal(fs_store_read(f->st, after.id, after.gen, 0, INT64_MAX, out, 4, NULL), 2);
    fs_sink_done(b, 0, FS_POLL_OK, NULL);
    struct fs_instance_info in;
    fs_store_foreach_instance(f->st, health_cb, &in);
    assert_int_equal(in.state, FS_INST_UP);
    assert_int_equal(in.interval_us, 500000);
    /* other static labels: a new instance, the old series stay history beside it */
    fs_store_sink_remove(f->st, b);
    struct fs_kv other[1] = {{"pod", "p2"}};
    struct fs_target_cfg relabelled = f->t;
    relabelled.labels = other;
    relabelled.n_labels = 1;
    struct fs_sink *c = fs_store_sink_add(f->st, &relabelled, "snmp", 500000);
    push_bytes(c, t + 2000, "Eth1/1", 7, 32);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, false).n, 2);
    struct found fresh = find(f->st, "fabric_port_bytes_total", NULL, true);
    assert_int_equal(fresh.n, 1);
    assert_int_equal(fresh.u, 7);
    assert_non_null(strstr(fresh.text, "pod=\"p2\""));
}

/* fs_sink_retire: the series leaves the exposition at once (not after the staleness
 * bound), its history stays readable, its counter continues, and a later sample brings
 * it back; inside one batch the later of sample and retire wins. */
static void
test_retire_series(void **state)
{
    struct fixture *f = *state;
    struct fs_sink *s = fs_store_sink_add(f->st, &f->t, "gnmi", 10 * 1000000);
    struct fs_label l1[] = {{"interface", "Eth1/1"}, {"direction", "rx"}};
    int64_t t = now_us();
    push_bytes(s, t, "Eth1/1", 100, 64);
    push_bytes(s, t + 1000, "Eth1/2", 5, 64);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, true).n, 2);
    fs_sink_retire(s, FS_M_PORT_BYTES, l1, 2); /* outside a batch */
    struct found r = find(f->st, "fabric_port_bytes_total", "Eth1/1", false);
    assert_int_equal(r.n, 1);
    assert_false(r.exported);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, true).n, 1); /* Eth1/2 stays */
    struct fs_ring_sample out[4];
    assert_int_equal(fs_store_read(f->st, r.id, r.gen, 0, INT64_MAX, out, 4, NULL), 1);
    /* unknown series, unknown labels: nothing happens */
    struct fs_label nol[] = {{"interface", "Eth9/9"}, {"direction", "rx"}};
    fs_sink_retire(s, FS_M_PORT_BYTES, nol, 2);
    fs_sink_retire(s, FS_M_QUEUE_DEPTH, l1, 2);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, false).n, 2);
    /* the next sample exports it again, its counter continued */
    push_bytes(s, t + 2000, "Eth1/1", 150, 64);
    r = find(f->st, "fabric_port_bytes_total", "Eth1/1", true);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.u, 150);
    /* sample then retire in one batch: retired; retire then sample: exported */
    fs_sink_begin(s, t + 3000);
    fs_sink_counter(s, FS_M_PORT_BYTES, l1, 2, 160, 64);
    fs_sink_retire(s, FS_M_PORT_BYTES, l1, 2);
    fs_sink_end(s);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).n, 0);
    fs_sink_begin(s, t + 4000);
    fs_sink_retire(s, FS_M_PORT_BYTES, l1, 2);
    fs_sink_counter(s, FS_M_PORT_BYTES, l1, 2, 170, 64);
    fs_sink_end(s);
    r = find(f->st, "fabric_port_bytes_total", "Eth1/1", true);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.u, 170);
    /* an interface label is normalized as for samples */
    struct fs_label l1b[] = {{"interface", "ethernet 1/1"}, {"direction", "rx"}};
    fs_sink_retire(s, FS_M_PORT_BYTES, l1b, 2);
    assert_int_equal(find(f->st, "fabric_port_bytes_total", "Eth1/1", true).n, 0);
}

/* A streaming sink whose stream fails: its series stop being exported at once (the
 * staleness bound is long), the lower-precedence source takes over, history stays, and
 * samples after the failure are exported again. A polling sink keeps its values. */
static void
test_stream_failure_stales_at_once(void **state)
{
    struct fixture *f = *state;
    static char *const precedence[] = {"gnmi", "snmp"};
    f->t.source_precedence = (char **)precedence;
    struct fs_sink *g = fs_store_sink_add(f->st, &f->t, "gnmi", 60 * 1000000LL);
    struct fs_sink *sn = fs_store_sink_add(f->st, &f->t, "snmp", 60 * 1000000LL);
    fs_store_sink_set_streaming(g, true);
    int64_t t = now_us();
    push_bytes(g, t, "Eth1/1", 100, 64);
    push_bytes(sn, t, "Eth1/1", 90, 64);
    fs_sink_done(sn, 0, FS_POLL_OK, NULL);
    struct found r = find(f->st, "fabric_port_bytes_total", NULL, true);
    assert_int_equal(r.n, 1);
    assert_non_null(strstr(r.text, "source=\"gnmi\""));
    advance(1000);
    fs_sink_done(g, 0, FS_POLL_PROTOCOL, "stream ended");
    r = find(f->st, "fabric_port_bytes_total", NULL, true);
    assert_int_equal(r.n, 1);
    assert_non_null(strstr(r.text, "source=\"snmp\""));
    r = find(f->st, "fabric_port_bytes_total", "source=\"gnmi\"", false);
    assert_int_equal(r.n, 1);
    assert_false(r.exported);
    struct fs_ring_sample out[4];
    assert_int_equal(fs_store_read(f->st, r.id, r.gen, 0, INT64_MAX, out, 4, NULL), 1);
    /* the stream is back: its new samples win again */
    advance(1000);
    push_bytes(g, now_us(), "Eth1/1", 120, 64);
    r = find(f->st, "fabric_port_bytes_total", NULL, true);
    assert_int_equal(r.n, 1);
    assert_non_null(strstr(r.text, "source=\"gnmi\""));
    assert_int_equal(r.u, 120);
    /* a failed poll of a polling sink leaves its values fresh */
    advance(1000);
    fs_sink_done(sn, 0, FS_POLL_TIMEOUT, NULL);
    f->t.expose_all_sources = true;
    assert_int_equal(find(f->st, "fabric_port_bytes_total", NULL, true).n, 2);
}

/* ---- series handles (fs_sink_counter_h / fs_sink_gauge_h, issue 34) ---- */

/* One poll of a small switch, through handles (h != NULL: hs[i] per sample) or the key
 * path: counters (32-bit wraps, a scaled one), gauges, device port names to normalize,
 * a port the filters drop; sample order rotated by `rot` so positional handles meet
 * other labels too. */
static void
handle_poll(struct fs_sink *s, struct fs_series_handle *hs, int64_t ts, uint64_t base, int rot)
{
    static const char *const ports[] = {"1/1", "Eth1/2", "ethernet 1/3", "mgmt0", "Eth1/63"};
    enum { NP = 5, PER = 4 };
    fs_sink_begin(s, ts);
    for (int k = 0; k < NP * PER; k++) {
        int i = (k + rot) % (NP * PER), p = i / PER;
        char tc[4];
        snprintf(tc, sizeof tc, "%d", p);
        struct fs_label l[] = {{"interface", ports[p]}, {"direction", "rx"}, {"priority", tc}};
        struct fs_series_handle *h = hs ? &hs[k] : NULL;
        uint64_t raw = (base + (uint64_t)i * 1000) & 0xffffffffu;
        switch (i % PER) {
        case 0:
            if (h)
                fs_sink_counter_h(s, h, FS_M_PORT_BYTES, l, 2, raw, 32, 1.0);
            else
                fs_sink_counter(s, FS_M_PORT_BYTES, l, 2, raw, 32);
            break;
        case 1:
            if (h)
                fs_sink_counter_h(s, h, FS_M_PFC_PAUSE_SECONDS, l, 3, raw, 64, 1e-3);
            else
                fs_sink_counter_scaled(s, FS_M_PFC_PAUSE_SECONDS, l, 3, raw, 64, 1e-3);
            break;
        case 2:
            if (h)
                fs_sink_gauge_h(s, h, FS_M_QUEUE_DEPTH, l + 2, 1, (double)raw / 2);
            else
                fs_sink_gauge(s, FS_M_QUEUE_DEPTH, l + 2, 1, (double)raw / 2);
            break;
        default:
            if (h)
                fs_sink_gauge_h(s, h, FS_M_DEVICE_UPTIME, NULL, 0, (double)base);
            else
                fs_sink_gauge(s, FS_M_DEVICE_UPTIME, NULL, 0, (double)base);
            break;
        }
    }
    fs_sink_end(s);
}

/* Every exported series of one sink as "name{labels} value" lines, the target label cut
 * off (the two sinks compared differ in it only). */
static int
dump_cb(void *arg, const struct fs_series_info *s)
{
    struct fs_buf *b = arg;
    const char *l = strchr(s->labels_text, ',');
    fs_buf_printf(b, "%s{%s} %" PRIu64 " %.17g\n", s->name, l ? l : "", s->u, s->d);
    return 0;
}

static char *
dump_target(struct fs_store *st)
{
    struct fs_buf b;
    fs_buf_init(&b, 1 << 20);
    fs_store_foreach_series(st, true, dump_cb, &b);
    char *d = fs_buf_detach(&b, NULL);
    return d ? d : strdup("");
}

static struct fs_store *
filtered_store(struct fs_target_cfg *t)
{
    struct fs_store *st = store_new(16 << 20, 3600LL * 1000000);
    t->iface_exclude = "^Eth1/63$";
    assert_int_equal(regcomp(&t->iface_exclude_re, t->iface_exclude, REG_EXTENDED | REG_NOSUB), 0);
    return st;
}

/* Through handles the store ends with exactly the key path's series and values, over
 * polls with wraps, a reboot, a rotated sample order (handles meeting other labels) and
 * handles of another sink. */
static void
test_handle_equals_key_path(void **state)
{
    (void)state;
    struct fs_target_cfg ta = {.name = "a", .address = "::1"}, tb = ta;
    struct fs_store *sa = filtered_store(&ta), *sb = filtered_store(&tb);
    struct fs_sink *a = fs_store_sink_add(sa, &ta, "cli", 1000000);
    struct fs_sink *b = fs_store_sink_add(sb, &tb, "cli", 1000000);
    struct fs_sink *other =
        fs_store_sink_add(sb, &(struct fs_target_cfg){.name = "o"}, "cli", 1000000);
    struct fs_series_handle hs[20] = {{0}};
    handle_poll(other, hs, now_us(), 7, 0); /* handles of another sink: refilled by b */
    struct fs_series_handle first[20];
    for (int poll = 0; poll < 12; poll++) {
        uint64_t base = 0xffffff00u + (uint64_t)poll * 40; /* 32-bit counters wrap */
        if (poll == 6) {
            fs_sink_counter_reset(a, FS_RESET_REBOOT, NULL);
            fs_sink_counter_reset(b, FS_RESET_REBOOT, NULL);
            base = 3;
        }
        int rot = poll >= 8 ? poll : 0;
        handle_poll(a, NULL, now_us(), base, rot);
        handle_poll(b, hs, now_us(), base, rot);
        if (poll == 1)
            memcpy(first, hs, sizeof first);
        if (poll >= 1 && poll < 8) /* same order: every handle (but the filtered port's) kept */
            for (int k = 0; k < 20; k++)
                assert_true(hs[k].series == first[k].series && hs[k].epoch == first[k].epoch);
        advance(1000000);
        fs_sink_done(a, 0, FS_POLL_OK, NULL);
        fs_sink_done(b, 0, FS_POLL_OK, NULL);
    }
    /* the filtered port's samples (i 16 and 17, at k = i - rot of the last poll, rot 11)
     * are dropped: their handles stay empty */
    assert_null(hs[5].series);
    assert_null(hs[6].series);
    assert_non_null(hs[7].series);
    fs_store_sink_remove(sb, other);
    char *da = dump_target(sa), *db = dump_target(sb);
    assert_string_equal(da, db);
    assert_non_null(strstr(db, "interface=\"Eth1/3\""));
    assert_null(strstr(db, "Eth1/63"));
    free(da);
    free(db);
    regfree(&ta.iface_exclude_re);
    regfree(&tb.iface_exclude_re);
    fs_store_free(sa);
    fs_store_free(sb);
}

/* A handle whose series was swept (dead past the retention) is stale: the sample makes a
 * new series as the key path would (no write to the freed one: ASan), and a retired
 * series' handle brings it back with its counter continued. */
static void
test_handle_stale_after_sweep_and_retire(void **state)
{
    (void)state;
    struct fs_store *st = store_new(16 << 20, 2000000);
    struct fs_target_cfg t = {.name = "tor9", .address = "::1"};
    struct fs_sink *s = fs_store_sink_add(st, &t, "cli", 100000);
    struct fs_label l1[] = {{"interface", "Eth1/1"}, {"direction", "rx"}};
    struct fs_series_handle h1 = {0};
    fs_sink_begin(s, now_us());
    fs_sink_counter_h(s, &h1, FS_M_PORT_BYTES, l1, 2, 100, 64, 1.0);
    fs_sink_end(s);
    fs_sink_done(s, 0, FS_POLL_OK, NULL);
    assert_non_null(h1.series);
    /* retired: the next sample through the handle exports it again, counter continued */
    fs_sink_retire(s, FS_M_PORT_BYTES, l1, 2);
    assert_int_equal(find(st, "fabric_port_bytes_total", "Eth1/1", true).n, 0);
    struct fs_series_handle kept = h1;
    fs_sink_begin(s, now_us());
    fs_sink_counter_h(s, &h1, FS_M_PORT_BYTES, l1, 2, 150, 64, 1.0);
    fs_sink_end(s);
    assert_true(h1.series == kept.series && h1.epoch == kept.epoch); /* still good */
    struct found r = find(st, "fabric_port_bytes_total", "Eth1/1", true);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.u, 150);
    /* swept: Eth1/1 gets no sample past the retention while Eth1/2 does */
    advance(2100000);
    push_bytes(s, now_us(), "Eth1/2", 1, 64);
    fs_sink_done(s, 0, FS_POLL_OK, NULL);
    assert_int_equal(find(st, "fabric_port_bytes_total", "Eth1/1", false).n, 0);
    fs_sink_begin(s, now_us());
    fs_sink_counter_h(s, &h1, FS_M_PORT_BYTES, l1, 2, 40, 64, 1.0);
    fs_sink_end(s);
    assert_true(h1.epoch != kept.epoch);
    r = find(st, "fabric_port_bytes_total", "Eth1/1", true);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.u, 40); /* a new series, from the raw value, as the key path */
    fs_store_free(st);
}

/* A sink revived by a reload with other interface filters: handles filled before are
 * stale, so a port the new filters exclude is dropped as on the key path. */
static void
test_handle_stale_after_revive(void **state)
{
    (void)state;
    struct fs_store *st = store_new(16 << 20, 3600LL * 1000000);
    struct fs_target_cfg t = {.name = "tor9", .address = "::1"};
    struct fs_sink *s = fs_store_sink_add(st, &t, "cli", 1000000);
    struct fs_label l1[] = {{"interface", "Eth1/1"}, {"direction", "rx"}};
    struct fs_series_handle h1 = {0};
    fs_sink_begin(s, now_us());
    fs_sink_counter_h(s, &h1, FS_M_PORT_BYTES, l1, 2, 100, 64, 1.0);
    fs_sink_end(s);
    fs_store_sink_remove(st, s);
    struct fs_target_cfg t2 = t;
    t2.iface_exclude = "^Eth1/1$";
    assert_int_equal(regcomp(&t2.iface_exclude_re, t2.iface_exclude, REG_EXTENDED | REG_NOSUB), 0);
    struct fs_sink *s2 = fs_store_sink_add(st, &t2, "cli", 1000000);
    assert_ptr_equal(s2, s); /* revived: same sink, same series */
    advance(1000);
    fs_sink_begin(s2, now_us());
    fs_sink_counter_h(s2, &h1, FS_M_PORT_BYTES, l1, 2, 200, 64, 1.0);
    fs_sink_end(s2);
    assert_null(h1.series);
    struct found r = find(st, "fabric_port_bytes_total", "Eth1/1", false);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.u, 100); /* the sample of 200 was dropped */
    fs_store_free(st);
    regfree(&t2.iface_exclude_re);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_labels_and_normalization, setup, teardown),
        cmocka_unit_test(test_ifname_normalize),
        cmocka_unit_test(test_label_sets_shared),
        cmocka_unit_test(test_label_sets_concurrent),
        cmocka_unit_test_setup_teardown(test_label_escaping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_last_sample_timestamp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counter_wrap32, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counter_reboot_and_cleared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counter_interface_discontinuity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interface_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_staleness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_source_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scaled_counter, setup, teardown),
        cmocka_unit_test(test_dead_series_swept),
        cmocka_unit_test_setup_teardown(test_remove_keeps_history, setup, teardown),
        cmocka_unit_test(test_removed_history_expires),
        cmocka_unit_test(test_stale_id_generation),
        cmocka_unit_test_setup_teardown(test_reset_without_drop_not_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_width_change_is_discontinuity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrap_plausibility, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clock_step_back, setup, teardown),
        cmocka_unit_test(test_clock_jump_forward),
        cmocka_unit_test(test_series_limit_under_churn),
        cmocka_unit_test_setup_teardown(test_utf8_interface_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removed_target_readers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flapping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readd_continues, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retire_series, setup, teardown),
        cmocka_unit_test(test_removed_histories_expire_together),
        cmocka_unit_test_setup_teardown(test_stream_failure_stales_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_arrays_shrink_and_grow, setup, teardown),
        cmocka_unit_test(test_handle_equals_key_path),
        cmocka_unit_test(test_handle_stale_after_sweep_and_retire),
        cmocka_unit_test(test_handle_stale_after_revive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
