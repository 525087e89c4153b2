/* The shared part of the import subcommands (see command.h). */
#include "importers/command.h"

#include <errno.h>
#include <string.h>

#include "importers/client.h"
#include "util/errf.h"

#define MAX_EXTRA 4

int
fs_imp_parse_args(int argc, char **argv, const char *name, const char *usage,
                  const struct fs_imp_extra *extra, size_t n_extra, void *ctx, int operands,
                  bool need_host, struct fs_imp_args *out)
{
    struct option opts[4 + MAX_EXTRA + 1] = {{"url", required_argument, NULL, 'u'},
                                             {"host", required_argument, NULL, 'H'},
                                             {"token-file", required_argument, NULL, 't'},
                                             {"help", no_argument, NULL, 'h'}};
    char shorts[32] = "u:H:t:h";
    size_t ns = strlen(shorts);
    if (n_extra > MAX_EXTRA)
        n_extra = MAX_EXTRA;
    for (size_t i = 0; i < n_extra; i++) {
        opts[4 + i] = extra[i].opt;
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
        case 'h':
            printf("usage: fabricscope %s %s\n", name, usage);
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

int
fs_imp_finish(const char *name, const struct fs_imp_args *a, int read_rc, const char *err,
              const struct fs_imp_batch *b, const char *empty)
{
    if (read_rc != 0) {
        fprintf(stderr, "fabricscope %s: %s\n", name, err);
        return 1;
    }
    if (b->n == 0) {
        fprintf(stderr, "fabricscope %s: %s\n", name, empty);
        return 1;
    }
    return fs_imp_client_run(a->url, a->token_file, b, name, stdout, stderr);
}
