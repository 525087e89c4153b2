/* Nsight Systems SQLite export reader (see import_nsys.h). */
#include "importers/import_nsys.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "importers/client.h"
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

/* The NVTX payload message size of an NVTX_EVENTS row n (see the header): a join on
   eventId to the DYNAMIC_NVTXPAYLOAD_* tables with an eventId column and a "Message
   size" column, one integer size per event (the least, should a table repeat one).
   SQLite builds the grouping and its automatic index on eventId in its temporary store,
   which spills to a file (temp_store = FILE), so a payload table of any size takes a
   bounded amount of memory here. Appends " LEFT JOIN (...) p ON p.eventId = n.eventId"
   to sql and returns true, or false when no table qualifies (or the join does not fit). */
static bool
message_size_join(sqlite3 *db, struct fs_buf *sql)
{
    sqlite3_stmt *tables;
    if (sqlite3_prepare_v2(db,
                           "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE "
                           "'DYNAMIC\\_NVTXPAYLOAD\\_%' ESCAPE '\\'",
                           -1, &tables, NULL) != SQLITE_OK)
        return false;
    struct fs_buf u;
    fs_buf_init(&u, 64 << 10);
    while (sqlite3_step(tables) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(tables, 0);
        if (!t || !has_column(db, t, "eventId"))
            continue;
        char q[512], pragma[600], colq[512] = "";
        quote_ident(t, q, sizeof q);
        snprintf(pragma, sizeof pragma, "PRAGMA table_info(%s)", q);
        sqlite3_stmt *cols;
        if (sqlite3_prepare_v2(db, pragma, -1, &cols, NULL) != SQLITE_OK)
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
        fs_buf_printf(&u,
                      "%sSELECT eventId, %s AS size FROM %s WHERE eventId IS NOT NULL AND "
                      "typeof(%s) = 'integer'",
                      u.len ? " UNION ALL " : "", colq, q, colq);
    }
    sqlite3_finalize(tables);
    bool any = u.len > 0 && !u.overflow &&
               fs_buf_printf(sql,
                             " LEFT JOIN (SELECT eventId, min(size) AS size FROM (%s) GROUP BY "
                             "eventId) p ON p.eventId = n.eventId",
                             u.data);
    fs_buf_free(&u);
    return any;
}

/* An export's time in epoch ns; -1 when session-relative and past int64_t once placed. */
static int
to_epoch(long long v, long long session_start, int64_t *ns)
{
    /* Values above 1e18 are epoch ns already (nsys export --ts-normalize). */
    if (v > 1000000000000000000LL) {
        *ns = (int64_t)v;
        return 0;
    }
    return __builtin_add_overflow(v, session_start, ns) ? -1 : 0;
}

/* One import's reading state: events go to b, and to the stream s when there is one. */
struct nsys_read {
    sqlite3 *db;
    const char *path, *host;
    long long session;
    bool have_session;
    struct fs_imp_batch *b;
    struct fs_imp_stream *s; /* NULL: b keeps every event */
    size_t events;
    char *err;
    size_t errlen;
};

/* Adds an event of row `row` (counted from 1 in the order read) of table; the times are
   the export's. NULL with r->err (no session start to place a relative time with, no
   memory). */
static struct fs_imp_event *
add_event(struct nsys_read *r, const char *table, size_t row, const char *kind, const char *name,
          long long start, long long end)
{
    int64_t s, e;
    if (to_epoch(start, r->session, &s) != 0 || to_epoch(end, r->session, &e) != 0) {
        fs_errf(r->err, r->errlen,
                "%s: %s row %zu: start %lld or end %lld ns after the session start %lld ns is "
                "out of range",
                r->path, table, row, start, end, r->session);
        return NULL;
    }
    if (!r->have_session && s <= 1000000000000000000LL) {
        fs_errf(r->err, r->errlen,
                "%s: %s row %zu: no TARGET_INFO_SESSION_START_TIME.utcEpochNs: cannot place the "
                "events on the wall clock",
                r->path, table, row);
        return NULL;
    }
    struct fs_imp_event *ev = fs_imp_add(r->b, r->host, kind, name, s, e);
    if (!ev)
        fs_errf(r->err, r->errlen, "out of memory");
    return ev;
}

/* After an event's attrs: counts it and posts the batch when it is full. */
static int
event_done(struct nsys_read *r)
{
    r->events++;
    if (fs_imp_stream_feed(r->s, r->b) != 0) {
        fs_errf(r->err, r->errlen, "posting failed");
        return -1;
    }
    return 0;
}

static int
read_kernels(struct nsys_read *r)
{
    sqlite3 *db = r->db;
    char table[256];
    if (!find_kernel_table(db, table, sizeof table))
        return 0;
    const char *name_col = has_column(db, table, "shortName")       ? "shortName"
                           : has_column(db, table, "demangledName") ? "demangledName"
                                                                    : NULL;
    if (!name_col || !has_column(db, table, "start") || !has_column(db, table, "end")) {
        fs_errf(r->err, r->errlen, "%s: no start/end/shortName columns (unknown schema)", table);
        return -1;
    }
    /* Names through StringIds are joined on its primary key row by row: no name table is
       held here, whatever the number of strings. */
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
        fs_errf(r->err, r->errlen, "%s: %s", table, sqlite3_errmsg(db));
        return -1;
    }
    int rc = 0, step;
    size_t row = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        row++;
        const char *kname = (const char *)sqlite3_column_text(st, 4);
        char coll[64];
        if (!kname || fs_nccl_kernel_collective(kname, coll, sizeof coll) != 0)
            continue;
        struct fs_imp_event *e =
            add_event(r, table, row, "nccl.kernel", coll, sqlite3_column_int64(st, 0),
                      sqlite3_column_int64(st, 1));
        if (!e) {
            rc = -1;
            break;
        }
        if (fs_imp_attr_str(e, "kernel", kname) != 0 ||
            (sqlite3_column_type(st, 2) == SQLITE_INTEGER &&
             fs_imp_attr_int(e, "device", sqlite3_column_int64(st, 2)) != 0) ||
            (sqlite3_column_type(st, 3) == SQLITE_INTEGER &&
             fs_imp_attr_int(e, "stream", sqlite3_column_int64(st, 3)) != 0)) {
            fs_errf(r->err, r->errlen, "out of memory");
            rc = -1;
            break;
        }
        if (event_done(r) != 0) {
            rc = -1;
            break;
        }
    }
    if (rc == 0 && step != SQLITE_DONE) {
        fs_errf(r->err, r->errlen, "%s: %s row %zu: %s", r->path, table, row + 1,
                sqlite3_errmsg(db));
        rc = -1;
    }
    sqlite3_finalize(st);
    return rc;
}

static int
read_nvtx(struct nsys_read *r)
{
    sqlite3 *db = r->db;
    if (!table_exists(db, "NVTX_EVENTS"))
        return 0;
    if (!has_column(db, "NVTX_EVENTS", "start") || !has_column(db, "NVTX_EVENTS", "end")) {
        fs_errf(r->err, r->errlen, "NVTX_EVENTS: no start/end columns (unknown schema)");
        return -1;
    }
    bool text = has_column(db, "NVTX_EVENTS", "text");
    bool text_id = has_column(db, "NVTX_EVENTS", "textId") && table_exists(db, "StringIds");
    bool domain = has_column(db, "NVTX_EVENTS", "domainId");
    bool etype = has_column(db, "NVTX_EVENTS", "eventType");
    bool event_id = has_column(db, "NVTX_EVENTS", "eventId");
    if (!text && !text_id) {
        fs_errf(r->err, r->errlen, "NVTX_EVENTS: neither text nor textId (unknown schema)");
        return -1;
    }
    const char *name_expr = text && text_id ? "COALESCE(n.text, s.value)"
                            : text          ? "n.text"
                                            : "s.value";
    const char *join = text_id ? "LEFT JOIN StringIds s ON s.id = n.textId" : "";
    /* The NCCL domain's ids: its NvtxDomainCreate (75) rows named "NCCL". */
    long long nccl_domains[16];
    size_t n_domains = 0;
    char dsql[1024];
    sqlite3_stmt *st;
    if (domain && etype) {
        snprintf(dsql, sizeof dsql,
                 "SELECT DISTINCT n.domainId FROM NVTX_EVENTS n %s WHERE n.eventType = 75 AND "
                 "%s = 'NCCL'",
                 join, name_expr);
        if (sqlite3_prepare_v2(db, dsql, -1, &st, NULL) == SQLITE_OK) {
            while (sqlite3_step(st) == SQLITE_ROW && n_domains < 16)
                nccl_domains[n_domains++] = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        }
    }
    struct fs_buf sizes, sql;
    fs_buf_init(&sizes, 64 << 10);
    fs_buf_init(&sql, 128 << 10);
    bool with_sizes = event_id && message_size_join(db, &sizes);
    fs_buf_printf(&sql,
                  "SELECT n.start, n.\"end\", %s, %s, %s FROM NVTX_EVENTS n %s%s WHERE n.\"end\" "
                  "IS NOT NULL%s",
                  name_expr, domain ? "n.domainId" : "NULL", with_sizes ? "p.size" : "NULL", join,
                  with_sizes ? sizes.data : "", etype ? " AND n.eventType IN (59, 60)" : "");
    int rc = -1, step = SQLITE_DONE;
    size_t row = 0;
    st = NULL;
    if (sql.overflow || sqlite3_prepare_v2(db, sql.data, -1, &st, NULL) != SQLITE_OK) {
        fs_errf(r->err, r->errlen, "NVTX_EVENTS: %s",
                sql.overflow ? "too many payload tables" : sqlite3_errmsg(db));
        goto out;
    }
    rc = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        row++;
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
            add_event(r, "NVTX_EVENTS", row, "nccl.nvtx", name, sqlite3_column_int64(st, 0),
                      sqlite3_column_int64(st, 1));
        if (!e) {
            rc = -1;
            break;
        }
        if (sqlite3_column_type(st, 4) == SQLITE_INTEGER &&
            fs_imp_attr_int(e, "message_size_bytes", sqlite3_column_int64(st, 4)) != 0) {
            fs_errf(r->err, r->errlen, "out of memory");
            rc = -1;
            break;
        }
        if (event_done(r) != 0) {
            rc = -1;
            break;
        }
    }
    if (rc == 0 && step != SQLITE_DONE) {
        fs_errf(r->err, r->errlen, "%s: NVTX_EVENTS row %zu: %s", r->path, row + 1,
                sqlite3_errmsg(db));
        rc = -1;
    }
out:
    sqlite3_finalize(st);
    fs_buf_free(&sizes);
    fs_buf_free(&sql);
    return rc;
}

int
fs_import_nsys_stream(const char *path, const char *host, struct fs_imp_batch *b,
                      struct fs_imp_stream *s, size_t *events, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    int rc = -1;
    char host_buf[FS_HOST_EVENTS_MAX_STR + 1] = "";
    *events = 0;
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
    /* Sorting and automatic indexes (the message-size join) go to a file, not memory. */
    sqlite3_exec(db, "PRAGMA temp_store = FILE", NULL, NULL, NULL);
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
    struct nsys_read r = {.db = db, .path = path, .b = b, .s = s, .err = err, .errlen = errlen};
    if (session_tab && has_column(db, "TARGET_INFO_SESSION_START_TIME", "utcEpochNs") &&
        sqlite3_prepare_v2(db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1", -1,
                           &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER) {
            r.session = sqlite3_column_int64(st, 0);
            r.have_session = true;
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
    r.host = host;
    rc = read_kernels(&r) == 0 && read_nvtx(&r) == 0 ? 0 : -1;
    *events = r.events;
out:
    sqlite3_close(db);
    return rc;
}

int
fs_import_nsys_read(const char *path, const char *host, struct fs_imp_batch *b, char *err,
                    size_t errlen)
{
    size_t events;
    return fs_import_nsys_stream(path, host, b, NULL, &events, err, errlen);
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
    /* Streamed: an export of a long run is gigabytes; events are posted every
       FS_IMP_STREAM_EVENTS as the rows are stepped. */
    const char *path = argv[a.first_operand];
    struct fs_imp_stream st;
    struct fs_imp_batch b = {0};
    char err[512], empty[600];
    size_t events = 0;
    snprintf(empty, sizeof empty, "%s: no NCCL kernels or NVTX ranges found", path);
    fs_imp_stream_init(&st, &a, "import-nsys", stdout, stderr);
    int read_rc = fs_import_nsys_stream(path, a.host, &b, &st, &events, err, sizeof err);
    rc = fs_imp_stream_end(&st, &b, read_rc, err, events, empty);
    fs_imp_batch_free(&b);
    return rc;
}
