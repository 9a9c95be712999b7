/* SPDX-License-Identifier: BSD-3-Clause */
/* UCP's defaults where zv may be selected: one rule for both modules. */
#ifndef ZV_GLUE_UCP_DEFAULTS_H
#define ZV_GLUE_UCP_DEFAULTS_H

#include <stdlib.h>
#include <string.h>

/*
 * zv caches registrations in its own md, invalidated by the kernel. UCP's
 * own cache would cache them a second time, keyed by address and dropped
 * only on UCM's events, so a page replaced behind UCM's hooks would reach
 * the wire through UCP's stale entry (UCX 1.22's zero-copy protocols
 * register every lane's md through UCP's cache while it exists, whatever
 * cache_mem_types says: zv_ucs_module.c). So UCP's cache defaults to off in
 * a process that may select zv: UCX_TLS unset, "all", an exclusion list
 * ("^..."), or naming a zv transport. Elsewhere (UCX_TLS=rc_verbs,... in a
 * process that happens to load the module) UCP keeps its default. A user
 * who sets UCX_RCACHE_ENABLE keeps their choice. It must run before UCP
 * reads its configuration: libuct_zv's constructor does under LD_PRELOAD
 * and the Open MPI component, libucs_zv's under UCX 1.22's loader.
 */
static inline int zv_tls_may_select_zv(const char *tls)
{
    static const char *const names[] = {"all", "rc_zv", "ud_zv", "uc_zv"};
    size_t i;

    if ((tls == NULL) || (tls[0] == '\0') || (tls[0] == '^')) {
        return 1;
    }
    for (i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
        if (strstr(tls, names[i]) != NULL) {
            return 1;
        }
    }
    return 0;
}

static inline void zv_set_ucp_defaults(void)
{
    if (zv_tls_may_select_zv(getenv("UCX_TLS"))) {
        setenv("UCX_RCACHE_ENABLE", "n", 0);
    }
}

#endif
