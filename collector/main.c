/* fabricscope: argument parsing only; everything else is in the fs_core library. */
#include <getopt.h>
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
    fprintf(f, "usage: fabricscope -c FILE                 run the collector\n"
               "       fabricscope --check-config FILE     validate FILE (exit 0 good, 2 bad)\n"
               "       fabricscope probe -c FILE TARGET    poll one target once and print it\n"
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

static int
cmd_probe(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *cfg = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!cfg || optind != argc - 1) {
        fprintf(stderr, "fabricscope probe: needs -c FILE and one TARGET\n");
        return 2;
    }
    return fs_probe(cfg, argv[optind], stdout, stderr);
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"check-config", required_argument, NULL, 'C'},
        {"version", no_argument, NULL, 'V'},      {"help", no_argument, NULL, 'h'},
        {"shard", required_argument, NULL, 's'},  {NULL, 0, NULL, 0}};
    const char *cfg = NULL;
    struct fs_shard shard = {0, 0};
    char err[160];
    int c;

    /* Subcommands come first so each can have its own options. */
    if (argc > 1 && strcmp(argv[1], "probe") == 0)
        return cmd_probe(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "import-nsys") == 0)
        return fs_import_nsys_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "import-perf") == 0)
        return fs_import_perf_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "import-nccl-inspector") == 0)
        return fs_import_nccl_inspector_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "correlate") == 0)
        return fs_correlate_main(argc - 1, argv + 1);

    while ((c = getopt_long(argc, argv, "c:hVs:", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            cfg = optarg;
            break;
        case 'C':
            return fs_check_config(optarg, stdout, stderr);
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
