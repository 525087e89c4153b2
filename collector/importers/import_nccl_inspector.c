/* NCCL Inspector JSON-lines reader (see import_nccl_inspector.h). */
#include "importers/import_nccl_inspector.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "importers/command.h"
#include "util/errf.h"

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

/* One record; 1 added, 0 not a record, -1 no memory. */
static int
record(struct json_object *o, const char *host, struct fs_imp_batch *b)
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
    int64_t start_ns = start_us * 1000, end_ns = (start_us + exec_us) * 1000;
    struct fs_imp_event *e = fs_imp_add(b, hn, "nccl.inspector", op, start_ns, end_ns);
    if (!e)
        return -1;
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
    return rc ? -1 : 1;
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
        size_t a = 0;
        while (a < l && (line[a] == ' ' || line[a] == '\t' || line[a] == '\r'))
            a++;
        if (a == l)
            continue;
        if (l > (size_t)1 << 20) {
            fs_errf(err, errlen, "%s:%zu: line longer than 1 MiB", name, lineno);
            rc = -1;
            break;
        }
        json_tokener_reset(tok);
        struct json_object *o = json_tokener_parse_ex(tok, line, (int)l);
        enum json_tokener_error je = json_tokener_get_error(tok);
        if (!o || je != json_tokener_success) {
            fs_errf(err, errlen, "%s:%zu: not JSON: %s", name, lineno,
                    je == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(je));
            json_object_put(o);
            rc = -1;
            break;
        }
        int r = record(o, host, b);
        json_object_put(o);
        if (r < 0) {
            fs_errf(err, errlen, "out of memory");
            rc = -1;
        } else if (r == 0) {
            (*skipped)++;
        }
    }
    json_tokener_free(tok);
    return rc;
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
fs_import_nccl_inspector_dir(const char *dir, const char *host, struct fs_imp_batch *b,
                             size_t *files, size_t *skipped, char *err, size_t errlen)
{
    *files = 0;
    *skipped = 0;
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
    if (rc != 0)
        fs_errf(err, errlen, "out of memory");
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
        struct fs_buf text;
        char why[128];
        int read_rc = fs_imp_read_all(f, &text, why, sizeof why);
        fclose(f);
        if (read_rc != 0) {
            fs_errf(err, errlen, "%s: %s", path, why);
            rc = -1;
        } else {
            rc = fs_import_nccl_inspector_read(text.data ? text.data : "", text.len, path, host, b,
                                               skipped, err, errlen);
            (*files)++;
        }
        fs_buf_free(&text);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
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
    const char *dir = argv[a.first_operand];
    struct fs_imp_batch b = {0};
    char err[512], empty[600];
    size_t files = 0, skipped = 0;
    int read_rc = fs_import_nccl_inspector_dir(dir, a.host, &b, &files, &skipped, err, sizeof err);
    snprintf(empty, sizeof empty, "%s: no collective records in %zu log files", dir, files);
    rc = fs_imp_finish("import-nccl-inspector", &a, read_rc, err, &b, empty);
    fs_imp_batch_free(&b);
    return rc;
}
