/* libFuzzer target: a whole /api/v1/raw query string (split, percent-decoding, every
 * parameter, selectors, times) to the parsed request. */
#include <stddef.h>
#include <stdint.h>

#include "http/api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fs_raw_query q;
    char err[512];
    if (fs_raw_query_parse_string((const char *)data, size, 1733130000000000LL, &q, err,
                                  sizeof err) == 0) {
        if (q.start_us > q.end_us || q.n_sel == 0 || q.limit == 0 || q.limit > FS_RAW_MAX_POINTS)
            __builtin_trap();
        fs_raw_query_free(&q);
    }
    /* The time parser on its own, NUL-terminated. */
    char t[64];
    size_t n = size < sizeof t - 1 ? size : sizeof t - 1;
    for (size_t i = 0; i < n; i++)
        t[i] = (char)data[i];
    t[n] = '\0';
    int64_t us;
    (void)fs_api_parse_time(t, &us);
    return 0;
}
