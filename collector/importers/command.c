/* The shared part of the import subcommands (see command.h). */
#include "importers/command.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/errf.h"

#define MAX_EXTRA 4
#define N_COMMON 7

/* "NS" or "NS:UNCERTAINTY_NS" (host minus collector; the uncertainty defaults to 0). */
static int
parse_host_offset(const char *s, int64_t *off, int64_t *unc)
{
    char *e;
    errno = 0;
    long long o = strtoll(s, &e, 10), u = 0;
    if (errno || e == s || (*e && *e != ':'))
        return -1;
    if (*e == ':') {
        const char *us = e + 1;
        u = strtoll(us, &e, 10);
        if (errno || e == us || *e || u < 0)
            return -1;
    }
    *off = o;
    *unc = u;
    return 0;
}

int
fs_imp_parse_args(int argc, char **argv, const char *name, const char *usage,
                  const struct fs_imp_extra *extra, size_t n_extra, void *ctx, int operands,
                  bool need_host, struct fs_imp_args *out)
{
    struct option opts[N_COMMON + MAX_EXTRA + 1] = {{"url", required_argument, NULL, 'u'},
                                                    {"host", required_argument, NULL, 'H'},
                                                    {"token-file", required_argument, NULL, 't'},
                                                    {"help", no_argument, NULL, 'h'},
                                                    {"host-offset", required_argument, NULL, 'O'},
                                                    {"offset-file", required_argument, NULL, 'F'},
                                                    {"offset-now", no_argument, NULL, 'N'}};
    char shorts[40] = "u:H:t:hO:F:N";
    size_t ns = strlen(shorts);
    if (n_extra > MAX_EXTRA)
        n_extra = MAX_EXTRA;
    for (size_t i = 0; i < n_extra; i++) {
        opts[N_COMMON + i] = extra[i].opt;
        shorts[ns++] = (char)extra[i].opt.val;
        if (extra[i].opt.has_arg == required_argument)
            shorts[ns++] = ':';
    }
    shorts[ns] = '\0';
    *out = (struct fs_imp_args){0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
        switch (c) {
        case 'u':
            out->url = optarg;
            break;
        case 'H':
            out->host = optarg;
            break;
        case 't':
            out->token_file = optarg;
            break;
        case 'O':
            if (out->offset_source == FS_IMP_OFFSET_FILE ||
                parse_host_offset(optarg, &out->host_offset_ns, &out->host_offset_unc_ns) != 0) {
                fprintf(stderr,
                        "fabricscope %s: --host-offset wants NS or NS:UNCERTAINTY_NS (host clock "
                        "minus the collector's), and excludes --offset-file\n",
                        name);
                return 2;
            }
            out->offset_source = FS_IMP_OFFSET_GIVEN;
            break;
        case 'F':
            if (out->offset_source == FS_IMP_OFFSET_GIVEN) {
                fprintf(stderr, "fabricscope %s: --offset-file excludes --host-offset\n", name);
                return 2;
            }
            out->offset_source = FS_IMP_OFFSET_FILE;
            out->offset_file = optarg;
            break;
        case 'N':
            out->offset_now = true;
            break;
        case 'h':
            printf("usage: fabricscope %s %s\n"
                   "  the host's clock offset at capture time: --offset-file FILE (written on the\n"
                   "  capture host by `fabricscope clock-offset --url URL --out FILE`), or\n"
                   "  --host-offset NS[:UNCERTAINTY_NS]; without either it is measured now, which\n"
                   "  is refused for a capture that ended more than 5 minutes ago unless\n"
                   "  --offset-now says this host's clock then and now are the same\n",
                   name, usage);
            return 0;
        default: {
            size_t i = 0;
            while (i < n_extra && extra[i].opt.val != c)
                i++;
            if (i == n_extra)
                return 2; /* getopt has said what was wrong */
            int rc = extra[i].handle(optarg, ctx);
            if (rc != 0)
                return rc;
        }
        }
    }
    if (!out->url || (need_host && !out->host) || argc - optind != operands) {
        fprintf(stderr, "fabricscope %s: usage: fabricscope %s %s\n", name, name, usage);
        return 2;
    }
    out->first_operand = optind;
    return -1;
}

int
fs_imp_read_all(FILE *f, struct fs_buf *out, char *err, size_t errlen)
{
    fs_buf_init(out, (size_t)1 << 30);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (!fs_buf_append(out, chunk, n))
            break;
    if (out->overflow) {
        fs_errf(err, errlen, "larger than 1 GiB");
        return -1;
    }
    if (ferror(f)) {
        fs_errf(err, errlen, "read error: %s", strerror(errno));
        return -1;
    }
    return 0;
}
