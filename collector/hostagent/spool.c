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

static int
is_spooled(const struct dirent *d)
{
    uint64_t s;
    size_t e;
    return parse_name(d->d_name, &s, &e) == 0;
}

/* The spooled names in order (scandir's list; the caller frees). -1 with err. */
static int
list(const struct fs_spool *s, struct dirent ***names, char *err, size_t errlen)
{
    int n = scandir(s->dir, names, is_spooled, alphasort);
    if (n < 0)
        fs_errf(err, errlen, "%s: %s", s->dir, strerror(errno));
    return n;
}

static void
free_list(struct dirent **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
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
    struct dirent **names = NULL;
    memset(s, 0, sizeof *s);
    s->max_bytes = max_bytes;
    if (!(s->dir = strdup(dir))) {
        fs_errf(err, errlen, "out of memory");
        return -1;
    }
    if (fs_agent_private_dir(dir, true, err, errlen) != 0)
        goto fail;
    /* A temporary file is a body a crash interrupted: its batch was not spooled. */
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strncmp(de->d_name, ".tmp-", 5) == 0) {
            char tmp[4400];
            snprintf(tmp, sizeof tmp, "%s/%s", dir, de->d_name);
            unlink(tmp);
        }
    if (d)
        closedir(d);
    int n = list(s, &names, err, errlen);
    if (n < 0)
        goto fail;
    for (int i = 0; i < n; i++) {
        uint64_t seq = 0, size;
        size_t ev = 0;
        (void)parse_name(names[i]->d_name, &seq, &ev);
        if (file_size(s, names[i]->d_name, &size) != 0)
            continue;
        s->bytes += size;
        s->files++;
        s->events += ev;
        if (seq >= s->next_seq)
            s->next_seq = seq + 1;
    }
    free_list(names, n);
    return 0;
fail:
    fs_spool_close(s);
    return -1;
}

void
fs_spool_close(struct fs_spool *s)
{
    free(s->dir);
    memset(s, 0, sizeof *s);
}

/* Drops the oldest file, counted. 0, or -1 when there was none. */
static int
drop_oldest(struct fs_spool *s)
{
    struct dirent **names = NULL;
    char err[256], name[300];
    int n = list(s, &names, err, sizeof err), rc = -1;
    if (n > 0) {
        uint64_t seq = 0;
        size_t ev = 0;
        snprintf(name, sizeof name, "%s", names[0]->d_name);
        (void)parse_name(name, &seq, &ev);
        if (fs_spool_remove(s, name, err, sizeof err) == 0) {
            s->dropped_events += ev;
            s->dropped_files++;
            fs_log(FS_LOG_WARN, "agent",
                   "spool full (spool.max_bytes %" PRIu64 "): dropped its oldest batch of %zu "
                   "events (%" PRIu64 " events dropped since start)",
                   s->max_bytes, ev, s->dropped_events);
            rc = 0;
        }
    }
    if (n >= 0)
        free_list(names, n);
    return rc;
}

int
fs_spool_put(struct fs_spool *s, const char *body, size_t len, size_t n_events, char *err,
             size_t errlen)
{
    char path[4096], tmp[4200];
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
    snprintf(path, sizeof path, "%s/%020" PRIu64 "-%zu.json", s->dir, s->next_seq, n_events);
    /* A name of its own (O_EXCL): nothing planted under a predictable one is written. */
    snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", s->dir);
    errno = 0;
    int fd = mkostemp(tmp, O_CLOEXEC);
    size_t done = 0;
    while (fd >= 0 && done < len) {
        ssize_t w = write(fd, body + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (fd < 0 || done < len || fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        fs_errf(err, errlen, "spooling to %s: %s", s->dir, strerror(errno ? errno : EIO));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return -1;
    }
    s->next_seq++;
    s->files++;
    s->events += n_events;
    s->bytes += len;
    return 0;
}

int
fs_spool_oldest(struct fs_spool *s, char **body, size_t *len, size_t *n_events, char *name,
                size_t namelen, char *err, size_t errlen)
{
    struct dirent **names = NULL;
    int n = list(s, &names, err, errlen), rc = -1;
    *body = NULL;
    if (n <= 0) {
        rc = n;
        goto out;
    }
    uint64_t seq = 0;
    snprintf(name, namelen, "%s", names[0]->d_name);
    (void)parse_name(name, &seq, n_events);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    struct stat st;
    int fd = fs_agent_open_regular(path, &st, err, errlen);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd < 0) {
        /* Not one the agent wrote (a symlink, a FIFO): removed, or it blocks the spool. */
        if (unlink(path) == 0) {
            fs_log(FS_LOG_WARN, "agent", "%s: removed from the spool", err);
            s->files -= s->files ? 1 : 0;
            s->events -= *n_events < s->events ? *n_events : s->events;
            rc = 0;
            goto out;
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
out:
    if (n >= 0)
        free_list(names, n);
    return rc;
}

int
fs_spool_remove(struct fs_spool *s, const char *name, char *err, size_t errlen)
{
    char path[4096];
    uint64_t size = 0, seq;
    size_t ev = 0;
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    (void)file_size(s, name, &size);
    (void)parse_name(name, &seq, &ev);
    if (unlink(path) != 0) {
        fs_errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    s->bytes -= size < s->bytes ? size : s->bytes;
    s->files -= s->files ? 1 : 0;
    s->events -= ev < s->events ? ev : s->events;
    return 0;
}
