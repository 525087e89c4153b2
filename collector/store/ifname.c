/* Interface name normalization: the one place that knows vendors' port spellings. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "store/sink.h"

/* True for "1/1", "1/16/3": digits separated by single slashes, at least one slash. */
static int
is_slot_port(const char *s)
{
    int slashes = 0, digits = 0;
    for (; *s; s++) {
        if (isdigit((unsigned char)*s)) {
            digits++;
        } else if (*s == '/' && digits > 0) {
            slashes++;
            digits = 0;
        } else {
            return 0;
        }
    }
    return slashes > 0 && digits > 0;
}

const char *
fs_ifname_normalize(const char *name, char *buf, size_t len)
{
    const char *p = name;
    /* ONYX spells the same port "1/1", "ethernet 1/1", "Ethernet1/1" or "Eth1/1". */
    if (strncasecmp(p, "ethernet", 8) == 0)
        p += 8;
    else if (strncasecmp(p, "eth", 3) == 0)
        p += 3;
    while (*p == ' ')
        p++;
    if (is_slot_port(p)) {
        snprintf(buf, len, "Eth%s", p);
        return buf;
    }
    snprintf(buf, len, "%s", name);
    return buf;
}
