/* Error-message formatting (see errf.h). */
#include "util/errf.h"

#include <stdarg.h>
#include <stdio.h>

void
fs_errf(char *err, size_t len, const char *fmt, ...)
{
    if (!err || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}
