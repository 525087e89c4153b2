/* The agent's on-disk spool (see spool.h). */
#include "hostagent/spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostagent/safefile.h"
#include "util/errf.h"
#include "util/file.h"
#include "util/log.h"

/* "<seq>-<events>.json": 0 with both parsed, -1 for any other name. */
static int
parse_name(const char *n, uint64_t *seq, size_t *events)
{
    unsigned long long a, b;
    int used = 0;
    if (sscanf(n, "%20llu-%20llu.json%n", &a, &b, &used) != 2 || n[used] != '\0' ||
        strlen(n) != (size_t)used)
        return -1;
    *seq = a;
    *events = (size_t)b;
    return 0;
}

/* Appends an entry at the tail of the index. 0 or -1 (no memory). */
static int
push(struct fs_spool *s, const char *name, uint64_t seq, size_t events, uint64_t size)
{
    if (s->head + s->files == s->cap) {
        if (s->head) { /* room freed at the head: reused before growing */
            memmove(s->q, s->q + s->head, s->files * sizeof *s->q);
            s->head = 0;
        } else {
            size_t cap = s->cap ? s->cap * 2 : 64;
            void *p = realloc(s->q, cap * sizeof *s->q);
            if (!p)
                return -1;
            s->q = p;
            s->cap = cap;
        }
    }
    struct fs_spool_entry *e = &s->q[s->head + s->files];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->seq = seq;
    e->events = events;
    e->size = size;
    s->files++;
    s->events += events;
    s->bytes += size;
    return 0;
}

static int
by_seq(const void *x, const void *y)
{
    const struct fs_spool_entry *a = x, *b = y;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int
file_size(const struct fs_spool *s, const char *name, uint64_t *size)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    if (lstat(path, &st) != 0)
        return -1;
    *size = (uint64_t)st.st_size;
    return 0;
}

int
fs_spool_open(struct fs_spool *s, const char *dir, uint64_t max_bytes, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->max_bytes = max_bytes;
    if (!(s->dir = strdup(dir))) {
        fs_errf(err, errlen, "out of memory");
        return -1;
    }
    if (fs_agent_private_dir(dir, true, err, errlen) != 0)
        goto fail;
    /* The index, once: the only listing of the directory. */
    DIR *d = opendir(dir);
    struct dirent *de;
    if (!d) {
        fs_errf(err, errlen, "%s: %s", dir, strerror(errno));
        goto fail;
    }
    while ((de = readdir(d))) {
        uint64_t seq = 0, size;
        size_t ev = 0;
        if (strncmp(de->d_name, ".tmp-", 5) == 0 || strstr(de->d_name, ".json.tmp.")) {
            /* A body a crash interrupted (fs_file_replace's name, or an older agent's):
             * its batch was not spooled. */
            char tmp[4400];
            snprintf(tmp, sizeof tmp, "%s/%s", dir, de->d_name);
            unlink(tmp);
            continue;
        }
        if (parse_name(de->d_name, &seq, &ev) != 0 || file_size(s, de->d_name, &size) != 0)
            continue;
        if (push(s, de->d_name, seq, ev, size) != 0) {
            closedir(d);
            fs_errf(err, errlen, "out of memory");
            goto fail;
        }
        if (seq >= s->next_seq)
            s->next_seq = seq + 1;
    }
    closedir(d);
    if (s->files > 1)
        qsort(s->q, s->files, sizeof *s->q, by_seq);
    return 0;
fail:
    fs_spool_close(s);
    return -1;
}

void
fs_spool_close(struct fs_spool *s)
{
    free(s->dir);
    free(s->q);
    memset(s, 0, sizeof *s);
}

/* Drops the oldest file, counted. 0, or -1 when there was none. */
static int
drop_oldest(struct fs_spool *s)
{
    char err[256], name[sizeof s->q->name];
    if (!s->files)
        return -1;
    size_t ev = s->q[s->head].events;
    snprintf(name, sizeof name, "%s", s->q[s->head].name);
    if (fs_spool_remove(s, name, err, sizeof err) != 0)
        return -1;
    s->dropped_events += ev;
    s->dropped_files++;
    fs_log(FS_LOG_WARN, "agent",
           "spool full (spool.max_bytes %" PRIu64 "): dropped its oldest batch of %zu "
           "events (%" PRIu64 " events dropped since start)",
           s->max_bytes, ev, s->dropped_events);
    return 0;
}

int
fs_spool_put(struct fs_spool *s, const char *body, size_t len, size_t n_events, char *err,
             size_t errlen)
{
    char path[4096];
    if (len > s->max_bytes) {
        s->dropped_events += n_events;
        s->dropped_files++;
        fs_log(FS_LOG_WARN, "agent",
               "a batch of %zu events (%zu bytes) exceeds spool.max_bytes: "
               "dropped",
               n_events, len);
        return 0;
    }
    while (s->files && s->bytes + len > s->max_bytes)
        if (drop_oldest(s) != 0)
            break;
    char name[sizeof s->q->name];
    snprintf(name, sizeof name, "%020" PRIu64 "-%zu.json", s->next_seq, n_events);
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    /* Room in the index first: a body on disk the index does not hold is not posted. */
    if (s->head + s->files == s->cap && !s->head) {
        void *p = realloc(s->q, (s->cap ? s->cap * 2 : 64) * sizeof *s->q);
        if (!p) {
            fs_errf(err, errlen, "spooling to %s: out of memory", s->dir);
            return -1;
        }
        s->q = p;
        s->cap = s->cap ? s->cap * 2 : 64;
    }
    /* Written beside under a name of its own, then renamed (util/file.h): nothing planted
     * under a predictable name is written, and a crash leaves no half body. */
    char why[512];
    if (fs_file_replace(path, body, len, 0600, why, sizeof why) != 0) {
        fs_errf(err, errlen, "spooling to %s: %s", s->dir, why);
        return -1;
    }
    (void)push(s, name, s->next_seq, n_events, len); /* has room (above) */
    s->next_seq++;
    return 0;
}

/* Takes the head entry out of the index (its file is gone or removed). */
static void
pop(struct fs_spool *s)
{
    const struct fs_spool_entry *e = &s->q[s->head];
    s->bytes -= e->size < s->bytes ? e->size : s->bytes;
    s->events -= e->events < s->events ? e->events : s->events;
    s->files--;
    s->head = s->files ? s->head + 1 : 0;
}

int
fs_spool_oldest(struct fs_spool *s, char **body, size_t *len, size_t *n_events, char *name,
                size_t namelen, char *err, size_t errlen)
{
    int rc = -1;
    *body = NULL;
    if (!s->files)
        return 0;
    const struct fs_spool_entry *e = &s->q[s->head];
    snprintf(name, namelen, "%s", e->name);
    *n_events = e->events;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", s->dir, e->name);
    struct stat st;
    int fd = fs_agent_open_regular(path, &st, err, errlen);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd < 0) {
        /* Not one the agent wrote (a symlink, a FIFO): removed, or it blocks the spool;
         * one removed behind the agent's back leaves the index too. */
        if (unlink(path) == 0 || errno == ENOENT) {
            fs_log(FS_LOG_WARN, "agent", "%s: removed from the spool", err);
            pop(s);
            return 0;
        }
    } else if (!f) {
        close(fd);
        fs_errf(err, errlen, "%s: %s", path, strerror(errno));
    } else if (!(*body = malloc((size_t)st.st_size + 1))) {
        fs_errf(err, errlen, "out of memory");
    } else if (fread(*body, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        fs_errf(err, errlen, "%s: short read", path);
        free(*body);
        *body = NULL;
    } else {
        (*body)[st.st_size] = '\0';
        *len = (size_t)st.st_size;
        rc = 1;
    }
    if (f)
        fclose(f);
    return rc;
}

int
fs_spool_remove(struct fs_spool *s, const char *name, char *err, size_t errlen)
{
    char path[4096];
    size_t i = 0;
    while (i < s->files && strcmp(s->q[s->head + i].name, name) != 0)
        i++;
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    if (unlink(path) != 0 && !(errno == ENOENT && i < s->files)) {
        fs_errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (i == s->files)
        return 0; /* not indexed (it is not the agent's): nothing to count */
    if (i) {      /* not the oldest (the agent removes only that): moved to the head */
        struct fs_spool_entry e = s->q[s->head + i];
        memmove(&s->q[s->head + 1], &s->q[s->head], i * sizeof e);
        s->q[s->head] = e;
    }
    pop(s);
    return 0;
}
