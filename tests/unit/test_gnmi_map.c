/*
 * gNMI Notification -> samples (drivers/gnmi/map.c): joined paths, keys, origin, the
 * built-in table, PROTO/JSON/JSON_IETF values (uint64 exact past 2^53), deletes, the
 * ACL map, user mappings, the resolution cache, hostile values, expose_unmapped, and the
 * sink emitter into a real store (device clock measurement, deletes retiring series at
 * once, the series limit bounding exposed paths).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "gnmi/map.h"
#include "store/store.h"

/* ---- a recording emitter ---- */

#define MAX_REC 64
struct rec {
    enum fs_metric m;
    char labels[160];
    bool counter, deleted;
    uint64_t u;
    double d, scale;
};
struct recorder {
    struct rec r[MAX_REC];
    size_t n;
    int begins, ends;
    int64_t recv_us, device_ns;
    struct fs_gnmi_lldp lldp; /* the LLDP events applied, as the driver does */
    int lldp_events;
};

static void
join_labels(char *buf, size_t len, const struct fs_label *l, size_t n)
{
    buf[0] = '\0';
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s=%s", i ? "," : "", l[i].name, l[i].value);
}

static void
r_begin(void *arg, int64_t recv_us, int64_t device_ns)
{
    struct recorder *r = arg;
    r->begins++;
    r->recv_us = recv_us;
    r->device_ns = device_ns;
}

static struct rec *
r_add(struct recorder *r, enum fs_metric m, const struct fs_label *l, size_t n)
{
    assert_true(r->n < MAX_REC);
    struct rec *x = &r->r[r->n++];
    memset(x, 0, sizeof *x);
    x->m = m;
    join_labels(x->labels, sizeof x->labels, l, n);
    return x;
}

static void
r_counter(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
          double scale)
{
    struct rec *x = r_add(arg, m, l, n);
    x->counter = true;
    x->u = raw;
    x->scale = scale;
}

static void
r_gauge(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    r_add(arg, m, l, n)->d = v;
}

static void
r_deleted(void *arg, enum fs_metric m, const struct fs_label *l, size_t n)
{
    r_add(arg, m, l, n)->deleted = true;
}

static void
r_end(void *arg)
{
    ((struct recorder *)arg)->ends++;
}

static void
r_lldp(void *arg, const struct fs_gnmi_lldp_event *ev)
{
    struct recorder *r = arg;
    r->lldp_events++;
    fs_gnmi_lldp_apply(&r->lldp, ev);
}

static const struct fs_gnmi_emit rec_emit = {r_begin, r_counter, r_gauge, r_deleted,
                                             r_end,   r_lldp,    NULL,    NULL};

static const struct rec *
find(const struct recorder *r, enum fs_metric m, const char *labels)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->r[i].m == m && strcmp(r->r[i].labels, labels) == 0)
            return &r->r[i];
    return NULL;
}

/* ---- building notifications ---- */

static Gnmi__Path *
path(const char *s)
{
    char err[128];
    Gnmi__Path *p = NULL;
    assert_int_equal(fs_gnmi_path_parse(s, &p, err, sizeof err), 0);
    return p;
}

static Gnmi__Notification *
notif(const char *prefix, int64_t ts)
{
    Gnmi__Notification *n = calloc(1, sizeof *n);
    gnmi__notification__init(n);
    n->timestamp = ts;
    if (prefix)
        n->prefix = path(prefix);
    return n;
}

static Gnmi__TypedValue *
add_update(Gnmi__Notification *n, const char *p)
{
    n->update = realloc(n->update, (n->n_update + 1) * sizeof *n->update);
    Gnmi__Update *u = malloc(sizeof *u);
    gnmi__update__init(u);
    u->path = path(p);
    u->val = malloc(sizeof *u->val);
    gnmi__typed_value__init(u->val);
    n->update[n->n_update++] = u;
    return u->val;
}

static void
add_uint(Gnmi__Notification *n, const char *p, uint64_t v)
{
    Gnmi__TypedValue *tv = add_update(n, p);
    tv->value_case = GNMI__TYPED_VALUE__VALUE_UINT_VAL;
    tv->uint_val = v;
}

static void
add_int(Gnmi__Notification *n, const char *p, int64_t v)
{
    Gnmi__TypedValue *tv = add_update(n, p);
    tv->value_case = GNMI__TYPED_VALUE__VALUE_INT_VAL;
    tv->int_val = v;
}

static void
add_str(Gnmi__Notification *n, const char *p, const char *v)
{
    Gnmi__TypedValue *tv = add_update(n, p);
    tv->value_case = GNMI__TYPED_VALUE__VALUE_STRING_VAL;
    tv->string_val = strdup(v);
}

static void
add_json(Gnmi__Notification *n, const char *p, const char *json, bool ietf)
{
    Gnmi__TypedValue *tv = add_update(n, p);
    ProtobufCBinaryData b = {strlen(json), (uint8_t *)strdup(json)};
    if (ietf) {
        tv->value_case = GNMI__TYPED_VALUE__VALUE_JSON_IETF_VAL;
        tv->json_ietf_val = b;
    } else {
        tv->value_case = GNMI__TYPED_VALUE__VALUE_JSON_VAL;
        tv->json_val = b;
    }
}

static void
add_delete(Gnmi__Notification *n, const char *p)
{
    n->delete_ = realloc(n->delete_, (n->n_delete_ + 1) * sizeof *n->delete_);
    n->delete_[n->n_delete_++] = path(p);
}

static void
notif_free(Gnmi__Notification *n)
{
    protobuf_c_message_free_unpacked(&n->base, NULL);
}

static struct fs_gnmi_map *
map_new(const struct fs_gnmi_map_opts *o)
{
    char err[256] = "";
    struct fs_gnmi_map *m = fs_gnmi_map_new(o, err, sizeof err);
    if (!m)
        fail_msg("fs_gnmi_map_new: %s", err);
    return m;
}

/* ---- tests ---- */

static const struct fs_gnmi_lldp_nb *
lldp_nb(const struct recorder *r, const char *iface, const char *id)
{
    for (size_t i = 0; i < r->lldp.n; i++)
        if (strcmp(r->lldp.v[i].iface, iface) == 0 && strcmp(r->lldp.v[i].id, id) == 0)
            return &r->lldp.v[i];
    return NULL;
}

/* openconfig-lldp: the local identity, neighbours in PROTO leaves and in JSON_IETF, the
 * remote port name chosen by port-id-type, deletes of a leaf, a neighbour, an interface,
 * the stale sweep; no sample comes out of any of it. */
static void
test_lldp(void **state)
{
    (void)state;
    struct fs_gnmi_map_opts o = {.expose_unmapped = true};
    struct fs_gnmi_map *m = map_new(&o);
    struct recorder r = {0};
    Gnmi__Notification *n = notif("/openconfig-lldp:lldp", 1);
    add_str(n, "state/chassis-id", "0c:42:a1:00:00:01");
    add_str(n, "state/system-name", "leaf1");
    add_uint(n, "state/counters/frame-in", 5); /* not LLDP identity: the usual way */
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    notif_free(n);
    assert_string_equal(r.lldp.local_chassis, "0c:42:a1:00:00:01");
    assert_string_equal(r.lldp.local_name, "leaf1");
    assert_int_equal(r.n, 1); /* frame-in exposed, nothing else */

    n = notif("/lldp/interfaces/interface[name=Ethernet0]/neighbors/neighbor[id=nb1]", 2);
    add_str(n, "state/chassis-id", "0c:42:a1:de:ad:01");
    add_str(n, "state/port-id", "Eth1/1");
    add_str(n, "state/port-id-type", "openconfig-lldp-types:INTERFACE_NAME");
    add_str(n, "state/port-description", "to leaf1");
    add_str(n, "state/system-name", "sw-onyx");
    add_uint(n, "state/ttl", 120); /* consumed, not a metric */
    fs_gnmi_map_notification(m, n, 2, &rec_emit, &r);
    notif_free(n);
    n = notif(NULL, 3);
    add_json(n, "/lldp/interfaces/interface[name=Ethernet4]/neighbors",
             "{\"neighbor\":[{\"id\":\"x\",\"state\":{\"id\":\"x\",\"chassis-id\":"
             "\"aa:bb:cc:dd:ee:ff\",\"port-id\":\"11:22:33:44:55:66\",\"port-id-type\":"
             "\"openconfig-lldp-types:MAC_ADDRESS\",\"port-description\":\"eth0\","
             "\"system-name\":\"gpu01\"}}]}",
             true);
    fs_gnmi_map_notification(m, n, 3, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.lldp.n, 2);
    const struct fs_gnmi_lldp_nb *a = lldp_nb(&r, "Ethernet0", "nb1");
    assert_non_null(a);
    assert_string_equal(a->f[FS_GNMI_LLDP_SYS_NAME], "sw-onyx");
    assert_string_equal(fs_gnmi_lldp_port(a), "Eth1/1");
    const struct fs_gnmi_lldp_nb *b = lldp_nb(&r, "Ethernet4", "x");
    assert_non_null(b);
    assert_string_equal(b->f[FS_GNMI_LLDP_CHASSIS_ID], "aa:bb:cc:dd:ee:ff");
    assert_string_equal(fs_gnmi_lldp_port(b), "eth0"); /* a MAC port id: its description */

    /* a leaf withdrawn, then a neighbour, then a whole interface (key `*`: all) */
    n = notif(NULL, 4);
    add_delete(n, "/lldp/interfaces/interface[name=Ethernet0]/neighbors/neighbor[id=nb1]/state/"
                  "port-description");
    fs_gnmi_map_notification(m, n, 4, &rec_emit, &r);
    notif_free(n);
    assert_string_equal(lldp_nb(&r, "Ethernet0", "nb1")->f[FS_GNMI_LLDP_PORT_DESCR], "");
    n = notif(NULL, 5);
    add_delete(n, "/lldp/interfaces/interface[name=Ethernet0]/neighbors/neighbor[id=nb1]");
    fs_gnmi_map_notification(m, n, 5, &rec_emit, &r);
    notif_free(n);
    assert_null(lldp_nb(&r, "Ethernet0", "nb1"));
    assert_int_equal(r.lldp.n, 1);
    n = notif(NULL, 6);
    add_delete(n, "/lldp/interfaces/interface[name=*]");
    fs_gnmi_map_notification(m, n, 6, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(r.lldp.n, 0);

    /* a new snapshot renews one of two entries: the sweep removes the other */
    n = notif("/lldp/interfaces/interface[name=Ethernet8]/neighbors/neighbor[id=1]", 7);
    add_str(n, "state/system-name", "spine1");
    fs_gnmi_map_notification(m, n, 7, &rec_emit, &r);
    notif_free(n);
    n = notif("/lldp/interfaces/interface[name=Ethernet9]/neighbors/neighbor[id=1]", 7);
    add_str(n, "state/system-name", "spine2");
    fs_gnmi_map_notification(m, n, 7, &rec_emit, &r);
    notif_free(n);
    fs_gnmi_lldp_mark_stale(&r.lldp);
    n = notif("/lldp/interfaces/interface[name=Ethernet9]/neighbors/neighbor[id=1]", 8);
    add_str(n, "state/system-name", "spine2");
    fs_gnmi_map_notification(m, n, 8, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(fs_gnmi_lldp_sweep(&r.lldp), 1);
    assert_int_equal(r.lldp.n, 1);
    assert_non_null(lldp_nb(&r, "Ethernet9", "1"));
    /* a neighbour leaf without its keys is consumed, never a neighbour */
    n = notif(NULL, 9);
    add_str(n, "/lldp/interfaces/interface/neighbors/neighbor/state/system-name", "x");
    fs_gnmi_map_notification(m, n, 9, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(r.lldp.n, 1);
    assert_true(fs_gnmi_map_get_stats(m)->lldp >= 12);
    fs_gnmi_lldp_free(&r.lldp);
    fs_gnmi_map_free(m);
}

static void
test_path_parse(void **state)
{
    (void)state;
    Gnmi__Path *p = path("openconfig:/interfaces/interface[name=Eth1\\/1]/state/counters");
    assert_string_equal(p->origin, "openconfig");
    assert_int_equal(p->n_elem, 4);
    assert_string_equal(p->elem[1]->name, "interface");
    assert_int_equal(p->elem[1]->n_key, 1);
    assert_string_equal(p->elem[1]->key[0]->key, "name");
    assert_string_equal(p->elem[1]->key[0]->value, "Eth1/1");
    protobuf_c_message_free_unpacked(&p->base, NULL);
    p = path("/a/b[x=1][y=*]");
    assert_string_equal(p->origin, "");
    assert_int_equal(p->elem[1]->n_key, 2);
    assert_string_equal(p->elem[1]->key[1]->value, "*");
    protobuf_c_message_free_unpacked(&p->base, NULL);
    char err[128];
    Gnmi__Path *bad = NULL;
    assert_int_equal(fs_gnmi_path_parse("/a/b[x=1", &bad, err, sizeof err), -1);
    assert_null(bad);
    assert_int_equal(fs_gnmi_path_parse("/a/b[=1]", &bad, err, sizeof err), -1);
    assert_int_equal(fs_gnmi_path_parse("/a/b[x]", &bad, err, sizeof err), -1);
}

static void
test_proto_queue_counters(void **state)
{
    (void)state;
    struct fs_gnmi_map *m = map_new(NULL);
    struct recorder r = {0};
    const uint64_t big = (1ull << 53) + 1;
    /* Prefix and path joined; the key name differs (interface-id vs name) by model. */
    Gnmi__Notification *n =
        notif("/qos/interfaces/interface[interface-id=Eth1/49]/output/queues", 1700000000123456789);
    add_uint(n, "queue[name=3]/state/ecn-marked-pkts", big);
    add_uint(n, "queue[name=UC3]/state/transmit-pkts", UINT64_MAX);
    add_uint(n, "queue[name=3]/state/instant-queue-len", 12000000);
    add_uint(n, "queue[name=3]/state/wred-dropped-pkts", big + 2);
    add_uint(n, "queue[name=3]/state/no-buffer-uc-dropped-pkts", 7);
    add_uint(n, "queue[name=3]/state/transmit-octets", 123);
    add_uint(n, "queue[name=3]/state/max-queue-len", 99);
    fs_gnmi_map_notification(m, n, 1700000000124000, &rec_emit, &r);
    assert_int_equal(r.begins, 1);
    assert_int_equal(r.ends, 1);
    assert_int_equal(r.recv_us, 1700000000124000);
    assert_int_equal(r.device_ns, 1700000000123456789);
    const struct rec *x = find(&r, FS_M_QUEUE_ECN_MARKED, "interface=Eth1/49,tc=3");
    assert_non_null(x);
    assert_true(x->counter);
    assert_true(x->u == big);
    x = find(&r, FS_M_QUEUE_TX_PACKETS, "interface=Eth1/49,tc=3");
    assert_non_null(x);
    assert_true(x->u == UINT64_MAX);
    x = find(&r, FS_M_QUEUE_DEPTH, "interface=Eth1/49,tc=3");
    assert_non_null(x);
    assert_false(x->counter);
    assert_true(x->d == 12000000.0);
    assert_non_null(find(&r, FS_M_QUEUE_WRED_DROPPED, "interface=Eth1/49,tc=3"));
    assert_non_null(find(&r, FS_M_QUEUE_NO_BUFFER_DROPPED, "interface=Eth1/49,tc=3"));
    assert_non_null(find(&r, FS_M_QUEUE_TX_BYTES, "interface=Eth1/49,tc=3"));
    assert_non_null(find(&r, FS_M_QUEUE_DEPTH_MAX, "interface=Eth1/49,tc=3"));
    const struct fs_gnmi_map_stats *st = fs_gnmi_map_get_stats(m);
    assert_int_equal(st->updates, 7);
    assert_int_equal(st->mapped, 7);
    assert_int_equal(st->cache_entries, 7);
    /* The same paths again hit the cache: no new entries, same results. */
    r.n = 0;
    fs_gnmi_map_notification(m, n, 43, &rec_emit, &r);
    assert_int_equal(st->cache_entries, 7);
    assert_int_equal(r.n, 7);
    assert_true(find(&r, FS_M_QUEUE_ECN_MARKED, "interface=Eth1/49,tc=3")->u == big);
    notif_free(n);
    fs_gnmi_map_free(m);
}

static void
test_interfaces_origin_and_modules(void **state)
{
    (void)state;
    struct fs_gnmi_map *m = map_new(NULL);
    struct recorder r = {0};
    Gnmi__Notification *n = notif("openconfig:/openconfig-interfaces:interfaces", 0);
    add_uint(n, "interface[name=Eth1/1]/state/counters/in-octets", 1000);
    add_uint(n, "interface[name=Eth1/1]/state/counters/out-pkts", 10);
    add_str(n, "interface[name=Eth1/1]/state/oper-status", "UP");
    add_str(n, "interface[name=Eth1/2]/state/oper-status", "DOWN");
    add_uint(n, "interface[name=Eth1/1]/ethernet/state/counters/in-pfc5-packets", 55);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    assert_int_equal(r.n, 5);
    assert_true(find(&r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=rx")->u == 1000);
    assert_true(find(&r, FS_M_PORT_PACKETS, "interface=Eth1/1,direction=tx")->u == 10);
    assert_true(find(&r, FS_M_PORT_OPER_UP, "interface=Eth1/1")->d == 1.0);
    assert_true(find(&r, FS_M_PORT_OPER_UP, "interface=Eth1/2")->d == 0.0);
    assert_true(find(&r, FS_M_PFC_PAUSE_FRAMES, "interface=Eth1/1,direction=rx,priority=5")->u ==
                55);
    /* The same path under another origin is another cache entry (origin is kept). */
    Gnmi__Notification *n2 = notif("/interfaces", 0);
    add_uint(n2, "interface[name=Eth1/1]/state/counters/in-octets", 2000);
    fs_gnmi_map_notification(m, n2, 2, &rec_emit, &r);
    assert_int_equal(fs_gnmi_map_get_stats(m)->cache_entries, 6);
    notif_free(n);
    notif_free(n2);
    fs_gnmi_map_free(m);
}

static void
test_pfc_switch_priority(void **state)
{
    (void)state;
    struct fs_gnmi_map *m = map_new(NULL);
    struct recorder r = {0};
    Gnmi__Notification *n = notif("/qos/interfaces/interface[interface-id=Eth1/49]", 0);
    add_uint(n, "switch-priority[priority=3]/state/counters/in-pause-pkts", 500);
    add_uint(n, "switch-priority[priority=3]/state/counters/out-pause-pkts", 4);
    add_uint(n, "switch-priority[priority=3]/state/in-pause-duration", 50000);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    assert_true(find(&r, FS_M_PFC_PAUSE_FRAMES, "interface=Eth1/49,direction=rx,priority=3")->u ==
                500);
    assert_true(find(&r, FS_M_PFC_PAUSE_FRAMES, "interface=Eth1/49,direction=tx,priority=3")->u ==
                4);
    const struct rec *x =
        find(&r, FS_M_PFC_PAUSE_SECONDS, "interface=Eth1/49,direction=rx,priority=3");
    assert_non_null(x);
    assert_true(x->u == 50000);
    assert_true(x->scale == 1e-6);
    notif_free(n);
    fs_gnmi_map_free(m);
}

static void
test_json_ietf_container_and_strings(void **state)
{
    (void)state;
    struct fs_gnmi_map *m = map_new(NULL);
    struct recorder r = {0};
    Gnmi__Notification *n = notif(NULL, 5);
    /* RFC 7951: 64-bit numbers as strings, members qualified by their module. */
    add_json(n, "/interfaces/interface[name=Eth1/3]/state",
             "{\"openconfig-interfaces:counters\":{\"in-octets\":\"9007199254740993\","
             "\"out-octets\":5,\"openconfig-if-ext:mystery\":1},\"oper-status\":"
             "\"openconfig-interfaces:UP\"}",
             true);
    add_json(n, "/interfaces/interface[name=Eth1/3]/state/counters/in-errors",
             "18446744073709551615", false);
    add_json(n, "/interfaces/interface[name=Eth1/3]/state/counters/out-errors", "12.0", false);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    assert_true(find(&r, FS_M_PORT_BYTES, "interface=Eth1/3,direction=rx")->u ==
                9007199254740993ull);
    assert_true(find(&r, FS_M_PORT_BYTES, "interface=Eth1/3,direction=tx")->u == 5);
    assert_true(find(&r, FS_M_PORT_OPER_UP, "interface=Eth1/3")->d == 1.0);
    assert_true(find(&r, FS_M_PORT_ERRORS, "interface=Eth1/3,direction=rx")->u == UINT64_MAX);
    assert_true(find(&r, FS_M_PORT_ERRORS, "interface=Eth1/3,direction=tx")->u == 12);
    const struct fs_gnmi_map_stats *st = fs_gnmi_map_get_stats(m);
    assert_int_equal(st->mapped, 5);
    assert_int_equal(st->unmapped, 1); /* mystery */
    notif_free(n);
    fs_gnmi_map_free(m);
}

static void
test_hostile_values(void **state)
{
    (void)state;
    struct fs_gnmi_map *m = map_new(NULL);
    struct recorder r = {0};
    Gnmi__Notification *n = notif("/interfaces/interface[name=Eth1/4]/state/counters", 0);
    add_str(n, "in-octets", "12abc");
    add_int(n, "out-octets", -5);
    add_json(n, "in-pkts", "{\"broken\":", true);
    add_json(n, "out-pkts", "[1,2,3]", false);
    add_str(n, "in-discards", "-1");
    add_update(n, "out-discards"); /* no value at all */
    add_uint(n, "nothing-we-know", 3);
    add_uint(n, "in-errors", 9); /* good values around bad ones still arrive */
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    const struct fs_gnmi_map_stats *st = fs_gnmi_map_get_stats(m);
    assert_int_equal(st->rejected, 6);
    assert_int_equal(st->unmapped, 1);
    assert_int_equal(st->mapped, 1);
    assert_int_equal(r.n, 1);
    assert_true(find(&r, FS_M_PORT_ERRORS, "interface=Eth1/4,direction=rx")->u == 9);
    notif_free(n);

    /* A path without the key a label needs is not mappable. */
    n = notif(NULL, 0);
    add_uint(n, "/qos/interfaces/interface/output/queues/queue[name=3]/state/transmit-pkts", 1);
    add_uint(n,
             "/qos/interfaces/interface[name=Eth1/1]/output/queues/queue[name=best]/state/"
             "transmit-pkts",
             1);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    assert_int_equal(st->unmapped, 3);
    notif_free(n);
    fs_gnmi_map_free(m);
}

static void
test_deletes(void **state)
{
    (void)state;
    struct fs_gnmi_map *m = map_new(NULL);
    struct recorder r = {0};
    Gnmi__Notification *n = notif("/interfaces", 0);
    add_uint(n, "interface[name=Eth1/1]/state/counters/in-octets", 1);
    add_uint(n, "interface[name=Eth1/1]/state/counters/out-octets", 1);
    add_uint(n, "interface[name=Eth1/10]/state/counters/in-octets", 1);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    notif_free(n);
    r.n = 0;
    n = notif("/interfaces", 0);
    add_delete(n, "interface[name=Eth1/1]");
    fs_gnmi_map_notification(m, n, 2, &rec_emit, &r);
    assert_int_equal(r.n, 2); /* Eth1/10 is not under Eth1/1 */
    assert_true(find(&r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=rx")->deleted);
    assert_true(find(&r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=tx")->deleted);
    assert_int_equal(fs_gnmi_map_get_stats(m)->deletes, 2);
    /* Deleting again reports nothing new; an update brings the series back. */
    r.n = 0;
    fs_gnmi_map_notification(m, n, 3, &rec_emit, &r);
    assert_int_equal(r.n, 0);
    notif_free(n);
    n = notif("/interfaces", 0);
    add_uint(n, "interface[name=Eth1/1]/state/counters/in-octets", 2);
    add_delete(n, "interface[name=Eth1/1]/state/counters/in-octets");
    fs_gnmi_map_notification(m, n, 4, &rec_emit, &r);
    assert_int_equal(r.n, 2);
    assert_false(r.r[0].deleted);
    assert_true(r.r[1].deleted);
    notif_free(n);
    fs_gnmi_map_free(m);
}

/* JSON lists (arrays of objects): each entry is the list element with the entry's keys,
 * inferred as OpenConfig keeps them (scalar members repeated in config/state, else the
 * only scalar member); the same series as the PROTO path with [key=value]. Leaf-lists,
 * entries whose key cannot be told and lists under a keyed element are rejected. */
static void
test_json_lists(void **state)
{
    (void)state;
    struct fs_gnmi_acl_rule acl[] = {{"RDMA", 10, "nccl"}};
    struct fs_gnmi_map_opts o = {.acl_rules = acl, .n_acl_rules = 1};
    struct fs_gnmi_map *m = map_new(&o);
    struct recorder r = {0};
    Gnmi__Notification *n = notif(NULL, 0);
    add_json(n, "/interfaces",
             "{\"openconfig-interfaces:interface\":["
             "{\"name\":\"Eth1/1\",\"config\":{\"name\":\"Eth1/1\",\"mtu\":9216},"
             "\"state\":{\"name\":\"Eth1/1\",\"counters\":{\"in-octets\":\"9007199254740993\"}}},"
             "{\"name\":\"Eth1/2\",\"state\":{\"counters\":{\"out-octets\":\"6\"}}}]}",
             true);
    /* the update path names the list itself */
    add_json(n, "/qos/interfaces/interface[interface-id=Eth1/1]/output/queues/queue",
             "[{\"name\":\"UC3\",\"state\":{\"name\":\"UC3\",\"transmit-pkts\":\"7\"}}]", true);
    /* composite keys (name, type) and a numeric key */
    add_json(n, "/acl/acl-sets",
             "{\"acl-set\":[{\"name\":\"RDMA\",\"type\":\"ACL_IPV4\",\"config\":{\"name\":"
             "\"RDMA\",\"type\":\"ACL_IPV4\"},\"acl-entries\":{\"acl-entry\":[{\"sequence-id\":10,"
             "\"state\":{\"sequence-id\":10,\"matched-packets\":\"99\"}}]}}]}",
             false);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    notif_free(n);
    assert_true(find(&r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=rx")->u ==
                9007199254740993ull);
    assert_true(find(&r, FS_M_PORT_BYTES, "interface=Eth1/2,direction=tx")->u == 6);
    assert_true(find(&r, FS_M_QUEUE_TX_PACKETS, "interface=Eth1/1,tc=3")->u == 7);
    assert_true(find(&r, FS_M_FLOW_RULE_PACKETS, "rule=nccl")->u == 99);
    const struct fs_gnmi_map_stats *st = fs_gnmi_map_get_stats(m);
    assert_int_equal(st->mapped, 4);
    assert_int_equal(st->rejected, 0);
    /* the same leaf by PROTO path hits the entry the JSON list resolved (one cache key) */
    size_t cached = st->cache_entries;
    n = notif(NULL, 0);
    add_uint(n, "/interfaces/interface[name=Eth1/1]/state/counters/in-octets", 1);
    fs_gnmi_map_notification(m, n, 2, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(st->cache_entries, cached);
    /* a delete by plain path reaches what came as a JSON_IETF list entry */
    r.n = 0;
    n = notif(NULL, 0);
    add_delete(n, "/interfaces/interface[name=Eth1/2]");
    fs_gnmi_map_notification(m, n, 2, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(r.n, 1);
    assert_true(find(&r, FS_M_PORT_BYTES, "interface=Eth1/2,direction=tx")->deleted);
    /* rejected: a leaf-list, an entry with two scalars of which none is repeated, an
     * entry with no scalar, a list under an element that already has keys */
    uint64_t rej = st->rejected;
    n = notif(NULL, 0);
    add_json(n, "/interfaces/interface[name=Eth1/1]/state/counters/in-octets", "[1,2,3]", false);
    add_json(n, "/interfaces",
             "{\"interface\":[{\"name\":\"Eth1/5\",\"description\":\"x\",\"state\":{}},"
             "{\"state\":{\"name\":\"Eth1/6\"}},"
             "{\"name\":\"Eth1/7\",\"state\":{\"name\":\"Eth1/7\",\"counters\":{\"in-pkts\":1}}}]}",
             false);
    add_json(n, "/interfaces/interface[name=Eth1/1]", "[{\"name\":\"Eth1/1\"}]", false);
    fs_gnmi_map_notification(m, n, 3, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(st->rejected - rej, 4);
    assert_non_null(find(&r, FS_M_PORT_PACKETS, "interface=Eth1/7,direction=rx"));
    fs_gnmi_map_free(m);
}

static void
test_acl_map(void **state)
{
    (void)state;
    struct fs_gnmi_acl_rule acl[] = {{"ROCE", 10, "roce_cnp"}, {"ALL", -1, "everything"}};
    struct fs_gnmi_map_opts o = {.acl_rules = acl, .n_acl_rules = 2};
    struct fs_gnmi_map *m = map_new(&o);
    struct recorder r = {0};
    Gnmi__Notification *n = notif("/acl/acl-sets", 0);
    add_uint(n,
             "acl-set[name=ROCE][type=ACL_IPV4]/acl-entries/acl-entry[sequence-id=10]/state/"
             "matched-packets",
             77);
    add_uint(n,
             "acl-set[name=ROCE][type=ACL_IPV4]/acl-entries/acl-entry[sequence-id=20]/state/"
             "matched-packets",
             1);
    add_uint(n,
             "acl-set[name=ALL][type=ACL_IPV4]/acl-entries/acl-entry[sequence-id=5]/state/"
             "matched-octets",
             900);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    assert_int_equal(r.n, 2);
    assert_true(find(&r, FS_M_FLOW_RULE_PACKETS, "rule=roce_cnp")->u == 77);
    assert_true(find(&r, FS_M_FLOW_RULE_BYTES, "rule=everything")->u == 900);
    assert_int_equal(fs_gnmi_map_get_stats(m)->unmapped, 1);
    notif_free(n);
    fs_gnmi_map_free(m);
}

/* ACL entries named for a flow rule by their description: counters that came before the
   description map once it is seen (PROTO), a JSON_IETF acl-set with description and
   counters in one blob maps at once, the per-interface counters of the entry follow its
   set's description, acl_rules win, a changed description moves the entry, one naming
   no rule removes it, and the prefix must be there. */
static void
test_acl_by_description(void **state)
{
    (void)state;
    const char *names[] = {"nccl-roce", "nccl-sockets", "explicit"};
    struct fs_gnmi_acl_rule acl[] = {{"FLOWS", 30, "explicit"}};
    struct fs_gnmi_map_opts o = {.acl_rules = acl,
                                 .n_acl_rules = 1,
                                 .rule_names = names,
                                 .n_rule_names = 3,
                                 .acl_description_prefix = "fs:"};
    struct fs_gnmi_map *m = map_new(&o);
    const struct fs_gnmi_map_stats *st = fs_gnmi_map_get_stats(m);
    struct recorder r = {0};
#define E(seq) "acl-set[name=FLOWS][type=ACL_IPV4]/acl-entries/acl-entry[sequence-id=" #seq "]/"
    Gnmi__Notification *n = notif("/acl/acl-sets", 0);
    add_uint(n, E(10) "state/matched-packets", 5); /* before its description: unmapped */
    add_str(n, E(10) "state/description", "fs:nccl-roce");
    add_str(n, E(20) "config/description", "nccl-sockets");   /* no prefix: no rule */
    add_str(n, E(30) "state/description", "fs:nccl-sockets"); /* acl_rules win */
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(r.n, 0);
    assert_int_equal(st->acl_descriptions, 3);
    n = notif("/acl/acl-sets", 0);
    add_uint(n, E(10) "state/matched-packets", 6);
    add_uint(n, E(10) "state/matched-octets", 6000);
    add_uint(n, E(20) "state/matched-packets", 7);
    add_uint(n, E(30) "state/matched-packets", 8);
    fs_gnmi_map_notification(m, n, 2, &rec_emit, &r);
    notif_free(n);
    assert_true(find(&r, FS_M_FLOW_RULE_PACKETS, "rule=nccl-roce")->u == 6);
    assert_true(find(&r, FS_M_FLOW_RULE_BYTES, "rule=nccl-roce")->u == 6000);
    assert_true(find(&r, FS_M_FLOW_RULE_PACKETS, "rule=explicit")->u == 8);
    assert_int_equal(r.n, 3);
    /* the entry's counters bound to an interface follow the set's description */
    r.n = 0;
    n = notif(NULL, 0);
    add_uint(n,
             "/acl/interfaces/interface[id=Eth1/5]/ingress-acl-sets/ingress-acl-set"
             "[set-name=FLOWS][type=ACL_IPV4]/acl-entries/acl-entry[sequence-id=10]/state/"
             "matched-packets",
             3);
    fs_gnmi_map_notification(m, n, 3, &rec_emit, &r);
    notif_free(n);
    assert_true(find(&r, FS_M_FLOW_RULE_PACKETS, "rule=nccl-roce,interface=Eth1/5")->u == 3);
    /* moved to another rule, then to no rule */
    r.n = 0;
    n = notif("/acl/acl-sets", 0);
    add_str(n, E(10) "state/description", "fs:nccl-sockets");
    add_uint(n, E(10) "state/matched-packets", 9);
    add_str(n, E(10) "config/description", "something else");
    add_uint(n, E(10) "state/matched-octets", 9000);
    fs_gnmi_map_notification(m, n, 4, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(r.n, 1);
    assert_true(find(&r, FS_M_FLOW_RULE_PACKETS, "rule=nccl-sockets")->u == 9);
    /* JSON_IETF: one acl-set blob with the description and the counters */
    r.n = 0;
    n = notif(NULL, 0);
    add_json(n, "/acl/acl-sets",
             "{\"openconfig-acl:acl-set\":[{\"name\":\"J\",\"type\":\"ACL_IPV4\","
             "\"config\":{\"name\":\"J\",\"type\":\"ACL_IPV4\"},\"acl-entries\":{"
             "\"acl-entry\":[{\"sequence-id\":10,\"state\":{\"sequence-id\":10,"
             "\"description\":\"fs:nccl-roce\",\"matched-packets\":\"11\"}}]}}]}",
             true);
    fs_gnmi_map_notification(m, n, 5, &rec_emit, &r);
    notif_free(n);
    assert_true(find(&r, FS_M_FLOW_RULE_PACKETS, "rule=nccl-roce")->u == 11);
#undef E
    fs_gnmi_map_free(m);
    /* off (no rule names): a description is an unmapped string as before */
    struct fs_gnmi_map_opts off = {0};
    m = map_new(&off);
    n = notif("/acl/acl-sets", 0);
    add_str(n,
            "acl-set[name=FLOWS][type=ACL_IPV4]/acl-entries/acl-entry[sequence-id=10]/state/"
            "description",
            "fs:nccl-roce");
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(fs_gnmi_map_get_stats(m)->acl_descriptions, 0);
    assert_int_equal(fs_gnmi_map_get_stats(m)->unmapped, 1);
    fs_gnmi_map_free(m);
}

/* Cumulus nvidia-wjh aggregates (assumed JSON layout, map.h) counted as a window: the
   first sight adds the count, growth adds the difference, a shrinking count adds
   nothing, a window after the previous one adds all of it; bad JSON is rejected. */
static void
test_wjh_aggregate(void **state)
{
    (void)state;
    struct fs_gnmi_map *m = map_new(NULL);
    const struct fs_gnmi_map_stats *st = fs_gnmi_map_get_stats(m);
    struct recorder r = {0};
#define WJH(iface, grp) "/interfaces/interface[name=" iface "]/wjh/aggregate/" grp "/reasons/"
    static const struct {
        const char *json;
        uint64_t want;
    } steps[] = {
        {"{\"count\":5,\"reason\":\"WRED\",\"window_start\":100,\"window_end\":200}", 5},
        {"{\"count\":\"8\",\"reason\":\"WRED\",\"window_start\":100,\"window_end\":250}", 8},
        {"{\"count\":3,\"reason\":\"WRED\",\"window_start\":150,\"window_end\":260}", 8},
        {"{\"count\":4,\"reason\":\"WRED\",\"window_start\":300,\"window_end\":400}", 12},
        {"{\"count\":6}", 14},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        Gnmi__Notification *n = notif(NULL, 0);
        r.n = 0; /* the recorder appends: keep this step's samples only */
        add_str(n, WJH("swp5", "buffer") "reason[id=1][severity=Warning]/drop", steps[i].json);
        fs_gnmi_map_notification(m, n, 1 + (int64_t)i, &rec_emit, &r);
        notif_free(n);
        assert_true(find(&r, FS_M_PORT_WJH_DROPPED, "interface=swp5,group=buffer,reason=WRED")->u ==
                    steps[i].want);
    }
    /* another aggregate without a reason text; bad JSON and a missing count rejected */
    Gnmi__Notification *n = notif(NULL, 0);
    add_str(n, WJH("swp6", "l2") "reason[id=207][severity=Error]/drop", "{\"count\":2}");
    add_str(n, WJH("swp6", "l2") "reason[id=208][severity=Error]/drop", "{\"count\":");
    add_str(n, WJH("swp6", "l2") "reason[id=209][severity=Error]/drop", "{\"reason\":\"x\"}");
    add_str(n, WJH("swp6", "l2") "reason[id=210][severity=Error]/drop", "[1,2]");
    fs_gnmi_map_notification(m, n, 9, &rec_emit, &r);
    notif_free(n);
#undef WJH
    assert_true(find(&r, FS_M_PORT_WJH_DROPPED, "interface=swp6,group=l2,reason=id_207")->u == 2);
    assert_int_equal(st->wjh_records, 9);
    assert_int_equal(st->wjh_rejected, 3);
    fs_gnmi_map_free(m);
}

static void
test_user_maps(void **state)
{
    (void)state;
    struct fs_gnmi_label_src ls[] = {{"interface", "name", NULL}, {"direction", NULL, "rx"}};
    struct fs_gnmi_user_map um = {"/interfaces/interface/ethernet/state/counters/in-fcs-errors",
                                  "fabric_port_errors_total",
                                  FS_GNMI_COUNTER,
                                  0,
                                  ls,
                                  2};
    struct fs_gnmi_map_opts o = {.user_maps = &um, .n_user_maps = 1};
    struct fs_gnmi_map *m = map_new(&o);
    struct recorder r = {0};
    Gnmi__Notification *n = notif(NULL, 0);
    add_uint(n, "/interfaces/interface[name=Eth1/7]/ethernet/state/counters/in-fcs-errors", 3);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    assert_true(find(&r, FS_M_PORT_ERRORS, "interface=Eth1/7,direction=rx")->u == 3);
    notif_free(n);
    fs_gnmi_map_free(m);

    char err[256];
    um.metric = "no_such_metric";
    assert_null(fs_gnmi_map_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "no_such_metric"));
    um.metric = "fabric_queue_depth_bytes"; /* a gauge mapped as a counter */
    assert_null(fs_gnmi_map_new(&o, err, sizeof err));
    um.metric = "fabric_port_errors_total";
    ls[1].label = "tc"; /* not a label of that metric */
    assert_null(fs_gnmi_map_new(&o, err, sizeof err));
}

static void
test_cache_bounded(void **state)
{
    (void)state;
    struct fs_gnmi_map_opts o = {.cache_max = 16};
    struct fs_gnmi_map *m = map_new(&o);
    struct recorder r = {0};
    for (int i = 0; i < 40; i++) {
        char p[128];
        snprintf(p, sizeof p, "/interfaces/interface[name=Eth1/%d]/state/counters/in-octets", i);
        Gnmi__Notification *n = notif(NULL, 0);
        add_uint(n, p, (uint64_t)i);
        r.n = 0;
        fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
        assert_int_equal(r.n, 1); /* still mapped past the bound, just not cached */
        notif_free(n);
    }
    const struct fs_gnmi_map_stats *st = fs_gnmi_map_get_stats(m);
    assert_int_equal(st->cache_entries, 16);
    assert_int_equal(st->cache_overflow, 24);
    fs_gnmi_map_free(m);
}

/*
 * Hostile targets (issue 18): JSON nested 100,000 deep or larger than the bound is
 * refused before json-c builds it, wrong value types and the rest are counted by reason,
 * timestamps far from the arrival are not clock readings, and long distinct paths fill
 * the cache only up to its byte bound.
 */
static void
test_hostile_bounds(void **state)
{
    (void)state;
    struct fs_gnmi_map *m = map_new(NULL);
    struct recorder r = {0};
    const struct fs_gnmi_map_stats *st = fs_gnmi_map_get_stats(m);
    const char *pre = "/interfaces/interface[name=Eth1/4]/state/counters";

    size_t deep = 100000;
    char *j = malloc(2 * deep + 2);
    memset(j, '[', deep);
    j[deep] = '1';
    memset(j + deep + 1, ']', deep);
    j[2 * deep + 1] = '\0';
    Gnmi__Notification *n = notif(pre, 0);
    add_json(n, "in-octets", j, true);
    j[0] = '{'; /* not JSON */
    add_json(n, "out-octets", j, false);
    free(j);
    size_t big = FS_GNMI_JSON_MAX_BYTES + 1;
    j = malloc(big + 1);
    memset(j, ' ', big);
    memcpy(j, "\"1\"", 3);
    j[big] = '\0';
    add_json(n, "in-pkts", j, true); /* valid, but beyond the bound */
    free(j);
    add_json(n, "out-pkts", "null", true);
    add_str(n, "in-discards", "many");
    add_json(n, "out-discards", "[1,2]", true); /* a leaf-list where a counter belongs */
    add_uint(n, "in-errors", 9);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(st->mapped, 1);
    assert_int_equal(st->rejected_by[FS_GNMI_REJ_JSON_TOO_DEEP], 1);
    assert_int_equal(st->rejected_by[FS_GNMI_REJ_JSON_INVALID], 1);
    assert_int_equal(st->rejected_by[FS_GNMI_REJ_JSON_TOO_LARGE], 1);
    assert_int_equal(st->rejected_by[FS_GNMI_REJ_WRONG_TYPE], 2);
    assert_int_equal(st->rejected_by[FS_GNMI_REJ_JSON_SHAPE], 1);
    uint64_t sum = 0;
    for (int i = 0; i < FS_GNMI_REJ_COUNT; i++)
        sum += st->rejected_by[i];
    assert_int_equal(sum, st->rejected);
    assert_int_equal(st->rejected, 6);

    /* Timestamps: a day and more away, either way, or negative: values kept, no clock
     * reading (the emitter sees no device time), counted. */
    int64_t now_us = 1764800000LL * 1000000;
    const int64_t stamps[] = {now_us * 1000 + 2000000,
                              (now_us + FS_GNMI_TS_MAX_SKEW_US) * 1000 + 1000,
                              (now_us - FS_GNMI_TS_MAX_SKEW_US) * 1000 - 1000,
                              INT64_MAX,
                              -5,
                              1};
    const bool good[] = {true, false, false, false, false, false};
    for (size_t i = 0; i < sizeof stamps / sizeof stamps[0]; i++) {
        r.n = 0;
        r.device_ns = -1;
        n = notif(pre, stamps[i]);
        add_uint(n, "in-errors", 10 + i);
        fs_gnmi_map_notification(m, n, now_us, &rec_emit, &r);
        notif_free(n);
        assert_int_equal(r.n, 1);
        assert_true(r.device_ns == (good[i] ? stamps[i] : 0));
    }
    assert_int_equal(st->bad_timestamps, 5);
    assert_true(st->last_device_ns == stamps[0]);
    fs_gnmi_map_free(m);

    /* Distinct 3 KB paths: the cache stops at its byte bound, not its entry count. */
    struct fs_gnmi_map_opts o = {.cache_max_bytes = 64 << 10};
    m = map_new(&o);
    st = fs_gnmi_map_get_stats(m);
    char *p = malloc(4096);
    for (int i = 0; i < 100; i++) {
        int o2 = snprintf(p, 4096, "/junk[k=%d]/", i);
        memset(p + o2, 'x', 3000);
        p[o2 + 3000] = '\0';
        n = notif(NULL, 0);
        add_uint(n, p, 1);
        fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
        notif_free(n);
    }
    free(p);
    assert_true(st->cache_bytes <= 64 << 10);
    assert_true(st->cache_entries >= 15 && st->cache_entries < 22);
    assert_int_equal(st->cache_overflow, 100 - st->cache_entries);
    assert_int_equal(st->unmapped, 100);
    fs_gnmi_map_free(m);
}

/* ---- the sink emitter into a real store ---- */

struct found {
    uint64_t u;
    int hits;
};

static int
find_series(void *arg, const struct fs_series_info *s)
{
    struct found *f = arg;
    if (s->metric != FS_M_QUEUE_ECN_MARKED)
        return 0;
    for (size_t i = 0; i < s->n_labels; i++)
        if (strcmp(s->labels[i].name, "tc") == 0 && strcmp(s->labels[i].value, "3") == 0) {
            f->u = s->u;
            f->hits++;
        }
    return 0;
}

struct clock_seen {
    bool known;
    double offset, uncertainty;
};

static int
find_clock(void *arg, const struct fs_instance_info *in)
{
    struct clock_seen *c = arg;
    c->known = in->clock_known;
    c->offset = in->clock_offset_seconds;
    c->uncertainty = in->clock_uncertainty_seconds;
    return 0;
}

/* ---- series handles: the same store through the handles as through the labels ---- */

struct dump {
    char *text;
    size_t len, cap;
};

static int
dump_series(void *arg, const struct fs_series_info *s)
{
    struct dump *d = arg;
    char line[1024];
    int n = snprintf(line, sizeof line, "%s{%.*s} %llu %.17g\n", s->name, (int)s->labels_text_len,
                     s->labels_text, (unsigned long long)s->u, s->d);
    if (d->len + (size_t)n + 1 > d->cap) {
        d->cap = (d->len + (size_t)n + 1) * 2;
        d->text = realloc(d->text, d->cap);
        assert_non_null(d->text);
    }
    memcpy(d->text + d->len, line, (size_t)n + 1);
    d->len += (size_t)n;
    return 0;
}

static int handle_calls, handle_filled;

static void
count_counter_h(void *arg, struct fs_series_handle *h, enum fs_metric m, const struct fs_label *l,
                size_t n, uint64_t raw, double scale)
{
    handle_calls++;
    handle_filled += h->series != NULL;
    fs_gnmi_sink_emit.counter_h(arg, h, m, l, n, raw, scale);
}

static void
count_gauge_h(void *arg, struct fs_series_handle *h, enum fs_metric m, const struct fs_label *l,
              size_t n, double v)
{
    handle_calls++;
    handle_filled += h->series != NULL;
    fs_gnmi_sink_emit.gauge_h(arg, h, m, l, n, v);
}

/* 600 interfaces' counters and oper-status (more paths than the map's first table holds:
 * it grows during the first round and the handles move with their slots), four rounds:
 * the store fed through the handles holds what the one fed through the labels holds, and
 * from the second round on every sample finds its handle filled. */
static void
test_sink_handles_equal_labels(void **state)
{
    (void)state;
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 64 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *sa = fs_store_new(&ro, err, sizeof err),
                    *sb = fs_store_new(&ro, err, sizeof err);
    assert_non_null(sa);
    assert_non_null(sb);
    struct fs_target_cfg tcfg = {.name = "leaf1", .address = "127.0.0.1", .staleness_intervals = 3};
    struct fs_gnmi_sink_arg a = {.sink = fs_store_sink_add(sa, &tcfg, "gnmi", 1000000)};
    struct fs_gnmi_sink_arg b = {.sink = fs_store_sink_add(sb, &tcfg, "gnmi", 1000000)};
    struct fs_gnmi_emit with_h = fs_gnmi_sink_emit, labels_only = fs_gnmi_sink_emit;
    with_h.counter_h = count_counter_h;
    with_h.gauge_h = count_gauge_h;
    labels_only.counter_h = NULL;
    labels_only.gauge_h = NULL;
    struct fs_gnmi_map *ma = map_new(NULL), *mb = map_new(NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    for (int round = 0; round < 4; round++) {
        handle_calls = handle_filled = 0;
        for (int i = 0; i < 600; i++) {
            char pfx[96];
            snprintf(pfx, sizeof pfx, "/interfaces/interface[name=Ethernet%d]/state", i);
            Gnmi__Notification *n = notif(pfx, (now + round * 1000000) * 1000);
            add_uint(n, "counters/in-octets", 1000u * (uint64_t)round + (uint64_t)i);
            add_uint(n, "counters/out-discards", (uint64_t)round);
            add_str(n, "oper-status", round == 2 && i % 7 == 0 ? "DOWN" : "UP");
            fs_gnmi_map_notification(ma, n, now + round * 1000000, &with_h, &a);
            fs_gnmi_map_notification(mb, n, now + round * 1000000, &labels_only, &b);
            notif_free(n);
        }
        assert_int_equal(handle_calls, 600 * 3);
        if (round > 0)
            assert_int_equal(handle_filled, handle_calls);
    }
    struct dump da = {0}, db = {0};
    fs_store_foreach_series(sa, false, dump_series, &da);
    fs_store_foreach_series(sb, false, dump_series, &db);
    assert_non_null(da.text);
    assert_non_null(db.text);
    assert_true(da.len > 1800 * 20);
    assert_string_equal(da.text, db.text);
    free(da.text);
    free(db.text);
    fs_gnmi_map_free(ma);
    fs_gnmi_map_free(mb);
    fs_store_free(sa);
    fs_store_free(sb);
}

static void
test_sink_emitter_store(void **state)
{
    (void)state;
    char err[256];
    struct fs_ring_opts ro = {0};
    ro.memory_limit = 16 << 20;
    ro.retention_us = 3600LL * 1000000;
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(st);
    struct fs_target_cfg tcfg = {0};
    tcfg.name = "leaf1";
    tcfg.address = "127.0.0.1";
    tcfg.staleness_intervals = 3;
    struct fs_sink *sink = fs_store_sink_add(st, &tcfg, "gnmi", 1000000);
    assert_non_null(sink);
    struct fs_gnmi_map *m = map_new(NULL);
    struct fs_gnmi_sink_arg a = {.sink = sink};
    const uint64_t big = (1ull << 53) + 12345;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* odd: the device readings below are not round, so the core takes the device clock
     * for a fine one (it guesses the resolution from the readings) */
    int64_t now = ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000) | 1;
    /* The device's clock runs 2.5 s ahead; this notification arrives 8 ms after its stamp. */
    Gnmi__Notification *n =
        notif("/qos/interfaces/interface[interface-id=Eth1/49]", (now + 2500000 - 8000) * 1000);
    add_uint(n, "output/queues/queue[name=3]/state/ecn-marked-pkts", big);
    fs_gnmi_map_notification(m, n, now, &fs_gnmi_sink_emit, &a);
    notif_free(n);
    struct found f = {0};
    fs_store_foreach_series(st, false, find_series, &f);
    assert_int_equal(f.hits, 1);
    assert_true(f.u == big);
    f = (struct found){0};
    /* Minimum-delay filtering: one measurement per second, from the least delayed
     * notification of that second. The first second is delayed throughout (8 ms, as a
     * stream's first second on a loaded host can be): reported alone it would bound the
     * offset below the truth, so nothing is reported before ten seconds are seen. */
    n = notif("/qos/interfaces/interface[interface-id=Eth1/49]",
              (now + 300000 + 2500000 - 40000) * 1000);
    add_uint(n, "output/queues/queue[name=3]/state/ecn-marked-pkts", big + 1);
    fs_gnmi_map_notification(m, n, now + 300000, &fs_gnmi_sink_emit, &a);
    notif_free(n);
    struct clock_seen c = {0};
    for (int sec = 1; sec <= 10; sec++) {
        c = (struct clock_seen){0};
        fs_store_foreach_instance(st, find_clock, &c);
        assert_false(c.known); /* fewer than ten seconds over */
        /* closes second sec (best lag: -8 ms in the first, -200 us in the others) */
        int64_t recv = now + sec * 1000000 + 100000;
        n = notif("/qos/interfaces/interface[interface-id=Eth1/49]", (recv + 2500000 - 200) * 1000);
        add_uint(n, "output/queues/queue[name=3]/state/ecn-marked-pkts", big + 1 + sec);
        fs_gnmi_map_notification(m, n, recv, &fs_gnmi_sink_emit, &a);
        notif_free(n);
    }
    c = (struct clock_seen){0};
    fs_store_foreach_instance(st, find_clock, &c);
    assert_true(c.known);
    /* Offset >= 2.5 s - 200 us (the best lag); the bound above is that lag + 5 ms (the
     * delayed first second does not widen it); the true 2.5 s is inside. */
    assert_true(c.offset >= 2.4998 && c.offset <= 2.5048);
    assert_true(fabs(c.offset - 2.5) <= c.uncertainty + 1e-9);
    assert_true(c.uncertainty <= 0.0026);
    /* A delete retires the series at once (staleness would take 3 s); history stays. */
    f = (struct found){0};
    fs_store_foreach_series(st, true, find_series, &f);
    assert_int_equal(f.hits, 1);
    n = notif("/qos/interfaces/interface[interface-id=Eth1/49]", 0);
    add_delete(n, "output/queues/queue[name=3]");
    fs_gnmi_map_notification(m, n, now + 1000, &fs_gnmi_sink_emit, &a);
    notif_free(n);
    f = (struct found){0};
    fs_store_foreach_series(st, true, find_series, &f);
    assert_int_equal(f.hits, 0);
    f = (struct found){0};
    fs_store_foreach_series(st, false, find_series, &f);
    assert_int_equal(f.hits, 1);
    fs_gnmi_map_free(m);
    fs_store_sink_remove(st, sink);
    fs_store_free(st);
}

/* One notification of the ECN counter, stamped dev_us by the device, arriving at recv_us. */
static void
feed_stamp(struct fs_gnmi_map *m, struct fs_gnmi_sink_arg *a, int64_t dev_us, int64_t recv_us,
           uint64_t v)
{
    Gnmi__Notification *n = notif("/qos/interfaces/interface[interface-id=Eth1/49]", dev_us * 1000);
    add_uint(n, "output/queues/queue[name=3]/state/ecn-marked-pkts", v);
    fs_gnmi_map_notification(m, n, recv_us, &fs_gnmi_sink_emit, a);
    notif_free(n);
}

/* Second *sec of a stream: four notifications; the best arrives 1.2 ms after its stamp,
 * the others 3-9 ms; second 15 is delayed by another 12 ms throughout. */
static void
feed_second(struct fs_gnmi_map *m, struct fs_gnmi_sink_arg *a, int64_t t0, int64_t off, int *sec)
{
    static const int64_t delay[4] = {3000, 1200, 9000, 5000};
    int64_t base = t0 + (int64_t)*sec * 1000000, extra = *sec == 15 ? 12000 : 0;
    for (int k = 0; k < 4; k++) {
        int64_t recv = base + k * 250000;
        feed_stamp(m, a, recv - delay[k] - extra + off, recv, (uint64_t)(*sec * 4 + k + 1));
    }
    (*sec)++;
}

static struct clock_seen
clock_of(struct fs_store *st)
{
    struct clock_seen c = {0};
    fs_store_foreach_instance(st, find_clock, &c);
    return c;
}

/*
 * The bound of the gNMI clock estimate: a second delayed throughout (seen in CI: 12 ms on
 * a loaded machine) must neither make the bound wrong nor widen it (it is 5 ms wide: the
 * assumed stamping delay of the best notification of the last minute); a device clock
 * stepping forward is followed at once, one stepping back once the minute has passed.
 */
static void
test_sink_clock_bound(void **state)
{
    (void)state;
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 16 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(st);
    struct fs_target_cfg tcfg = {.name = "leaf1", .address = "127.0.0.1", .staleness_intervals = 3};
    struct fs_sink *sink = fs_store_sink_add(st, &tcfg, "gnmi", 1000000);
    assert_non_null(sink);
    struct fs_gnmi_map *m = map_new(NULL);
    struct fs_gnmi_sink_arg a = {.sink = sink};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t t0 = ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000) | 1; /* not round */
    int64_t off = 250000;                                                /* device ahead */
    int sec = 0;
    for (int i = 0; i < 40; i++) {
        feed_second(m, &a, t0, off, &sec);
        struct clock_seen c = clock_of(st);
        if (sec <= 10) {
            assert_false(c.known); /* the warm-up */
            continue;
        }
        assert_true(c.known);
        double truth = off / 1e6;
        /* honest: the truth is inside; the bound is [best lag, best lag + 5 ms] */
        assert_true(fabs(c.offset - truth) <= c.uncertainty + 1e-6);
        /* (the core widens older bounds by 20 ppm of their age) */
        assert_true(c.offset - c.uncertainty >= truth - 0.0012 - 0.0001);
        assert_true(c.uncertainty <= 0.0026);
    }
    /* The device clock steps forward by 40 ms: the next second contradicts the old
     * bounds, the core drops them, and the estimate follows. */
    off += 40000;
    feed_second(m, &a, t0, off, &sec);
    feed_second(m, &a, t0, off, &sec);
    struct clock_seen c = clock_of(st);
    assert_true(c.known);
    assert_true(fabs(c.offset - off / 1e6) <= c.uncertainty + 1e-6);
    assert_true(c.uncertainty <= 0.0026);
    /* It steps back by 70 ms: followed once the minute of old lags is forgotten. */
    off -= 70000;
    for (int i = 0; i < FS_GNMI_CLOCK_LAGS + 2; i++)
        feed_second(m, &a, t0, off, &sec);
    c = clock_of(st);
    assert_true(c.known);
    assert_true(fabs(c.offset - off / 1e6) <= c.uncertainty + 1e-6);
    assert_true(c.uncertainty <= 0.0026);
    fs_gnmi_map_free(m);
    fs_store_sink_remove(st, sink);
    fs_store_free(st);
}

/*
 * The assumed delivery delay (config clock_max_delivery_delay) is what the upper bound of
 * the offset rests on: with 40 ms instead of the default 5 ms, the same stream gives
 * [best lag, best lag + 40 ms], an uncertainty of about 20 ms, with the truth inside.
 */
static void
test_sink_clock_assumed_delay(void **state)
{
    (void)state;
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 16 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(st);
    struct fs_target_cfg tcfg = {.name = "leaf1", .address = "127.0.0.1", .staleness_intervals = 3};
    struct fs_sink *sink = fs_store_sink_add(st, &tcfg, "gnmi", 1000000);
    assert_non_null(sink);
    struct fs_gnmi_map *m = map_new(NULL);
    struct fs_gnmi_sink_arg a = {.sink = sink, .clk_max_delay_us = 40000};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t t0 = ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000) | 1; /* not round */
    int64_t off = -120000;                                               /* device behind */
    int sec = 0;
    for (int i = 0; i < 14; i++)
        feed_second(m, &a, t0, off, &sec);
    struct clock_seen c = clock_of(st);
    assert_true(c.known);
    assert_true(fabs(c.offset - off / 1e6) <= c.uncertainty + 1e-6);
    /* best lag: off - 1.2 ms; upper bound: that + 40 ms (plus 20 ppm drift widening) */
    assert_true(c.uncertainty >= 0.0199 && c.uncertainty <= 0.0201);
    assert_true(fabs(c.offset - (off + 18800) / 1e6) <= 0.0001);
    fs_gnmi_map_free(m);
    fs_store_sink_remove(st, sink);
    fs_store_free(st);
}

/* expose_unmapped: numeric values of unmapped paths as fabric_gnmi_value{path}, with
 * origin, keys (escaped) and module prefixes dropped; strings dropped and counted;
 * mapped paths unchanged; deletes reach exposed series too. */
static void
test_expose_unmapped(void **state)
{
    (void)state;
    struct fs_gnmi_map_opts o = {.expose_unmapped = true};
    struct fs_gnmi_map *m = map_new(&o);
    struct recorder r = {0};
    Gnmi__Notification *n = notif("openconfig:/system/state", 0);
    add_uint(n, "boot-time", 1700000000);
    add_int(n, "temperature[sensor=cpu\\]0]/instant", -3);
    add_str(n, "hostname", "leaf1");      /* a string: dropped */
    add_str(n, "numeric-string", "12.5"); /* a number sent as a string: exposed */
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    notif_free(n);
    n = notif(NULL, 0);
    add_uint(n, "/interfaces/interface[name=Eth1/1]/state/counters/in-octets", 7); /* mapped */
    add_json(n, "/interfaces/interface[name=Eth1/1]/state",
             "{\"openconfig-if-ext:mystery\":\"18446744073709551615\",\"descr\":\"uplink\","
             "\"flag\":true}",
             true);
    fs_gnmi_map_notification(m, n, 2, &rec_emit, &r);
    notif_free(n);
    assert_true(find(&r, FS_M_GNMI_VALUE, "path=openconfig:/system/state/boot-time")->d ==
                1700000000.0);
    assert_true(find(&r, FS_M_GNMI_VALUE,
                     "path=openconfig:/system/state/temperature[sensor=cpu\\]0]/instant")
                    ->d == -3.0);
    assert_true(find(&r, FS_M_GNMI_VALUE, "path=openconfig:/system/state/numeric-string")->d ==
                12.5);
    assert_null(find(&r, FS_M_GNMI_VALUE, "path=openconfig:/system/state/hostname"));
    assert_true(
        find(&r, FS_M_GNMI_VALUE, "path=/interfaces/interface[name=Eth1/1]/state/mystery")->d ==
        18446744073709551615.0);
    assert_true(
        find(&r, FS_M_GNMI_VALUE, "path=/interfaces/interface[name=Eth1/1]/state/flag")->d == 1.0);
    assert_null(find(&r, FS_M_GNMI_VALUE, "path=/interfaces/interface[name=Eth1/1]/state/descr"));
    assert_true(find(&r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=rx")->u == 7);
    const struct fs_gnmi_map_stats *st = fs_gnmi_map_get_stats(m);
    assert_int_equal(st->exposed, 5);
    assert_int_equal(st->unmapped, 2); /* hostname, descr */
    assert_int_equal(st->mapped, 1);
    assert_int_equal(st->rejected, 0);
    /* a delete reaches the exposed series under it */
    r.n = 0;
    n = notif("openconfig:/system", 0);
    add_delete(n, "state/temperature");
    fs_gnmi_map_notification(m, n, 3, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(r.n, 1);
    assert_true(r.r[0].deleted && r.r[0].m == FS_M_GNMI_VALUE);
    fs_gnmi_map_free(m);

    /* without the option the same values are dropped and counted */
    m = map_new(NULL);
    r.n = 0;
    n = notif("openconfig:/system/state", 0);
    add_uint(n, "boot-time", 1);
    fs_gnmi_map_notification(m, n, 1, &rec_emit, &r);
    notif_free(n);
    assert_int_equal(r.n, 0);
    assert_int_equal(fs_gnmi_map_get_stats(m)->unmapped, 1);
    assert_int_equal(fs_gnmi_map_get_stats(m)->exposed, 0);
    fs_gnmi_map_free(m);
}

struct limit_seen {
    int series;
    uint64_t dropped;
};

static int
count_gnmi_value(void *arg, const struct fs_series_info *s)
{
    struct limit_seen *l = arg;
    l->series += s->metric == FS_M_GNMI_VALUE;
    return 0;
}

static int
find_limit_dropped(void *arg, const struct fs_instance_info *in)
{
    ((struct limit_seen *)arg)->dropped = in->series_limit_dropped;
    return 0;
}

/* A target sending endless distinct paths gets no more series than the per-target limit. */
static void
test_expose_unmapped_bounded(void **state)
{
    (void)state;
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 16 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(st);
    fs_store_set_series_limit(st, 10);
    struct fs_target_cfg tcfg = {.name = "leaf1", .address = "127.0.0.1", .staleness_intervals = 3};
    struct fs_sink *sink = fs_store_sink_add(st, &tcfg, "gnmi", 1000000);
    struct fs_gnmi_map_opts o = {.expose_unmapped = true};
    struct fs_gnmi_map *m = map_new(&o);
    struct fs_gnmi_sink_arg a = {.sink = sink};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    Gnmi__Notification *n = notif("/junk", 0);
    char p[64];
    for (int i = 0; i < 40; i++) {
        snprintf(p, sizeof p, "leaf[id=%d]/value", i);
        add_uint(n, p, (uint64_t)i);
    }
    fs_gnmi_map_notification(m, n, now, &fs_gnmi_sink_emit, &a);
    notif_free(n);
    struct limit_seen l = {0};
    fs_store_foreach_series(st, false, count_gnmi_value, &l);
    fs_store_foreach_instance(st, find_limit_dropped, &l);
    assert_int_equal(l.series, 10);
    assert_int_equal(l.dropped, 30);
    assert_int_equal(fs_gnmi_map_get_stats(m)->exposed, 40);
    fs_gnmi_map_free(m);
    fs_store_sink_remove(st, sink);
    fs_store_free(st);
}

/*
 * Fleets (issue 18): maps of one shared set with the same options hold one copy of each
 * resolved path; other options make another class; ACL counters resolved through a
 * target's own ACL descriptions stay its own. Deletes stay per map, entries outlive the map that
 * made them (labels included), and the last map out frees them and the set.
 */
static void
feed_ports(struct fs_gnmi_map *m, struct recorder *r, int64_t t)
{
    Gnmi__Notification *n = notif("/interfaces", 0);
    add_uint(n, "interface[name=Eth1/1]/state/counters/in-octets", 1);
    add_uint(n, "interface[name=Eth1/1]/state/counters/out-octets", 2);
    add_uint(n, "interface[name=Eth1/7]/ethernet/state/counters/in-fcs-errors", 3);
    r->n = 0;
    fs_gnmi_map_notification(m, n, t, &rec_emit, r);
    notif_free(n);
}

static void
test_shared_paths(void **state)
{
    (void)state;
    struct fs_gnmi_map_shared *sh = fs_gnmi_map_shared_new();
    assert_non_null(sh);
    struct fs_gnmi_label_src ls[] = {{"interface", "name", NULL}, {"direction", NULL, "rx"}};
    struct fs_gnmi_user_map um = {"/interfaces/interface/ethernet/state/counters/in-fcs-errors",
                                  "fabric_port_errors_total",
                                  FS_GNMI_COUNTER,
                                  0,
                                  ls,
                                  2};
    struct fs_gnmi_map_opts o = {.user_maps = &um, .n_user_maps = 1, .shared = sh};
    struct fs_gnmi_map *a = map_new(&o), *b = map_new(&o);
    struct fs_gnmi_map_opts oe = o;
    oe.expose_unmapped = true;
    struct fs_gnmi_map *c = map_new(&oe);
    const char *names[] = {"r1"};
    struct fs_gnmi_map_opts on = o;
    on.rule_names = names;
    on.n_rule_names = 1;
    struct fs_gnmi_map *d = map_new(&on);
    struct recorder r = {0};
    feed_ports(a, &r, 1);
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 3);
    feed_ports(b, &r, 1);
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 3);          /* the same class: shared */
    assert_int_equal(fs_gnmi_map_get_stats(b)->cache_entries, 3); /* counted for b too */
    feed_ports(c, &r, 1);
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 6); /* other options, other class */
    feed_ports(d, &r, 1);
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 9); /* ACL names on: a class of its own */
    assert_int_equal(r.n, 3);
    /* ACL counters resolved through a target's descriptions stay that target's own */
    struct fs_gnmi_map *d2 = map_new(&on);
    feed_ports(d2, &r, 1);
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 9);
#define ACL_E "/acl/acl-sets/acl-set[name=F][type=ACL_IPV4]/acl-entries/acl-entry[sequence-id=10]/"
    Gnmi__Notification *na = notif(NULL, 0);
    add_str(na, ACL_E "state/description", "r1");
    fs_gnmi_map_notification(d, na, 1, &rec_emit, &r);
    notif_free(na);
    na = notif(NULL, 0);
    add_uint(na, ACL_E "state/matched-packets", 5);
    r.n = 0;
    fs_gnmi_map_notification(d, na, 2, &rec_emit, &r);
    assert_int_equal(r.n, 1); /* d's description names rule r1 */
    assert_non_null(find(&r, FS_M_FLOW_RULE_PACKETS, "rule=r1"));
    r.n = 0;
    fs_gnmi_map_notification(d2, na, 2, &rec_emit, &r);
    assert_int_equal(r.n, 0); /* d2 has no such description: unmapped */
    notif_free(na);
#undef ACL_E
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 9);
    fs_gnmi_map_free(d2); /* d forgot its paths when its description named a rule: */
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 6); /* their last holder was d2 */

    /* a made the entries; they (and their label names) live on in b */
    fs_gnmi_map_free(a);
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 6);
    feed_ports(b, &r, 2);
    assert_int_equal(r.n, 3);
    assert_true(find(&r, FS_M_PORT_ERRORS, "interface=Eth1/7,direction=rx")->u == 3);
    assert_non_null(find(&r, FS_M_PORT_BYTES, "interface=Eth1/1,direction=tx"));

    /* deletes are per map: b's does not mark a2's */
    struct fs_gnmi_map *a2 = map_new(&o);
    feed_ports(a2, &r, 3);
    Gnmi__Notification *n = notif("/interfaces", 0);
    add_delete(n, "interface[name=Eth1/1]");
    r.n = 0;
    fs_gnmi_map_notification(b, n, 4, &rec_emit, &r);
    assert_int_equal(r.n, 2);
    r.n = 0;
    fs_gnmi_map_notification(a2, n, 4, &rec_emit, &r);
    assert_int_equal(r.n, 2);
    assert_true(r.r[0].deleted && r.r[1].deleted);
    r.n = 0;
    fs_gnmi_map_notification(b, n, 5, &rec_emit, &r);
    assert_int_equal(r.n, 0); /* already deleted for b */
    notif_free(n);

    fs_gnmi_map_shared_release(sh); /* the maps keep the set */
    fs_gnmi_map_free(b);
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 6);
    fs_gnmi_map_free(a2);
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 3);
    fs_gnmi_map_free(d);
    assert_int_equal(fs_gnmi_map_shared_entries(sh), 3);
    fs_gnmi_map_free(c); /* the last: frees the set */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_parse),
        cmocka_unit_test(test_sink_handles_equal_labels),
        cmocka_unit_test(test_proto_queue_counters),
        cmocka_unit_test(test_interfaces_origin_and_modules),
        cmocka_unit_test(test_pfc_switch_priority),
        cmocka_unit_test(test_json_ietf_container_and_strings),
        cmocka_unit_test(test_hostile_values),
        cmocka_unit_test(test_deletes),
        cmocka_unit_test(test_json_lists),
        cmocka_unit_test(test_acl_map),
        cmocka_unit_test(test_acl_by_description),
        cmocka_unit_test(test_wjh_aggregate),
        cmocka_unit_test(test_user_maps),
        cmocka_unit_test(test_cache_bounded),
        cmocka_unit_test(test_hostile_bounds),
        cmocka_unit_test(test_sink_emitter_store),
        cmocka_unit_test(test_sink_clock_bound),
        cmocka_unit_test(test_sink_clock_assumed_delay),
        cmocka_unit_test(test_expose_unmapped),
        cmocka_unit_test(test_expose_unmapped_bounded),
        cmocka_unit_test(test_shared_paths),
        cmocka_unit_test(test_lldp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
