/* The correlate subcommand (see correlate_cli.h). */
#include "importers/correlate_cli.h"

#include <curl/curl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "importers/client.h"

static const char *
str(struct json_object *o, const char *key)
{
    struct json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v))
        return "";
    const char *s = json_object_get_string(v);
    return s ? s : "";
}

static double
num(struct json_object *o, const char *key)
{
    struct json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v))
        return 0;
    return json_object_get_double(v);
}

static void
port(struct json_object *s, char *out, size_t len)
{
    snprintf(out, len, "%s %s%s%s%s%s", str(s, "target"), str(s, "interface"),
             *str(s, "tc") ? " tc" : "", str(s, "tc"), *str(s, "rule") ? " rule " : "",
             str(s, "rule"));
}

int
fs_correlate_print(const char *json, FILE *out)
{
    struct json_object *root = json_tokener_parse(json), *data, *summary, *events;
    if (!root || !json_object_object_get_ex(root, "data", &data) ||
        !json_object_object_get_ex(data, "summary", &summary) ||
        !json_object_object_get_ex(data, "events", &events) ||
        !json_object_is_type(summary, json_type_array) ||
        !json_object_is_type(events, json_type_array)) {
        json_object_put(root);
        return -1;
    }
    fprintf(out, "%.0f slow windows of %.0f events, %.0f series scanned\n\n", num(data, "windows"),
            num(data, "events_considered"), num(data, "series_scanned"));
    fprintf(out, "%-28s %-8s %8s %7s %7s %10s  %s\n", "SUSPECT", "KIND", "EVIDENCE", "FIRST",
            "DURING", "MAX Z", "SUMMARY");
    size_t ns = json_object_array_length(summary);
    for (size_t i = 0; i < ns; i++) {
        struct json_object *s = json_object_array_get_idx(summary, i);
        char p[256];
        port(s, p, sizeof p);
        fprintf(out, "%-28s %-8s %8.2f %7.0f %7.0f %10.1f  %s\n", p, str(s, "kind"),
                num(s, "evidence"), num(s, "first"), num(s, "departs"), num(s, "max_z"),
                str(s, "text"));
    }
    if (ns == 0)
        fprintf(out, "(no switch series departed from its baseline in these windows)\n");
    fprintf(out, "\n%-26s %-12s %-16s %10s  %-28s %9s %9s\n", "EVENT START", "HOST", "NAME",
            "DUR MS", "TOP SUSPECT", "LAG MS", "± MS");
    size_t ne = json_object_array_length(events);
    for (size_t i = 0; i < ne; i++) {
        struct json_object *e = json_object_array_get_idx(events, i), *sus, *top = NULL;
        if (json_object_object_get_ex(e, "suspects", &sus) && json_object_array_length(sus) > 0)
            top = json_object_array_get_idx(sus, 0);
        char p[256] = "-";
        if (top)
            port(top, p, sizeof p);
        fprintf(out, "%-26s %-12s %-16s %10.3f  %-28s %9.1f %9.1f\n", str(e, "start"),
                str(e, "host"), str(e, "name"), num(e, "duration_ms"), p,
                top ? num(top, "lag_ms") : 0.0, top ? num(top, "clock_uncertainty_ms") : 0.0);
    }
    json_object_put(root);
    return 0;
}

static int
add_param(char *q, size_t len, CURL *h, const char *key, const char *value)
{
    char *esc = curl_easy_escape(h, value, 0);
    if (!esc)
        return -1;
    size_t l = strlen(q);
    snprintf(q + l, len - l, "%s%s=%s", l ? "&" : "", key, esc);
    curl_free(esc);
    return 0;
}

int
fs_correlate_main(int argc, char **argv)
{
    static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                         {"start", required_argument, NULL, 's'},
                                         {"end", required_argument, NULL, 'e'},
                                         {"kind", required_argument, NULL, 'k'},
                                         {"slow", required_argument, NULL, 'l'},
                                         {"window", required_argument, NULL, 'w'},
                                         {"token-file", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *url = NULL, *token = NULL;
    const char *keys[64], *vals[64];
    size_t np = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "u:s:e:k:l:w:t:h", opts, NULL)) != -1) {
        const char *key = NULL;
        switch (c) {
        case 'u':
            url = optarg;
            break;
        case 't':
            token = optarg;
            break;
        case 's':
            key = "start";
            break;
        case 'e':
            key = "end";
            break;
        case 'k':
            key = "kind";
            break;
        case 'l':
            key = "slow";
            break;
        case 'w':
            key = "window";
            break;
        case 'h':
            printf("usage: fabricscope correlate --url URL [--start T] [--end T] [--kind K] "
                   "[--slow pNN|Nx] [--window START,END]...\n");
            return 0;
        default:
            return 2;
        }
        if (key && np < 64) {
            keys[np] = key;
            vals[np++] = optarg;
        }
    }
    if (!url || optind != argc) {
        fprintf(stderr, "fabricscope correlate: needs --url URL\n");
        return 2;
    }
    struct fs_imp_client cl;
    char err[512], q[8192] = "";
    if (fs_imp_client_open(&cl, url, token, err, sizeof err) != 0) {
        fprintf(stderr, "fabricscope correlate: %s\n", err);
        return 1;
    }
    for (size_t i = 0; i < np; i++)
        if (add_param(q, sizeof q, cl.curl, keys[i], vals[i]) != 0) {
            fs_imp_client_close(&cl);
            return 1;
        }
    char path[8300];
    snprintf(path, sizeof path, "/api/v1/correlate%s%s", q[0] ? "?" : "", q);
    struct fs_buf resp;
    fs_buf_init(&resp, 256u << 20);
    long status = 0;
    int rc = 1;
    if (fs_imp_client_get(&cl, path, &resp, &status, err, sizeof err) != 0)
        fprintf(stderr, "fabricscope correlate: %s\n", err);
    else if (status != 200)
        fprintf(stderr, "fabricscope correlate: HTTP %ld: %.400s\n", status,
                resp.data ? resp.data : "");
    else if (fs_correlate_print(resp.data ? resp.data : "", stdout) != 0)
        fprintf(stderr, "fabricscope correlate: the answer is not a correlate document\n");
    else
        rc = 0;
    fs_buf_free(&resp);
    fs_imp_client_close(&cl);
    return rc;
}
