/* libFuzzer target: an episode log snapshot (analysis/episode_log.h). The input is a
 * snapshot without its trailing CRC-32, which is computed and appended here so that the
 * fuzzer reaches the decoding behind the checksum. A snapshot that is read must give the
 * same log when written and read again. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "analysis/episode_log.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW_US 1800000000000000LL

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fs_episode_log_opts o = {
        .retention_us = 7LL * 86400 * 1000000, .memory_limit = 1 << 20, .merge_gap_us = 2000000};
    uint8_t *in = malloc(size + 4);
    struct fs_episode_log *l = fs_episode_log_new(&o), *again = fs_episode_log_new(&o);
    struct fs_buf b;
    char err[256];
    fs_buf_init(&b, 64 << 20);
    if (!in || !l || !again)
        goto out;
    memcpy(in, data, size);
    uLong crc = crc32(0L, in, (uInt)size);
    for (int i = 0; i < 4; i++)
        in[size + (size_t)i] = (uint8_t)(crc >> (8 * i));
    if (fs_episode_log_restore(l, in, size + 4, NOW_US, err, sizeof err) != 0)
        goto out;
    if (fs_episode_log_snapshot(l, NOW_US, &b, NULL) != 0 ||
        fs_episode_log_restore(again, b.data, b.len, NOW_US, err, sizeof err) != 0)
        abort(); /* what was read must write and read back */
    struct fs_episode_log_stats s1, s2;
    fs_episode_log_stats(l, &s1);
    fs_episode_log_stats(again, &s2);
    if (s1.runs != s2.runs || s1.series != s2.series)
        abort();
out:
    fs_buf_free(&b);
    fs_episode_log_free(l);
    fs_episode_log_free(again);
    free(in);
    return 0;
}
