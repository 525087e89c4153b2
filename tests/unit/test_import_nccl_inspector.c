/* import-nccl-inspector: JSON-lines records as the Inspector plugin writes them (with and
 * without the verbose trace, collective and P2P), a directory of logs, and bad lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "importers/import_nccl_inspector.h"

static const char *
attr(const struct fs_imp_event *e, const char *key)
{
    for (size_t i = 0; i < e->n_attrs; i++)
        if (strcmp(e->attrs[i].key, key) == 0)
            return e->attrs[i].value;
    return NULL;
}

static const char log_text[] =
    "{\"header\":{\"id\":\"0x7f3a\",\"comm_name\":\"dp\",\"rank\":3,\"n_ranks\":16,\"nnodes\":2},"
    "\"metadata\":{\"inspector_output_format_version\":\"v4.0\",\"git_rev\":\"x\","
    "\"rec_mechanism\":\"nccl_profiler_interface\",\"dump_timestamp_us\":1796236354900000,"
    "\"hostname\":\"gpu-node-3\",\"pid\":4242},"
    "\"coll_perf\":{\"coll\":\"AllReduce\",\"coll_sn\":17,\"coll_msg_size_bytes\":1048576,"
    "\"coll_exec_time_us\":2500,\"coll_timing_source\":\"kernel_gpu\",\"coll_algobw_gbs\":"
    "41.9,\"coll_busbw_gbs\":78.6}}\n"
    "{\"header\":{\"id\":\"0x7f3a\",\"rank\":3,\"n_ranks\":16,\"nnodes\":2},"
    "\"metadata\":{\"dump_timestamp_us\":1796236355900000,\"hostname\":\"gpu-node-3\"},"
    "\"event_trace_sn\":{},\"event_trace_ts\":{\"coll_start_ts\":1796236355000000,"
    "\"coll_stop_ts\":1796236355003000,\"kernel_events\":[]},"
    "\"coll_perf\":{\"coll\":\"AllGather\",\"coll_sn\":18,\"coll_msg_size_bytes\":65536,"
    "\"coll_exec_time_us\":3000,\"coll_timing_source\":\"kernel_gpu\",\"coll_algobw_gbs\":1,"
    "\"coll_busbw_gbs\":1}}\n"
    "\n"
    "{\"header\":{\"id\":\"0x7f3b\",\"rank\":0,\"n_ranks\":2,\"nnodes\":2},"
    "\"metadata\":{\"dump_timestamp_us\":1796236356000000,\"hostname\":\"gpu-node-3\"},"
    "\"p2p_perf\":{\"p2p\":\"Send\",\"p2p_sn\":1,\"p2p_peer\":1,\"p2p_msg_size_bytes\":4096,"
    "\"p2p_exec_time_us\":40,\"p2p_timing_source\":\"kernel_gpu\",\"p2p_algobw_gbs\":0.1,"
    "\"p2p_busbw_gbs\":0.1}}\n"
    "{\"something\":\"else\"}\n";

/* Times past what ns can hold are refused, naming the line, before they are scaled (the
   fuzzer's UBSan report: 9223372036854773307 * 1000 cannot be represented). */
static void
test_times_out_of_range(void **state)
{
    (void)state;
    static const char *bad[] = {
        "{\"metadata\":{\"hostname\":\"h\"},\"event_trace_ts\":{\"coll_start_ts\":"
        "9223372036854773307},\"coll_perf\":{\"coll\":\"AllReduce\",\"coll_exec_time_us\":1}}",
        "{\"metadata\":{\"hostname\":\"h\",\"dump_timestamp_us\":9223372036854775000},"
        "\"coll_perf\":{\"coll\":\"AllReduce\",\"coll_exec_time_us\":5}}",
        "{\"metadata\":{\"hostname\":\"h\"},\"event_trace_ts\":{\"p2p_start_ts\":"
        "1796236355000000},\"p2p_perf\":{\"p2p\":\"Send\",\"p2p_exec_time_us\":"
        "9223372036854775000}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[512];
        snprintf(text, sizeof text, "\n%s\n", bad[i]);
        struct fs_imp_batch b = {0};
        size_t skipped = 0;
        char err[256] = "";
        assert_int_equal(fs_import_nccl_inspector_read(text, strlen(text), "t.log", NULL, &b,
                                                       &skipped, err, sizeof err),
                         -1);
        assert_non_null(strstr(err, "t.log:2: "));
        assert_non_null(strstr(err, "out of range"));
        fs_imp_batch_free(&b);
    }
}

static void
test_records(void **state)
{
    (void)state;
    struct fs_imp_batch b = {0};
    size_t skipped = 0;
    char err[256];
    assert_int_equal(fs_import_nccl_inspector_read(log_text, strlen(log_text), "t.log", NULL, &b,
                                                   &skipped, err, sizeof err),
                     0);
    assert_int_equal(b.n, 3);
    assert_int_equal(skipped, 1);
    const struct fs_imp_event *e = &b.ev[0];
    assert_string_equal(e->host, "gpu-node-3");
    assert_string_equal(e->kind, "nccl.inspector");
    assert_string_equal(e->name, "AllReduce");
    /* No verbose trace: the range ends at the dump time. */
    assert_true(e->end_ns == 1796236354900000000LL);
    assert_true(e->start_ns == 1796236354900000000LL - 2500000);
    assert_string_equal(attr(e, "placement"), "dump_time");
    assert_string_equal(attr(e, "msg_size_bytes"), "1048576");
    assert_string_equal(attr(e, "rank"), "3");
    assert_string_equal(attr(e, "comm_name"), "dp");
    assert_non_null(attr(e, "busbw_gbs"));
    e = &b.ev[1];
    assert_true(e->start_ns == 1796236355000000000LL);
    assert_true(e->end_ns == 1796236355003000000LL);
    assert_string_equal(attr(e, "placement"), "trace");
    e = &b.ev[2];
    assert_string_equal(e->name, "Send");
    assert_string_equal(attr(e, "peer"), "1");
    fs_imp_batch_free(&b);
}

static void
test_directory_and_bad_line(void **state)
{
    (void)state;
    char dir[128], path[256], err[512];
    snprintf(dir, sizeof dir, "/tmp/fs-test-inspector-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/gpu-node-3-pid4242.log", dir);
    FILE *f = fopen(path, "w");
    fputs(log_text, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/README.txt", dir); /* not a log: ignored */
    f = fopen(path, "w");
    fputs("not json", f);
    fclose(f);
    struct fs_imp_batch b = {0};
    size_t files, skipped;
    assert_int_equal(
        fs_import_nccl_inspector_dir(dir, "override", &b, &files, &skipped, err, sizeof err), 0);
    assert_int_equal(files, 1);
    assert_int_equal(b.n, 3);
    assert_string_equal(b.ev[0].host, "override");
    fs_imp_batch_free(&b);
    snprintf(path, sizeof path, "%s/gpu-node-4-pid1.log", dir);
    f = fopen(path, "w");
    fputs("{\"coll_perf\":{}}\n{\"header\": [1,2\n", f);
    fclose(f);
    assert_int_equal(fs_import_nccl_inspector_dir(dir, NULL, &b, &files, &skipped, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "gpu-node-4-pid1.log:2: not JSON"));
    fs_imp_batch_free(&b);
    unlink(path);
    snprintf(path, sizeof path, "%s/gpu-node-3-pid4242.log", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/README.txt", dir);
    unlink(path);
    rmdir(dir);
    assert_int_equal(fs_import_nccl_inspector_dir(dir, NULL, &b, &files, &skipped, err, sizeof err),
                     -1);
}

/* A log read through the bounded line buffer: lines that straddle its refills, a last line
   without a newline, and a line longer than 1 MiB refused with its number. */
static void
test_long_log_and_long_line(void **state)
{
    (void)state;
    char dir[128], path[256], err[512];
    snprintf(dir, sizeof dir, "/tmp/fs-test-inspector-long-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/big.jsonl", dir);
    const char *first = strchr(log_text, '\n') + 1; /* the verbose AllGather record */
    size_t rec_len = (size_t)(strchr(first, '\n') - first);
    FILE *f = fopen(path, "w");
    size_t n = 0, bytes = 0;
    while (bytes < (size_t)3 << 20) { /* past the 1 MiB + 64 KiB buffer, twice */
        fwrite(first, 1, rec_len, f);
        fputc('\n', f);
        bytes += rec_len + 1;
        n++;
    }
    fwrite(first, 1, rec_len, f); /* no final newline */
    n++;
    fclose(f);
    struct fs_imp_batch b = {0};
    size_t files, skipped;
    assert_int_equal(fs_import_nccl_inspector_dir(dir, NULL, &b, &files, &skipped, err, sizeof err),
                     0);
    assert_int_equal(b.n, n);
    assert_int_equal(skipped, 0);
    assert_string_equal(b.ev[n - 1].name, "AllGather");
    fs_imp_batch_free(&b);

    f = fopen(path, "w");
    fputs("{}\n\n", f);
    for (size_t i = 0; i < ((size_t)1 << 20) + 10; i++)
        fputc(' ', f);
    fputs("{}\n{}\n", f);
    fclose(f);
    assert_int_equal(fs_import_nccl_inspector_dir(dir, NULL, &b, &files, &skipped, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "big.jsonl:3: line longer than 1 MiB"));
    fs_imp_batch_free(&b);
    unlink(path);
    rmdir(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_times_out_of_range),
        cmocka_unit_test(test_directory_and_bad_line),
        cmocka_unit_test(test_long_log_and_long_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
