/* NCCL kernel name classification (see nccl_names.h). */
#include "importers/nccl_names.h"

#include <ctype.h>
#include <string.h>

int
fs_nccl_kernel_collective(const char *kernel, char *out, size_t len)
{
    static const char *const prefixes[] = {"ncclDevKernel_", "ncclKernel_"};
    for (size_t p = 0; p < 2; p++) {
        const char *s = strstr(kernel, prefixes[p]);
        if (!s)
            continue;
        s += strlen(prefixes[p]);
        size_t n = 0;
        while (isalnum((unsigned char)s[n]))
            n++;
        if (n == 0 || n >= len)
            return -1;
        memcpy(out, s, n);
        out[n] = '\0';
        return 0;
    }
    return -1;
}
