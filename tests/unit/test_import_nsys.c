/* import-nsys: small SQLite files built with the Nsight Systems export schema (current
 * and older variants), NCCL kernel classification, NVTX ranges, wall-clock placement,
 * and clear errors for corrupt and foreign files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "importers/import_nsys.h"
#include "importers/nccl_names.h"

#define SESSION 1796236354000000000LL

static void
exec_sql(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("sql: %s: %s", msg, sql);
}

static void
temp_path(char *out, size_t len, const char *tag)
{
    snprintf(out, len, "/tmp/fs-test-nsys-%d-%s.sqlite", (int)getpid(), tag);
    unlink(out);
}

/* The 2026.4 shape: shortName a StringIds reference, NCCL domain from NvtxDomainCreate. */
static void
build_current(const char *path)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(db,
             "CREATE TABLE StringIds(id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);"
             "CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT);"
             "INSERT INTO META_DATA_EXPORT VALUES('EXPORT_SCHEMA_VERSION','3.28.1');"
             "CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, "
             "localTime TEXT, systemClockNs INTEGER, sessionStartCntVctNs INTEGER);"
             "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES(1796236354000000000,"
             "'2026-12-02T18:32:34Z','',0,0);"
             "CREATE TABLE TARGET_INFO_SYSTEM_ENV(globalVid INTEGER, devStateName TEXT, name TEXT,"
             " nameEnum INTEGER, value TEXT);"
             "INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES(1,'','Hostname',0,'gpu-node-7');"
             "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT "
             "NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId "
             "INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
             "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER);"
             "INSERT INTO StringIds VALUES(1,'ncclDevKernel_AllReduce_Sum_f32_RING_LL');"
             "INSERT INTO StringIds VALUES(2,'ncclDevKernel_SendRecv');"
             "INSERT INTO StringIds VALUES(3,'void gemm_kernel<float>(int)');"
             "INSERT INTO StringIds VALUES(4,'NCCL');"
             "INSERT INTO StringIds VALUES(5,'ncclAllReduce');"
             "INSERT INTO StringIds VALUES(6,'my_app_step');"
             "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(60112000000,60114500000,0,1,NULL,7,"
             "10,1,1,1,NULL);"
             "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(60200000000,60200100000,1,1,NULL,8,"
             "11,1,2,2,NULL);"
             "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(60300000000,60301000000,0,1,NULL,7,"
             "12,1,3,3,NULL);"
             "CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT "
             "NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid "
             "INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value "
             "INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value "
             "INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);"
             /* the NCCL domain's creation, then an NCCL push/pop range and an app range */
             "INSERT INTO NVTX_EVENTS(start,end,eventType,textId,domainId) "
             "VALUES(1000,NULL,75,4,3);"
             "INSERT INTO NVTX_EVENTS(start,end,eventType,textId,domainId) "
             "VALUES(60111000000,60115000000,59,5,3);"
             "INSERT INTO NVTX_EVENTS(start,end,eventType,text,domainId) "
             "VALUES(60000000000,61000000000,59,'my_app_step',0);");
    sqlite3_close(db);
}

static int64_t
find_event(const struct fs_imp_batch *b, const char *kind, const char *name)
{
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->ev[i].kind, kind) == 0 && strcmp(b->ev[i].name, name) == 0)
            return (int64_t)i;
    return -1;
}

static const char *
attr(const struct fs_imp_event *e, const char *key)
{
    for (size_t i = 0; i < e->n_attrs; i++)
        if (strcmp(e->attrs[i].key, key) == 0)
            return e->attrs[i].value;
    return NULL;
}

static void
test_current_schema(void **state)
{
    (void)state;
    char path[256], err[512];
    temp_path(path, sizeof path, "current");
    build_current(path);
    struct fs_imp_batch b = {0};
    assert_int_equal(fs_import_nsys_read(path, NULL, &b, err, sizeof err), 0);
    assert_int_equal(b.n, 3); /* two NCCL kernels, one NCCL NVTX range */
    int64_t k = find_event(&b, "nccl.kernel", "AllReduce");
    assert_true(k >= 0);
    assert_string_equal(b.ev[k].host, "gpu-node-7");
    assert_true(b.ev[k].start_ns == SESSION + 60112000000LL);
    assert_true(b.ev[k].end_ns == SESSION + 60114500000LL);
    assert_string_equal(attr(&b.ev[k], "kernel"), "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    assert_string_equal(attr(&b.ev[k], "stream"), "7");
    assert_true(find_event(&b, "nccl.kernel", "SendRecv") >= 0);
    int64_t n = find_event(&b, "nccl.nvtx", "ncclAllReduce");
    assert_true(n >= 0);
    assert_true(b.ev[n].start_ns == SESSION + 60111000000LL);
    assert_true(find_event(&b, "nccl.nvtx", "my_app_step") < 0);
    fs_imp_batch_free(&b);

    /* --host wins over the export's name. */
    assert_int_equal(fs_import_nsys_read(path, "override", &b, err, sizeof err), 0);
    assert_string_equal(b.ev[0].host, "override");
    fs_imp_batch_free(&b);
    unlink(path);
}

/* An older shape: a _V2 kernel table with text names (NCCL <= 2.18 kernels), no
   StringIds, NVTX text only, timestamps already epoch (--ts-normalize). */
static void
test_older_schema_and_normalized_times(void **state)
{
    (void)state;
    char path[256], err[512];
    temp_path(path, sizeof path, "old");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(db, "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL_V2(start INTEGER, end INTEGER, "
                 "deviceId INTEGER, streamId INTEGER, shortName TEXT);"
                 "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL_V2 VALUES(1796236354100000000,"
                 "1796236354102000000,0,3,'ncclKernel_AllGather_RING_LL_Sum_int8_t');"
                 "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL_V2 VALUES(1796236354200000000,"
                 "1796236354202000000,0,3,'ncclKernel_ReduceScatter_RING_SIMPLE_Sum_float');"
                 "CREATE TABLE NVTX_EVENTS(start INTEGER, end INTEGER, text TEXT);"
                 "INSERT INTO NVTX_EVENTS VALUES(1796236354099000000,1796236354103000000,"
                 "'ncclAllGather');");
    sqlite3_close(db);
    struct fs_imp_batch b = {0};
    assert_int_equal(fs_import_nsys_read(path, "h1", &b, err, sizeof err), 0);
    assert_int_equal(b.n, 3);
    int64_t k = find_event(&b, "nccl.kernel", "AllGather");
    assert_true(k >= 0);
    assert_true(b.ev[k].start_ns == 1796236354100000000LL);
    assert_true(find_event(&b, "nccl.kernel", "ReduceScatter") >= 0);
    assert_true(find_event(&b, "nccl.nvtx", "ncclAllGather") >= 0);
    fs_imp_batch_free(&b);
    /* Without --host and without TARGET_INFO_SYSTEM_ENV: a clear error. */
    assert_int_equal(fs_import_nsys_read(path, NULL, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "--host"));
    fs_imp_batch_free(&b);
    unlink(path);
}

static void
test_corrupt_and_foreign_files(void **state)
{
    (void)state;
    char path[256], err[512];
    struct fs_imp_batch b = {0};
    temp_path(path, sizeof path, "corrupt");
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 4096; i++)
        fputc((i * 7919) & 0xff, f);
    fclose(f);
    assert_int_equal(fs_import_nsys_read(path, "h", &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a readable SQLite database"));
    assert_int_equal(b.n, 0);
    unlink(path);

    temp_path(path, sizeof path, "foreign");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(db, "CREATE TABLE customers(id INTEGER, name TEXT);");
    sqlite3_close(db);
    assert_int_equal(fs_import_nsys_read(path, "h", &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an Nsight Systems export"));
    unlink(path);

    /* Session-relative times with no session start: refused, not misplaced. */
    temp_path(path, sizeof path, "nosession");
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(
        db,
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER, end INTEGER, "
        "shortName TEXT);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(5,6,'ncclDevKernel_Broadcast_RING_LL');");
    sqlite3_close(db);
    assert_int_equal(fs_import_nsys_read(path, "h", &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "TARGET_INFO_SESSION_START_TIME"));
    assert_non_null(strstr(err, "CUPTI_ACTIVITY_KIND_KERNEL row 1:")); /* where it stopped */
    fs_imp_batch_free(&b);
    unlink(path);

    assert_int_equal(fs_import_nsys_read("/nonexistent/x.sqlite", "h", &b, err, sizeof err), -1);
}

/* NVTX message sizes from DYNAMIC_NVTXPAYLOAD_* tables joined on eventId: an integer size
   is taken (the least of two for one event), a non-integer one and a table without a
   "Message size" column are not, and a range without a payload has no size. */
/* A session-relative time that overflows int64_t once placed on the session start is
   refused, naming the row (was signed overflow). */
static void
test_time_out_of_range(void **state)
{
    (void)state;
    char path[256], err[512] = "";
    temp_path(path, sizeof path, "range");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(db, "CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER);"
                 "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES(9000000000000000000);"
                 "CREATE TABLE NVTX_EVENTS(start INTEGER, end INTEGER, eventType INTEGER, "
                 "text TEXT, domainId INTEGER, eventId INTEGER);"
                 "INSERT INTO NVTX_EVENTS VALUES(1000000000000000000,1000000000000000000,59,"
                 "'ncclAllReduce',0,1);");
    sqlite3_close(db);
    struct fs_imp_batch b = {0};
    assert_int_equal(fs_import_nsys_read(path, "h", &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "NVTX_EVENTS row 1: "));
    assert_non_null(strstr(err, "out of range"));
    fs_imp_batch_free(&b);
    unlink(path);
}

static void
test_message_sizes(void **state)
{
    (void)state;
    char path[256], err[512];
    temp_path(path, sizeof path, "payload");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_sql(db, "CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER);"
                 "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES(1796236354000000000);"
                 "CREATE TABLE NVTX_EVENTS(start INTEGER, end INTEGER, eventType INTEGER, "
                 "text TEXT, domainId INTEGER, eventId INTEGER);"
                 "INSERT INTO NVTX_EVENTS VALUES(10,20,59,'ncclAllReduce',0,1);"
                 "INSERT INTO NVTX_EVENTS VALUES(30,40,59,'ncclAllGather',0,2);"
                 "INSERT INTO NVTX_EVENTS VALUES(50,60,59,'ncclBroadcast',0,3);"
                 "INSERT INTO NVTX_EVENTS VALUES(70,80,59,'ncclReduce',0,4);"
                 "INSERT INTO NVTX_EVENTS VALUES(90,95,59,'app_step',0,5);"
                 "CREATE TABLE DYNAMIC_NVTXPAYLOAD_1(eventId INTEGER, \"Message size (bytes)\" "
                 "INTEGER);"
                 "INSERT INTO DYNAMIC_NVTXPAYLOAD_1 VALUES(1, 1048576);"
                 "INSERT INTO DYNAMIC_NVTXPAYLOAD_1 VALUES(2, 'big');"
                 "INSERT INTO DYNAMIC_NVTXPAYLOAD_1 VALUES(5, 64);"
                 "CREATE TABLE DYNAMIC_NVTXPAYLOAD_2(eventId INTEGER, \"Message size\" INTEGER);"
                 "INSERT INTO DYNAMIC_NVTXPAYLOAD_2 VALUES(3, 8192);"
                 "INSERT INTO DYNAMIC_NVTXPAYLOAD_2 VALUES(3, 4096);"
                 "CREATE TABLE DYNAMIC_NVTXPAYLOAD_3(eventId INTEGER, count INTEGER);"
                 "INSERT INTO DYNAMIC_NVTXPAYLOAD_3 VALUES(4, 7);");
    sqlite3_close(db);
    struct fs_imp_batch b = {0};
    assert_int_equal(fs_import_nsys_read(path, "h", &b, err, sizeof err), 0);
    assert_int_equal(b.n, 4); /* the NCCL ranges, each once */
    int64_t i = find_event(&b, "nccl.nvtx", "ncclAllReduce");
    assert_true(i >= 0);
    assert_string_equal(attr(&b.ev[i], "message_size_bytes"), "1048576");
    assert_true(b.ev[i].start_ns == SESSION + 10);
    i = find_event(&b, "nccl.nvtx", "ncclAllGather");
    assert_true(i >= 0);
    assert_null(attr(&b.ev[i], "message_size_bytes"));
    i = find_event(&b, "nccl.nvtx", "ncclBroadcast");
    assert_true(i >= 0);
    assert_string_equal(attr(&b.ev[i], "message_size_bytes"), "4096");
    i = find_event(&b, "nccl.nvtx", "ncclReduce");
    assert_true(i >= 0);
    assert_null(attr(&b.ev[i], "message_size_bytes"));
    fs_imp_batch_free(&b);
    unlink(path);
}

static void
test_kernel_names(void **state)
{
    (void)state;
    char c[64];
    assert_int_equal(
        fs_nccl_kernel_collective("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", c, sizeof c), 0);
    assert_string_equal(c, "AllReduce");
    assert_int_equal(fs_nccl_kernel_collective("ncclDevKernel_AllGatherV_RING_LL", c, sizeof c), 0);
    assert_string_equal(c, "AllGatherV");
    assert_int_equal(fs_nccl_kernel_collective("ncclDevKernel_Generic", c, sizeof c), 0);
    assert_string_equal(c, "Generic");
    assert_int_equal(fs_nccl_kernel_collective(
                         "void ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)", c, sizeof c),
                     0);
    assert_string_equal(c, "Broadcast");
    assert_int_equal(fs_nccl_kernel_collective(
                         "_Z25ncclKernel_AllReduce_RING_LL_Sum_floatP11ncclDevComm", c, sizeof c),
                     0);
    assert_string_equal(c, "AllReduce");
    assert_int_equal(fs_nccl_kernel_collective("gemm_kernel", c, sizeof c), -1);
    assert_int_equal(fs_nccl_kernel_collective("ncclDevKernel_", c, sizeof c), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_current_schema),
        cmocka_unit_test(test_older_schema_and_normalized_times),
        cmocka_unit_test(test_corrupt_and_foreign_files),
        cmocka_unit_test(test_message_sizes),
        cmocka_unit_test(test_time_out_of_range),
        cmocka_unit_test(test_kernel_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
