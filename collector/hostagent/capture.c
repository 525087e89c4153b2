/* Predicted captures (see capture.h). */
#include "hostagent/capture.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "hostagent/safefile.h"
#include "importers/command.h"
#include "importers/import_perf.h"
#include "util/errf.h"

static bool
listed(char **v, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

static const char *
str_of(struct json_object *o, const char *key)
{
    struct json_object *m;
    if (!json_object_object_get_ex(o, key, &m) || !json_object_is_type(m, json_type_string))
        return NULL;
    return json_object_get_string(m);
}

static bool
follows(const struct fs_agent_cfg *cfg, struct json_object *series)
{
    if (!cfg->n_targets && !cfg->n_rules)
        return true;
    for (size_t i = 0; i < json_object_array_length(series); i++) {
        struct json_object *s = json_object_array_get_idx(series, i);
        if (listed(cfg->targets, cfg->n_targets, str_of(s, "target")))
            return true;
        const char *rule = str_of(s, "rule");
        if (rule && *rule && listed(cfg->rules, cfg->n_rules, rule))
            return true;
    }
    return false;
}

int
fs_capture_pick(const char *json, const struct fs_agent_cfg *cfg, int64_t not_before_ns,
                int64_t *next_ns, char *what, size_t whatlen, char *err, size_t errlen)
{
    struct json_object *j = json_tokener_parse(json), *data, *rec;
    int rc = -1;
    if (errlen)
        err[0] = '\0';
    if (!j || !json_object_object_get_ex(j, "data", &data) ||
        !json_object_object_get_ex(data, "recurring", &rec) ||
        !json_object_is_type(rec, json_type_array)) {
        fs_errf(err, errlen, "GET /api/v1/incidents: an answer without data.recurring");
        goto out;
    }
    rc = 0;
    for (size_t i = 0; i < json_object_array_length(rec); i++) {
        struct json_object *g = json_object_array_get_idx(rec, i), *series, *next;
        if (!json_object_object_get_ex(g, "series", &series) ||
            !json_object_is_type(series, json_type_array) ||
            !json_object_object_get_ex(g, "next_expected", &next) || !follows(cfg, series))
            continue;
        /* Seconds with µs, as put_time writes them: exact in a double to the µs. A
         * number only, finite and within FS_CAPTURE_MAX_AHEAD_NS: anything else would be a
         * window decades away or an overflow on the way to ns. */
        double sec = json_object_get_double(next);
        if ((!json_object_is_type(next, json_type_double) &&
             !json_object_is_type(next, json_type_int)) ||
            !isfinite(sec) || sec < 0 || sec > FS_CAPTURE_MAX_SECONDS) {
            fs_errf(err, errlen, "GET /api/v1/incidents: next_expected %.40s refused (not a time)",
                    json_object_to_json_string(next));
            continue;
        }
        int64_t ns = (int64_t)llround(sec * 1e6) * 1000;
        if (ns < not_before_ns)
            continue;
        if (ns - not_before_ns > FS_CAPTURE_MAX_AHEAD_NS) {
            fs_errf(err, errlen,
                    "GET /api/v1/incidents: next_expected %.0f s ahead refused (at most %.0f s)",
                    (double)(ns - not_before_ns) / 1e9, (double)FS_CAPTURE_MAX_AHEAD_NS / 1e9);
            continue;
        }
        if (rc == 1 && ns >= *next_ns)
            continue;
        *next_ns = ns;
        const char *text = str_of(g, "text");
        snprintf(what, whatlen, "%s", text ? text : "a recurring incident");
        rc = 1;
    }
out:
    json_object_put(j);
    return rc;
}

uint64_t
fs_capture_overshoot(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_CONF), page = sysconf(_SC_PAGESIZE);
    return (uint64_t)(cpus > 0 ? cpus : 1) * FS_CAPTURE_MMAP_PAGES *
           (uint64_t)(page > 0 ? page : 4096);
}

pid_t
fs_capture_start(const struct fs_agent_cfg *cfg, const char *raw, int64_t duration_us,
                 uint64_t max_bytes, char *err, size_t errlen)
{
    char secs[32], log[4200], size[48];
    const char *argv[64];
    size_t n = 0;
    snprintf(secs, sizeof secs, "%.3f", (double)duration_us / 1e6);
    snprintf(log, sizeof log, "%s.log", raw);
    argv[n++] = cfg->perf;
    argv[n++] = "record";
    argv[n++] = "-k";
    argv[n++] = "mono";
    for (size_t i = 0; i < cfg->n_events && n < 50; i++) {
        argv[n++] = "-e";
        argv[n++] = cfg->events[i];
    }
    char pages[16];
    snprintf(pages, sizeof pages, "%d", FS_CAPTURE_MMAP_PAGES);
    argv[n++] = "-a";
    argv[n++] = "-m";
    argv[n++] = pages;
    argv[n++] = "-o";
    argv[n++] = raw;
    /* perf stops the session there (its own headers come on top: see capture.h). */
    snprintf(size, sizeof size, "--max-size=%" PRIu64 "K", max_bytes >> 10);
    argv[n++] = size;
    argv[n++] = "--";
    argv[n++] = "sleep";
    argv[n++] = secs;
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        fs_errf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = fs_agent_create(log, 0640);
        int nul = open("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
        }
        if (nul >= 0)
            dup2(nul, 0);
        /* perf stops (and writes its file) on SIGINT, which the agent sends on stop. */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvp(argv[0], (char *const *)argv);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

/* What perf's stderr says, and the fix for the refusals it knows. */
static void
diagnose(const char *log, const char *raw, char *err, size_t errlen)
{
    char text[2048] = "", line[512];
    int fd = fs_agent_open_regular(log, NULL, line, sizeof line);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    size_t n = 0;
    while (f && fgets(line, sizeof line, f)) {
        size_t l = strlen(line);
        if (n + l < sizeof text - 1) {
            memcpy(text + n, line, l);
            n += l;
            text[n] = '\0';
        }
    }
    if (f)
        fclose(f);
    for (size_t i = 0; i < n; i++)
        if (text[i] == '\n' || text[i] == '\t')
            text[i] = ' ';
    const char *fix = "";
    if (strstr(text, "ermission") || strstr(text, "perf_event_paranoid") ||
        strstr(text, "EACCES") || strstr(text, "not permitted"))
        fix = "fix: run the agent as root, or give it CAP_PERFMON (CAP_SYS_ADMIN on kernels "
              "before 5.8) and read access to /sys/kernel/tracing, or set "
              "kernel.perf_event_paranoid to -1; ";
    else if (strstr(text, "event syntax error") || strstr(text, "nknown tracepoint") ||
             strstr(text, "not found"))
        fix = "fix: this kernel lacks a tracepoint of capture.events (see `perf list "
              "tracepoint`) or tracefs is not mounted; ";
    else if (strstr(text, "cannot run"))
        fix = "fix: install perf (linux-perf) or set capture.perf; ";
    fs_errf(err, errlen, "perf record into %s failed: %s%.600s", raw, fix,
            text[0] ? text : "(it said nothing)");
}

/* perf record stopped at --max-size (it then ends its workload, sleep, with SIGTERM and
 * exits non-zero): a bounded capture, not a failure. */
static bool
limit_reached(const char *log)
{
    char text[8192], why[256];
    int fd = fs_agent_open_regular(log, NULL, why, sizeof why);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return false;
    text[n] = '\0';
    return strstr(text, "size limit reached") != NULL;
}

int
fs_capture_import(const struct fs_agent_cfg *cfg, const char *raw, int ws, bool interrupted,
                  fs_capture_sink sink, void *ctx, size_t *events, char *err, size_t errlen)
{
    char log[4200], why[600];
    int fds[2] = {-1, -1};
    FILE *f = NULL;
    char *line = NULL;
    struct fs_imp_batch b = {0};
    struct fs_perf_stream st;
    pid_t pid = -1;
    int rc = -1;
    *events = 0;
    snprintf(log, sizeof log, "%s.log", raw);
    bool exited_ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    if ((!exited_ok && !interrupted && !limit_reached(log)) || access(raw, R_OK) != 0) {
        diagnose(log, raw, err, errlen);
        return -1;
    }
    if (!(line = malloc(FS_CAPTURE_LINE_MAX)) || pipe(fds) != 0) {
        fs_errf(err, errlen, "perf script of %s: %s", raw,
                line ? strerror(errno) : "out of memory");
        goto out;
    }
    if ((pid = fork()) < 0) {
        fs_errf(err, errlen, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        int lfd = open(log, O_WRONLY | O_APPEND | O_NOFOLLOW);
        dup2(fds[1], 1);
        if (lfd >= 0)
            dup2(lfd, 2);
        close(fds[0]);
        /* --ns: two events in one µs would otherwise be identical, and the collector
         * keeps identical events once. */
        execlp(cfg->perf, cfg->perf, "script", "--header", "--ns", "-i", raw, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    fds[1] = -1;
    /* Streamed through a pipe, a line at a time, handed on every FS_CAPTURE_PIECE_EVENTS
     * events: perf script of a large capture is gigabytes, the agent holds one piece. */
    if (!(f = fdopen(fds[0], "r"))) {
        fs_errf(err, errlen, "perf script of %s: %s", raw, strerror(errno));
        goto reap;
    }
    fds[0] = -1;
    fs_perf_stream_init(&st, NULL);
    rc = 0;
    while (rc == 0 && fgets(line, FS_CAPTURE_LINE_MAX, f)) {
        size_t l = strlen(line);
        if (l == FS_CAPTURE_LINE_MAX - 1 && line[l - 1] != '\n') {
            int ch; /* longer than any sample: skipped whole */
            while ((ch = getc(f)) != EOF && ch != '\n')
                ;
            continue;
        }
        if (fs_perf_stream_line(&st, line, l, cfg->host, &b, why, sizeof why) < 0) {
            fs_errf(err, errlen, "perf script of %s: %s", raw, why);
            rc = -1;
        } else if (b.n >= FS_CAPTURE_PIECE_EVENTS) {
            rc = sink(ctx, &b, err, errlen);
            *events += rc == 0 ? b.n : 0;
            fs_imp_batch_free(&b);
        }
    }
    if (rc == 0 && b.n) {
        rc = sink(ctx, &b, err, errlen);
        *events += rc == 0 ? b.n : 0;
    }
    if (rc == 0 && st.lines > 0 && st.events == 0) {
        fs_errf(err, errlen, "perf script of %s: none of %zu lines is a tracepoint sample", raw,
                st.lines);
        rc = -1;
    }
    if (rc != 0 && !feof(f))
        kill(pid, SIGTERM); /* what it still writes is not read */
reap:;
    int wst = 0;
    if (f)
        fclose(f);
    f = NULL;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
        ;
    if (rc == 0 && (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0)) {
        diagnose(log, raw, err, errlen);
        rc = -1;
    }
out:
    if (f)
        fclose(f);
    if (fds[0] >= 0)
        close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
    fs_imp_batch_free(&b);
    free(line);
    return rc;
}

void
fs_capture_hook(const struct fs_agent_cfg *cfg, const char *phase, int64_t start_ns, int64_t end_ns)
{
    if (!cfg->hook)
        return;
    /* Forked twice: the hook belongs to init, and the agent has no child to reap but
     * perf (a hook may run as long as it likes). */
    pid_t pid = fork();
    if (pid > 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return;
    }
    if (pid < 0)
        return;
    if (fork() != 0)
        _exit(0);
    char a[32], z[32];
    snprintf(a, sizeof a, "%" PRId64, start_ns);
    snprintf(z, sizeof z, "%" PRId64, end_ns);
    setenv("FS_WINDOW_START_NS", a, 1);
    setenv("FS_WINDOW_END_NS", z, 1);
    setenv("FS_WINDOW_PHASE", phase, 1);
    execl("/bin/sh", "sh", "-c", cfg->hook, (char *)NULL);
    _exit(127);
}
