/* NCCL Inspector JSON-lines reader (see import_nccl_inspector.h). */
#include "importers/import_nccl_inspector.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "importers/client.h"
#include "importers/command.h"
#include "util/errf.h"

/* The longest line read; a file is read through a buffer a little larger. */
#define LINE_MAX_BYTES ((size_t)1 << 20)
#define LINE_BUF (LINE_MAX_BYTES + (64 << 10))

static struct json_object *
member(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static bool
get_i64(struct json_object *o, const char *key, int64_t *v)
{
    struct json_object *m = member(o, key);
    if (!m || !json_object_is_type(m, json_type_int))
        return false;
    *v = json_object_get_int64(m);
    return true;
}

static const char *
get_str(struct json_object *o, const char *key)
{
    struct json_object *m = member(o, key);
    return m && json_object_is_type(m, json_type_string) ? json_object_get_string(m) : NULL;
}

static bool
get_num(struct json_object *o, const char *key, double *v)
{
    struct json_object *m = member(o, key);
    if (!m || !(json_object_is_type(m, json_type_double) || json_object_is_type(m, json_type_int)))
        return false;
    *v = json_object_get_double(m);
    return true;
}

/* The largest time or end in µs that still has a nanosecond value (about year 2262). */
#define MAX_US (INT64_MAX / 1000)

/* One record; 1 added, 0 not a record, -1 with why (a time out of range, no memory). */
static int
record(struct json_object *o, const char *host, struct fs_imp_batch *b, char *why, size_t whylen)
{
    struct json_object *header = member(o, "header"), *meta = member(o, "metadata");
    struct json_object *perf = member(o, "coll_perf");
    const char *p = "coll";
    if (!perf) {
        perf = member(o, "p2p_perf");
        p = "p2p";
    }
    if (!perf || !json_object_is_type(perf, json_type_object))
        return 0;
    char key[64];
    snprintf(key, sizeof key, "%s", p);
    const char *op = get_str(perf, key);
    int64_t exec_us;
    snprintf(key, sizeof key, "%s_exec_time_us", p);
    if (!op || !*op || !get_i64(perf, key, &exec_us) || exec_us < 0)
        return 0;
    const char *hn = host ? host : get_str(meta, "hostname");
    if (!hn || !*hn)
        return 0;
    /* Placement: the verbose trace's start, else ending at the dump time. */
    int64_t start_us = 0, dump_us;
    bool exact = false;
    struct json_object *trace = member(o, "event_trace_ts");
    snprintf(key, sizeof key, "%s_start_ts", p);
    if (trace && get_i64(trace, key, &start_us) && start_us > 0)
        exact = true;
    else if (get_i64(meta, "dump_timestamp_us", &dump_us) && dump_us > exec_us)
        start_us = dump_us - exec_us;
    else
        return 0;
    /* Range-checked before scaling to ns: a start or an end past MAX_US is no time. */
    if (start_us > MAX_US || exec_us > MAX_US - start_us) {
        fs_errf(why, whylen, "%s%s %" PRId64 " with %s_exec_time_us %" PRId64 ": out of range",
                exact ? p : "", exact ? "_start_ts" : "dump_timestamp_us",
                exact ? start_us : start_us + exec_us, p, exec_us);
        return -1;
    }
    int64_t start_ns = start_us * 1000, end_ns = (start_us + exec_us) * 1000;
    struct fs_imp_event *e = fs_imp_add(b, hn, "nccl.inspector", op, start_ns, end_ns);
    if (!e) {
        fs_errf(why, whylen, "out of memory");
        return -1;
    }
    int64_t iv;
    double dv;
    const char *sv;
    int rc = 0;
    if (get_i64(header, "rank", &iv))
        rc |= fs_imp_attr_int(e, "rank", iv);
    if (get_i64(header, "n_ranks", &iv))
        rc |= fs_imp_attr_int(e, "n_ranks", iv);
    if ((sv = get_str(header, "id")))
        rc |= fs_imp_attr_str(e, "comm", sv);
    if ((sv = get_str(header, "comm_name")))
        rc |= fs_imp_attr_str(e, "comm_name", sv);
    snprintf(key, sizeof key, "%s_sn", p);
    if (get_i64(perf, key, &iv))
        rc |= fs_imp_attr_int(e, "sn", iv);
    snprintf(key, sizeof key, "%s_msg_size_bytes", p);
    if (get_i64(perf, key, &iv))
        rc |= fs_imp_attr_int(e, "msg_size_bytes", iv);
    rc |= fs_imp_attr_int(e, "exec_time_us", exec_us);
    snprintf(key, sizeof key, "%s_timing_source", p);
    if ((sv = get_str(perf, key)))
        rc |= fs_imp_attr_str(e, "timing_source", sv);
    snprintf(key, sizeof key, "%s_algobw_gbs", p);
    if (get_num(perf, key, &dv))
        rc |= fs_imp_attr_double(e, "algobw_gbs", dv);
    snprintf(key, sizeof key, "%s_busbw_gbs", p);
    if (get_num(perf, key, &dv))
        rc |= fs_imp_attr_double(e, "busbw_gbs", dv);
    if (strcmp(p, "p2p") == 0 && get_i64(perf, "p2p_peer", &iv))
        rc |= fs_imp_attr_int(e, "peer", iv);
    rc |= fs_imp_attr_str(e, "placement", exact ? "trace" : "dump_time");
    if (rc)
        fs_errf(why, whylen, "out of memory");
    return rc ? -1 : 1;
}

/* One line (lineno of name): 1 an event added, 0 none (blank, or not a record: counted in
 *skipped), -1 with err (not JSON, too long, no memory). */
static int
read_line(struct json_tokener *tok, const char *line, size_t l, const char *name, size_t lineno,
          const char *host, struct fs_imp_batch *b, size_t *skipped, char *err, size_t errlen)
{
    size_t a = 0;
    while (a < l && (line[a] == ' ' || line[a] == '\t' || line[a] == '\r'))
        a++;
    if (a == l)
        return 0;
    if (l > LINE_MAX_BYTES) {
        fs_errf(err, errlen, "%s:%zu: line longer than 1 MiB", name, lineno);
        return -1;
    }
    json_tokener_reset(tok);
    struct json_object *o = json_tokener_parse_ex(tok, line, (int)l);
    enum json_tokener_error je = json_tokener_get_error(tok);
    if (!o || je != json_tokener_success) {
        fs_errf(err, errlen, "%s:%zu: not JSON: %s", name, lineno,
                je == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(je));
        json_object_put(o);
        return -1;
    }
    char why[160] = "";
    int r = record(o, host, b, why, sizeof why);
    json_object_put(o);
    if (r < 0)
        fs_errf(err, errlen, "%s:%zu: %s", name, lineno, why);
    else if (r == 0)
        (*skipped)++;
    return r;
}

int
fs_import_nccl_inspector_read(const char *text, size_t len, const char *name, const char *host,
                              struct fs_imp_batch *b, size_t *skipped, char *err, size_t errlen)
{
    struct json_tokener *tok = json_tokener_new();
    if (!tok) {
        fs_errf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    size_t lineno = 0;
    for (size_t i = 0; i < len && rc == 0;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (text + i)) : len - i;
        const char *line = text + i;
        i += l + 1;
        lineno++;
        if (read_line(tok, line, l, name, lineno, host, b, skipped, err, errlen) < 0)
            rc = -1;
    }
    json_tokener_free(tok);
    return rc;
}

/* One log read a line at a time through buf (LINE_BUF bytes): a line longer than
   LINE_MAX_BYTES is refused before it is whole, so memory stays bounded whatever the
   file's size. Events go to b and the stream s (NULL: b keeps them). 0 or -1 with err. */
static int
read_log(FILE *f, const char *path, const char *host, struct json_tokener *tok, char *buf,
         struct fs_imp_batch *b, struct fs_imp_stream *s, size_t *skipped, size_t *events,
         char *err, size_t errlen)
{
    size_t have = 0, pos = 0, lineno = 0;
    bool eof = false;
    for (;;) {
        char *nl = memchr(buf + pos, '\n', have - pos);
        size_t l;
        if (nl) {
            l = (size_t)(nl - (buf + pos));
        } else if (eof) {
            if (pos == have)
                return 0;
            l = have - pos; /* the last line, without a newline */
        } else {
            memmove(buf, buf + pos, have - pos);
            have -= pos;
            pos = 0;
            if (have > LINE_MAX_BYTES) {
                fs_errf(err, errlen, "%s:%zu: line longer than 1 MiB", path, lineno + 1);
                return -1;
            }
            size_t n = fread(buf + have, 1, LINE_BUF - have, f);
            if (n == 0 && ferror(f)) {
                fs_errf(err, errlen, "%s: read error: %s", path, strerror(errno));
                return -1;
            }
            eof = n == 0;
            have += n;
            continue;
        }
        lineno++;
        int r = read_line(tok, buf + pos, l, path, lineno, host, b, skipped, err, errlen);
        pos += l + (nl ? 1 : 0);
        if (r < 0)
            return -1;
        if (r > 0) {
            (*events)++;
            if (fs_imp_stream_feed(s, b) != 0) {
                fs_errf(err, errlen, "posting failed");
                return -1;
            }
        }
    }
}

bool
fs_nccl_inspector_is_log_name(const char *n)
{
    size_t l = strlen(n);
    return (l > 4 && strcmp(n + l - 4, ".log") == 0) || (l > 6 && strcmp(n + l - 6, ".jsonl") == 0);
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int
fs_import_nccl_inspector_stream(const char *dir, const char *host, struct fs_imp_batch *b,
                                struct fs_imp_stream *s, size_t *files, size_t *skipped,
                                size_t *events, char *err, size_t errlen)
{
    *files = 0;
    *skipped = 0;
    *events = 0;
    DIR *d = opendir(dir);
    if (!d) {
        fs_errf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
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
        if (!(names[n] = strdup(de->d_name))) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(d);
    struct json_tokener *tok = rc == 0 ? json_tokener_new() : NULL;
    char *buf = tok ? malloc(LINE_BUF) : NULL;
    if (!buf) {
        fs_errf(err, errlen, "out of memory");
        rc = -1;
    }
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        FILE *f = fopen(path, "rb");
        if (!f) {
            fs_errf(err, errlen, "%s: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        rc = read_log(f, path, host, tok, buf, b, s, skipped, events, err, errlen);
        fclose(f);
        (*files)++;
    }
    free(buf);
    if (tok)
        json_tokener_free(tok);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int
fs_import_nccl_inspector_dir(const char *dir, const char *host, struct fs_imp_batch *b,
                             size_t *files, size_t *skipped, char *err, size_t errlen)
{
    size_t events;
    return fs_import_nccl_inspector_stream(dir, host, b, NULL, files, skipped, &events, err,
                                           errlen);
}

int
fs_import_nccl_inspector_main(int argc, char **argv)
{
    struct fs_imp_args a;
    int rc = fs_imp_parse_args(argc, argv, "import-nccl-inspector",
                               "--url URL [--host NAME] [--token-file FILE] DIR", NULL, 0, NULL, 1,
                               false, &a);
    if (rc >= 0)
        return rc;
    /* Streamed: the logs of a long job are gigabytes; events are posted every
       FS_IMP_STREAM_EVENTS as the lines are read. */
    const char *dir = argv[a.first_operand];
    struct fs_imp_stream st;
    struct fs_imp_batch b = {0};
    char err[512], empty[600];
    size_t files = 0, skipped = 0, events = 0;
    fs_imp_stream_init(&st, &a, "import-nccl-inspector", stdout, stderr);
    int read_rc = fs_import_nccl_inspector_stream(dir, a.host, &b, &st, &files, &skipped, &events,
                                                  err, sizeof err);
    snprintf(empty, sizeof empty, "%s: no collective records in %zu log files", dir, files);
    rc = fs_imp_stream_end(&st, &b, read_rc, err, events, empty);
    fs_imp_batch_free(&b);
    return rc;
}
