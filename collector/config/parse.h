/*
 * Strict parsers of the configuration's value forms (the lowest layer of config/;
 * fs_parse_duration() and fs_parse_size() are public in config.h). Internal.
 */
#ifndef FS_CONFIG_PARSE_H
#define FS_CONFIG_PARSE_H

#include <stddef.h>

/** "A-B" port range; 0 with *lo and *hi set, or -1. Numbers above 65535 are refused. */
int fs_cfg_parse_port_range(const char *s, unsigned *lo, unsigned *hi);

/** "host:port" or "[v6]:port"; host is copied without brackets. 0 or -1. */
int fs_cfg_parse_listen(const char *s, char *host, size_t hlen, unsigned *port);

#endif
