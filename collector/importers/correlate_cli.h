/*
 * `fabricscope correlate --url URL [--start T] [--end T] [--kind K] [--slow pNN|Nx]
 *  [--window START,END]... [--token-file F]`: asks GET /api/v1/correlate and prints the
 * answer as a table, for an engineer on a bastion host: the aggregated suspects, then
 * each slow event with its top suspect.
 */
#ifndef FS_CORRELATE_CLI_H
#define FS_CORRELATE_CLI_H

#include <stdio.h>

/** Prints the table for a /api/v1/correlate JSON answer to out. 0 or -1 (not that JSON). */
int fs_correlate_print(const char *json, FILE *out);

/** The subcommand (argv[0] = "correlate"); returns the exit code. */
int fs_correlate_main(int argc, char **argv);

#endif
