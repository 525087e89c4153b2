/*
 * libFuzzer target for the ONYX `| json-print` parsers (drivers/onyx/parse.c): show
 * version, show interfaces ethernet in both layouts, congestion-control. JSON itself is
 * json-c's; this exercises what the parsers do with any document (and the span search
 * around it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    char err[128];
    struct onyx_samples s = {0};
    struct onyx_version v;
    struct onyx_tc_profile prof[8];
    size_t np = 0, a, b;
    if (onyx_json_span(buf, size, &a, &b) && (a > b || b > size))
        abort();
    (void)onyx_parse_version_json(buf, size, &v, err, sizeof(err));
    (void)onyx_parse_interfaces_json(buf, size, &s, err, sizeof(err));
    (void)onyx_parse_congestion_json(buf, size, &s, prof, &np, err, sizeof(err));
    if (np > 8)
        abort();
    for (size_t i = 0; i < s.n; i++)
        if ((unsigned)s.v[i].metric >= FS_METRIC_COUNT || s.v[i].n_labels > ONYX_LABELS_MAX)
            abort();
    onyx_samples_free(&s);
    return 0;
}
