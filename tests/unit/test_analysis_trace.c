/* Chrome Trace Event export: the document parses back with json-c, timestamps are plain
 * decimals relative to the origin, overlapping slices get their own lanes, metadata
 * names the tracks and the epoch origin is kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "analysis/trace.h"

#define ORIGIN_NS 1796236354000000000LL

static struct json_object *
find_event(struct json_object *evs, const char *ph, const char *name, int nth)
{
    size_t n = json_object_array_length(evs);
    for (size_t i = 0; i < n; i++) {
        struct json_object *e = json_object_array_get_idx(evs, i), *v;
        if (!json_object_object_get_ex(e, "ph", &v) || strcmp(json_object_get_string(v), ph))
            continue;
        if (name &&
            (!json_object_object_get_ex(e, "name", &v) || strcmp(json_object_get_string(v), name)))
            continue;
        if (nth-- == 0)
            return e;
    }
    return NULL;
}

static double
num(struct json_object *o, const char *key)
{
    struct json_object *v;
    assert_true(json_object_object_get_ex(o, key, &v));
    return json_object_get_double(v);
}

static void
test_trace_round_trip(void **state)
{
    (void)state;
    struct fs_buf b;
    fs_buf_init(&b, 1 << 20);
    struct fs_trace *t = fs_trace_new(&b, ORIGIN_NS);
    assert_non_null(t);
    int64_t ts[3] = {ORIGIN_NS / 1000 + 1000000, ORIGIN_NS / 1000 + 2000000,
                     ORIGIN_NS / 1000 + 3000000};
    double v[3] = {10, 52000.5, 1e-7};
    assert_int_equal(fs_trace_counter(t, "switch tor1", "Eth1/49 tc3 ecn marked/s", ts, v, 3), 0);
    assert_int_equal(fs_trace_instant(t, "switch tor1", "ECN surge", ORIGIN_NS + 1500000123,
                                      "{\"peak_z\":42.5}"),
                     0);
    struct fs_host_attr attrs[2] = {{"size_bytes", "1048576", false}, {"comm", "0x\"ab", true}};
    /* Two overlapping, non-nested slices on one track, then one after both. */
    assert_int_equal(fs_trace_slice(t, "host gpu1", "nccl.kernel", "AllReduce",
                                    ORIGIN_NS + 1000000001, ORIGIN_NS + 1800000000, attrs, 2),
                     0);
    assert_int_equal(fs_trace_slice(t, "host gpu1", "nccl.kernel", "AllReduce",
                                    ORIGIN_NS + 1500000000, ORIGIN_NS + 2500000000, NULL, 0),
                     0);
    assert_int_equal(fs_trace_slice(t, "host gpu1", "nccl.kernel", "AllGather",
                                    ORIGIN_NS + 2600000000, ORIGIN_NS + 2700000000, NULL, 0),
                     0);
    assert_int_equal(fs_trace_finish(t, "\"clock_uncertainty_ns\":5000"), 0);

    /* Plain decimals only: no exponent anywhere in the document. */
    assert_null(strstr(b.data, "e+"));
    assert_null(strstr(b.data, "e-0"));

    struct json_tokener *tok = json_tokener_new();
    struct json_object *root = json_tokener_parse_ex(tok, b.data, (int)b.len);
    assert_int_equal(json_tokener_get_error(tok), json_tokener_success);
    json_tokener_free(tok);
    struct json_object *evs, *other, *v2;
    assert_true(json_object_object_get_ex(root, "traceEvents", &evs));
    assert_true(json_object_object_get_ex(root, "otherData", &other));
    assert_true(json_object_object_get_ex(other, "epoch_origin_ns", &v2));
    assert_true(json_object_get_int64(v2) == ORIGIN_NS);
    assert_true(json_object_object_get_ex(other, "epoch_origin", &v2));
    assert_string_equal(json_object_get_string(v2), "2026-12-02T18:32:34.000000000Z");
    assert_true(json_object_object_get_ex(other, "clock_uncertainty_ns", &v2));

    struct json_object *c1 = find_event(evs, "C", "Eth1/49 tc3 ecn marked/s", 1);
    assert_non_null(c1);
    assert_true(num(c1, "ts") == 2000000.0); /* µs after the origin */
    struct json_object *args;
    assert_true(json_object_object_get_ex(c1, "args", &args));
    assert_true(num(args, "value") == 52000.5);

    struct json_object *in = find_event(evs, "i", "ECN surge", 0);
    assert_non_null(in);
    assert_true(num(in, "ts") == 1500000.123);

    struct json_object *s0 = find_event(evs, "X", "AllReduce", 0);
    struct json_object *s1 = find_event(evs, "X", "AllReduce", 1);
    struct json_object *s2 = find_event(evs, "X", "AllGather", 0);
    assert_true(num(s0, "ts") == 1000000.001);
    assert_true(num(s0, "dur") == 799999.999);
    assert_true(num(s0, "pid") == num(s1, "pid"));
    assert_true(num(s0, "tid") != num(s1, "tid")); /* overlap: another lane */
    assert_true(num(s2, "tid") == num(s0, "tid")); /* the first lane is free again */
    assert_true(json_object_object_get_ex(s0, "args", &args));
    assert_true(json_object_object_get_ex(args, "comm", &v2));
    assert_string_equal(json_object_get_string(v2), "0x\"ab");
    assert_true(json_object_object_get_ex(args, "size_bytes", &v2));
    assert_true(json_object_is_type(v2, json_type_int));

    /* Process and thread names. */
    int names = 0;
    for (int k = 0; k < 8; k++) {
        struct json_object *m = find_event(evs, "M", NULL, k);
        if (!m)
            break;
        assert_true(json_object_object_get_ex(m, "args", &args));
        assert_true(json_object_object_get_ex(args, "name", &v2));
        const char *nm = json_object_get_string(v2);
        if (!strcmp(nm, "switch tor1") || !strcmp(nm, "host gpu1") || !strcmp(nm, "nccl.kernel") ||
            !strcmp(nm, "nccl.kernel #2"))
            names++;
    }
    assert_int_equal(names, 4);
    json_object_put(root);
    fs_buf_free(&b);
}

static void
test_trace_overflow_reported(void **state)
{
    (void)state;
    struct fs_buf b;
    fs_buf_init(&b, 256);
    struct fs_trace *t = fs_trace_new(&b, ORIGIN_NS);
    int64_t ts[64];
    double v[64];
    for (int i = 0; i < 64; i++) {
        ts[i] = ORIGIN_NS / 1000 + i;
        v[i] = i;
    }
    assert_int_equal(fs_trace_counter(t, "switch tor1", "x", ts, v, 64), -1);
    assert_int_equal(fs_trace_finish(t, NULL), -1);
    fs_buf_free(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_round_trip),
        cmocka_unit_test(test_trace_overflow_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
