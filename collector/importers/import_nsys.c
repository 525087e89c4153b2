/* Nsight Systems SQLite export reader (see import_nsys.h). */
#include "importers/import_nsys.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "importers/command.h"
#include "importers/nccl_names.h"
#include "util/errf.h"

/* Table names come from sqlite_master and are quoted for SQL here. */
static void
quote_ident(const char *name, char *out, size_t len)
{
    size_t o = 0;
    if (len < 3) {
        out[0] = '\0';
        return;
    }
    out[o++] = '"';
    for (const char *p = name; *p && o + 3 < len; p++) {
        if (*p == '"')
            out[o++] = '"';
        out[o++] = *p;
    }
    out[o++] = '"';
    out[o] = '\0';
}

static bool
table_exists(sqlite3 *db, const char *name)
{
    sqlite3_stmt *st;
    bool found = false;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", -1, &st,
                           NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

static bool
has_column(sqlite3 *db, const char *table, const char *col)
{
    char q[512], sql[600];
    quote_ident(table, q, sizeof q);
    snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", q);
    sqlite3_stmt *st;
    bool found = false;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return false;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *n = sqlite3_column_text(st, 1);
        if (n && strcmp((const char *)n, col) == 0) {
            found = true;
            break;
        }
    }
    sqlite3_finalize(st);
    return found;
}

/* The kernel table: the exact name, else the highest _V<n> version. */
static bool
find_kernel_table(sqlite3 *db, char *out, size_t len)
{
    static const char base[] = "CUPTI_ACTIVITY_KIND_KERNEL";
    sqlite3_stmt *st;
    bool found = false;
    int best_v = -1;
    if (sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type='table'", -1, &st,
                           NULL) != SQLITE_OK)
        return false;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *n = (const char *)sqlite3_column_text(st, 0);
        if (!n || strncmp(n, base, sizeof base - 1) != 0)
            continue;
        const char *rest = n + sizeof base - 1;
        int v;
        if (*rest == '\0')
            v = 0;
        else if (rest[0] == '_' && rest[1] == 'V' && rest[2] >= '0' && rest[2] <= '9')
            v = atoi(rest + 2);
        else
            continue;
        if (v > best_v) {
            best_v = v;
            snprintf(out, len, "%s", n);
            found = true;
        }
    }
    sqlite3_finalize(st);
    return found;
}

struct size_map {
    long long *event_id;
    long long *size;
    size_t n, cap;
};

static int
size_map_add(struct size_map *m, long long id, long long size)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        long long *a = realloc(m->event_id, cap * sizeof *a);
        if (!a)
            return -1;
        m->event_id = a;
        long long *b = realloc(m->size, cap * sizeof *b);
        if (!b)
            return -1;
        m->size = b;
        m->cap = cap;
    }
    m->event_id[m->n] = id;
    m->size[m->n] = size;
    m->n++;
    return 0;
}

static bool
size_map_get(const struct size_map *m, long long id, long long *size)
{
    /* Filled in eventId order by the query below; binary search. */
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->event_id[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < m->n && m->event_id[lo] == id) {
        *size = m->size[lo];
        return true;
    }
    return false;
}

/* NVTX payload message sizes from DYNAMIC_NVTXPAYLOAD_* tables (see the header). */
static int
load_message_sizes(sqlite3 *db, struct size_map *m)
{
    sqlite3_stmt *tables;
    if (sqlite3_prepare_v2(db,
                           "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE "
                           "'DYNAMIC\\_NVTXPAYLOAD\\_%' ESCAPE '\\'",
                           -1, &tables, NULL) != SQLITE_OK)
        return 0;
    int rc = 0;
    while (rc == 0 && sqlite3_step(tables) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(tables, 0);
        if (!t || !has_column(db, t, "eventId"))
            continue;
        char q[512], sql[1400], colq[512] = "";
        quote_ident(t, q, sizeof q);
        snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", q);
        sqlite3_stmt *cols;
        if (sqlite3_prepare_v2(db, sql, -1, &cols, NULL) != SQLITE_OK)
            continue;
        while (sqlite3_step(cols) == SQLITE_ROW) {
            const char *cn = (const char *)sqlite3_column_text(cols, 1);
            if (cn && strstr(cn, "Message size")) {
                quote_ident(cn, colq, sizeof colq);
                break;
            }
        }
        sqlite3_finalize(cols);
        if (!colq[0])
            continue;
        snprintf(sql, sizeof sql, "SELECT eventId, %s FROM %s WHERE eventId IS NOT NULL", colq, q);
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
            continue;
        while (sqlite3_step(st) == SQLITE_ROW)
            if (sqlite3_column_type(st, 1) == SQLITE_INTEGER &&
                size_map_add(m, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1)) != 0) {
                rc = -1;
                break;
            }
        sqlite3_finalize(st);
    }
    sqlite3_finalize(tables);
    /* Sort by event id (insertion sort would be quadratic; a simple shell of pairs). */
    for (size_t gap = m->n / 2; gap > 0; gap /= 2)
        for (size_t i = gap; i < m->n; i++)
            for (size_t j = i; j >= gap && m->event_id[j - gap] > m->event_id[j]; j -= gap) {
                long long a = m->event_id[j], b = m->size[j];
                m->event_id[j] = m->event_id[j - gap];
                m->size[j] = m->size[j - gap];
                m->event_id[j - gap] = a;
                m->size[j - gap] = b;
            }
    return rc;
}

static int64_t
to_epoch(long long v, long long session_start)
{
    /* Values above 1e18 are epoch ns already (nsys export --ts-normalize). */
    return v > 1000000000000000000LL ? (int64_t)v : (int64_t)(v + session_start);
}

static int
read_kernels(sqlite3 *db, const char *host, long long session, struct fs_imp_batch *b,
             size_t *found, char *err, size_t errlen)
{
    char table[256];
    *found = 0;
    if (!find_kernel_table(db, table, sizeof table))
        return 0;
    const char *name_col = has_column(db, table, "shortName")       ? "shortName"
                           : has_column(db, table, "demangledName") ? "demangledName"
                                                                    : NULL;
    if (!name_col || !has_column(db, table, "start") || !has_column(db, table, "end")) {
        fs_errf(err, errlen, "%s: no start/end/shortName columns (unknown schema)", table);
        return -1;
    }
    bool strings = table_exists(db, "StringIds");
    char q[300], sql[1200];
    quote_ident(table, q, sizeof q);
    snprintf(sql, sizeof sql,
             "SELECT k.start, k.\"end\", %s, %s, %s FROM %s k %s WHERE k.\"end\" IS NOT NULL",
             has_column(db, table, "deviceId") ? "k.deviceId" : "NULL",
             has_column(db, table, "streamId") ? "k.streamId" : "NULL",
             strings ? (strcmp(name_col, "shortName") == 0 ? "COALESCE(s.value, k.shortName)"
                                                           : "COALESCE(s.value, k.demangledName)")
                     : (strcmp(name_col, "shortName") == 0 ? "k.shortName" : "k.demangledName"),
             q,
             strings ? (strcmp(name_col, "shortName") == 0
                            ? "LEFT JOIN StringIds s ON s.id = k.shortName"
                            : "LEFT JOIN StringIds s ON s.id = k.demangledName")
                     : "");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fs_errf(err, errlen, "%s: %s", table, sqlite3_errmsg(db));
        return -1;
    }
    int rc = 0, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *kname = (const char *)sqlite3_column_text(st, 4);
        char coll[64];
        if (!kname || fs_nccl_kernel_collective(kname, coll, sizeof coll) != 0)
            continue;
        struct fs_imp_event *e =
            fs_imp_add(b, host, "nccl.kernel", coll, to_epoch(sqlite3_column_int64(st, 0), session),
                       to_epoch(sqlite3_column_int64(st, 1), session));
        if (!e || fs_imp_attr_str(e, "kernel", kname) != 0 ||
            (sqlite3_column_type(st, 2) == SQLITE_INTEGER &&
             fs_imp_attr_int(e, "device", sqlite3_column_int64(st, 2)) != 0) ||
            (sqlite3_column_type(st, 3) == SQLITE_INTEGER &&
             fs_imp_attr_int(e, "stream", sqlite3_column_int64(st, 3)) != 0)) {
            fs_errf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        (*found)++;
    }
    if (rc == 0 && step != SQLITE_DONE) {
        fs_errf(err, errlen, "%s: %s", table, sqlite3_errmsg(db));
        rc = -1;
    }
    sqlite3_finalize(st);
    return rc;
}

static int
read_nvtx(sqlite3 *db, const char *host, long long session, struct fs_imp_batch *b, size_t *found,
          char *err, size_t errlen)
{
    *found = 0;
    if (!table_exists(db, "NVTX_EVENTS"))
        return 0;
    if (!has_column(db, "NVTX_EVENTS", "start") || !has_column(db, "NVTX_EVENTS", "end")) {
        fs_errf(err, errlen, "NVTX_EVENTS: no start/end columns (unknown schema)");
        return -1;
    }
    bool text = has_column(db, "NVTX_EVENTS", "text");
    bool text_id = has_column(db, "NVTX_EVENTS", "textId") && table_exists(db, "StringIds");
    bool domain = has_column(db, "NVTX_EVENTS", "domainId");
    bool etype = has_column(db, "NVTX_EVENTS", "eventType");
    bool event_id = has_column(db, "NVTX_EVENTS", "eventId");
    if (!text && !text_id) {
        fs_errf(err, errlen, "NVTX_EVENTS: neither text nor textId (unknown schema)");
        return -1;
    }
    const char *name_expr = text && text_id ? "COALESCE(n.text, s.value)"
                            : text          ? "n.text"
                                            : "s.value";
    const char *join = text_id ? "LEFT JOIN StringIds s ON s.id = n.textId" : "";
    /* The NCCL domain's ids: its NvtxDomainCreate (75) rows named "NCCL". */
    long long nccl_domains[16];
    size_t n_domains = 0;
    char sql[1024];
    sqlite3_stmt *st;
    if (domain && etype) {
        snprintf(sql, sizeof sql,
                 "SELECT DISTINCT n.domainId FROM NVTX_EVENTS n %s WHERE n.eventType = 75 AND "
                 "%s = 'NCCL'",
                 join, name_expr);
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
            while (sqlite3_step(st) == SQLITE_ROW && n_domains < 16)
                nccl_domains[n_domains++] = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        }
    }
    struct size_map sizes = {0};
    if (event_id && load_message_sizes(db, &sizes) != 0) {
        fs_errf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(sql, sizeof sql,
             "SELECT n.start, n.\"end\", %s, %s, %s FROM NVTX_EVENTS n %s WHERE n.\"end\" IS NOT "
             "NULL%s",
             name_expr, domain ? "n.domainId" : "NULL", event_id ? "n.eventId" : "NULL", join,
             etype ? " AND n.eventType IN (59, 60)" : "");
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fs_errf(err, errlen, "NVTX_EVENTS: %s", sqlite3_errmsg(db));
        free(sizes.event_id);
        free(sizes.size);
        return -1;
    }
    int rc = 0, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 2);
        if (!name || !*name)
            continue;
        bool in_domain = false;
        if (sqlite3_column_type(st, 3) == SQLITE_INTEGER) {
            long long d = sqlite3_column_int64(st, 3);
            for (size_t i = 0; i < n_domains; i++)
                in_domain |= nccl_domains[i] == d;
        }
        if (!in_domain && strncmp(name, "nccl", 4) != 0)
            continue;
        struct fs_imp_event *e =
            fs_imp_add(b, host, "nccl.nvtx", name, to_epoch(sqlite3_column_int64(st, 0), session),
                       to_epoch(sqlite3_column_int64(st, 1), session));
        if (!e) {
            fs_errf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        long long size;
        if (sqlite3_column_type(st, 4) == SQLITE_INTEGER &&
            size_map_get(&sizes, sqlite3_column_int64(st, 4), &size) &&
            fs_imp_attr_int(e, "message_size_bytes", size) != 0) {
            fs_errf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        (*found)++;
    }
    if (rc == 0 && step != SQLITE_DONE) {
        fs_errf(err, errlen, "NVTX_EVENTS: %s", sqlite3_errmsg(db));
        rc = -1;
    }
    sqlite3_finalize(st);
    free(sizes.event_id);
    free(sizes.size);
    return rc;
}

int
fs_import_nsys_read(const char *path, const char *host, struct fs_imp_batch *b, char *err,
                    size_t errlen)
{
    sqlite3 *db = NULL;
    int rc = -1;
    char host_buf[FS_HOST_EVENTS_MAX_STR + 1] = "";
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fs_errf(err, errlen, "%s: %s", path, db ? sqlite3_errmsg(db) : "cannot open");
        goto out;
    }
    /* Reading the schema is the first real access: corrupt and foreign files fail here. */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        fs_errf(err, errlen, "%s: not a readable SQLite database: %s", path, sqlite3_errmsg(db));
        sqlite3_finalize(st);
        goto out;
    }
    sqlite3_finalize(st);
    char kernel_table[256];
    bool kernels = find_kernel_table(db, kernel_table, sizeof kernel_table);
    bool nvtx = table_exists(db, "NVTX_EVENTS");
    bool session_tab = table_exists(db, "TARGET_INFO_SESSION_START_TIME");
    if (!kernels && !nvtx && !session_tab && !table_exists(db, "META_DATA_EXPORT")) {
        fs_errf(err, errlen,
                "%s: not an Nsight Systems export (no CUPTI_ACTIVITY_KIND_KERNEL, NVTX_EVENTS, "
                "TARGET_INFO_SESSION_START_TIME or META_DATA_EXPORT table)",
                path);
        goto out;
    }
    long long session = 0;
    bool have_session = false;
    if (session_tab && has_column(db, "TARGET_INFO_SESSION_START_TIME", "utcEpochNs") &&
        sqlite3_prepare_v2(db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1", -1,
                           &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER) {
            session = sqlite3_column_int64(st, 0);
            have_session = true;
        }
        sqlite3_finalize(st);
    }
    if (!host) {
        if (table_exists(db, "TARGET_INFO_SYSTEM_ENV") &&
            has_column(db, "TARGET_INFO_SYSTEM_ENV", "name") &&
            has_column(db, "TARGET_INFO_SYSTEM_ENV", "value") &&
            sqlite3_prepare_v2(db,
                               "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' "
                               "LIMIT 1",
                               -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
                snprintf(host_buf, sizeof host_buf, "%s", sqlite3_column_text(st, 0));
            sqlite3_finalize(st);
        }
        if (!host_buf[0]) {
            fs_errf(err, errlen,
                    "%s: no host name in the export (TARGET_INFO_SYSTEM_ENV); give --host", path);
            goto out;
        }
        host = host_buf;
    }
    size_t nk = 0, nn = 0;
    if (read_kernels(db, host, session, b, &nk, err, errlen) != 0 ||
        read_nvtx(db, host, session, b, &nn, err, errlen) != 0)
        goto out;
    if (!have_session) {
        for (size_t i = 0; i < b->n; i++)
            if (b->ev[i].start_ns <= 1000000000000000000LL) {
                fs_errf(err, errlen,
                        "%s: no TARGET_INFO_SESSION_START_TIME.utcEpochNs: cannot place the "
                        "events on the wall clock",
                        path);
                goto out;
            }
    }
    rc = 0;
out:
    sqlite3_close(db);
    return rc;
}

int
fs_import_nsys_main(int argc, char **argv)
{
    struct fs_imp_args a;
    int rc = fs_imp_parse_args(argc, argv, "import-nsys",
                               "REPORT.sqlite --url URL [--host NAME] [--token-file FILE]", NULL, 0,
                               NULL, 1, false, &a);
    if (rc >= 0)
        return rc;
    const char *path = argv[a.first_operand];
    struct fs_imp_batch b = {0};
    char err[512], empty[600];
    snprintf(empty, sizeof empty, "%s: no NCCL kernels or NVTX ranges found", path);
    int read_rc = fs_import_nsys_read(path, a.host, &b, err, sizeof err);
    rc = fs_imp_finish("import-nsys", &a, read_rc, err, &b, empty);
    fs_imp_batch_free(&b);
    return rc;
}
