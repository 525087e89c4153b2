/* The host agent's parts under volume: a job writing 1 MiB of bad lines ("x\n", 524,288
 * of them) gives one warning, not one per line, and every line is still counted; the
 * tail's file table forgets logs that are gone (a job's logs come and go); a spool of
 * 20,000 batches left by an outage is posted (oldest, remove) in linear time: within 10 s
 * where listing the directory for each batch took minutes. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostagent/spool.h"
#include "hostagent/tail.h"
#include "util/log.h"

static void
rm_rf(const char *dir)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void
write_text(const char *path, const char *text, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

/* Lines of file path that contain s. */
static size_t
count_lines(const char *path, const char *s)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    size_t n = 0;
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        n += strstr(line, s) != NULL;
    fclose(f);
    return n;
}

/* Runs the tail over dir until nothing is new, its log (stderr) into logpath. */
static void
drain_logged(struct fs_tail *t, const char *logpath)
{
    char err[256];
    fflush(stderr);
    int saved = dup(2), fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    int r;
    do {
        struct fs_imp_batch b = {0};
        struct fs_tail_pos pos;
        r = fs_tail_next(t, "h", 1 << 20, &b, &pos, err, sizeof err);
        fs_imp_batch_free(&b);
        if (r == 1)
            r = fs_tail_commit(t, &pos, err, sizeof err) == 0 ? 1 : -1;
    } while (r == 1);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_int_equal(r, 0);
}

static void
tail_bad_lines_rate_limited(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-tailscale-XXXXXX", path[300], logpath[300], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/job.log", dir);
    snprintf(logpath, sizeof logpath, "%s/agent.err", dir);
    size_t len = 1u << 20;
    char *junk = malloc(len);
    assert_non_null(junk);
    for (size_t i = 0; i < len; i += 2) {
        junk[i] = 'x';
        junk[i + 1] = '\n';
    }
    write_text(path, junk, len);
    free(junk);
    struct fs_tail t;
    assert_int_equal(fs_tail_open(&t, dir, dir, err, sizeof err), 0);
    drain_logged(&t, logpath);
    assert_int_equal(t.lines_bad, len / 2);
    size_t warned = count_lines(logpath, "level=warn");
    printf("1 MiB of bad lines: %llu counted, %zu warning line(s)\n",
           (unsigned long long)t.lines_bad, warned);
    assert_int_equal(warned, 1);
    fs_tail_close(&t);
    rm_rf(dir);
}

static void
tail_forgets_vanished_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-tailscale-XXXXXX", path[300], logpath[300], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(logpath, sizeof logpath, "%s/agent.err", dir);
    struct fs_tail t;
    assert_int_equal(fs_tail_open(&t, dir, dir, err, sizeof err), 0);
    /* 200 jobs, one after the other, each with a log removed when it ends. */
    for (int i = 0; i < 200; i++) {
        snprintf(path, sizeof path, "%s/job-%d.log", dir, i);
        write_text(path, "x\n", 2);
        drain_logged(&t, logpath);
        assert_int_equal(unlink(path), 0);
    }
    snprintf(path, sizeof path, "%s/last.log", dir);
    write_text(path, "x\n", 2);
    drain_logged(&t, logpath);
    assert_int_equal(t.lines_bad, 201);
    assert_int_equal(t.n, 1); /* last.log only */
    fs_tail_close(&t);
    rm_rf(dir);
}

static double
secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define SPOOLED 20000

static void
spool_flush_linear(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-spoolscale-XXXXXX", path[400], err[256], name[300];
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0700), 0);
    /* What an outage left: SPOOLED bodies, written as the agent names them. */
    for (int i = 0; i < SPOOLED; i++) {
        snprintf(path, sizeof path, "%s/%020d-1.json", dir, i);
        write_text(path, "{}", 2);
    }
    struct fs_spool s;
    double t0 = secs();
    assert_int_equal(fs_spool_open(&s, dir, 1ull << 30, err, sizeof err), 0);
    assert_int_equal(s.files, SPOOLED);
    /* Behind them, one more put while the rest waits. */
    assert_int_equal(fs_spool_put(&s, "{\"x\":1}", 7, 3, err, sizeof err), 0);
    size_t posted = 0, events = 0;
    for (;;) {
        char *body;
        size_t len, n;
        int r = fs_spool_oldest(&s, &body, &len, &n, name, sizeof name, err, sizeof err);
        assert_true(r >= 0);
        if (r == 0)
            break;
        if (posted < SPOOLED) { /* oldest first */
            char want[64];
            snprintf(want, sizeof want, "%020zu-1.json", posted);
            assert_string_equal(name, want);
        }
        free(body);
        events += n;
        assert_int_equal(fs_spool_remove(&s, name, err, sizeof err), 0);
        posted++;
    }
    double took = secs() - t0;
    printf("spool of %d batches opened and flushed in %.2f s\n", SPOOLED + 1, took);
    assert_int_equal(posted, SPOOLED + 1);
    assert_int_equal(events, SPOOLED + 3);
    assert_int_equal(s.files, 0);
    assert_int_equal(s.bytes, 0);
    assert_true(took < 10.0);
    fs_spool_close(&s);
    rm_rf(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tail_bad_lines_rate_limited),
        cmocka_unit_test(tail_forgets_vanished_files),
        cmocka_unit_test(spool_flush_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
