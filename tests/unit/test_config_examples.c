/*
 * Every example in config/ must validate (with the drivers snmp, cli and gnmi), and
 * every config/invalid/X.yaml must be refused with exactly the lines of X.expect.
 * FS_SOURCE_DIR points at the repository root.
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

#include "config/config.h"

static const char *const drivers[] = {"snmp", "cli", "gnmi"};
static const struct fs_config_opts opts = {drivers, 3};

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
    const char *must_have[] = {"demo.yaml",    "single-tor.yaml", "nccl-flow-rules.yaml",
                               "snmp-v3.yaml", "gnmi-tls.yaml",   "full.yaml"};

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
        if (fs_config_parse(text, len, files[i], &opts, &cfg, &errors) != 0)
            fail_msg("config/%s is refused:\n%s", files[i], errors);
        assert_non_null(cfg);
        fs_config_free(cfg);
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
    snprintf(path, sizeof(path), "%s/config/demo.yaml", src_dir());
    if (fs_config_load(path, &opts, &cfg, &errors) != 0)
        fail_msg("%s", errors);
    assert_string_equal(cfg->listen_host, "127.0.0.1");
    assert_int_equal(cfg->listen_port, 9464);
    assert_int_equal(cfg->n_targets, 1);
    assert_string_equal(cfg->targets[0].name, "sim-tor1");
    assert_string_equal(cfg->targets[0].address, "127.0.0.1");
    assert_non_null(cfg->targets[0].snmp);
    assert_null(cfg->targets[0].cli);
    assert_null(cfg->targets[0].gnmi);
    assert_int_equal(cfg->targets[0].snmp->port, 16100);
    assert_string_equal(cfg->targets[0].snmp->community.file, "run/demo/community");
    assert_int_equal(cfg->targets[0].snmp->interval_us, 1000000);
    assert_true(cfg->n_flow_rules >= 1);
    fs_config_free(cfg);
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
        rc = fs_config_parse(text, len, files[i], &opts, &cfg, &errors);
        if (rc == 0)
            fail_msg("config/invalid/%s was accepted", files[i]);
        assert_null(cfg);
        if (strcmp(errors, expect) != 0)
            fail_msg("config/invalid/%s:\ngot:\n%sexpected:\n%s", files[i], errors, expect);
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
    return cmocka_run_group_tests(tests, NULL, NULL);
}
