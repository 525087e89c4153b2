/* Importer HTTP client (see client.h). */
#include "importers/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "analysis/clock.h"

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
    memset(c, 0, sizeof *c);
    char token[512] = "";
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
            return -1;
        }
    } else if (getenv("FABRICSCOPE_TOKEN")) {
        snprintf(token, sizeof token, "%s", getenv("FABRICSCOPE_TOKEN"));
        trim_token(token);
    }
    if (strncmp(base_url, "http://", 7) != 0 && strncmp(base_url, "https://", 8) != 0) {
        snprintf(err, errlen, "--url must start with http:// or https://");
        return -1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    c->curl = curl_easy_init();
    c->base_url = strdup(base_url);
    if (!c->curl || !c->base_url) {
        snprintf(err, errlen, "out of memory");
        fs_imp_client_close(c);
        return -1;
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
            return -1;
        }
        snprintf(c->auth_header, n, "Authorization: Bearer %s", token);
    }
    return 0;
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
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        if (c->auth_header)
            hdr = curl_slist_append(hdr, c->auth_header);
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
    struct fs_ntp_round r[FS_IMP_TIME_ROUNDS];
    size_t n = 0;
    struct fs_buf resp;
    fs_buf_init(&resp, 4096);
    int rc = -1;
    for (int i = 0; i < FS_IMP_TIME_ROUNDS; i++) {
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

int
fs_imp_client_post(struct fs_imp_client *c, const struct fs_imp_batch *b, int64_t offset_ns,
                   int64_t uncertainty_ns, size_t *posted, char *err, size_t errlen)
{
    struct fs_buf body, resp;
    fs_buf_init(&body, FS_HOST_EVENTS_MAX_BODY);
    fs_buf_init(&resp, 64 << 10);
    int rc = -1;
    *posted = 0;
    for (size_t from = 0; from < b->n; from += FS_IMP_BATCH) {
        size_t to = from + FS_IMP_BATCH < b->n ? from + FS_IMP_BATCH : b->n;
        fs_buf_reset(&body);
        fs_buf_reset(&resp);
        if (fs_imp_body(b, from, to, offset_ns, uncertainty_ns, &body) != 0) {
            snprintf(err, errlen, "events %zu..%zu: body larger than %u bytes", from, to - 1,
                     FS_HOST_EVENTS_MAX_BODY);
            goto out;
        }
        long status = 0;
        if (request(c, "/api/v1/host-events", body.data, body.len, &resp, &status, err, errlen) !=
            0)
            goto out;
        if (status < 200 || status > 299) {
            snprintf(err, errlen, "POST /api/v1/host-events (events %zu..%zu): HTTP %ld: %.400s",
                     from, to - 1, status, resp.data ? resp.data : "");
            goto out;
        }
        *posted += to - from;
    }
    rc = 0;
out:
    fs_buf_free(&body);
    fs_buf_free(&resp);
    return rc;
}

int
fs_imp_client_run(const char *url, const char *token_file, const struct fs_imp_batch *b,
                  const char *what, FILE *o, FILE *e)
{
    char err[512];
    struct fs_imp_client c;
    if (fs_imp_client_open(&c, url, token_file, err, sizeof err) != 0) {
        fprintf(e, "fabricscope %s: %s\n", what, err);
        return 1;
    }
    int64_t off = 0, unc = 0;
    size_t posted = 0;
    int rc = 1;
    if (fs_imp_client_offset(&c, &off, &unc, err, sizeof err) != 0) {
        fprintf(e, "fabricscope %s: measuring the clock offset: %s\n", what, err);
        goto out;
    }
    if (fs_imp_client_post(&c, b, off, unc, &posted, err, sizeof err) != 0) {
        fprintf(e, "fabricscope %s: %s (%zu of %zu events posted before)\n", what, err, posted,
                b->n);
        goto out;
    }
    fprintf(o,
            "fabricscope %s: posted %zu events; host clock %+.3f ms from the collector's "
            "(± %.3f ms)\n",
            what, posted, (double)off / 1e6, (double)unc / 1e6);
    rc = 0;
out:
    fs_imp_client_close(&c);
    return rc;
}
