/* The gNMI driver's configuration block (see gnmi_config.h). */
#include "gnmi_config.h"

#include <stdlib.h>

void
fs_gnmi_cfg_defaults(struct fs_gnmi_cfg *c)
{
    c->port = 9339;
    c->encoding = FS_GNMI_ENC_AUTO;
    c->list_mode = FS_GNMI_LIST_STREAM;
    c->interval_us = 10 * 1000000LL;
}

void
fs_gnmi_cfg_free(struct fs_gnmi_cfg *c)
{
    if (!c)
        return;
    free(c->tls_ca_file);
    free(c->tls_cert_file);
    free(c->tls_key_file);
    free(c->tls_server_name);
    free(c->username);
    free(c->password.file);
    free(c->password.env);
    for (size_t i = 0; i < c->n_subscriptions; i++)
        free(c->subscriptions[i].path);
    free(c->subscriptions);
    for (size_t i = 0; i < c->n_user_maps; i++) {
        struct fs_gnmi_user_map *u = &c->user_maps[i];
        free(u->pattern);
        free(u->metric);
        for (size_t j = 0; j < u->n_labels; j++) {
            free(u->labels[j].label);
            free(u->labels[j].key);
            free(u->labels[j].value);
        }
        free(u->labels);
    }
    free(c->user_maps);
    for (size_t i = 0; i < c->n_acl_rules; i++) {
        free(c->acl_rules[i].acl_name);
        free(c->acl_rules[i].rule);
    }
    free(c->acl_rules);
    free(c);
}
