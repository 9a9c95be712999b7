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
 *   rcache_zverbs_enable       load the zv module (default true)
 *   rcache_zverbs_module       path of libuct_zv.so.0 (default: installed path)
 *   rcache_zverbs_monitor      UCX_ZV_RCACHE_MONITOR
 *   rcache_zverbs_max_size     UCX_ZV_RCACHE_MAX_SIZE
 *   rcache_zverbs_max_regions  UCX_ZV_RCACHE_MAX_REGIONS
 * `--mca rcache ^zverbs` excludes the component altogether.
 *
 * The last three are the registration cache's settings an MPI user reaches
 * for, the Open MPI way. The module reads its settings from UCX's
 * configuration (the environment) when UCX opens it, so open() exports each
 * one the user set (on the command line, in the environment as
 * OMPI_MCA_rcache_zverbs_*, or in a parameter file) as its UCX_ZV_*
 * variable before loading the module. One the user left at its default is
 * not exported: the module's own default applies, defined in one place. An
 * explicit UCX_ZV_* variable wins; when it disagrees with the MCA
 * parameter, one line says so. A value of the wrong form is reported and
 * not exported, so the module's default applies.
 */

#include "opal_config.h"

#include "opal/mca/mca.h"
#include "opal/mca/base/base.h"
#include "opal/mca/rcache/rcache.h"
#include "opal/util/output.h"

#include "util/text.h"

#include <ctype.h>
#include <errno.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifndef ZV_MODULE_INSTALL_PATH
#error "ZV_MODULE_INSTALL_PATH must be defined"
#endif

static bool  zverbs_enable = ZV_MCA_ENABLE_DEFAULT;
static char *zverbs_module = ZV_MODULE_INSTALL_PATH;

/* UCX_ZV_RCACHE_MONITOR's names: a string parameter, checked here. Open
 * MPI's enum parameters report a bad value through mpirun's help relay,
 * which did not always print it. */
static const char *const zverbs_monitor_names[] = {
    ZV_RCACHE_MONITORS(ZV_TEXT_NAME, ZV_TEXT_COMMA), NULL};

enum zverbs_syntax { ZV_SYNTAX_NAME, ZV_SYNTAX_MEMUNITS, ZV_SYNTAX_COUNT };

/* One MCA parameter that stands for one UCX_ZV_* variable. */
struct zverbs_ucx_param {
    const char         *name;    /* rcache_zverbs_<name> */
    const char         *ucx_env;
    enum zverbs_syntax  syntax;
    const char         *expected; /* its syntax, for a message */
    const char         *doc;
    char               *string;     /* the parameter's storage */
    int                 index;      /* the MCA variable's, or -1 */
};

/* The names, defaults and help texts are the module's (util/text.h). */
#define ZV_PARAM(name, var, kind, def, syntax, doc) \
    {name, var, ZV_SYNTAX_##kind, syntax, ZV_MCA_CACHE_HELP(var, syntax, doc), def, -1},
static struct zverbs_ucx_param zverbs_ucx_params[] = {ZV_MCA_CACHE_PARAMS(ZV_PARAM)};
#undef ZV_PARAM

#define ZV_NUM_UCX_PARAMS \
    (sizeof(zverbs_ucx_params) / sizeof(zverbs_ucx_params[0]))

static int zverbs_register(void);
static int zverbs_open(void);
static mca_rcache_base_module_t *zverbs_init(mca_rcache_base_resources_t *res);

OPAL_DECLSPEC extern mca_rcache_base_component_t mca_rcache_zverbs_component;

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
            ZV_MCA_ENABLE_HELP,
            MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_3,
            MCA_BASE_VAR_SCOPE_READONLY, &zverbs_enable);
    (void)mca_base_component_var_register(
            &mca_rcache_zverbs_component.rcache_version, "module",
            ZV_MCA_MODULE_HELP,
            MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_5,
            MCA_BASE_VAR_SCOPE_READONLY, &zverbs_module);

    for (size_t i = 0; i < ZV_NUM_UCX_PARAMS; ++i) {
        struct zverbs_ucx_param *p = &zverbs_ucx_params[i];
        p->index = mca_base_component_var_register(
                &mca_rcache_zverbs_component.rcache_version, p->name, p->doc,
                MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_4,
                MCA_BASE_VAR_SCOPE_READONLY, &p->string);
    }
    return OPAL_SUCCESS;
}

/* A monitor name; else "auto", "inf", or digits with, for sizes, one of
 * UCX's memory units: the forms UCX's parser accepts for these variables. */
static bool zverbs_value_valid(const char *v, enum zverbs_syntax syntax)
{
    if (syntax == ZV_SYNTAX_NAME) {
        for (size_t i = 0; zverbs_monitor_names[i] != NULL; ++i) {
            if (!strcasecmp(v, zverbs_monitor_names[i])) {
                return true;
            }
        }
        return false;
    }

    static const char *const units[] = {"", "b", "k", "kb", "m", "mb", "g",
                                        "gb", NULL};
    const char *end = v;

    if (!strcasecmp(v, "auto") || !strcasecmp(v, "inf")) {
        return true;
    }
    while (isdigit((unsigned char)*end)) {
        ++end;
    }
    if (end == v) {
        return false;
    }
    if (syntax == ZV_SYNTAX_COUNT) {
        return *end == '\0';
    }
    for (size_t i = 0; units[i] != NULL; ++i) {
        if (!strcasecmp(end, units[i])) {
            return true;
        }
    }
    return false;
}

/* Export the parameter as its UCX_ZV_* variable if the user set it. */
static void zverbs_export(const struct zverbs_ucx_param *p)
{
    mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
    const char *value, *env;

    if (p->index < 0 ||
        mca_base_var_get_value(p->index, NULL, &source, NULL) != OPAL_SUCCESS ||
        source == MCA_BASE_VAR_SOURCE_DEFAULT) {
        return;
    }
    value = p->string;
    if ((value == NULL) || !zverbs_value_valid(value, p->syntax)) {
        opal_output(0, "rcache:zverbs: rcache_zverbs_%s=%s is not a valid value "
                    "(expected %s); ignored, %s keeps its default", p->name,
                    (value != NULL) ? value : "", p->expected, p->ucx_env);
        return;
    }
    env = getenv(p->ucx_env);
    if (env != NULL) {
        if (strcasecmp(env, value) != 0) {
            opal_output(0, "rcache:zverbs: %s=%s in the environment wins over "
                        "rcache_zverbs_%s=%s", p->ucx_env, env, p->name, value);
        }
        return;
    }
    if (setenv(p->ucx_env, value, 0) != 0) {
        opal_output(0, "rcache:zverbs: cannot set %s=%s: %s", p->ucx_env,
                    value, strerror(errno));
    }
}

static int zverbs_open(void)
{
    void *handle;

    if (!zverbs_enable) {
        return OPAL_SUCCESS;
    }
    for (size_t i = 0; i < ZV_NUM_UCX_PARAMS; ++i) {
        zverbs_export(&zverbs_ucx_params[i]);
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
