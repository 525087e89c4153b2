/*
 * libFuzzer target for the configuration walker: any bytes must give either a
 * configuration or a list of problems, never a crash, leak or hang.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const drivers[] = {"snmp", "cli", "gnmi"};
    /* The first byte picks which drivers are built, so "not built" paths run too. */
    struct fs_config_opts opts = {drivers, size ? (size_t)(data[0] % 4) : 3};
    struct fs_config *cfg = NULL;
    char *errors = NULL;
    int rc = fs_config_parse((const char *)data, size, "fuzz.yaml", &opts, &cfg, &errors);

    /* The contract: exactly one of the two comes back. */
    if ((rc == 0) != (cfg != NULL) || (rc == 0) != (errors == NULL))
        abort();
    if (cfg && cfg->n_targets > 1)
        (void)fs_target_cfg_equal(&cfg->targets[0], &cfg->targets[1]);
    fs_config_free(cfg);
    free(errors);
    return 0;
}
