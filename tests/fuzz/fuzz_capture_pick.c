/* libFuzzer target: the host agent's reading of a GET /api/v1/incidents answer
 * (hostagent/capture.h fs_capture_pick), with no filter and with targets and rules; a
 * picked time is never before the bound nor beyond FS_CAPTURE_MAX_AHEAD_NS after it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostagent/capture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *targets[] = {"tor1", "leaf-2"}, *rules[] = {"nccl-sockets"};
    char *json = malloc(size + 1), what[512], err[600];
    if (!json)
        return 0;
    memcpy(json, data, size);
    json[size] = '\0';
    const int64_t now = 1800000000LL * 1000000000;
    for (int k = 0; k < 2; k++) {
        struct fs_agent_cfg cfg = {0};
        if (k) {
            cfg.targets = targets;
            cfg.n_targets = 2;
            cfg.rules = rules;
            cfg.n_rules = 1;
        }
        int64_t next = 0;
        int r = fs_capture_pick(json, &cfg, now, &next, what, sizeof what, err, sizeof err);
        if (r == 1 && (next < now || next - now > FS_CAPTURE_MAX_AHEAD_NS))
            abort();
    }
    free(json);
    return 0;
}
