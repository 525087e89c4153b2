/* What the host agent, as root, opens in directories: a state or spool directory another
 * user could write is refused, and a symlink planted where it writes or reads (the
 * spool's temporary file, a spooled batch, the tail's state, an NCCL Inspector log) is
 * neither followed nor written through: the file it points at stays as it was. */
#include <errno.h>
#include <fcntl.h>
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

#include "hostagent/spool.h"
#include "hostagent/tail.h"

#define REC(sn)                                                                                    \
    "{\"header\":{\"id\":\"0x1\",\"rank\":0,\"n_ranks\":2},\"metadata\":{\"dump_timestamp_us\":"   \
    "1796236355900000,\"hostname\":\"g\"},\"event_trace_ts\":{\"coll_start_ts\":1796236355000000}" \
    ",\"coll_perf\":{\"coll\":\"AllReduce\",\"coll_sn\":" #sn ",\"coll_exec_time_us\":2500}}\n"

static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *
read_text(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void
shared_dir_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-files-XXXXXX", err[600];
    assert_non_null(mkdtemp(dir));
    struct fs_spool s;
    /* World-writable (as /tmp is): refused, saying why and the fix. */
    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(fs_spool_open(&s, dir, 1 << 20, err, sizeof err), -1);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "writable by its group or by others"));
    assert_int_equal(chmod(dir, 0770), 0);
    assert_int_equal(fs_spool_open(&s, dir, 1 << 20, err, sizeof err), -1);
    /* Another owner. */
    assert_int_equal(chmod(dir, 0750), 0);
    if (geteuid() == 0) {
        assert_int_equal(chown(dir, 65534, 65534), 0);
        assert_int_equal(fs_spool_open(&s, dir, 1 << 20, err, sizeof err), -1);
        print_message("%s\n", err);
        assert_non_null(strstr(err, "belongs to uid 65534"));
        assert_int_equal(chown(dir, 0, 0), 0);
    }
    /* The agent's own, not writable by others: taken. */
    assert_int_equal(fs_spool_open(&s, dir, 1 << 20, err, sizeof err), 0);
    fs_spool_close(&s);
    rmdir(dir);
}

static void
spool_symlinks_not_followed(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-files-XXXXXX", err[600], victim[4200], link[4200], name[300];
    assert_non_null(mkdtemp(dir));
    snprintf(victim, sizeof victim, "%s.victim", dir);
    write_file(victim, "root's file\n");
    struct fs_spool s;
    /* Bodies a crash interrupted (an older agent's name and fs_file_replace's): removed
     * at open, never taken as batches. */
    char left[4200], left_old[4200];
    snprintf(left, sizeof left, "%s/00000000000000000001-1.json.tmp.Ab12Cd", dir);
    snprintf(left_old, sizeof left_old, "%s/.tmp-Xy34Zw", dir);
    write_file(left, "{\"events\":[");
    write_file(left_old, "{\"events\":[");
    assert_int_equal(fs_spool_open(&s, dir, 1 << 20, err, sizeof err), 0);
    struct stat lst;
    assert_int_equal(lstat(left, &lst), -1);
    assert_int_equal(lstat(left_old, &lst), -1);
    /* Where an older spool wrote its temporary file (a predictable name): not written
     * through (the body goes to a name of its own, util/file.h). */
    snprintf(link, sizeof link, "%s/.tmp-%ld", dir, (long)getpid());
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(fs_spool_put(&s, "{\"events\":[]}", 13, 1, err, sizeof err), 0);
    assert_string_equal(read_text(victim), "root's file\n");
    unlink(link);
    /* A spooled batch replaced by a symlink: not read (nor posted), removed. */
    char *body = NULL;
    size_t len = 0, n = 0;
    assert_int_equal(fs_spool_oldest(&s, &body, &len, &n, name, sizeof name, err, sizeof err), 1);
    free(body);
    snprintf(link, sizeof link, "%s/%s", dir, name);
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink(victim, link), 0);
    body = NULL;
    int r = fs_spool_oldest(&s, &body, &len, &n, name, sizeof name, err, sizeof err);
    assert_true(r <= 0);
    assert_null(body);
    struct stat st;
    assert_int_equal(lstat(link, &st), -1);
    assert_string_equal(read_text(victim), "root's file\n");
    fs_spool_close(&s);
    unlink(victim);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void
tail_symlinks_not_followed(void **state)
{
    (void)state;
    char logs[] = "/tmp/fs-files-XXXXXX", st_dir[] = "/tmp/fs-files-XXXXXX", err[600];
    char secret[4200], link[4200], victim[4200];
    assert_non_null(mkdtemp(logs));
    assert_non_null(mkdtemp(st_dir));
    /* A file only root reads, in NCCL Inspector's format, linked into the logs. */
    snprintf(secret, sizeof secret, "%s.secret", logs);
    write_file(secret, REC(1) REC(2));
    assert_int_equal(chmod(secret, 0600), 0);
    snprintf(link, sizeof link, "%s/a.log", logs);
    assert_int_equal(symlink(secret, link), 0);
    snprintf(link, sizeof link, "%s/b.log", logs);
    write_file(link, REC(3));
    struct fs_tail t;
    assert_int_equal(fs_tail_open(&t, logs, st_dir, err, sizeof err), 0);
    struct fs_imp_batch b = {0};
    struct fs_tail_pos pos;
    assert_int_equal(fs_tail_next(&t, "h", 1 << 20, &b, &pos, err, sizeof err), 1);
    /* b.log's record only. */
    assert_int_equal(b.n, 1);
    fs_imp_batch_free(&b);
    /* The state's temporary file of an older agent (a predictable name) planted as a
     * symlink: not written through; the state is written beside under a name of its own. */
    snprintf(victim, sizeof victim, "%s.victim", st_dir);
    write_file(victim, "root's file\n");
    snprintf(link, sizeof link, "%s/nccl-tail.json.tmp", st_dir);
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(fs_tail_commit(&t, &pos, err, sizeof err), 0);
    assert_string_equal(read_text(victim), "root's file\n");
    fs_tail_close(&t);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s %s.secret %s.victim", logs, st_dir, logs, st_dir);
    assert_int_equal(system(cmd), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shared_dir_refused),
        cmocka_unit_test(spool_symlinks_not_followed),
        cmocka_unit_test(tail_symlinks_not_followed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
