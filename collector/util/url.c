/* URLs without their credentials (see url.h). */
#include "util/url.h"

#include <stdio.h>
#include <string.h>

void
fs_url_redact(const char *url, char *out, size_t len)
{
    if (len == 0)
        return;
    const char *s = strstr(url, "://");
    size_t scheme = s ? (size_t)(s - url) + 3 : 0;
    const char *auth = url + scheme;
    size_t k = strcspn(auth, "/?#");
    const char *at = NULL;
    for (size_t i = k; i > 0; i--)
        if (auth[i - 1] == '@') {
            at = auth + i;
            break;
        }
    if (!at)
        snprintf(out, len, "%s", url);
    else
        snprintf(out, len, "%.*s***@%s", (int)scheme, url, at);
}
