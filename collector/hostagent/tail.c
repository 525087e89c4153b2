/* Live tail of NCCL Inspector logs (see tail.h). */
#include "hostagent/tail.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "hostagent/safefile.h"
#include "importers/import_nccl_inspector.h"
#include "util/clock.h"
#include "util/errf.h"
#include "util/file.h"
#include "util/log.h"

/* One bad line skipped (what: where and why, for the log): counted, and logged if no
 * warning went out within FS_TAIL_BAD_REPORT_US, with the count of those not logged. */
static void
bad_line(struct fs_tail *t, const char *what)
{
    int64_t now = fs_monotonic_us();
    t->lines_bad++;
    if (t->bad_reported_us && now - t->bad_reported_us < FS_TAIL_BAD_REPORT_US) {
        t->bad_unreported++;
        fs_log(FS_LOG_DEBUG, "agent", "%s", what);
        return;
    }
    if (t->bad_unreported)
        fs_log(FS_LOG_WARN, "agent",
               "%s (and %" PRIu64 " more bad lines skipped since the last such warning; "
               "at most one a minute, nccl_lines_bad_total counts them all)",
               what, t->bad_unreported);
    else
        fs_log(FS_LOG_WARN, "agent", "%s (the next ones are reported at most once a minute)", what);
    t->bad_unreported = 0;
    t->bad_reported_us = now;
}

static struct fs_tail_file *
find(struct fs_tail *t, const char *name, size_t *idx)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->f[i].name, name) == 0) {
            *idx = i;
            return &t->f[i];
        }
    return NULL;
}

static struct fs_tail_file *
add(struct fs_tail *t, const char *name, size_t *idx)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        void *p = realloc(t->f, cap * sizeof *t->f);
        if (!p)
            return NULL;
        t->f = p;
        t->cap = cap;
    }
    struct fs_tail_file *f = &t->f[t->n];
    memset(f, 0, sizeof *f);
    if (!(f->name = strdup(name)))
        return NULL;
    *idx = t->n++;
    return f;
}

static int
read_state(struct fs_tail *t, char *err, size_t errlen)
{
    struct stat lst;
    if (lstat(t->state_path, &lst) != 0 && errno == ENOENT)
        return 0;
    char why[600];
    int fd = fs_agent_open_regular(t->state_path, NULL, why, sizeof why);
    if (fd < 0) {
        fs_errf(err, errlen, "%s (remove it to read every log again)", why);
        return -1;
    }
    struct json_object *j = json_object_from_fd(fd), *files;
    close(fd);
    int rc = -1;
    if (!j || !json_object_object_get_ex(j, "files", &files) ||
        !json_object_is_type(files, json_type_array)) {
        fs_errf(err, errlen, "%s: not a tail state file (remove it to read every log again)",
                t->state_path);
        goto out;
    }
    for (size_t i = 0; i < json_object_array_length(files); i++) {
        struct json_object *o = json_object_array_get_idx(files, i), *name, *dev, *ino, *off;
        size_t idx;
        if (!json_object_object_get_ex(o, "name", &name) ||
            !json_object_object_get_ex(o, "dev", &dev) ||
            !json_object_object_get_ex(o, "ino", &ino) ||
            !json_object_object_get_ex(o, "offset", &off))
            continue;
        /* A log that is gone (the job's process ended and the file was removed) leaves
         * the state here, so the state does not grow with every process ever run. */
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", t->dir, json_object_get_string(name));
        if (stat(path, &st) != 0)
            continue;
        struct fs_tail_file *f = add(t, json_object_get_string(name), &idx);
        if (!f) {
            fs_errf(err, errlen, "out of memory");
            goto out;
        }
        f->dev = (uint64_t)json_object_get_int64(dev);
        f->ino = (uint64_t)json_object_get_int64(ino);
        f->offset = (uint64_t)json_object_get_int64(off);
    }
    rc = 0;
out:
    json_object_put(j);
    return rc;
}

int
fs_tail_open(struct fs_tail *t, const char *dir, const char *state_dir, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    size_t l = strlen(state_dir) + 32;
    t->dir = strdup(dir);
    t->state_path = malloc(l);
    if (!t->dir || !t->state_path) {
        fs_errf(err, errlen, "out of memory");
        fs_tail_close(t);
        return -1;
    }
    snprintf(t->state_path, l, "%s/nccl-tail.json", state_dir);
    if (read_state(t, err, errlen) != 0) {
        fs_tail_close(t);
        return -1;
    }
    return 0;
}

void
fs_tail_close(struct fs_tail *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->f[i].name);
    free(t->f);
    free(t->dir);
    free(t->state_path);
    memset(t, 0, sizeof *t);
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Parses lines [0, len) of text one by one: a line that is not JSON (a torn write by a
 * crashed process) is logged and skipped rather than stopping the tail for good. */
static int
parse_lines(struct fs_tail *t, const char *path, const char *text, size_t len, const char *host,
            struct fs_imp_batch *b, char *err, size_t errlen)
{
    size_t skipped = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (text + i)) + 1 : len - i;
        size_t before = b->n;
        char why[512];
        if (fs_import_nccl_inspector_read(text + i, l, path, host, b, &skipped, why, sizeof why) !=
            0) {
            if (b->n != before || strstr(why, "out of memory")) {
                fs_errf(err, errlen, "%s", why);
                return -1;
            }
            char what[1200];
            /* a long path cuts the message short: it is a warning */
            if (snprintf(what, sizeof what,
                         "%s at offset %zu: skipped a line that is not JSON (%s)", path, i,
                         why) < 0)
                what[0] = '\0';
            bad_line(t, what);
        }
        i += l;
    }
    return 0;
}

int
fs_tail_next(struct fs_tail *t, const char *host, size_t max_bytes, struct fs_imp_batch *b,
             struct fs_tail_pos *pos, char *err, size_t errlen)
{
    DIR *d = opendir(t->dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    if (!d) {
        fs_errf(err, errlen, "%s: %s", t->dir, strerror(errno));
        return -1;
    }
    while ((de = readdir(d)) && rc == 0) {
        if (!fs_nccl_inspector_is_log_name(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            void *p = realloc(names, cap * sizeof *names);
            if (!p) {
                rc = -1;
                break;
            }
            names = p;
        }
        if (!(names[n] = strdup(de->d_name)))
            rc = -1;
        else
            n++;
    }
    closedir(d);
    if (rc != 0) {
        fs_errf(err, errlen, "out of memory");
        goto out;
    }
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_str);
    /* Files gone from dir leave the table (a job's logs come and go: it would grow with
     * every process ever run). Before any index into it is handed out. */
    size_t kept = 0;
    for (size_t i = 0; i < t->n; i++) {
        const char *key = t->f[i].name;
        if (n && bsearch(&key, names, n, sizeof *names, cmp_str))
            t->f[kept++] = t->f[i];
        else
            free(t->f[i].name);
    }
    t->n = kept;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", t->dir, names[i]);
        /* The job's user writes this directory: a symlink there (to a file only root
         * reads) is not followed, a FIFO not blocked on. */
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        size_t idx;
        struct fs_tail_file *f = find(t, names[i], &idx);
        if (!f && !(f = add(t, names[i], &idx))) {
            close(fd);
            fs_errf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        uint64_t from = f->offset;
        if (f->dev != (uint64_t)st.st_dev || f->ino != (uint64_t)st.st_ino) {
            if (f->dev || f->ino)
                fs_log(FS_LOG_INFO, "agent", "%s is a new file: read from its start", path);
            from = 0;
        } else if ((uint64_t)st.st_size < from) {
            fs_log(FS_LOG_WARN, "agent", "%s was truncated: read from its start", path);
            from = 0;
        }
        if ((uint64_t)st.st_size <= from) {
            close(fd);
            continue;
        }
        size_t want = (size_t)((uint64_t)st.st_size - from);
        if (want > max_bytes)
            want = max_bytes;
        char *buf = malloc(want);
        ssize_t got = buf ? pread(fd, buf, want, (off_t)from) : -1;
        close(fd);
        if (got < 0) {
            fs_errf(err, errlen, "%s: %s", path, buf ? strerror(errno) : "out of memory");
            free(buf);
            rc = -1;
            break;
        }
        /* Only complete lines: the writer may be in the middle of one. */
        size_t end = (size_t)got;
        while (end && buf[end - 1] != '\n')
            end--;
        if (end == 0 && (size_t)got == max_bytes) {
            /* No record is that long (the importer refuses such lines too): skip this
             * part of it, or the tail would stop here for good; its rest is skipped as
             * a line that is not JSON. */
            free(buf);
            char what[4300];
            snprintf(what, sizeof what,
                     "%s at offset %" PRIu64 ": a line longer than %zu bytes: skipped", path, from,
                     max_bytes);
            bad_line(t, what);
            *pos = (struct fs_tail_pos){idx, (uint64_t)st.st_dev, (uint64_t)st.st_ino, from + got};
            rc = 1;
            break;
        }
        if (end == 0) {
            free(buf);
            continue;
        }
        rc = parse_lines(t, path, buf, end, host, b, err, errlen);
        free(buf);
        if (rc == 0) {
            *pos = (struct fs_tail_pos){idx, (uint64_t)st.st_dev, (uint64_t)st.st_ino, from + end};
            rc = 1;
        }
    }
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int
fs_tail_commit(struct fs_tail *t, const struct fs_tail_pos *pos, char *err, size_t errlen)
{
    struct fs_tail_file *f = &t->f[pos->file];
    f->dev = pos->dev;
    f->ino = pos->ino;
    f->offset = pos->offset;
    struct json_object *j = json_object_new_object(), *a = json_object_new_array();
    int rc = -1;
    if (!j || !a) {
        json_object_put(a);
        fs_errf(err, errlen, "out of memory");
        goto out;
    }
    json_object_object_add(j, "files", a);
    for (size_t i = 0; i < t->n; i++) {
        struct json_object *o = json_object_new_object();
        if (!o)
            continue;
        json_object_object_add(o, "name", json_object_new_string(t->f[i].name));
        json_object_object_add(o, "dev", json_object_new_int64((int64_t)t->f[i].dev));
        json_object_object_add(o, "ino", json_object_new_int64((int64_t)t->f[i].ino));
        json_object_object_add(o, "offset", json_object_new_int64((int64_t)t->f[i].offset));
        json_object_array_add(a, o);
    }
    /* Written whole or not at all: a restart reads either this state or the previous. */
    size_t tl = 0;
    const char *text = json_object_to_json_string_length(j, JSON_C_TO_STRING_PLAIN, &tl);
    char why[512];
    if (fs_file_replace(t->state_path, text, tl, 0640, why, sizeof why) != 0) {
        fs_errf(err, errlen, "%s: %s", t->state_path, why);
        goto out;
    }
    rc = 0;
out:
    json_object_put(j);
    return rc;
}
