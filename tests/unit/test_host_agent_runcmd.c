/* The host agent's configured command (hostagent/runcmd.h) run the way the agent's loop
 * runs it (fs_runcmd_step with a 50 ms wait until it says the run is over):
 *   - a command that closes its own pipes (a script starting `exec >>FILE 2>&1`) is waited
 *     for without spinning: the loop's CPU time stays a small part of the run's length;
 *   - a grandchild that keeps the pipes open after the command exited is killed at the
 *     timeout, with the command's process group, and the run ends. */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostagent/runcmd.h"
#include "util/clock.h"

static double
cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* pid runs (exists and is not a zombie). */
static bool
alive(pid_t pid)
{
    char p[64], line[512];
    snprintf(p, sizeof p, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    bool run = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    const char *st = strrchr(line, ')');
    return run && st && st[1] == ' ' && st[2] != 'Z' && st[2] != 'X';
}

/* Steps r as the agent does until it is over or deadline_us passes; 1 when over. */
static int
run_until(struct fs_runcmd *r, int64_t timeout_us, int64_t deadline_us)
{
    int64_t until = fs_monotonic_us() + deadline_us;
    while (fs_monotonic_us() < until)
        if (fs_runcmd_step(r, timeout_us, 50) == 1)
            return 1;
    return 0;
}

static void
closed_pipes_do_not_spin(void **state)
{
    (void)state;
    char err[256];
    struct fs_runcmd r = {0};
    /* 1.5 s with both pipes closed (to /dev/null) from its first line. */
    char *argv[] = {"/bin/sh", "-c", "exec >/dev/null 2>&1; sleep 1.5; exit 0", NULL};
    assert_int_equal(fs_runcmd_start(&r, argv, 1 << 16, 0, 0, err, sizeof err), 0);
    double c0 = cpu_s();
    int64_t t0 = fs_monotonic_us();
    assert_int_equal(run_until(&r, 30000000, 20000000), 1);
    double wall = (double)(fs_monotonic_us() - t0) / 1e6, cpu = cpu_s() - c0;
    print_message("closed pipes: %.2f s of run, %.3f s of CPU in the loop\n", wall, cpu);
    assert_true(wall >= 1.0);
    /* A spinning loop burns the whole run (1.5 s); a waiting one next to nothing. */
    assert_true(cpu < 0.2 * wall);
    assert_false(r.timed_out);
    assert_true(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
    fs_runcmd_free(&r);
}

static void
grandchild_killed_at_timeout(void **state)
{
    (void)state;
    char err[256], pidfile[] = "/tmp/fs-runcmd-XXXXXX";
    int fd = mkstemp(pidfile);
    assert_true(fd >= 0);
    close(fd);
    char script[512];
    /* The command exits at once; its background child holds stdout and stderr for 60 s. */
    snprintf(script, sizeof script, "sleep 60 & echo $! >%s; echo started; exit 0", pidfile);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct fs_runcmd r = {0};
    assert_int_equal(fs_runcmd_start(&r, argv, 1 << 16, 0, 0, err, sizeof err), 0);
    int64_t t0 = fs_monotonic_us();
    /* Timeout 1 s: over within a few seconds, not after the grandchild's 60 s. */
    assert_int_equal(run_until(&r, 1000000, 15000000), 1);
    double wall = (double)(fs_monotonic_us() - t0) / 1e6;
    print_message("grandchild holding the pipes: run over after %.2f s (timeout 1 s)\n", wall);
    assert_true(wall >= 0.9 && wall < 5.0);
    assert_true(r.timed_out);
    assert_non_null(r.out.data);
    assert_non_null(strstr(r.out.data, "started"));
    FILE *f = fopen(pidfile, "r");
    long gc = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld", &gc), 1);
    fclose(f);
    unlink(pidfile);
    /* Killed (SIGKILL to the group): gone, or a zombie where init does not reap. */
    int64_t until = fs_monotonic_us() + 10000000;
    while (alive((pid_t)gc) && fs_monotonic_us() < until) {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    assert_false(alive((pid_t)gc));
    fs_runcmd_free(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(closed_pipes_do_not_spin),
        cmocka_unit_test(grandchild_killed_at_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
