/*
 * onyx-replay: a canned-answer ONYX CLI for fleet benchmarks (test code, never shipped).
 *
 * One interactive session on stdin/stdout, as sshd's ForceCommand, speaking like
 * onyx_sim.py with its default scenario options: the `Mellanox Switch` banner, prompts
 * `switch-sim [standalone: master] > ` / `# ` / `(config) # `, the "cli" echo (each
 * command line echoed when it is read, so pipelined commands are answered in turn),
 * `enable` without a password, `configure terminal`, `exit`, paging commands accepted
 * (it never pages), `% Unrecognized command "x".` for what it does not know. A pty is put
 * in raw mode, as the simulator does.
 *
 * Every other command is answered at once from a table recorded from onyx_sim.py
 * (onyx_record.py), mapped read-only so that hundreds of sessions share one copy:
 *
 *   onyx-replay-table 1 SNAPSHOTS\n
 *   then records: "SNAP CMDLEN OUTLEN\n" CMD OUT   (CMD without newline; OUT as the
 *                                                  simulator printed it, CRLF line ends)
 *
 * A table holds SNAPSHOTS recordings of the switch, the same commands at successive
 * times. The session answers from snapshot min(polls - 1, SNAPSHOTS - 1), polls being the
 * `show version` commands seen so far (once per poll; clock probes send only `show
 * clock`), so counters move between polls and then stand still. `show clock` is answered
 * from the real clock (UTC, in the simulator's layout), so clock probing sees a clock.
 *
 *   onyx-replay TABLE
 * Exits 0 at end of input or `exit` in user/enable mode; 1 when the table is unusable.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define HOST "switch-sim [standalone: master] "

struct entry {
    int snap;
    const char *cmd, *out;
    size_t cmd_len, out_len;
};

struct table {
    struct entry *e; /* owned (malloc); the strings point into the mapping */
    size_t n;
    int snapshots;
};

/* Parses the mapped table; 0 or -1 with a message on stderr. */
static int
table_load(const char *map, size_t size, struct table *t)
{
    const char *p = map, *end = map + size;
    const char *nl = memchr(p, '\n', size);
    size_t cap = 0;
    if (!nl || sscanf(p, "onyx-replay-table 1 %d", &t->snapshots) != 1 || t->snapshots < 1) {
        fprintf(stderr, "onyx-replay: not a table (first line)\n");
        return -1;
    }
    p = nl + 1;
    while (p < end) {
        int snap;
        size_t cl, ol;
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || sscanf(p, "%d %zu %zu", &snap, &cl, &ol) != 3 || cl > (size_t)(end - nl - 1) ||
            ol > (size_t)(end - nl - 1) - cl) {
            fprintf(stderr, "onyx-replay: bad record at byte %zu\n", (size_t)(p - map));
            return -1;
        }
        if (t->n == cap) {
            cap = cap ? cap * 2 : 256;
            struct entry *ne = realloc(t->e, cap * sizeof(*ne));
            if (!ne) {
                fprintf(stderr, "onyx-replay: out of memory\n");
                return -1;
            }
            t->e = ne;
        }
        t->e[t->n++] = (struct entry){snap, nl + 1, nl + 1 + cl, cl, ol};
        p = nl + 1 + cl + ol;
    }
    return 0;
}

static const struct entry *
table_find(const struct table *t, int snap, const char *cmd, size_t len)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].snap == snap && t->e[i].cmd_len == len && !memcmp(t->e[i].cmd, cmd, len))
            return &t->e[i];
    return NULL;
}

/* Writes all of iov; exits when the peer is gone (the session is over). */
static void
write_all(struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(1, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            exit(0);
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

/* Collapses runs of blanks to one space and trims, as the simulator does. */
static size_t
normalize(const char *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    int gap = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        if (in[i] == ' ' || in[i] == '\t') {
            gap = o > 0;
            continue;
        }
        if (gap && o + 2 < cap)
            out[o++] = ' ';
        gap = 0;
        out[o++] = in[i];
    }
    out[o] = '\0';
    return o;
}

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: onyx-replay TABLE\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
        fprintf(stderr, "onyx-replay: %s: %s\n", argv[1], fd < 0 ? strerror(errno) : "empty");
        return 1;
    }
    const char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    struct table t = {0};
    int rc = 0;
    if (map == MAP_FAILED || table_load(map, (size_t)st.st_size, &t) != 0) {
        rc = 1;
        goto out;
    }
    struct termios tio;
    if (isatty(0) && tcgetattr(0, &tio) == 0) {
        cfmakeraw(&tio);
        tcsetattr(0, TCSANOW, &tio);
    }
    enum { USER, ENABLE, CONFIG } mode = USER;
    static const char *const prompts[] = {HOST "> ", HOST "# ", HOST "(config) # "};
    int versions = 0;
    char in[65536], cmd[4096], text[512];
    size_t have = 0, pos = 0;
    struct iovec iov[4] = {{"Mellanox Switch\r\n\r\n", 19}};
    write_all(iov, 1);
    for (;;) {
        iov[0] = (struct iovec){(void *)prompts[mode], strlen(prompts[mode])};
        write_all(iov, 1);
        /* the next line (CR, LF or CRLF ends it) */
        char *eol;
        for (;;) {
            eol = NULL;
            for (size_t i = pos; i < have; i++)
                if (in[i] == '\r' || in[i] == '\n') {
                    eol = in + i;
                    break;
                }
            if (eol)
                break;
            if (pos > 0) {
                memmove(in, in + pos, have - pos);
                have -= pos;
                pos = 0;
            }
            if (have == sizeof(in))
                have = 0; /* a line longer than any command: dropped */
            ssize_t r = read(0, in + have, sizeof(in) - have);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                goto out;
            have += (size_t)r;
        }
        const char *line = in + pos;
        size_t len = (size_t)(eol - line);
        pos = (size_t)(eol - in) + 1;
        if (*eol == '\r' && pos < have && in[pos] == '\n')
            pos++;
        size_t n = normalize(line, len, cmd, sizeof(cmd));
        iov[0] = (struct iovec){(void *)line, len};
        iov[1] = (struct iovec){"\r\n", 2};
        if (n == 0) {
            write_all(iov, 2);
            continue;
        }
        if (!strcmp(cmd, "enable") || !strcmp(cmd, "en") || !strcmp(cmd, "ena")) {
            mode = mode == USER ? ENABLE : mode;
            write_all(iov, 2);
            continue;
        }
        if (!strcmp(cmd, "disable")) {
            mode = USER;
            write_all(iov, 2);
            continue;
        }
        if (!strcmp(cmd, "exit")) {
            write_all(iov, 2);
            if (mode != CONFIG)
                goto out;
            mode = ENABLE;
            continue;
        }
        if (!strcmp(cmd, "configure terminal") && mode != USER) {
            mode = CONFIG;
            write_all(iov, 2);
            continue;
        }
        if (!strcmp(cmd, "no cli session paging enable") ||
            !strcmp(cmd, "cli session paging enable") || !strncmp(cmd, "terminal length ", 16) ||
            !strncmp(cmd, "terminal width ", 15)) {
            write_all(iov, 2);
            continue;
        }
        if (!strcmp(cmd, "show clock")) {
            time_t now = time(NULL);
            struct tm tm;
            gmtime_r(&now, &tm);
            int k = snprintf(text, sizeof(text),
                             "Time:       %02d:%02d:%02d\r\nDate:       %04d/%02d/%02d\r\n"
                             "Time zone:  UTC (Etc/UTC)\r\nUTC offset: same as UTC\r\n",
                             tm.tm_hour, tm.tm_min, tm.tm_sec, tm.tm_year + 1900, tm.tm_mon + 1,
                             tm.tm_mday);
            iov[2] = (struct iovec){text, (size_t)k};
            write_all(iov, 3);
            continue;
        }
        if (!strcmp(cmd, "show version"))
            versions++;
        int snap = versions > 0 ? versions - 1 : 0;
        if (snap >= t.snapshots)
            snap = t.snapshots - 1;
        const struct entry *e = table_find(&t, snap, cmd, n);
        if (e) {
            iov[2] = (struct iovec){(void *)e->out, e->out_len};
            write_all(iov, 3);
            continue;
        }
        /* the simulator names the first word (after `show`) */
        const char *w = cmd;
        if (!strncmp(w, "show ", 5))
            w += 5;
        int k = snprintf(text, sizeof(text),
                         "%% Unrecognized command \"%.*s\".\r\nType \"?\" for help.\r\n",
                         (int)strcspn(w, " "), w);
        iov[2] = (struct iovec){text, (size_t)k < sizeof(text) ? (size_t)k : sizeof(text) - 1};
        write_all(iov, 3);
    }
out:
    free(t.e);
    return rc;
}
