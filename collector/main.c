/* fabricscope: argument parsing only; everything else is in the fs_core library. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "importers/correlate_cli.h"
#include "importers/import_nccl_inspector.h"
#include "importers/import_nsys.h"
#include "importers/import_perf.h"

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: fabricscope -c FILE                 run the collector\n"
            "       fabricscope --check-config FILE     validate FILE (exit 0 good, 2 bad)\n"
            "       fabricscope probe -c FILE TARGET [--transcript]\n"
            "                                           poll one target once and print it\n"
            "                                           (--transcript: and the raw exchange)\n"
            "       fabricscope plan-flow-rules -c FILE [TARGET]\n"
            "                                           print the configuration commands that\n"
            "                                           would install the flow rules (sends none)\n"
            "       fabricscope import-nsys REPORT.sqlite --url URL [--host NAME]\n"
            "       fabricscope import-perf --url URL --host NAME [--reference TOD=CLOCK|now]"
            " < perf-script.txt\n"
            "       fabricscope import-nccl-inspector --url URL [--host NAME] DIR\n"
            "           (importers: --token-file FILE or FABRICSCOPE_TOKEN for the bearer"
            " token)\n"
            "       fabricscope correlate --url URL [--start T --end T --kind K --slow pNN]"
            "   the table\n"
            "       fabricscope --version | --help\n"
            "Signals: SIGHUP reloads FILE (a bad file is refused and the running\n"
            "configuration stays), SIGTERM or SIGINT stops.\n");
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
                                         {NULL, 0, NULL, 0}};
    const char *cfg = NULL;
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

    while ((c = getopt_long(argc, argv, "c:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg = optarg;
            break;
        case 'C':
            return fs_check_config(optarg, stdout, stderr);
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
    return fs_daemon_run(cfg);
}
