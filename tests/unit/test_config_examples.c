/*
 * The examples against the real registry of this build (the drivers the shipped binary
 * has, no stand-in list):
 *  - config/X.yaml is accepted if this build has every driver it uses; otherwise it is
 *    refused with exactly one "this build has no D driver" line per such block.
 *  - config/invalid/X.yaml is refused with exactly the lines of X.expect if this build
 *    has every driver it uses; otherwise the lines of X.expect about keys inside the
 *    blocks of drivers it lacks are replaced by one "no D driver" line per such block
 *    (a rule libyang checks once all else passed, like a must statement of the cli
 *    block, is then not reached: keep such examples to one driver's block).
 * Which drivers an example uses is read from the file itself with libyaml (the keys of
 * each target that name a driver fabricscope knows). FS_SOURCE_DIR is the repository.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <yaml.h>

#include "config/config.h"
#include "daemon.h"
#include "driver.h"

static struct fs_config_opts opts;

static int
setup(void **state)
{
    (void)state;
    fs_daemon_config_opts(&opts);
    return 0;
}

static bool
built(const char *name)
{
    for (size_t i = 0; i < opts.n_blocks; i++)
        if (!strcmp(opts.blocks[i]->name, name))
            return true;
    return false;
}

static bool
known(const char *name)
{
    for (size_t i = 0; i < fs_known_driver_count; i++)
        if (!strcmp(fs_known_driver_names[i], name))
            return true;
    return false;
}

static const yaml_node_t *
map_value(yaml_document_t *doc, const yaml_node_t *map, const char *key)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, key))
            return yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

/* Whether the configuration's reading stage refuses text (anchors, tags, aliases, a
 * second document, %TAG): it then stops before looking at any block. */
static bool
reading_refuses(const char *text, size_t len)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    bool refuse = false, done = false;
    int docs = 0;

    assert_true(yaml_parser_initialize(&parser));
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    while (!done && !refuse && yaml_parser_parse(&parser, &ev)) {
        switch (ev.type) {
        case YAML_ALIAS_EVENT:
            refuse = true;
            break;
        case YAML_SCALAR_EVENT:
            refuse = ev.data.scalar.anchor || ev.data.scalar.tag;
            break;
        case YAML_MAPPING_START_EVENT:
            refuse = ev.data.mapping_start.anchor || ev.data.mapping_start.tag;
            break;
        case YAML_SEQUENCE_START_EVENT:
            refuse = ev.data.sequence_start.anchor || ev.data.sequence_start.tag;
            break;
        case YAML_DOCUMENT_START_EVENT:
            refuse = ++docs > 1 || ev.data.document_start.tag_directives.start !=
                                       ev.data.document_start.tag_directives.end;
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return refuse;
}

/*
 * The refusal this build must give for text: one "FILE:L:C: targets[T].D: this build has
 * no D driver" line per block of a known driver D it lacks, in file order (malloc'd;
 * "" when the example uses only drivers this build has).
 */
static char *
missing_driver_lines(const char *text, size_t len, const char *file)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    size_t cap = 4096, o = 0;
    char *out = calloc(1, cap);

    assert_non_null(out);
    if (reading_refuses(text, len))
        return out;
    assert_true(yaml_parser_initialize(&parser));
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        /* Unreadable YAML: the configuration stops at reading too, before any block. */
        yaml_parser_delete(&parser);
        return out;
    }
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    const yaml_node_t *targets =
        root && root->type == YAML_MAPPING_NODE ? map_value(&doc, root, "targets") : NULL;
    if (targets && targets->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = targets->data.sequence.items.start;
             it < targets->data.sequence.items.top; it++) {
            const yaml_node_t *t = yaml_document_get_node(&doc, *it);
            if (!t || t->type != YAML_MAPPING_NODE)
                continue;
            const yaml_node_t *name = map_value(&doc, t, "name");
            for (yaml_node_pair_t *p = t->data.mapping.pairs.start; p < t->data.mapping.pairs.top;
                 p++) {
                const yaml_node_t *k = yaml_document_get_node(&doc, p->key);
                const char *key = (const char *)k->data.scalar.value;
                if (k->type != YAML_SCALAR_NODE || !known(key) || built(key))
                    continue;
                o += (size_t)snprintf(out + o, cap - o,
                                      "%s:%zu:%zu: targets[%s].%s: this build has no %s driver\n",
                                      file, k->start_mark.line + 1, k->start_mark.column + 1,
                                      name ? (const char *)name->data.scalar.value : "?", key, key);
                assert_true(o < cap);
            }
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return out;
}

static char *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
            buf[n] = '\0';
            *len = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the *.yaml files in dir (caller frees each and the array). */
static char **
yaml_files(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    size_t cap = 0;
    *n = 0;
    if (!d)
        fail_msg("cannot open %s", dir);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".yaml"))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            v = realloc(v, cap * sizeof(*v));
            assert_non_null(v);
        }
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(v, *n, sizeof(*v), name_cmp);
    return v;
}

static const char *
src_dir(void)
{
    const char *s = getenv("FS_SOURCE_DIR");
    if (!s)
        fail_msg("FS_SOURCE_DIR is not set");
    return s;
}

static void
test_examples_validate(void **state)
{
    (void)state;
    char dir[1024], path[1200];
    size_t n, len;
    char **files;
    const char *must_have[] = {"demo.yaml",        "single-tor.yaml", "nccl-flow-rules.yaml",
                               "snmp-v3.yaml",     "gnmi-tls.yaml",   "full.yaml",
                               "gnmi-cumulus.yaml"};

    snprintf(dir, sizeof(dir), "%s/config", src_dir());
    files = yaml_files(dir, &n);
    for (size_t i = 0; i < sizeof(must_have) / sizeof(must_have[0]); i++) {
        bool found = false;
        for (size_t j = 0; j < n; j++)
            found = found || !strcmp(files[j], must_have[i]);
        if (!found)
            fail_msg("config/%s is missing", must_have[i]);
    }
    for (size_t i = 0; i < n; i++) {
        struct fs_config *cfg = NULL;
        char *errors = NULL, *text;
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        text = slurp(path, &len);
        assert_non_null(text);
        char *missing = missing_driver_lines(text, len, files[i]);
        int rc = fs_config_parse(text, len, files[i], &opts, &cfg, &errors);
        if (!missing[0] && rc != 0)
            fail_msg("config/%s is refused:\n%s", files[i], errors);
        if (missing[0] && rc == 0)
            fail_msg("config/%s is accepted by a build without a driver it uses", files[i]);
        if (missing[0] && strcmp(errors, missing) != 0)
            fail_msg("config/%s:\ngot:\n%sexpected:\n%s", files[i], errors, missing);
        assert_true((rc == 0) == (cfg != NULL));
        fs_config_free(cfg);
        free(errors);
        free(missing);
        free(text);
        free(files[i]);
    }
    free(files);
}

static void
test_demo_contents(void **state)
{
    (void)state;
    char path[1200];
    struct fs_config *cfg = NULL;
    char *errors = NULL;
    const struct fs_driver *snmp = fs_driver_find("snmp"), *gnmi = fs_driver_find("gnmi"),
                           *cli = fs_driver_find("cli"), *sflow = fs_driver_find("sflow");
    snprintf(path, sizeof(path), "%s/config/demo.yaml", src_dir());
    if (!snmp || !gnmi || !cli || !sflow) {
        /* A build without one of the demo's drivers refuses it, saying why. */
        assert_int_not_equal(fs_config_load(path, &opts, &cfg, &errors), 0);
        if (!snmp)
            assert_non_null(strstr(errors, ".snmp: this build has no snmp driver\n"));
        if (!gnmi)
            assert_non_null(strstr(errors, ".gnmi: this build has no gnmi driver\n"));
        if (!cli)
            assert_non_null(strstr(errors, ".cli: this build has no cli driver\n"));
        if (!sflow)
            assert_non_null(strstr(errors, ".sflow: this build has no sflow driver\n"));
        free(errors);
        return;
    }
    if (fs_config_load(path, &opts, &cfg, &errors) != 0)
        fail_msg("%s", errors);
    assert_string_equal(cfg->listen_host, "127.0.0.1");
    assert_int_equal(cfg->listen_port, 9464);
    assert_int_equal(cfg->n_targets, 2);
    assert_string_equal(cfg->targets[0].name, "sim-tor1");
    assert_string_equal(cfg->targets[0].address, "127.0.0.1");
    /* One simulated switch three ways: SNMP and its CLI, each polled every second, and
     * the sFlow it exports (committed every second, counter samples every 20 s). */
    assert_int_equal(cfg->targets[0].n_blocks, 3);
    assert_non_null(fs_target_block_cfg(&cfg->targets[0], &sflow->block));
    assert_int_equal(
        sflow->block.config_interval(fs_target_block_cfg(&cfg->targets[0], &sflow->block)),
        20000000);
    assert_ptr_equal(fs_target_block_cfg(&cfg->targets[0], &snmp->block),
                     cfg->targets[0].blocks[0].cfg);
    assert_int_equal(
        snmp->block.config_interval(fs_target_block_cfg(&cfg->targets[0], &snmp->block)), 1000000);
    assert_non_null(fs_target_block_cfg(&cfg->targets[0], &cli->block));
    assert_int_equal(cli->block.config_interval(fs_target_block_cfg(&cfg->targets[0], &cli->block)),
                     1000000);
    /* the CLI driver gets the configuration's flow rules with the target */
    assert_int_equal(cfg->targets[0].n_flow_rules, cfg->n_flow_rules);
    assert_ptr_equal(cfg->targets[0].flow_rules, cfg->flow_rules);
    /* The gNMI switch: one gnmi block whose slowest subscription promises a value every
     * second (queues at 100 ms, interface counters at 1 s). */
    assert_string_equal(cfg->targets[1].name, "sim-leaf1");
    assert_int_equal(cfg->targets[1].n_blocks, 1);
    assert_ptr_equal(cfg->targets[1].blocks[0].ops, &gnmi->block);
    assert_int_equal(gnmi->block.config_interval(cfg->targets[1].blocks[0].cfg), 1000000);
    assert_true(cfg->n_flow_rules >= 1);
    fs_config_free(cfg);
}

/* L and C of "FILE:L:C: ..." (a line of a problem list). */
static void
line_pos(const char *line, unsigned long *l, unsigned long *c)
{
    const char *p = strchr(line, ':');
    *l = p ? strtoul(p + 1, (char **)&p, 10) : 0;
    *c = p && *p == ':' ? strtoul(p + 1, NULL, 10) : 0;
}

/* The key path of a problem line: between "FILE:L:C: " and the next ": ". */
static void
line_path(const char *line, char *buf, size_t len)
{
    const char *p = line;
    for (int i = 0; i < 3 && p; i++)
        p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL;
    const char *e = p ? strstr(p + 1, ": ") : NULL;
    snprintf(buf, len, "%.*s", e ? (int)(e - p - 1) : 0, e ? p + 1 : "");
}

struct problem_line {
    unsigned long l, c;
    size_t seq;
    char text[1024];
};

static int
problem_cmp(const void *a, const void *b)
{
    const struct problem_line *x = a, *y = b;
    if (x->l != y->l)
        return x->l < y->l ? -1 : 1;
    if (x->c != y->c)
        return x->c < y->c ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* What a build lacking some drivers must say for an invalid example (see the top). */
static char *
expected_without_drivers(const char *expect, const char *missing)
{
    struct problem_line *v = calloc(256, sizeof(*v));
    size_t n = 0, o = 0, cap = 64 * 1024;
    char *out = calloc(1, cap);
    assert_non_null(v);
    assert_non_null(out);
    for (int pass = 0; pass < 2; pass++) {
        const char *p = pass ? missing : expect;
        while (*p) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) + 1 : strlen(p);
            char path[512];
            bool inside = false;
            assert_true(n < 256 && len < sizeof(v[n].text));
            memcpy(v[n].text, p, len);
            v[n].text[len] = '\0';
            if (!pass) {
                /* dropped when it is about a key inside a block of a missing driver */
                line_path(v[n].text, path, sizeof(path));
                for (const char *m = missing; *m && !inside;) {
                    char block[512];
                    line_path(m, block, sizeof(block));
                    size_t bl = strlen(block);
                    inside = !strncmp(path, block, bl) && (path[bl] == '\0' || path[bl] == '.');
                    m = strchr(m, '\n') ? strchr(m, '\n') + 1 : m + strlen(m);
                }
            }
            if (!inside) {
                line_pos(v[n].text, &v[n].l, &v[n].c);
                v[n].seq = n;
                n++;
            }
            p += len;
        }
    }
    qsort(v, n, sizeof(*v), problem_cmp);
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s", v[i].text);
    free(v);
    return out;
}

static void
test_invalid_examples(void **state)
{
    (void)state;
    char dir[1024], path[1200];
    size_t n, len, elen;
    char **files;

    snprintf(dir, sizeof(dir), "%s/config/invalid", src_dir());
    files = yaml_files(dir, &n);
    assert_true(n >= 10);
    for (size_t i = 0; i < n; i++) {
        struct fs_config *cfg = NULL;
        char *errors = NULL, *text, *expect;
        int rc;
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        text = slurp(path, &len);
        assert_non_null(text);
        snprintf(path, sizeof(path), "%s/%.*s.expect", dir, (int)strlen(files[i]) - 5, files[i]);
        expect = slurp(path, &elen);
        if (!expect)
            fail_msg("config/invalid/%s has no .expect file", files[i]);
        char *missing = missing_driver_lines(text, len, files[i]);
        rc = fs_config_parse(text, len, files[i], &opts, &cfg, &errors);
        if (rc == 0)
            fail_msg("config/invalid/%s was accepted", files[i]);
        assert_null(cfg);
        if (!missing[0] && strcmp(errors, expect) != 0)
            fail_msg("config/invalid/%s:\ngot:\n%sexpected:\n%s", files[i], errors, expect);
        if (missing[0]) {
            char *want = expected_without_drivers(expect, missing);
            if (strcmp(errors, want) != 0)
                fail_msg("config/invalid/%s (a driver it uses is not built):\ngot:\n%s"
                         "expected:\n%s",
                         files[i], errors, want);
            free(want);
        }
        free(missing);
        free(errors);
        free(expect);
        free(text);
        free(files[i]);
    }
    free(files);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_validate),
        cmocka_unit_test(test_demo_contents),
        cmocka_unit_test(test_invalid_examples),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
