/*
 * The SNMP driver's configuration block: the checks YANG cannot express (which keys
 * belong to which SNMP version, weak crypto, SNMPv3 secure by default) and building
 * struct fs_snmp_cfg; see snmp_config.h.
 */
#include <stdlib.h>
#include <string.h>

#include "config/block.h"
#include "snmp_config.h"

#define US_PER_S INT64_C(1000000)

static void
check_v2c(const struct lyd_node *snmp, struct fs_cfg_errs *errs)
{
    static const char *const v3_only[] = {"user", "auth", "priv", "security_level"};

    if (!fs_cfg_kid(snmp, "community_file") && !fs_cfg_kid(snmp, "community_env"))
        fs_cfg_node_err(errs, snmp, true, "SNMP v2c needs community_file or community_env");
    for (size_t i = 0; i < sizeof(v3_only) / sizeof(v3_only[0]); i++) {
        const struct lyd_node *n = fs_cfg_given(snmp, v3_only[i]);
        if (n)
            fs_cfg_node_err(errs, n, true, "%s is an SNMPv3 setting; add version: 3", v3_only[i]);
    }
}

/* SNMPv3 is authPriv unless the block asks for less by name. */
static void
check_security_level(const struct lyd_node *snmp, bool auth, bool priv, struct fs_cfg_errs *errs)
{
    const struct lyd_node *lvl = fs_cfg_given(snmp, "security_level");
    const char *v = fs_cfg_cval(snmp, "security_level");

    if (!v)
        v = "authPriv";
    if (lvl && ((auth && !strcmp(v, "noAuthNoPriv")) || (priv && strcmp(v, "authPriv"))))
        fs_cfg_node_err(errs, lvl, true, "security_level: %s contradicts the %s block", v,
                        priv ? "priv" : "auth");
    else if (!auth && !priv && strcmp(v, "noAuthNoPriv"))
        fs_cfg_node_err(errs, lvl ? lvl : snmp, true,
                        "SNMP v3 without auth and priv is noAuthNoPriv (no authentication, "
                        "counters in clear): add auth and priv, or set security_level: "
                        "noAuthNoPriv");
    else if (auth && !priv && strcmp(v, "authNoPriv"))
        fs_cfg_node_err(errs, lvl ? lvl : snmp, true,
                        "SNMP v3 without priv is authNoPriv (counters in clear): add priv, or "
                        "set security_level: authNoPriv");
}

static void
check_v3(const struct lyd_node *snmp, struct fs_cfg_errs *errs)
{
    const struct lyd_node *comm = fs_cfg_kid(snmp, "community_file");
    const struct lyd_node *auth = fs_cfg_kid(snmp, "auth");
    const struct lyd_node *priv = fs_cfg_kid(snmp, "priv");
    bool weak_ok = fs_cfg_bool(snmp, "allow_weak_crypto");

    if (!comm)
        comm = fs_cfg_kid(snmp, "community_env");
    if (!fs_cfg_kid(snmp, "user"))
        fs_cfg_node_err(errs, snmp, true, "SNMP v3 needs user");
    if (comm)
        fs_cfg_node_err(errs, comm, true,
                        "a community is an SNMP v2c setting; v3 uses user, auth and priv");
    if (priv && !auth)
        fs_cfg_node_err(errs, priv, true,
                        "priv needs auth: SNMPv3 has no privacy without authentication");
    else
        check_security_level(snmp, auth != NULL, priv != NULL, errs);
    if (auth && !fs_cfg_node_bad(auth) && !weak_ok) {
        const struct lyd_node *p = fs_cfg_kid(auth, "protocol");
        const char *v = p ? fs_cfg_value(p) : "";
        if (!strcmp(v, "md5") || !strcmp(v, "sha"))
            fs_cfg_node_err(errs, p, false,
                            "%s is weak; use sha256 or better, or set allow_weak_crypto: true", v);
    }
    if (priv && !fs_cfg_node_bad(priv) && !weak_ok) {
        const struct lyd_node *p = fs_cfg_kid(priv, "protocol");
        const char *v = p ? fs_cfg_value(p) : "";
        if (!strcmp(v, "des"))
            fs_cfg_node_err(errs, p, false,
                            "des is weak; use aes128, or set allow_weak_crypto: true");
    }
}

static enum fs_snmp_auth
auth_proto(const char *v)
{
    static const char *const names[] = {"", "md5", "sha", "sha224", "sha256", "sha384", "sha512"};
    for (size_t i = 1; v && i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(v, names[i]))
            return (enum fs_snmp_auth)i;
    return FS_AUTH_NONE;
}

static enum fs_snmp_security_level
security_level(const char *v)
{
    if (v && !strcmp(v, "noAuthNoPriv"))
        return FS_SNMP_NO_AUTH_NO_PRIV;
    if (v && !strcmp(v, "authNoPriv"))
        return FS_SNMP_AUTH_NO_PRIV;
    return FS_SNMP_AUTH_PRIV;
}

int
fs_snmp_config_build(const struct lyd_node *n, void **dcfg, struct fs_cfg_errs *errs)
{
    struct fs_snmp_cfg *s = calloc(1, sizeof(*s));
    const struct lyd_node *auth = fs_cfg_kid(n, "auth"), *priv = fs_cfg_kid(n, "priv");
    const char *v;

    *dcfg = s;
    if (!s)
        return -1;
    s->port = (uint16_t)fs_cfg_long(n, "port", 161);
    s->version = (v = fs_cfg_cval(n, "version")) && !strcmp(v, "3") ? FS_SNMP_V3 : FS_SNMP_V2C;
    if (s->version == FS_SNMP_V3)
        check_v3(n, errs);
    else
        check_v2c(n, errs);
    if (fs_cfg_secret_ref(&s->community, n, "community") || fs_cfg_strdup(&s->user, n, "user"))
        return -1;
    if (auth) {
        s->auth_protocol = auth_proto(fs_cfg_cval(auth, "protocol"));
        if (fs_cfg_secret_ref(&s->auth_password, auth, "password"))
            return -1;
    }
    if (priv) {
        v = fs_cfg_cval(priv, "protocol");
        s->priv_protocol = v && !strcmp(v, "des") ? FS_PRIV_DES : FS_PRIV_AES128;
        if (fs_cfg_secret_ref(&s->priv_password, priv, "password"))
            return -1;
    }
    s->security_level = security_level(fs_cfg_cval(n, "security_level"));
    s->allow_weak_crypto = fs_cfg_bool(n, "allow_weak_crypto");
    s->interval_us = fs_cfg_duration_us(n, "interval", 10 * US_PER_S);
    s->timeout_us = fs_cfg_duration_us(n, "timeout", 2 * US_PER_S);
    s->retries = (int)fs_cfg_long(n, "retries", 1);
    s->max_repetitions = (int)fs_cfg_long(n, "max_repetitions", 50);
    v = fs_cfg_cval(n, "qos_index_base");
    s->qos_index_base = !v || !strcmp(v, "auto") ? -1 : (int)strtol(v, NULL, 10);
    s->lldp = fs_cfg_kid(n, "lldp") ? fs_cfg_bool(n, "lldp") : true;
    s->lldp_interval_us = fs_cfg_duration_us(n, "lldp_interval", 30 * US_PER_S);
    return 0;
}

void
fs_snmp_config_free(void *dcfg)
{
    struct fs_snmp_cfg *s = dcfg;
    if (!s)
        return;
    fs_cfg_secret_ref_free(&s->community);
    free(s->user);
    fs_cfg_secret_ref_free(&s->auth_password);
    fs_cfg_secret_ref_free(&s->priv_password);
    free(s);
}

bool
fs_snmp_config_equal(const void *pa, const void *pb)
{
    const struct fs_snmp_cfg *a = pa, *b = pb;
    if (!a || !b)
        return a == b;
    return a->port == b->port && a->version == b->version &&
           fs_cfg_secret_ref_equal(&a->community, &b->community) &&
           fs_cfg_str_equal(a->user, b->user) && a->auth_protocol == b->auth_protocol &&
           fs_cfg_secret_ref_equal(&a->auth_password, &b->auth_password) &&
           a->priv_protocol == b->priv_protocol &&
           fs_cfg_secret_ref_equal(&a->priv_password, &b->priv_password) &&
           a->security_level == b->security_level && a->allow_weak_crypto == b->allow_weak_crypto &&
           a->interval_us == b->interval_us && a->timeout_us == b->timeout_us &&
           a->retries == b->retries && a->max_repetitions == b->max_repetitions &&
           a->qos_index_base == b->qos_index_base && a->lldp == b->lldp &&
           a->lldp_interval_us == b->lldp_interval_us;
}

int64_t
fs_snmp_config_interval(const void *dcfg)
{
    const struct fs_snmp_cfg *s = dcfg;
    return s && s->interval_us > 0 ? s->interval_us : 10 * US_PER_S;
}
