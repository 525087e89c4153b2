/* libFuzzer target: the perf script text reader, with the header's reference and with
 * an explicit one, then the POST body built from what it read; then the streamed reader
 * (fs_perf_stream_line, the host agent's), line by line. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "importers/import_perf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    size_t skipped;
    struct fs_perf_ref given = {true, 1796236354000000000LL, 1000000000000LL};
    for (int pass = 0; pass < 2; pass++) {
        struct fs_imp_batch b = {0};
        if (fs_import_perf_read((const char *)data, size, "fuzz", pass ? &given : NULL, &b,
                                &skipped, err, sizeof err) == 0) {
            struct fs_buf body;
            fs_buf_init(&body, 1 << 20);
            (void)fs_imp_body(&b, 0, b.n, 0, 0, &body);
            fs_buf_free(&body);
        }
        fs_imp_batch_free(&b);
    }
    struct fs_perf_stream st;
    struct fs_imp_batch b = {0};
    fs_perf_stream_init(&st, NULL);
    for (size_t i = 0; i < size;) {
        const uint8_t *nl = memchr(data + i, '\n', size - i);
        size_t l = nl ? (size_t)(nl - (data + i)) : size - i;
        if (fs_perf_stream_line(&st, (const char *)data + i, l, "fuzz", &b, err, sizeof err) < 0)
            break;
        i += l + 1;
    }
    fs_imp_batch_free(&b);
    return 0;
}
