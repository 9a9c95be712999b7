// SPDX-License-Identifier: BSD-3-Clause
// UCX glue for the zv memory domain: its config table (UCX_ZV_*), the
// process-wide invalidation source, md open, rkeys and the component.
#include "glue/zv_glue.h"
#include "md/zv_md.h"
#include "monitor/monitor.h"
#include "rcache/config.h"
#include "ucx/compat.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>
#include <ucs/debug/log_def.h>

#include <cstddef>
#include <pthread.h>

namespace {

struct zv_md_config {
    uct_md_config_t super;
    unsigned long   gid_index;
    unsigned        rcache_monitor;
    size_t          rcache_max_size;
    unsigned long   rcache_max_regions;
    unsigned        rcache_event_queue;
    unsigned        rcache_uffd_mode;
    int             rcache_odp;
};

ucs_config_field_t zv_md_config_table[] = {
    {"", "", nullptr, offsetof(zv_md_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"GID_INDEX", "auto",
     "Index of the port GID to use. \"auto\" picks, on RoCE ports, the first\n"
     "RoCE v2 GID with an IPv4-mapped address (what rdma_cm uses), else the\n"
     "first RoCE v2 GID; on InfiniBand ports, index 0.",
     offsetof(zv_md_config, gid_index), UCS_CONFIG_TYPE_ULUNITS},

    {"RCACHE_MONITOR", zv::rcache::k_monitor_default, zv::rcache::k_monitor_doc,
     offsetof(zv_md_config, rcache_monitor),
     UCS_CONFIG_TYPE_ENUM(zv::rcache::k_monitor_kind_names)},

    {"RCACHE_MAX_SIZE", zv::rcache::k_max_size_default, zv::rcache::k_max_size_doc,
     offsetof(zv_md_config, rcache_max_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"RCACHE_MAX_REGIONS", zv::rcache::k_max_regions_default,
     zv::rcache::k_max_regions_doc, offsetof(zv_md_config, rcache_max_regions),
     UCS_CONFIG_TYPE_ULUNITS},

    {"RCACHE_EVENT_QUEUE", zv::rcache::k_event_queue_default,
     zv::rcache::k_event_queue_doc, offsetof(zv_md_config, rcache_event_queue),
     UCS_CONFIG_TYPE_UINT},

    {"RCACHE_UFFD_MODE", zv::rcache::k_uffd_mode_default, zv::rcache::k_uffd_mode_doc,
     offsetof(zv_md_config, rcache_uffd_mode),
     UCS_CONFIG_TYPE_ENUM(zv::rcache::k_uffd_mode_names)},

    {"RCACHE_ODP", zv::rcache::k_odp_default, zv::rcache::k_odp_doc,
     offsetof(zv_md_config, rcache_odp), UCS_CONFIG_TYPE_TERNARY},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

// Registration cost reported to UCP (seconds, seconds/byte); it decides
// where zero-copy starts. With the cache, UCP's repeated registrations of
// the same buffers are hits (a lookup, no syscall); without it every one is
// an ibv_reg_mr (tens of microseconds, plus page pinning per byte).
constexpr double reg_cost_hit      = 0.2e-6;
constexpr double reg_cost_overhead = 16e-6;
constexpr double reg_cost_growth   = 0.06e-9;

// The invalidation source is process-wide and chosen once, by the first md
// opened (UCX opens mds when a context is created, which is as early as the
// module can act on UCX's configuration); later mds share it, and one that
// asks for another source is told so, once.
ucs_status_t init_monitor_once(const zv::rcache::config &cfg)
{
    static pthread_mutex_t lock   = PTHREAD_MUTEX_INITIALIZER;
    static bool            done   = false;
    static bool            warned = false;
    static ucs_status_t    result = UCS_OK;
    pthread_mutex_lock(&lock);
    if (!done) {
        result = zv::monitor::global_init(cfg.monitor_settings());
        done   = true;
        if (result == UCS_OK) {
            ucs_debug("zv: registration cache invalidation source: %s",
                      zv::monitor::active_name());
        }
    } else if ((result == UCS_OK) && !warned &&
               (cfg.monitor != zv::rcache::monitor_kind::automatic) &&
               (zv::monitor::global() != nullptr) &&
               (cfg.monitor != zv::monitor::global()->kind())) {
        warned = true;
        ucs_warn("zv: UCX_ZV_RCACHE_MONITOR=%s ignored: the registration cache's "
                 "invalidation source is chosen once per process, by the first zv "
                 "memory domain opened, and is %s",
                 zv::rcache::monitor_kind_name(cfg.monitor), zv::monitor::active_name());
    }
    pthread_mutex_unlock(&lock);
    return result;
}

ucs_status_t zv_md_open(uct_component_t *component, const char *md_name,
                        const uct_md_config_t *uct_config, uct_md_h *md_p)
{
    const auto *config = reinterpret_cast<const zv_md_config *>(uct_config);
    zv::md::md_settings settings;
    if (config->gid_index == UCS_ULUNITS_AUTO) {
        settings.gid_index = -1;
    } else if (config->gid_index > 255) {
        ucs_error("UCX_ZV_GID_INDEX=%lu is out of range (allowed: 0..255 or auto)",
                  config->gid_index);
        return UCS_ERR_INVALID_PARAM;
    } else {
        settings.gid_index = static_cast<int>(config->gid_index);
    }
    zv::rcache::config &rc = settings.rcache;
    rc.monitor     = static_cast<zv::rcache::monitor_kind>(config->rcache_monitor);
    rc.max_size    = config->rcache_max_size;
    rc.max_regions = config->rcache_max_regions;
    rc.event_queue = config->rcache_event_queue;
    rc.uffd        = static_cast<zv::rcache::uffd_mode>(config->rcache_uffd_mode);
    rc.odp         = (config->rcache_odp != UCS_NO);
    if ((rc.event_queue < 16) || (rc.event_queue > (1u << 20))) {
        ucs_error("UCX_ZV_RCACHE_EVENT_QUEUE=%zu is out of range (allowed: 16..1048576)",
                  rc.event_queue);
        return UCS_ERR_INVALID_PARAM;
    }
    ucs_status_t status = init_monitor_once(rc);
    if (status != UCS_OK) {
        return status;
    }
    bool cached                = (zv::monitor::global() != nullptr) &&
                                 (zv::monitor::global()->kind() !=
                                  zv::rcache::monitor_kind::none);
    settings.reg_cost_overhead = cached ? reg_cost_hit : reg_cost_overhead;
    settings.reg_cost_growth   = cached ? 0 : reg_cost_growth;
    return zv::md::open(component, md_name, settings, md_p);
}

ucs_status_t zv_query_md_resources(uct_component_t *component,
                                   uct_md_resource_desc_t **resources_p,
                                   unsigned *num_resources_p)
{
    return zv::md::query_md_resources(component, resources_p, num_resources_p);
}

ucs_status_t zv_rkey_unpack(uct_component_t *component, const void *buffer,
                            uct_rkey_t *rkey_p, void **handle_p)
{
    return zv::md::rkey_unpack(component, buffer, rkey_p, handle_p);
}

ucs_status_t zv_rkey_release(uct_component_t *component, uct_rkey_t rkey,
                             void *handle)
{
    return zv::md::rkey_release(component, rkey, handle);
}

// UCX calls this for every opened md (its virtual filesystem of objects);
// zv exposes nothing there yet, but the hook must exist.
void zv_md_vfs_init(uct_md_h)
{
}

// ---------------------------------------------------------------- descriptors

uct_component_t zv_component = {
    /* name               */ "zv",
    /* query_md_resources */ zv_query_md_resources,
    /* md_open            */ zv_md_open,
    /* cm_open            */ nullptr,
    /* rkey_unpack        */ zv::ucx::rkey_unpack<zv_rkey_unpack>,
    /* rkey_ptr           */ nullptr,
    /* rkey_release       */ zv_rkey_release,
    ZV_UCX_COMPONENT_RKEY_COMPARE
    /* md_config          */ {"zv memory domain", "ZV_", zv_md_config_table,
                              sizeof(zv_md_config), {nullptr, nullptr}},
    /* cm_config          */ {"", "", nullptr, 0, {nullptr, nullptr}},
    /* tl_list            */ {&zv_component.tl_list, &zv_component.tl_list},
    /* list               */ {nullptr, nullptr},
    /* flags              */ 0,
    /* md_vfs_init        */ zv_md_vfs_init,
};

} // namespace

namespace zv::glue {

uct_component_t *component() { return &zv_component; }

} // namespace zv::glue
