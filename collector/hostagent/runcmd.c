/* The agent's configured command (see runcmd.h). */
#include "hostagent/runcmd.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"

static int64_t
wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

bool
fs_runcmd_running(const struct fs_runcmd *r)
{
    return r->pid > 0;
}

int
fs_runcmd_start(struct fs_runcmd *r, char *const argv[], uint64_t max_output, int64_t win_start_ns,
                int64_t win_end_ns, char *err, size_t errlen)
{
    int out[2] = {-1, -1}, errp[2] = {-1, -1};
    fs_buf_free(&r->out);
    memset(r, 0, sizeof *r);
    r->out_fd = r->err_fd = -1;
    fs_buf_init(&r->out, (size_t)max_output + 1); /* + its NUL */
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "command: pipe: %s", strerror(errno));
        goto fail;
    }
    r->start_mono_us = fs_monotonic_us();
    r->start_ns = wall_ns();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "command: fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        /* Its own process group: a timeout kills whatever it started too. */
        setpgid(0, 0);
        dup2(out[1], 1);
        dup2(errp[1], 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        if (win_end_ns) {
            char a[32], z[32];
            snprintf(a, sizeof a, "%" PRId64, win_start_ns);
            snprintf(z, sizeof z, "%" PRId64, win_end_ns);
            setenv("FS_WINDOW_START_NS", a, 1);
            setenv("FS_WINDOW_END_NS", z, 1);
        }
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[0], argv);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* both sides: no race with the first kill */
    r->pid = pid;
    close(out[1]);
    close(errp[1]);
    r->out_fd = out[0];
    r->err_fd = errp[0];
    fcntl(r->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(r->err_fd, F_SETFL, O_NONBLOCK);
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        close_fd(&out[i]);
        close_fd(&errp[i]);
    }
    return -1;
}

/* The group outlives its leader while a member (a backgrounded grandchild) runs, and its
 * id is not handed out again while it has members: killing it after the leader is reaped
 * stays within what the command started. */
static void
kill_group(struct fs_runcmd *r)
{
    if (r->pid > 0 && (!r->reaped || r->out_fd >= 0 || r->err_fd >= 0))
        kill(-r->pid, SIGKILL);
}

/* Reads fd until it would block; at its end closes it. */
static void
drain(struct fs_runcmd *r, int *fd, bool is_out)
{
    char chunk[65536];
    while (*fd >= 0) {
        ssize_t n = read(*fd, chunk, sizeof chunk);
        if (n > 0) {
            if (!is_out) {
                size_t room = sizeof r->err_text - 1 - r->err_len;
                size_t k = (size_t)n < room ? (size_t)n : room;
                memcpy(r->err_text + r->err_len, chunk, k);
                r->err_len += k;
                r->err_text[r->err_len] = '\0';
                continue;
            }
            size_t room = r->out.max - 1 - r->out.len;
            if ((size_t)n > room) {
                /* The bound: keep what fits, stop the run. */
                fs_buf_append(&r->out, chunk, room);
                r->cut = true;
                kill_group(r);
                close_fd(fd);
                return;
            }
            if (!fs_buf_append(&r->out, chunk, (size_t)n)) {
                r->cut = true;
                kill_group(r);
                close_fd(fd);
                return;
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        close_fd(fd); /* end of file, or an error: nothing more comes */
    }
}

int
fs_runcmd_step(struct fs_runcmd *r, int64_t timeout_us, int wait_ms)
{
    if (r->pid <= 0)
        return 1;
    struct pollfd p[2];
    nfds_t n = 0;
    if (r->out_fd >= 0)
        p[n++] = (struct pollfd){.fd = r->out_fd, .events = POLLIN};
    if (r->err_fd >= 0)
        p[n++] = (struct pollfd){.fd = r->err_fd, .events = POLLIN};
    /* With both pipes closed (a command that redirected its output) nothing wakes a
     * poll: wait anyway, or the caller's loop spins until the child exits. */
    (void)poll(n ? p : NULL, n, wait_ms);
    drain(r, &r->out_fd, true);
    drain(r, &r->err_fd, false);
    /* The timeout holds for the whole run: a grandchild that keeps the pipes open after
     * the child was reaped is killed with its group, and what escaped the group (setsid)
     * is no longer read. */
    if (!r->timed_out && timeout_us != INT64_MAX &&
        fs_monotonic_us() - r->start_mono_us >= timeout_us) {
        r->timed_out = true;
        kill_group(r);
    }
    if (r->timed_out && r->reaped) {
        drain(r, &r->out_fd, true);
        drain(r, &r->err_fd, false);
        close_fd(&r->out_fd);
        close_fd(&r->err_fd);
    }
    if (!r->reaped) {
        int ws;
        pid_t w = waitpid(r->pid, &ws, WNOHANG);
        if (w == r->pid || (w < 0 && errno == ECHILD)) {
            r->reaped = true;
            r->status = w == r->pid ? ws : 0;
        }
    }
    if (!r->reaped || r->out_fd >= 0 || r->err_fd >= 0)
        return 0;
    r->end_ns = wall_ns();
    r->pid = 0;
    return 1;
}

void
fs_runcmd_kill(struct fs_runcmd *r)
{
    if (r->pid <= 0)
        return;
    /* A run already killed for its timeout ended by it: reported as such (once). */
    r->stopped = !r->timed_out;
    kill_group(r);
    /* The group is dead: the pipes reach their end (unless something left the group). */
    int64_t until = fs_monotonic_us() + 2000000;
    while (fs_runcmd_step(r, INT64_MAX, 50) == 0) {
        if (fs_monotonic_us() > until) {
            close_fd(&r->out_fd);
            close_fd(&r->err_fd);
        }
    }
}

void
fs_runcmd_describe(const struct fs_runcmd *r, char *out, size_t outlen)
{
    if (r->timed_out)
        snprintf(out, outlen, "killed after command.timeout");
    else if (r->stopped)
        snprintf(out, outlen, "stopped with the agent");
    else if (r->cut)
        snprintf(out, outlen, "killed: output beyond command.max_output_bytes (%zu bytes)",
                 r->out.max - 1);
    else if (WIFEXITED(r->status))
        snprintf(out, outlen, "exited with status %d", WEXITSTATUS(r->status));
    else if (WIFSIGNALED(r->status))
        snprintf(out, outlen, "killed by signal %d", WTERMSIG(r->status));
    else
        snprintf(out, outlen, "ended (wait status %d)", r->status);
}

void
fs_runcmd_free(struct fs_runcmd *r)
{
    fs_runcmd_kill(r);
    close_fd(&r->out_fd);
    close_fd(&r->err_fd);
    fs_buf_free(&r->out);
}
