/* libFuzzer target: the NCCL Inspector JSON-lines reader, then the POST body. */
#include <stddef.h>
#include <stdint.h>

#include "importers/import_nccl_inspector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    size_t skipped = 0;
    struct fs_imp_batch b = {0};
    if (fs_import_nccl_inspector_read((const char *)data, size, "fuzz", NULL, &b, &skipped, err,
                                      sizeof err) == 0) {
        struct fs_buf body;
        fs_buf_init(&body, 1 << 20);
        (void)fs_imp_body(&b, 0, b.n, 0, 0, &body);
        fs_buf_free(&body);
    }
    fs_imp_batch_free(&b);
    return 0;
}
