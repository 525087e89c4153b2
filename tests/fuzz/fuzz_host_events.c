/* libFuzzer target: the POST /api/v1/host-events body, then a query over what was kept.
 * A tiny memory limit exercises eviction too. */
#include <stddef.h>
#include <stdint.h>

#include "analysis/host_events.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
touch_cb(void *arg, const struct fs_host_event *e)
{
    size_t *sum = arg;
    *sum += (size_t)e->host[0] + (size_t)e->kind[0] + (size_t)e->name[0];
    for (uint32_t i = 0; i < e->n_attrs; i++)
        *sum += (size_t)e->attrs[i].key[0] + (size_t)e->attrs[i].value[0];
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fs_host_events *hs;
    char err[256];
    if (!hs) {
        struct fs_host_events_opts o = {16 << 10, 3600LL * 1000000000LL};
        hs = fs_host_events_new(&o, err, sizeof err);
        if (!hs)
            return 0;
    }
    size_t stored;
    (void)fs_host_events_ingest(hs, (const char *)data, size, 1796236354000000000LL, &stored, err,
                                sizeof err);
    size_t sum = 0;
    fs_host_events_foreach(hs, INT64_MIN, INT64_MAX, "nccl", touch_cb, &sum);
    fs_host_events_foreach(hs, 0, INT64_MAX, NULL, touch_cb, &sum);
    return 0;
}
