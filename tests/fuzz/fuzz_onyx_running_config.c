/*
 * libFuzzer target for the reading of `show running-config` (drivers/onyx/flowrules.c,
 * onyx_flow_plan): whatever a switch, or whoever configured it, put there. The plan must
 * come out whole or fail cleanly, and every command it would send to the CLI must be one
 * line of printable text (a newline taken from the running config into a command would
 * inject a command of the switch's choosing), with the rollback and notes likewise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flowrules.h"

static const struct fs_flow_rule rules[] = {
    {.name = "nccl", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = 3},
    {.name = "nccl-ce",
     .protocol = FS_PROTO_UDP,
     .dst_lo = 4791,
     .dst_hi = 4791,
     .ecn_ce = true,
     .tc = -1},
    {.name = "storage", .protocol = FS_PROTO_TCP, .dst_lo = 3260, .dst_hi = 3270, .tc = -1},
};
static const char *const ports[] = {"Eth1/1", "Eth1/2", "Eth1/49", "Eth1/1/2"};

static void
check_lines(const char *what, char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!v[i])
            abort();
        for (const char *p = v[i]; *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f) {
                fprintf(stderr, "%s %zu holds byte 0x%02x: ", what, i, (unsigned char)*p);
                for (const char *q = v[i]; *q; q++)
                    fprintf(stderr, (unsigned char)*q < 0x20 ? "\\x%02x" : "%c", *q);
                fprintf(stderr, "\n");
                abort();
            }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Not NUL-terminated on purpose: the parser is given a length. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    /* The rule count and port count vary with the first byte, so every subset is tried. */
    size_t n_rules = size ? (size_t)(data[0] % 4) : 3;
    size_t n_ports = size ? (size_t)((data[0] >> 2) % 5) : 4;
    struct onyx_plan p;
    char err[256];
    for (int with_ports = 0; with_ports < 2; with_ports++) {
        memset(&p, 0, sizeof(p));
        if (onyx_flow_plan(rules, n_rules, buf, size, with_ports ? ports : NULL,
                           with_ports ? n_ports : 0, &p, err, sizeof(err)) == 0) {
            check_lines("command", p.cmds, p.n);
            check_lines("rollback", p.rollback, p.n_rollback);
            check_lines("note", p.notes, p.n_notes);
            if (p.n_bound > n_ports)
                abort();
        }
        onyx_plan_free(&p);
    }
    free(buf);
    return 0;
}
