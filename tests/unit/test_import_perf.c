/* import-perf: perf script tracepoint text with the reference-time header (as perf
 * 6.1 prints it on this machine kind), differing field sets, kfree_skb's "reason:",
 * comms with spaces, an explicit reference, and inputs that are not perf script. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "importers/import_perf.h"

static const char *
attr(const struct fs_imp_event *e, const char *key)
{
    for (size_t i = 0; i < e->n_attrs; i++)
        if (strcmp(e->attrs[i].key, key) == 0)
            return e->attrs[i].value;
    return NULL;
}

static const char sample[] =
    "# ========\n"
    "# captured on    : Wed Dec  2 18:32:40 2026\n"
    "# clockid: monotonic (1)\n"
    "# reference time: 2026-12-02 18:32:34.802946 = 1796236354.802946 (TOD) = "
    "1016.124836457 (monotonic)\n"
    "# ========\n"
    "#\n"
    "         swapper     0 [000]   997.784374: tcp:tcp_retransmit_skb: "
    "skbaddr=0xffff88812303e000 skaddr=0xffff888102c5e5c0 family=AF_INET sport=37208 "
    "dport=5555 saddr=127.0.0.1 daddr=127.0.0.1 saddrv6=::ffff:127.0.0.1 "
    "daddrv6=::ffff:127.0.0.1 state=0x1 err=0\n"
    /* an older kernel: no pointers, no err, state by name */
    "          iperf3  4242 [003]  1017.000000: tcp:tcp_retransmit_skb: family=AF_INET "
    "sport=5201 dport=43512 saddr=10.0.0.2 daddr=10.0.0.1 saddrv6=::ffff:10.0.0.2 "
    "daddrv6=::ffff:10.0.0.1 state=TCP_ESTABLISHED\n"
    "  Web Content  777/778   [001]  1017.500000001: skb:kfree_skb: skbaddr=0xffff8881 "
    "protocol=2048 location=tcp_v4_rcv+0x10 reason: NETFILTER_DROP\n"
    "     ksoftirqd/1    20 [001]  1018.000000: net:net_dev_xmit: dev=eth0 "
    "skbaddr=0xffff888100000000 len=1514 rc=0\n"
    "this line is noise\n";

static void
test_header_reference_and_fields(void **state)
{
    (void)state;
    struct fs_imp_batch b = {0};
    size_t skipped;
    char err[256];
    assert_int_equal(
        fs_import_perf_read(sample, strlen(sample), "gpu1", NULL, &b, &skipped, err, sizeof err),
        0);
    assert_int_equal(b.n, 4);
    assert_int_equal(skipped, 1);
    /* wall = TOD + (sample - reference) */
    const int64_t tod = 1796236354802946000LL, ref = 1016124836457LL;
    const struct fs_imp_event *e = &b.ev[0];
    assert_string_equal(e->kind, "perf.tcp_retransmit_skb");
    assert_string_equal(e->name, "tcp:tcp_retransmit_skb");
    assert_true(e->start_ns == tod + (997784374000LL - ref));
    assert_true(e->end_ns == e->start_ns);
    assert_string_equal(attr(e, "comm"), "swapper");
    assert_string_equal(attr(e, "saddr"), "127.0.0.1");
    assert_string_equal(attr(e, "sport"), "37208");
    assert_string_equal(attr(e, "dport"), "5555");
    assert_string_equal(attr(e, "err"), "0");
    assert_string_equal(attr(e, "l4"), "tcp");
    assert_null(attr(e, "skbaddr")); /* kernel pointers are left out */
    assert_string_equal(attr(&b.ev[1], "state"), "TCP_ESTABLISHED");
    assert_string_equal(attr(&b.ev[1], "tid"), "4242");
    assert_null(attr(&b.ev[1], "err"));
    e = &b.ev[2];
    assert_string_equal(e->kind, "perf.kfree_skb");
    assert_string_equal(attr(e, "comm"), "Web Content");
    assert_string_equal(attr(e, "tid"), "777/778");
    assert_string_equal(attr(e, "reason"), "NETFILTER_DROP");
    assert_null(attr(e, "l4"));
    assert_true(e->start_ns == tod + (1017500000001LL - ref));
    assert_string_equal(attr(&b.ev[3], "dev"), "eth0");
    assert_string_equal(attr(&b.ev[3], "comm"), "ksoftirqd/1");
    fs_imp_batch_free(&b);
}

static void
test_explicit_reference_and_errors(void **state)
{
    (void)state;
    struct fs_imp_batch b = {0};
    size_t skipped;
    char err[256];
    const char *noheader = "perf 10 [000] 100.000001: net:net_dev_xmit: dev=lo len=60 rc=0\n";
    /* No header and no reference: refused with advice. */
    assert_int_equal(
        fs_import_perf_read(noheader, strlen(noheader), "h", NULL, &b, &skipped, err, sizeof err),
        -1);
    assert_non_null(strstr(err, "-k mono"));
    struct fs_perf_ref ref;
    assert_int_equal(fs_perf_parse_reference_arg("1796236354.5=100", &ref), 0);
    assert_true(ref.tod_ns == 1796236354500000000LL && ref.clock_ns == 100000000000LL);
    assert_int_equal(fs_perf_parse_reference_arg("1796236354.5", &ref), -1);
    assert_int_equal(fs_perf_parse_reference_arg("1.0=", &ref), -1);
    assert_int_equal(fs_perf_parse_reference_arg("x=1.0", &ref), -1);
    assert_int_equal(fs_perf_parse_reference_arg("1.0=1.0", &ref), 0);
    assert_int_equal(fs_perf_parse_reference_arg("1796236354.5=100.0", &ref), 0);
    assert_int_equal(
        fs_import_perf_read(noheader, strlen(noheader), "h", &ref, &b, &skipped, err, sizeof err),
        0);
    assert_int_equal(b.n, 1);
    assert_true(b.ev[0].start_ns == 1796236354500001000LL);
    fs_imp_batch_free(&b);
    /* Text that is not perf script at all. */
    const char *junk = "hello world\nfoo: bar: baz\n";
    assert_int_equal(
        fs_import_perf_read(junk, strlen(junk), "h", &ref, &b, &skipped, err, sizeof err), -1);
    assert_non_null(strstr(err, "none of 2 lines"));
    assert_int_equal(b.n, 0);
}

/* Times past what ns can hold (as seconds, or once placed on the reference) are refused
   with the line before they are scaled (the fuzzer's UBSan report: 17962363548 *
   1000000000 cannot be represented). */
static void
test_times_out_of_range(void **state)
{
    (void)state;
    struct fs_imp_batch b = {0};
    size_t skipped;
    char err[256];
    struct fs_perf_ref ref = {true, 1796236354000000000LL, 1000000000000LL};
    const char *big = "# x\nperf 10 [000] 17962363548.000001: net:net_dev_xmit: dev=lo\n";
    assert_int_equal(
        fs_import_perf_read(big, strlen(big), "h", &ref, &b, &skipped, err, sizeof err), -1);
    assert_non_null(strstr(err, "line 2: sample time 17962363548.000001 s out of range"));
    /* In range alone, past int64_t once placed: TOD + (sample - clock). */
    const char *far = "perf 10 [000] 9000000000.5: net:net_dev_xmit: dev=lo\n";
    struct fs_perf_ref late = {true, 9000000000000000000LL, 0};
    assert_int_equal(
        fs_import_perf_read(far, strlen(far), "h", &late, &b, &skipped, err, sizeof err), -1);
    assert_non_null(strstr(err, "line 1: sample time 9000000000.500000000 s is out of range"));
    const char *hdr =
        "# reference time: 2026-12-03 = 99999999999.5 (TOD) = 100.000000001 (monotonic)\n"
        "perf 10 [000] 100.000001: net:net_dev_xmit: dev=lo\n";
    assert_int_equal(
        fs_import_perf_read(hdr, strlen(hdr), "h", NULL, &b, &skipped, err, sizeof err), -1);
    assert_non_null(strstr(err, "TOD time is out of range"));
    assert_int_equal(b.n, 0);
    assert_int_equal(fs_perf_parse_reference_arg("99999999999.5=100", &ref), -1);
    assert_int_equal(fs_perf_parse_reference_arg("1.0=9223372036.0", &ref), -1);
    assert_int_equal(fs_perf_parse_reference_arg("1.0=9223372035.999999999", &ref), 0);
    fs_imp_batch_free(&b);
}

/* A real capture from this machine kind (perf 6.1, `perf record -k mono -e
 * tcp:tcp_retransmit_skb -e net:net_dev_xmit -a`, `perf script --header`): a TCP stream
 * in a network namespace with an nftables rule dropping 30% of its segments. The header
 * carries the recorded command line over several lines, which are not samples. */
static void
test_real_capture(void **state)
{
    (void)state;
    const char *src = getenv("FS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path,
             "%s/tests/fuzz/corpus/fuzz_perf_script/real_perf61_kmono_retransmits",
             src ? src : ".");
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s (FS_SOURCE_DIR must point at the source tree)", path);
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    struct fs_imp_batch b = {0};
    size_t skipped;
    char err[256];
    assert_int_equal(fs_import_perf_read(text, len, "h", NULL, &b, &skipped, err, sizeof err), 0);
    size_t retrans = 0, xmit = 0;
    /* # reference time: 2026-12-03 07:41:06.982196 = 1796283666.982196 (TOD) =
       2839.640088043 (monotonic) */
    const int64_t tod = 1796283666982196000LL, ref = 2839640088043LL;
    for (size_t i = 0; i < b.n; i++) {
        const struct fs_imp_event *e = &b.ev[i];
        if (strcmp(e->kind, "perf.tcp_retransmit_skb") == 0) {
            retrans++;
            assert_string_equal(attr(e, "dport"), "5599");
            assert_string_equal(attr(e, "saddr"), "127.0.0.1");
            assert_non_null(attr(e, "sport"));
            assert_string_equal(attr(e, "family"), "AF_INET");
        } else if (strcmp(e->kind, "perf.net_dev_xmit") == 0) {
            xmit++;
            assert_string_equal(attr(e, "dev"), "lo");
        }
        /* All within the 2 s capture after the reference instant. */
        assert_true(e->start_ns > tod && e->start_ns < tod + 3000000000LL);
    }
    assert_int_equal(retrans, 60);
    assert_int_equal(xmit, 20);
    /* The first retransmit: 2839.736078 on the monotonic axis. */
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < b.n; i++)
        if (strcmp(b.ev[i].kind, "perf.tcp_retransmit_skb") == 0 && b.ev[i].start_ns < first)
            first = b.ev[i].start_ns;
    assert_true(first == tod + (2839736078000LL - ref));
    fs_imp_batch_free(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_reference_and_fields),
        cmocka_unit_test(test_explicit_reference_and_errors),
        cmocka_unit_test(test_real_capture),
        cmocka_unit_test(test_times_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
