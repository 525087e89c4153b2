/*
 * The protobuf-c bump allocator of the gNMI driver (drivers/gnmi/arena.c): messages
 * unpacked into it decode exactly, a message larger than the chunk is served from
 * overflow blocks and the chunk then grows to fit the next one whole (up to its bound),
 * a large request gets a mapped block, and reset drops everything (ASan/LSan see no leak).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gnmi/arena.h"
#include "gnmi/map.h"

/* A notification with n updates of uint64 values past 2^53, packed. */
static ProtobufCBinaryData
packed(size_t n)
{
    Gnmi__Notification nt = GNMI__NOTIFICATION__INIT;
    char err[128];
    assert_int_equal(fs_gnmi_path_parse("/qos/interfaces/interface[interface-id=Eth1/1]",
                                        &nt.prefix, err, sizeof err),
                     0);
    nt.n_update = n;
    nt.update = calloc(n, sizeof *nt.update);
    for (size_t i = 0; i < n; i++) {
        Gnmi__Update *u = calloc(1, sizeof *u);
        gnmi__update__init(u);
        assert_int_equal(fs_gnmi_path_parse("output/queues/queue[name=3]/state/transmit-pkts",
                                            &u->path, err, sizeof err),
                         0);
        u->val = calloc(1, sizeof *u->val);
        gnmi__typed_value__init(u->val);
        u->val->value_case = GNMI__TYPED_VALUE__VALUE_UINT_VAL;
        u->val->uint_val = (1ull << 53) + 1 + i;
        nt.update[i] = u;
    }
    ProtobufCBinaryData b;
    b.len = gnmi__notification__get_packed_size(&nt);
    b.data = malloc(b.len);
    gnmi__notification__pack(&nt, b.data);
    for (size_t i = 0; i < n; i++)
        protobuf_c_message_free_unpacked(&nt.update[i]->base, NULL);
    free(nt.update);
    protobuf_c_message_free_unpacked(&nt.prefix->base, NULL);
    return b;
}

static void
check(const Gnmi__Notification *n, size_t count)
{
    assert_non_null(n);
    assert_int_equal(n->n_update, count);
    for (size_t i = 0; i < count; i++) {
        assert_true(n->update[i]->val->uint_val == (1ull << 53) + 1 + i);
        assert_string_equal(n->update[i]->path->elem[3]->name, "state");
    }
    assert_string_equal(n->prefix->elem[2]->key[0]->value, "Eth1/1");
}

static void
test_small_fits_chunk(void **state)
{
    (void)state;
    struct fs_gnmi_arena a;
    fs_gnmi_arena_init(&a, 64 << 10, 1 << 20);
    ProtobufCBinaryData b = packed(10);
    for (int round = 0; round < 3; round++) {
        Gnmi__Notification *n = gnmi__notification__unpack(&a.pa, b.len, b.data);
        check(n, 10);
        assert_null(a.blocks); /* all from the chunk */
        assert_true(a.used > 0);
        fs_gnmi_arena_reset(&a);
        assert_int_equal(a.used, 0);
    }
    free(b.data);
    fs_gnmi_arena_fini(&a);
}

static void
test_large_overflows_then_grows(void **state)
{
    (void)state;
    struct fs_gnmi_arena a;
    fs_gnmi_arena_init(&a, 1024, 8 << 20);
    ProtobufCBinaryData b = packed(2000);
    Gnmi__Notification *n = gnmi__notification__unpack(&a.pa, b.len, b.data);
    check(n, 2000);
    assert_non_null(a.blocks);
    size_t cap0 = a.cap;
    fs_gnmi_arena_reset(&a);
    assert_null(a.blocks);
    assert_true(a.cap > cap0);
    n = gnmi__notification__unpack(&a.pa, b.len, b.data);
    check(n, 2000);
    assert_null(a.blocks); /* fits the grown chunk whole */
    fs_gnmi_arena_reset(&a);
    free(b.data);
    fs_gnmi_arena_fini(&a);
}

static void
test_growth_bounded(void **state)
{
    (void)state;
    struct fs_gnmi_arena a;
    fs_gnmi_arena_init(&a, 1024, 4096);
    ProtobufCBinaryData b = packed(500);
    Gnmi__Notification *n = gnmi__notification__unpack(&a.pa, b.len, b.data);
    check(n, 500);
    fs_gnmi_arena_reset(&a);
    assert_int_equal(a.cap, 4096);
    /* Still decodes (from overflow blocks) past the bound. */
    n = gnmi__notification__unpack(&a.pa, b.len, b.data);
    check(n, 500);
    fs_gnmi_arena_reset(&a);
    /* A truncated message fails cleanly; reset releases what was allocated. */
    assert_null(gnmi__notification__unpack(&a.pa, b.len - 3, b.data));
    fs_gnmi_arena_reset(&a);
    free(b.data);
    fs_gnmi_arena_fini(&a);
}

/* The overflow limit: a decode that needs more than it fails (and says so), and the next
 * one within it works. */
static void
test_overflow_limit(void **state)
{
    (void)state;
    struct fs_gnmi_arena a;
    fs_gnmi_arena_init(&a, 1024, 4096);
    ProtobufCBinaryData b = packed(500);
    a.overflow_limit = 16 << 10;
    assert_null(gnmi__notification__unpack(&a.pa, b.len, b.data));
    assert_true(a.overflow_refused);
    assert_true(a.overflow_bytes <= a.overflow_limit);
    fs_gnmi_arena_reset(&a);
    assert_false(a.overflow_refused);
    a.overflow_limit = 32 * b.len + (1u << 20); /* what grpc_io.c allows */
    Gnmi__Notification *n = gnmi__notification__unpack(&a.pa, b.len, b.data);
    check(n, 500);
    assert_false(a.overflow_refused);
    fs_gnmi_arena_reset(&a);
    free(b.data);
    fs_gnmi_arena_fini(&a);
}

/* One large message grows the chunk; a window of small ones shrinks it back (not below
 * its first size), and a window with a large one keeps it. */
static void
test_shrinks_back(void **state)
{
    (void)state;
    struct fs_gnmi_arena a;
    fs_gnmi_arena_init(&a, 1024, 8 << 20);
    ProtobufCBinaryData big = packed(2000), small = packed(2);
    assert_non_null(gnmi__notification__unpack(&a.pa, big.len, big.data));
    fs_gnmi_arena_reset(&a);
    size_t grown = a.cap;
    assert_true(grown > 64 << 10);
    for (int i = 0; i < 2 * FS_GNMI_ARENA_WINDOW; i++) {
        if (i == FS_GNMI_ARENA_WINDOW / 2) /* one large message in the first window */
            check(gnmi__notification__unpack(&a.pa, big.len, big.data), 2000);
        else
            check(gnmi__notification__unpack(&a.pa, small.len, small.data), 2);
        fs_gnmi_arena_reset(&a);
        if (i == FS_GNMI_ARENA_WINDOW) /* (counted from the init's window) */
            assert_int_equal(a.cap, grown);
    }
    assert_true(a.cap < 16 << 10);
    assert_true(a.cap >= 1024);
    check(gnmi__notification__unpack(&a.pa, big.len, big.data), 2000); /* still decodes */
    fs_gnmi_arena_reset(&a);
    free(big.data);
    free(small.data);
    fs_gnmi_arena_fini(&a);
}

/* A large request (a received message's copy) is served from a mapped block of its own,
 * readable and writable whole, dropped at reset; the chunk then grows to fit it. */
static void
test_large_request_mapped(void **state)
{
    (void)state;
    struct fs_gnmi_arena a;
    fs_gnmi_arena_init(&a, 4096, 8 << 20);
    size_t n = 1 << 20;
    unsigned char *p = fs_gnmi_arena_alloc(&a, n);
    assert_non_null(p);
    memset(p, 0xa5, n);
    assert_int_equal(p[0] + p[n - 1], 2 * 0xa5);
    assert_true(a.overflow_mapped >= n); /* mapped, not from malloc */
    fs_gnmi_arena_reset(&a);
    assert_null(a.blocks);
    assert_true(a.cap >= n);
    p = fs_gnmi_arena_alloc(&a, n);
    assert_non_null(p);
    assert_null(a.blocks); /* from the grown chunk */
    p[n - 1] = 1;
    fs_gnmi_arena_fini(&a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_fits_chunk), cmocka_unit_test(test_large_overflows_then_grows),
        cmocka_unit_test(test_growth_bounded),   cmocka_unit_test(test_overflow_limit),
        cmocka_unit_test(test_shrinks_back),     cmocka_unit_test(test_large_request_mapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
