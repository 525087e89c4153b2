/* libFuzzer target: a Prometheus query API answer (matrix or vector), fed to the
 * streaming parser in chunks whose sizes come from the input's first byte, so a token
 * split across reads is exercised as libcurl would split it. */
#include <stddef.h>
#include <stdint.h>

#include "history/prom_query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
series_cb(void *arg, const struct fs_prom_series *s)
{
    size_t *sum = arg;
    for (size_t i = 0; i < s->n_labels; i++)
        *sum += (size_t)s->labels[i].name[0] + (size_t)s->labels[i].value[0];
    for (size_t i = 0; i < s->n; i++)
        *sum += (size_t)s->ts_us[i] + (s->v[i] > 0);
    return *sum % 97 == 3; /* sometimes stop, as a caller out of memory would */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)data[0] % 64 + 1, sum = 0;
    struct fs_prom_parser *p = fs_prom_parser_new(series_cb, &sum, 100000);
    if (!p)
        return 0;
    for (size_t o = 1; o < size; o += chunk)
        if (fs_prom_parser_feed(p, (const char *)data + o, size - o < chunk ? size - o : chunk))
            break;
    char err[256];
    (void)fs_prom_parser_finish(p, NULL, NULL, err, sizeof err);
    fs_prom_parser_free(p);
    return 0;
}
