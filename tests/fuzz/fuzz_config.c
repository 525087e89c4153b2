/*
 * libFuzzer target for the configuration walker: any bytes must give either a
 * configuration or a list of problems, never a crash, leak or hang.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "daemon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const known[] = {"snmp", "cli", "gnmi"};
    struct fs_config_opts real, bare = {NULL, 0, known, 3};
    struct fs_config *cfg = NULL;
    char *errors = NULL;

    /* This build's registry, or (first byte odd) a build without any driver, so that the
     * "this build has no X driver" paths run too. */
    fs_daemon_config_opts(&real);
    int rc = fs_config_parse((const char *)data, size, "fuzz.yaml",
                             size && (data[0] & 1) ? &bare : &real, &cfg, &errors);

    /* The contract: exactly one of the two comes back. */
    if ((rc == 0) != (cfg != NULL) || (rc == 0) != (errors == NULL))
        abort();
    if (cfg && cfg->n_targets > 1)
        (void)fs_target_cfg_equal(&cfg->targets[0], &cfg->targets[1]);
    fs_config_free(cfg);
    free(errors);
    return 0;
}
