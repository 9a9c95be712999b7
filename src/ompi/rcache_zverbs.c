/* SPDX-License-Identifier: BSD-3-Clause */
/* Open MPI component that brings the zv UCT module into every MPI process. */

/*
 * UCX 1.13 only opens the module names compiled into libuct, so libuct_zv
 * must already be in the process when `pml ucx` calls ucp_init(). MPI_Init
 * opens the rcache framework before the pml framework, and opening a
 * framework opens each of its components: this component's open() loads
 * the module (RTLD_GLOBAL | RTLD_NODELETE, since the module can never be
 * unloaded once registered with UCT) and offers no rcache module itself.
 *
 * MCA parameters:
 *   rcache_zverbs_enable  load the zv module (default true)
 *   rcache_zverbs_module  path of libuct_zv.so.0 (default: installed path)
 * `--mca rcache ^zverbs` excludes the component altogether.
 */

#include "opal_config.h"

#include "opal/mca/mca.h"
#include "opal/mca/base/base.h"
#include "opal/mca/rcache/rcache.h"
#include "opal/util/output.h"

#include <dlfcn.h>

#ifndef ZV_MODULE_INSTALL_PATH
#error "ZV_MODULE_INSTALL_PATH must be defined"
#endif

static bool  zverbs_enable = true;
static char *zverbs_module = ZV_MODULE_INSTALL_PATH;

static int zverbs_register(void);
static int zverbs_open(void);
static mca_rcache_base_module_t *zverbs_init(mca_rcache_base_resources_t *res);

OPAL_MODULE_DECLSPEC extern mca_rcache_base_component_t mca_rcache_zverbs_component;

mca_rcache_base_component_t mca_rcache_zverbs_component = {
    .rcache_version = {
        MCA_RCACHE_BASE_VERSION_3_0_0,
        .mca_component_name = "zverbs",
        MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
        .mca_open_component = zverbs_open,
        .mca_register_component_params = zverbs_register,
    },
    .rcache_data = {
        .param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT
    },
    .rcache_init = zverbs_init,
};

static int zverbs_register(void)
{
    (void)mca_base_component_var_register(
            &mca_rcache_zverbs_component.rcache_version, "enable",
            "Load the zverbs UCT module (libuct_zv) into each process so that "
            "UCX (pml ucx, osc ucx) can use the rc_zv/ud_zv/uc_zv transports "
            "without LD_PRELOAD",
            MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_3,
            MCA_BASE_VAR_SCOPE_READONLY, &zverbs_enable);
    (void)mca_base_component_var_register(
            &mca_rcache_zverbs_component.rcache_version, "module",
            "Path of the zverbs UCT module to load",
            MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_5,
            MCA_BASE_VAR_SCOPE_READONLY, &zverbs_module);
    return OPAL_SUCCESS;
}

static int zverbs_open(void)
{
    void *handle;

    if (!zverbs_enable) {
        return OPAL_SUCCESS;
    }

    handle = dlopen(zverbs_module, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (handle == NULL) {
        opal_output(0, "rcache:zverbs: cannot load %s: %s (set "
                    "rcache_zverbs_module, or rcache_zverbs_enable=0)",
                    zverbs_module, dlerror());
        return OPAL_SUCCESS; /* MPI still runs, without the zv transports */
    }
    opal_output_verbose(10, 0, "rcache:zverbs: loaded %s", zverbs_module);
    /* The handle is intentionally kept: the module stays for the process'
     * lifetime (RTLD_NODELETE). */
    return OPAL_SUCCESS;
}

static mca_rcache_base_module_t *zverbs_init(mca_rcache_base_resources_t *res)
{
    (void)res;
    return NULL; /* loader only: never an Open MPI registration cache */
}
