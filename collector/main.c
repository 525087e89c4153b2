/* fabricscope: argument parsing only; everything else is in the fs_core library. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "hostagent/agent.h"
#include "importers/client.h"
#include "importers/correlate_cli.h"
#include "importers/import_nccl_inspector.h"
#include "importers/import_nsys.h"
#include "importers/import_perf.h"

/* Every flag and subcommand; tests/ops/test_help.sh checks that each option the sources
 * define is named here. */
static void
usage(FILE *f)
{
    fprintf(
        f,
        "usage: fabricscope -c FILE [--shard INDEX/COUNT]   run the collector\n"
        "       fabricscope --check-config FILE             validate FILE and exit\n"
        "       fabricscope --reload PID                    reload the collector PID, wait\n"
        "                                                   for its verdict\n"
        "       fabricscope SUBCOMMAND [OPTIONS]            see below\n"
        "       fabricscope --version | --help\n"
        "\n"
        "Collector options:\n"
        "  -c, --config FILE         the YAML configuration (docs/configuration.md)\n"
        "      --check-config FILE   print every problem of FILE as FILE:LINE:COL: key: reason;\n"
        "                            exit 0 when good, 2 when bad\n"
        "      --reload PID          ask the collector of process PID to reload its file and\n"
        "                            wait for its verdict (60 s at most): exit 0 applied, 1\n"
        "                            refused or no answer (the unit's ExecReload)\n"
        "      --shard INDEX/COUNT   poll only the targets shard INDEX of COUNT owns (0-based);\n"
        "                            overrides the file's shard: {index, count} at start and on\n"
        "                            every reload\n"
        "  -V, --version             print the version\n"
        "  -h, --help                print this help\n"
        "\n"
        "Subcommands:\n"
        "  probe -c FILE TARGET [--transcript]\n"
        "                            poll TARGET of FILE once with each of its drivers, print\n"
        "                            what /metrics would carry and each driver's state; exit 0\n"
        "                            all good, 1 a driver failed, 2 bad file or unknown target;\n"
        "                            --transcript: also each driver's raw exchange\n"
        "  plan-flow-rules -c FILE [TARGET]\n"
        "                            print the configuration commands that would install the\n"
        "                            flow rules on TARGET (or every target); sends none\n"
        "  import-nsys REPORT.sqlite --url URL [--host NAME] [--token-file FILE]\n"
        "                            post the NCCL kernels of an Nsight Systems SQLite export\n"
        "                            (nsys export --type sqlite) to the collector at URL\n"
        "  import-perf --url URL --host NAME [--reference TOD=CLOCK|now] [--token-file FILE]\n"
        "                            post `perf script` output read from stdin; --reference\n"
        "                            ties perf's clock to time of day\n"
        "  import-nccl-inspector --url URL [--host NAME] [--token-file FILE] DIR\n"
        "                            post the NCCL Inspector plugin's JSON-lines logs of DIR\n"
        "  clock-offset --url URL [--out FILE] [--host NAME]\n"
        "                            measure this host's clock minus the collector's and write\n"
        "                            it (JSON) to FILE or stdout; run it on a GPU host when a\n"
        "                            capture is taken\n"
        "  host-agent -c FILE [--check-config] [--once]\n"
        "                            the agent of a GPU host: keeps its clock offset to the\n"
        "                            collector measured, posts NCCL Inspector records as they\n"
        "                            are written (spooled while the collector is away) and runs\n"
        "                            perf around the next predicted incident; --check-config\n"
        "                            validates FILE (exit 0 or 2), --once captures once now\n"
        "  correlate --url URL [--start T] [--end T] [--kind K] [--slow pNN|Nx]\n"
        "            [--window START,END]... [--token-file FILE]\n"
        "                            print GET /api/v1/correlate as a table: the suspects,\n"
        "                            then each slow event with its top suspect\n"
        "  Each subcommand takes --help. Importers read the collector's bearer token from\n"
        "  --token-file FILE or the FABRICSCOPE_TOKEN environment variable, and take the\n"
        "  host's clock offset at capture time with --offset-file FILE (from clock-offset)\n"
        "  or --host-offset NS[:UNCERTAINTY_NS]; without them it is measured at import, which\n"
        "  is refused for a capture older than 5 minutes unless --offset-now is given.\n"
        "\n"
        "Signals: SIGHUP reloads FILE (a bad file is refused and the running configuration\n"
        "stays; `systemctl reload` runs --check-config, then --reload), SIGTERM or SIGINT\n"
        "stops (a second one, or 15 s, ends a stuck shutdown).\n");
}

/* `probe` (takes TARGET and --transcript) and `plan-flow-rules` (TARGET optional). */
static int
cmd_target(const char *cmd, int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"transcript", no_argument, NULL, 'T'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    bool probe = strcmp(cmd, "probe") == 0;
    struct fs_probe_opts po = {.transcript = false};
    const char *cfg = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg = optarg;
            break;
        case 'T':
            if (probe) {
                po.transcript = true;
                break;
            }
            fprintf(stderr, "fabricscope %s: --transcript is an option of probe\n", cmd);
            return 2;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (probe && (!cfg || optind != argc - 1)) {
        fprintf(stderr, "fabricscope probe: needs -c FILE and one TARGET\n");
        return 2;
    }
    if (!probe && (!cfg || optind < argc - 1)) {
        fprintf(stderr, "fabricscope plan-flow-rules: needs -c FILE and at most one TARGET\n");
        return 2;
    }
    if (probe)
        return fs_probe(cfg, argv[optind], &po, stdout, stderr);
    return fs_plan_flow_rules(cfg, optind < argc ? argv[optind] : NULL, stdout, stderr);
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"check-config", required_argument, NULL, 'C'},
                                         {"version", no_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"shard", required_argument, NULL, 's'},
                                         {"reload", required_argument, NULL, 'R'},
                                         {NULL, 0, NULL, 0}};
    const char *cfg = NULL;
    struct fs_shard shard = {0, 0};
    char err[160];
    int c;

    /* Subcommands come first so each can have its own options. */
    if (argc > 1 && (strcmp(argv[1], "probe") == 0 || strcmp(argv[1], "plan-flow-rules") == 0))
        return cmd_target(argv[1], argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "import-nsys") == 0)
        return fs_import_nsys_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "import-perf") == 0)
        return fs_import_perf_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "import-nccl-inspector") == 0)
        return fs_import_nccl_inspector_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "correlate") == 0)
        return fs_correlate_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "host-agent") == 0)
        return fs_host_agent_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "clock-offset") == 0)
        return fs_imp_clock_offset_main(argc - 1, argv + 1);

    while ((c = getopt_long(argc, argv, "c:hVs:", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg = optarg;
            break;
        case 'C':
            return fs_check_config(optarg, stdout, stderr);
        case 'R': {
            char *end;
            long pid = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || pid <= 0) {
                fprintf(stderr, "fabricscope: --reload: \"%s\" is not a process id\n", optarg);
                return 2;
            }
            /* Below systemd's default TimeoutSec= (90 s) for the ExecReload= lines. */
            return fs_daemon_reload(pid, 60, stdout, stderr);
        }
        case 's':
            if (fs_shard_parse(optarg, &shard, err, sizeof err) != 0) {
                fprintf(stderr, "fabricscope: %s\n", err);
                return 2;
            }
            break;
        case 'V':
            printf("fabricscope %s\n", FS_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fabricscope: unknown command \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!cfg) {
        usage(stderr);
        return 2;
    }
    return fs_daemon_run_shard(cfg, shard.count ? &shard : NULL);
}
