/* Importer HTTP client (see client.h). */
#include "importers/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <getopt.h>
#include <unistd.h>

#include <json-c/json.h>

#include "clock/clock.h"
#include "importers/command.h"

static int64_t
realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t
collect(char *p, size_t size, size_t n, void *arg)
{
    struct fs_buf *b = arg;
    if (!fs_buf_append(b, p, size * n))
        return 0;
    return size * n;
}

static void
trim_token(char *s)
{
    size_t l = strlen(s);
    while (l && (s[l - 1] == '\n' || s[l - 1] == '\r' || s[l - 1] == ' ' || s[l - 1] == '\t'))
        s[--l] = '\0';
}

int
fs_imp_client_open(struct fs_imp_client *c, const char *base_url, const char *token_file, char *err,
                   size_t errlen)
{
    return fs_imp_client_open_token(c, base_url, token_file, getenv("FABRICSCOPE_TOKEN"), err,
                                    errlen);
}

int
fs_imp_client_open_token(struct fs_imp_client *c, const char *base_url, const char *token_file,
                         const char *env_token, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    /* Read with room to spare: a token cut at the buffer's end would be refused by the
     * collector with no word of why. */
    char token[FS_IMP_TOKEN_MAX + 2] = "";
    int rc = -1;
    if (token_file) {
        FILE *f = fopen(token_file, "r");
        if (!f) {
            snprintf(err, errlen, "token file %s: %s", token_file, strerror(errno));
            return -1;
        }
        if (!fgets(token, sizeof token, f))
            token[0] = '\0';
        fclose(f);
        trim_token(token);
        if (!token[0]) {
            snprintf(err, errlen, "token file %s is empty", token_file);
            goto out;
        }
        if (strlen(token) > FS_IMP_TOKEN_MAX) {
            snprintf(err, errlen, "token file %s: the token is longer than %d bytes", token_file,
                     FS_IMP_TOKEN_MAX);
            goto out;
        }
    } else if (env_token) {
        if (strlen(env_token) > FS_IMP_TOKEN_MAX + 1) {
            snprintf(err, errlen, "FABRICSCOPE_TOKEN is longer than %d bytes", FS_IMP_TOKEN_MAX);
            goto out;
        }
        snprintf(token, sizeof token, "%s", env_token);
        trim_token(token);
        if (strlen(token) > FS_IMP_TOKEN_MAX) {
            snprintf(err, errlen, "FABRICSCOPE_TOKEN is longer than %d bytes", FS_IMP_TOKEN_MAX);
            goto out;
        }
    }
    if (strncmp(base_url, "http://", 7) != 0 && strncmp(base_url, "https://", 8) != 0) {
        snprintf(err, errlen, "--url must start with http:// or https://");
        goto out;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    c->curl = curl_easy_init();
    c->base_url = strdup(base_url);
    if (!c->curl || !c->base_url) {
        snprintf(err, errlen, "out of memory");
        fs_imp_client_close(c);
        goto out;
    }
    size_t l = strlen(c->base_url);
    while (l && c->base_url[l - 1] == '/')
        c->base_url[--l] = '\0';
    if (token[0]) {
        size_t n = strlen(token) + 32;
        c->auth_header = malloc(n);
        if (!c->auth_header) {
            snprintf(err, errlen, "out of memory");
            fs_imp_client_close(c);
            goto out;
        }
        snprintf(c->auth_header, n, "Authorization: Bearer %s", token);
    }
    rc = 0;
out:
    memset(token, 0, sizeof token); /* not left on the stack */
    return rc;
}

void
fs_imp_client_close(struct fs_imp_client *c)
{
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->base_url);
    if (c->auth_header) {
        /* The token does not outlive the client in memory. */
        memset(c->auth_header, 0, strlen(c->auth_header));
        free(c->auth_header);
    }
    memset(c, 0, sizeof *c);
}

/* One request; the response body in resp, the HTTP status in *status. */
static int
request(struct fs_imp_client *c, const char *path, const char *body, size_t body_len,
        struct fs_buf *resp, long *status, char *err, size_t errlen)
{
    char url[2048];
    snprintf(url, sizeof url, "%s%s", c->base_url, path);
    CURL *h = c->curl;
    struct curl_slist *hdr = NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout_s > 0 ? c->timeout_s : 60L);
    if (c->connect_timeout_s > 0)
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, c->connect_timeout_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* On every request: a collector with http.bearer_token_file refuses GETs without. */
    if (c->auth_header)
        hdr = curl_slist_append(hdr, c->auth_header);
    if (body) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdr);
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "%s: %s", url, curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

int
fs_imp_client_get(struct fs_imp_client *c, const char *path, struct fs_buf *resp, long *status,
                  char *err, size_t errlen)
{
    return request(c, path, NULL, 0, resp, status, err, errlen);
}

static int
get_member_int(struct json_object *o, const char *key, int64_t *v)
{
    struct json_object *m;
    if (!json_object_object_get_ex(o, key, &m) || !json_object_is_type(m, json_type_int))
        return -1;
    *v = json_object_get_int64(m);
    return 0;
}

int
fs_imp_client_offset(struct fs_imp_client *c, int64_t *offset_ns, int64_t *uncertainty_ns,
                     char *err, size_t errlen)
{
    return fs_imp_client_offset_rounds(c, FS_IMP_TIME_ROUNDS, offset_ns, uncertainty_ns, err,
                                       errlen);
}

int
fs_imp_client_offset_rounds(struct fs_imp_client *c, int rounds, int64_t *offset_ns,
                            int64_t *uncertainty_ns, char *err, size_t errlen)
{
    struct fs_ntp_round r[64];
    size_t n = 0;
    struct fs_buf resp;
    fs_buf_init(&resp, 4096);
    int rc = -1;
    if (rounds < 1 || rounds > 64)
        rounds = FS_IMP_TIME_ROUNDS;
    for (int i = 0; i < rounds; i++) {
        fs_buf_reset(&resp);
        long status = 0;
        int64_t t1 = realtime_ns();
        if (request(c, "/api/v1/time", NULL, 0, &resp, &status, err, errlen) != 0)
            goto out;
        int64_t t4 = realtime_ns();
        if (status != 200) {
            snprintf(err, errlen, "GET /api/v1/time: HTTP %ld", status);
            goto out;
        }
        struct json_object *o = json_tokener_parse(resp.data ? resp.data : "");
        int64_t t2, t3;
        int bad = !o || get_member_int(o, "receive_ns", &t2) || get_member_int(o, "send_ns", &t3);
        json_object_put(o);
        if (bad) {
            snprintf(err, errlen, "GET /api/v1/time: no receive_ns/send_ns in the answer");
            goto out;
        }
        r[n++] = (struct fs_ntp_round){t1, t2, t3, t4};
    }
    struct fs_ntp_result res;
    /* Both clocks are read in ns; realtime resolution is 1 ns on Linux. */
    if (fs_ntp_best(r, n, 1000, &res, err, errlen) != 0)
        goto out;
    *offset_ns = res.offset_ns;
    *uncertainty_ns = res.uncertainty_ns;
    rc = 0;
out:
    fs_buf_free(&resp);
    return rc;
}

/* The receipt of one accepted post (analysis/host_events.h). */
struct receipt {
    int64_t stored, duplicates, post_id, oldest_post_id;
};

static int
parse_receipt(const char *body, struct receipt *r)
{
    struct json_object *o = json_tokener_parse(body ? body : ""), *d;
    int rc = -1;
    *r = (struct receipt){0};
    if (o && json_object_object_get_ex(o, "data", &d) && !get_member_int(d, "stored", &r->stored)) {
        /* A collector before idempotent posts answers stored alone. */
        (void)get_member_int(d, "duplicates", &r->duplicates);
        (void)get_member_int(d, "post_id", &r->post_id);
        (void)get_member_int(d, "oldest_post_id", &r->oldest_post_id);
        rc = 0;
    }
    json_object_put(o);
    return rc;
}

/* Posts b in FS_IMP_BATCH bodies, adding to res and remembering each post's id and
   what it stored in log (for fs_imp_post_log_evicted). Event numbers in errors count
   from res->posted. 0 or -1 with err. */
static int
post_batches(struct fs_imp_client *c, const struct fs_imp_batch *b, int64_t offset_ns,
             int64_t uncertainty_ns, struct fs_imp_post_log *log, struct fs_imp_post_result *res,
             char *err, size_t errlen)
{
    struct fs_buf body, resp;
    fs_buf_init(&body, FS_HOST_EVENTS_MAX_BODY);
    fs_buf_init(&resp, 64 << 10);
    int rc = -1;
    size_t base = res->posted;
    for (size_t from = 0; from < b->n; from += FS_IMP_BATCH) {
        size_t to = from + FS_IMP_BATCH < b->n ? from + FS_IMP_BATCH : b->n;
        fs_buf_reset(&body);
        fs_buf_reset(&resp);
        if (fs_imp_body(b, from, to, offset_ns, uncertainty_ns, &body) != 0) {
            snprintf(err, errlen, "events %zu..%zu: body larger than %u bytes", base + from,
                     base + to - 1, FS_HOST_EVENTS_MAX_BODY);
            goto out;
        }
        long status = 0;
        if (request(c, "/api/v1/host-events", body.data, body.len, &resp, &status, err, errlen) !=
            0)
            goto out;
        if (status < 200 || status > 299) {
            snprintf(err, errlen, "POST /api/v1/host-events (events %zu..%zu): HTTP %ld: %.400s",
                     base + from, base + to - 1, status, resp.data ? resp.data : "");
            goto out;
        }
        struct receipt r;
        if (parse_receipt(resp.data, &r) != 0) {
            snprintf(err, errlen, "POST /api/v1/host-events: an answer without \"stored\": %.200s",
                     resp.data ? resp.data : "");
            goto out;
        }
        if (log->n == log->cap) {
            size_t cap = log->cap ? log->cap * 2 : 64;
            int64_t *ids = realloc(log->ids, cap * sizeof *ids);
            if (ids)
                log->ids = ids;
            size_t *kept = ids ? realloc(log->kept, cap * sizeof *kept) : NULL;
            if (!kept) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
            log->kept = kept;
            log->cap = cap;
        }
        log->ids[log->n] = r.post_id;
        log->kept[log->n++] = (size_t)r.stored;
        log->oldest = r.oldest_post_id;
        res->posted += to - from;
        res->stored += (size_t)r.stored;
        res->duplicates += (size_t)r.duplicates;
    }
    rc = 0;
out:
    fs_buf_free(&body);
    fs_buf_free(&resp);
    return rc;
}

/* Posts older than the oldest the store still holds were evicted for its memory limit,
   some perhaps while the import was still posting. */
static size_t
post_log_evicted(const struct fs_imp_post_log *log)
{
    size_t n = 0;
    for (size_t k = 0; k < log->n; k++)
        if (log->ids[k] > 0 && log->ids[k] < log->oldest)
            n += log->kept[k];
    return n;
}

static void
post_log_free(struct fs_imp_post_log *log)
{
    free(log->ids);
    free(log->kept);
    *log = (struct fs_imp_post_log){0};
}

int
fs_imp_client_post(struct fs_imp_client *c, const struct fs_imp_batch *b, int64_t offset_ns,
                   int64_t uncertainty_ns, struct fs_imp_post_result *res, char *err, size_t errlen)
{
    struct fs_imp_post_log log = {0};
    *res = (struct fs_imp_post_result){0};
    int rc = post_batches(c, b, offset_ns, uncertainty_ns, &log, res, err, errlen);
    if (rc == 0)
        res->evicted = post_log_evicted(&log);
    post_log_free(&log);
    return rc;
}

int
fs_imp_client_post_body(struct fs_imp_client *c, const char *body, size_t len, size_t n_events,
                        long *status, struct fs_imp_post_result *res, char *err, size_t errlen)
{
    struct fs_buf resp;
    fs_buf_init(&resp, 64 << 10);
    int rc = -1;
    *res = (struct fs_imp_post_result){0};
    *status = 0;
    if (request(c, "/api/v1/host-events", body, len, &resp, status, err, errlen) != 0)
        goto out;
    rc = 0;
    struct receipt r;
    if (*status < 200 || *status > 299) {
        snprintf(err, errlen, "POST /api/v1/host-events: HTTP %ld: %.400s", *status,
                 resp.data ? resp.data : "");
    } else if (parse_receipt(resp.data, &r) != 0) {
        /* Accepted, but not by a collector we understand: not worth a retry loop. */
        snprintf(err, errlen, "POST /api/v1/host-events: an answer without \"stored\": %.200s",
                 resp.data ? resp.data : "");
    } else {
        res->posted = n_events;
        res->stored = (size_t)r.stored;
        res->duplicates = (size_t)r.duplicates;
    }
out:
    fs_buf_free(&resp);
    return rc;
}

int
fs_imp_offset_read(const char *path, struct fs_imp_offset *o, char *err, size_t errlen)
{
    struct json_object *j = json_object_from_file(path);
    int rc = -1;
    if (!j) {
        snprintf(err, errlen, "offset file %s: cannot be read as JSON (%s)", path,
                 json_util_get_last_err() ? json_util_get_last_err() : "unknown error");
        return -1;
    }
    struct json_object *h;
    if (get_member_int(j, "offset_ns", &o->offset_ns) ||
        get_member_int(j, "uncertainty_ns", &o->uncertainty_ns) ||
        get_member_int(j, "measured_at_ns", &o->measured_at_ns) || o->uncertainty_ns < 0) {
        snprintf(err, errlen,
                 "offset file %s: wants integer offset_ns, uncertainty_ns (>= 0) and "
                 "measured_at_ns, as `fabricscope clock-offset` writes them",
                 path);
        goto out;
    }
    o->host[0] = '\0';
    if (json_object_object_get_ex(j, "host", &h) && json_object_is_type(h, json_type_string))
        snprintf(o->host, sizeof o->host, "%s", json_object_get_string(h));
    rc = 0;
out:
    json_object_put(j);
    return rc;
}

int
fs_imp_stream_init(struct fs_imp_stream *s, const struct fs_imp_args *a, const char *what, FILE *o,
                   FILE *e)
{
    memset(s, 0, sizeof *s);
    s->a = a;
    s->what = what;
    s->o = o;
    s->e = e;
    return 0;
}

/* Opens the client and settles the offset, given the latest event end seen so far.
   1: not yet (a capture that looks old so far, while more may follow), 0 open, -1 failed
   (reported). */
static int
stream_open(struct fs_imp_stream *s, bool final, size_t held)
{
    const struct fs_imp_args *a = s->a;
    char err[512];
    int64_t now = realtime_ns();
    if (a->offset_source == FS_IMP_OFFSET_GIVEN) {
        s->off = a->host_offset_ns;
        s->unc = a->host_offset_unc_ns;
        snprintf(s->how, sizeof s->how, "given");
    } else if (a->offset_source == FS_IMP_OFFSET_FILE) {
        if (fs_imp_offset_read(a->offset_file, &s->file, err, sizeof err) != 0) {
            fprintf(s->e, "fabricscope %s: %s\n", s->what, err);
            return -1;
        }
        s->off = s->file.offset_ns;
        s->unc = s->file.uncertainty_ns;
        if (a->host && s->file.host[0] && strcmp(a->host, s->file.host) != 0)
            fprintf(s->e, "fabricscope %s: warning: %s was measured on %s, not on %s\n", s->what,
                    a->offset_file, s->file.host, a->host);
    } else if (s->end > 0 && now - s->end > FS_IMP_STALE_CAPTURE_NS && !a->offset_now) {
        /* Old so far; a later event may still be recent, up to the events held. */
        if (!final && held < FS_IMP_STREAM_HOLD)
            return 1;
        fprintf(s->e,
                "fabricscope %s: the capture ended %.0f min ago%s: an offset measured now, "
                "here, is not the capture's. Record it on the capture host at capture time "
                "(`fabricscope clock-offset --url URL --out FILE`) and pass --offset-file FILE, "
                "or give --host-offset NS[:UNCERTAINTY_NS]; --offset-now posts with the offset "
                "measured now anyway\n",
                s->what, (double)(now - s->end) / 6e10,
                final ? "" : " (its first events, as far as this import held them)");
        return -1;
    } else {
        snprintf(s->how, sizeof s->how, "measured now");
    }
    if (fs_imp_client_open(&s->c, a->url, a->token_file, err, sizeof err) != 0) {
        fprintf(s->e, "fabricscope %s: %s\n", s->what, err);
        return -1;
    }
    s->open = true;
    if (a->offset_source == FS_IMP_OFFSET_MEASURE_NOW &&
        fs_imp_client_offset(&s->c, &s->off, &s->unc, err, sizeof err) != 0) {
        fprintf(s->e, "fabricscope %s: measuring the clock offset: %s\n", s->what, err);
        return -1;
    }
    return 0;
}

/* Posts everything b holds (opens the stream first), or holds b while the capture's age
   is not known: 0 posted, 1 held, -1 failed (reported; the stream is failed). */
static int
stream_send(struct fs_imp_stream *s, const struct fs_imp_batch *b, bool final)
{
    if (s->failed)
        return -1;
    /* While held, b grows: look at its new events only, and try again only after
       another FS_IMP_STREAM_EVENTS of them. */
    if (!s->open && !final && b->n < s->next_try)
        return 1;
    for (size_t i = s->scanned; i < b->n; i++)
        if (b->ev[i].end_ns > s->end)
            s->end = b->ev[i].end_ns;
    s->scanned = b->n;
    if (!s->open) {
        int r = stream_open(s, final, b->n);
        if (r > 0) {
            s->next_try = b->n + FS_IMP_STREAM_EVENTS;
            return 1;
        }
        if (r < 0) {
            s->failed = true;
            return -1;
        }
    }
    char err[512];
    if (post_batches(&s->c, b, s->off, s->unc, &s->log, &s->pr, err, sizeof err) != 0) {
        fprintf(s->e, "fabricscope %s: %s (%zu events posted before)\n", s->what, err,
                s->pr.posted);
        s->failed = true;
        return -1;
    }
    s->scanned = 0;
    return 0;
}

int
fs_imp_stream_flush(struct fs_imp_stream *s, struct fs_imp_batch *b, bool final)
{
    int r = stream_send(s, b, final);
    if (r == 0) {
        fs_imp_batch_free(b);
        *b = (struct fs_imp_batch){0};
    }
    return r < 0 ? -1 : 0;
}

int
fs_imp_stream_finish(struct fs_imp_stream *s, struct fs_imp_batch *b)
{
    int rc = 1;
    if (fs_imp_stream_flush(s, b, true) != 0)
        goto out;
    const struct fs_imp_args *a = s->a;
    if (a->offset_source == FS_IMP_OFFSET_FILE) {
        int64_t apart = s->end > s->file.measured_at_ns ? s->end - s->file.measured_at_ns
                                                        : s->file.measured_at_ns - s->end;
        snprintf(s->how, sizeof s->how, "from %s, measured on %s %.0f s %s the capture's end",
                 a->offset_file, s->file.host[0] ? s->file.host : "an unnamed host",
                 (double)apart / 1e9, s->file.measured_at_ns <= s->end ? "before" : "after");
        if (apart > 3600LL * 1000000000)
            fprintf(s->e,
                    "fabricscope %s: warning: the offset in %s was measured %.1f h from the "
                    "capture; a clock can drift by milliseconds in that time\n",
                    s->what, a->offset_file, (double)apart / 3.6e12);
    }
    s->pr.evicted = post_log_evicted(&s->log);
    fprintf(s->o,
            "fabricscope %s: posted %zu events, %zu stored, %zu already held; host clock "
            "%+.3f ms from the collector's (± %.3f ms, %s)\n",
            s->what, s->pr.posted, s->pr.stored, s->pr.duplicates, (double)s->off / 1e6,
            (double)s->unc / 1e6, s->how);
    if (s->pr.evicted) {
        fprintf(s->e,
                "fabricscope %s: the collector dropped %zu of the %zu events stored to stay "
                "within host_events.memory_limit: raise it, or import less at once\n",
                s->what, s->pr.evicted, s->pr.stored);
        goto out;
    }
    rc = 0;
out:
    if (s->open)
        fs_imp_client_close(&s->c);
    s->open = false;
    post_log_free(&s->log);
    return rc;
}

int
fs_imp_stream_feed(struct fs_imp_stream *s, struct fs_imp_batch *b)
{
    if (!s || b->n < FS_IMP_STREAM_EVENTS)
        return 0;
    return fs_imp_stream_flush(s, b, false);
}

int
fs_imp_stream_end(struct fs_imp_stream *s, struct fs_imp_batch *b, int read_rc, const char *why,
                  size_t events, const char *empty)
{
    if (read_rc == 0 && events > 0)
        return fs_imp_stream_finish(s, b);
    if (read_rc != 0 && !s->failed) {
        if (s->pr.posted)
            fprintf(s->e,
                    "fabricscope %s: %s (%zu events posted before it; an import run again "
                    "stores none of them twice)\n",
                    s->what, why, s->pr.posted);
        else if (events)
            fprintf(s->e, "fabricscope %s: %s (nothing posted)\n", s->what, why);
        else
            fprintf(s->e, "fabricscope %s: %s\n", s->what, why);
    } else if (read_rc == 0) {
        fprintf(s->e, "fabricscope %s: %s\n", s->what, empty);
    }
    if (s->open)
        fs_imp_client_close(&s->c);
    s->open = false;
    s->failed = true;
    post_log_free(&s->log);
    return 1;
}

int
fs_imp_client_run(const struct fs_imp_args *a, const struct fs_imp_batch *b, const char *what,
                  FILE *o, FILE *e)
{
    /* A stream of one batch, which stays the caller's. */
    struct fs_imp_stream s;
    struct fs_imp_batch none = {0};
    fs_imp_stream_init(&s, a, what, o, e);
    (void)stream_send(&s, b, true); /* a failure is reported and fails the stream */
    return fs_imp_stream_finish(&s, &none);
}

int
fs_imp_clock_offset_main(int argc, char **argv)
{
    static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"host", required_argument, NULL, 'H'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *url = NULL, *out = NULL, *host = NULL;
    char err[512], name[256];
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "u:o:H:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            url = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'H':
            host = optarg;
            break;
        case 'h':
            printf("usage: fabricscope clock-offset --url URL [--out FILE] [--host NAME]\n"
                   "  measures this host's clock minus the collector's (NTP-style rounds over\n"
                   "  GET /api/v1/time) and writes it as JSON to FILE (atomically) or stdout;\n"
                   "  run it on a capture host when the capture is taken, and give the file\n"
                   "  to the importer with --offset-file\n");
            return 0;
        default:
            return 2;
        }
    }
    if (!url || optind != argc) {
        fprintf(stderr, "fabricscope clock-offset: usage: fabricscope clock-offset --url URL "
                        "[--out FILE] [--host NAME]\n");
        return 2;
    }
    if (!host) {
        if (gethostname(name, sizeof name) != 0)
            snprintf(name, sizeof name, "unknown");
        name[sizeof name - 1] = '\0';
        host = name;
    }
    struct fs_imp_client c;
    if (fs_imp_client_open(&c, url, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "fabricscope clock-offset: %s\n", err);
        return 1;
    }
    int64_t off, unc;
    int rc = fs_imp_client_offset(&c, &off, &unc, err, sizeof err);
    fs_imp_client_close(&c);
    if (rc != 0) {
        fprintf(stderr, "fabricscope clock-offset: %s\n", err);
        return 1;
    }
    struct json_object *j = json_object_new_object();
    if (!j) {
        fprintf(stderr, "fabricscope clock-offset: out of memory\n");
        return 1;
    }
    json_object_object_add(j, "host", json_object_new_string(host));
    json_object_object_add(j, "url", json_object_new_string(url));
    json_object_object_add(j, "offset_ns", json_object_new_int64(off));
    json_object_object_add(j, "uncertainty_ns", json_object_new_int64(unc));
    json_object_object_add(j, "measured_at_ns", json_object_new_int64(realtime_ns()));
    const char *text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
    rc = 1;
    if (!out) {
        printf("%s\n", text);
        rc = 0;
    } else {
        /* Written whole or not at all: a reader never sees half a file. */
        size_t l = strlen(out) + 16;
        char *tmp = malloc(l);
        FILE *f = NULL;
        if (tmp) {
            snprintf(tmp, l, "%s.tmp%ld", out, (long)getpid());
            f = fopen(tmp, "w");
        }
        if (!f || fprintf(f, "%s\n", text) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
            fprintf(stderr, "fabricscope clock-offset: %s: %s\n", tmp ? tmp : out, strerror(errno));
            if (f)
                fclose(f);
            if (tmp)
                unlink(tmp);
        } else if (fclose(f) != 0 || rename(tmp, out) != 0) {
            fprintf(stderr, "fabricscope clock-offset: %s: %s\n", out, strerror(errno));
            unlink(tmp);
        } else {
            fprintf(stderr,
                    "fabricscope clock-offset: %s: host clock %+.3f ms from the "
                    "collector's (± %.3f ms)\n",
                    out, (double)off / 1e6, (double)unc / 1e6);
            rc = 0;
        }
        free(tmp);
    }
    json_object_put(j);
    return rc;
}
