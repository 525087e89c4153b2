/*
 * The host's LLDP neighbours, as `lldpctl -f json` (lldpd) prints them, and the
 * "neighbors" body the agent posts to the collector (analysis/host_events.h).
 *
 * lldpctl's shape (lldpd 1.0.16, checked against its real output): with one neighbour
 * "interface" is an object, with several a list of objects, each {"<nic>": {...}}; with
 * none "lldp" is empty. A neighbour's chassis is {"<sysName>": {"id": {"type", "value"},
 * ...}}, or {"id": {...}, ...} when it sent no sysName; its port {"id": {"type",
 * "value"}, "descr": ...}. The port's name is its id when the id is an interface name
 * ("ifname"), else its description (lldpd sends the ifName there), else the id: the
 * same rule as the SNMP driver's LLDP-MIB read, so both name a switch port alike.
 * Parsed with json-c; members not named here are ignored.
 *
 * Bounds: text at most FS_AGENT_LLDP_MAX_BYTES, nesting FS_AGENT_LLDP_DEPTH; at most the
 * caller's max neighbours (the rest counted in *dropped); strings cut to
 * FS_HOST_EVENTS_MAX_NBR_STR bytes at a UTF-8 character boundary, bytes that are not
 * UTF-8 replaced by '?' (the collector takes UTF-8 only). A neighbour without
 * interface name, port or chassis (id or sysName) is skipped and counted in *dropped.
 *
 * Ownership: the caller's array is filled in place; fs_agent_lldp_body's *body is the
 * caller's (free).
 */
#ifndef FS_AGENT_LLDP_H
#define FS_AGENT_LLDP_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/host_events.h"

#define FS_AGENT_LLDP_MAX_BYTES (4 * 1024 * 1024)
#define FS_AGENT_LLDP_DEPTH 32

struct fs_agent_lldp_nbr {
    char nic[FS_HOST_EVENTS_MAX_NBR_STR + 1];
    char chassis_id[FS_HOST_EVENTS_MAX_NBR_STR + 1];
    char sys_name[FS_HOST_EVENTS_MAX_NBR_STR + 1];
    char port[FS_HOST_EVENTS_MAX_NBR_STR + 1];
    char port_id[FS_HOST_EVENTS_MAX_NBR_STR + 1];
    char port_descr[FS_HOST_EVENTS_MAX_NBR_STR + 1];
};

/**
 * Parses lldpctl -f json output into out[0..*n) (at most max). 0, or -1 with errbuf
 * naming the problem and its place ("lldp.interface[1]: not an object"); *n is then 0.
 */
int fs_agent_lldp_parse(const char *text, size_t len, struct fs_agent_lldp_nbr *out, size_t max,
                        size_t *n, size_t *dropped, char *errbuf, size_t errlen);

/**
 * The body posting host's neighbours v[0..n) (its whole table, posted again within
 * interval_s): {"neighbors": {"host", "interval_s", "list": [...]}}. 0, or -1 with
 * errbuf (no memory).
 */
int fs_agent_lldp_body(const char *host, int64_t interval_s, const struct fs_agent_lldp_nbr *v,
                       size_t n, char **body, size_t *len, char *errbuf, size_t errlen);

#endif
