// SPDX-License-Identifier: BSD-3-Clause
// UCX glue: the "zv" component, its config tables and module registration.
//
// This is the only file that uses UCX's registration conventions (config
// tables, component and transport descriptors). It translates UCX's config
// structs into plain settings for the C++ core.
#include "glue/layout_check.h"
#include "glue/zv_glue.h"
#include "md/zv_md.h"
#include "monitor/monitor.h"
#include "rcache/config.h"
#include "rc/rc_iface.h"
#include "ucx/compat.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>
#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <pthread.h>

namespace {

// ---------------------------------------------------------------- md config

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

// ---------------------------------------------------------------- rc_zv config

struct zv_rc_iface_config {
    uct_iface_config_t      super;
    zv::glue::queue_config  queue;
    unsigned                tx_cq_len;
    unsigned                tx_moderation;
    size_t                  seg_size;
    double                  conn_timeout;
    double                  timeout;
    unsigned                retry_count;
    unsigned                max_rd_atomic;
};

ucs_config_field_t zv_rc_iface_config_table[] = {
    // MAX_NUM_EPS=auto: what a process can afford (src/iface/scale.h and
    // contrib/doc/design.md, "Scale"), so that UCP moves to ud_zv beyond it.
    {"", "MAX_NUM_EPS=auto", nullptr, offsetof(zv_rc_iface_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    // The queue settings every zv transport has, with rc_zv's defaults.
    {"", "RX_QUEUE_LEN=2048", nullptr, offsetof(zv_rc_iface_config, queue),
     UCS_CONFIG_TYPE_TABLE(zv::glue::queue_config_table)},

    {"TX_CQ_LEN", "4096",
     "Send work requests that may be outstanding on the whole interface (the\n"
     "size of its send completion queue). 1/16 of it is kept for the signaled\n"
     "work requests that report unsignaled ones when it runs full.",
     offsetof(zv_rc_iface_config, tx_cq_len), UCS_CONFIG_TYPE_UINT},

    {"TX_MODERATION", "32",
     "Ask the device for a send completion only once in this many sends (and\n"
     "whenever a completion is needed); 1 signals every send.",
     offsetof(zv_rc_iface_config, tx_moderation), UCS_CONFIG_TYPE_UINT},

    {"SEG_SIZE", "8k",
     "Size of receive and bounce buffers: the largest active message.",
     offsetof(zv_rc_iface_config, seg_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"CONN_TIMEOUT", "30s",
     "How long an endpoint tries to reach the peer's interface before it fails\n"
     "with an endpoint error. Also how long a closing connection waits for the\n"
     "peer's answer, and how often a queue pair no endpoint here uses is probed:\n"
     "one whose peer is gone is destroyed within about three times this.",
     offsetof(zv_rc_iface_config, conn_timeout), UCS_CONFIG_TYPE_TIME},

    {"TIMEOUT", "1s",
     "Transport retry timeout of the RC queue pairs (rounded to the device's\n"
     "4.096us * 2^n steps). With RETRY_COUNT it bounds how long a dead peer\n"
     "goes unnoticed.",
     offsetof(zv_rc_iface_config, timeout), UCS_CONFIG_TYPE_TIME},

    {"RETRY_COUNT", "6",
     "Transport retries before a send fails with an endpoint error (0..6; 7\n"
     "means retry forever on some devices and is refused).",
     offsetof(zv_rc_iface_config, retry_count), UCS_CONFIG_TYPE_UINT},

    {"MAX_RD_ATOMIC", "4",
     "RDMA READ and atomic operations in flight per queue pair, each way: what\n"
     "an endpoint issues at a time (a rendezvous reads with them) and what it\n"
     "serves for its peer. Capped by the device's limits, and what an endpoint\n"
     "issues by what its peer serves (told when connecting). As UCX's\n"
     "UCX_RC_MAX_RD_ATOMIC (1..255).",
     offsetof(zv_rc_iface_config, max_rd_atomic), UCS_CONFIG_TYPE_UINT},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

// ---------------------------------------------------------------- entry points

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

/// 4.096us * 2^n >= seconds, n in 1..31.
uint8_t ib_timeout_exponent(double seconds)
{
    uint8_t n = 1;
    while ((n < 31) && (4.096e-6 * static_cast<double>(1ull << n) < seconds)) {
        ++n;
    }
    return n;
}

ucs_status_t zv_rc_iface_open(uct_md_h md, uct_worker_h worker,
                              const uct_iface_params_t *params,
                              const uct_iface_config_t *uct_config,
                              uct_iface_h *iface_p)
{
    const auto *config = reinterpret_cast<const zv_rc_iface_config *>(uct_config);
    zv::rc::rc_settings s;
    ucs_status_t status = zv::glue::queue_settings(config->queue, "UCX_RC_ZV_", {16, 4},
                                                   &s.common, &s.rx_batch, &s.max_inline);
    if (status != UCS_OK) {
        return status;
    }
    s.tx_cq_len           = config->tx_cq_len;
    s.tx_moderation       = config->tx_moderation;
    s.seg_size            = static_cast<unsigned>(config->seg_size);
    s.conn_timeout        = config->conn_timeout;
    s.timing.timeout      = ib_timeout_exponent(config->timeout);
    s.timing.retry_cnt    = static_cast<uint8_t>(config->retry_count);
    // (Range-checked below, capped to the device when the interface opens.)
    s.timing.max_rd_atomic      = static_cast<uint8_t>(config->max_rd_atomic);
    s.timing.max_dest_rd_atomic = s.timing.max_rd_atomic;

    const zv::glue::range_check checks[] = {
        {"UCX_RC_ZV_TX_CQ_LEN", (s.tx_cq_len < s.common.tx_queue_len) || (s.tx_cq_len > 262144), "TX_QUEUE_LEN..262144"},
        {"UCX_RC_ZV_TX_MODERATION", (s.tx_moderation == 0) || (s.tx_moderation > s.common.tx_queue_len / 2), "1..TX_QUEUE_LEN/2"},
        {"UCX_RC_ZV_SEG_SIZE", (config->seg_size < 256) || (config->seg_size > (1ul << 20)), "256..1m"},
        {"UCX_RC_ZV_CONN_TIMEOUT", !(config->conn_timeout > 0), "> 0"},
        {"UCX_RC_ZV_RETRY_COUNT", config->retry_count > 6, "0..6"},
        {"UCX_RC_ZV_MAX_RD_ATOMIC", (config->max_rd_atomic == 0) || (config->max_rd_atomic > 255), "1..255"},
        // 4.096us * 2^31 is the longest timeout a QP can hold.
        {"UCX_RC_ZV_TIMEOUT", !(config->timeout > 0) || (config->timeout > 8796), "> 0 and <= 8796s"},
    };
    status = zv::glue::check_ranges(checks, sizeof(checks) / sizeof(checks[0]));
    if (status != UCS_OK) {
        return status;
    }
    s.common.rx_queue_len = zv::glue::srq_queue_len(md, s.common.rx_queue_len,
                                                    "UCX_RC_ZV_RX_QUEUE_LEN");
    s.rx_batch            = std::min(s.rx_batch, s.common.rx_queue_len);
    return zv::rc::iface_open(md, worker, params, uct_config, s, iface_p);
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

ucs_status_t zv_rc_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                unsigned *num_devices_p)
{
    return zv::md::query_port_devices(md, devices_p, num_devices_p, "rc_zv");
}

uct_tl_t rc_zv_tl = {
    /* name          */ "rc_zv",
    /* query_devices */ zv_rc_query_devices,
    /* iface_open    */ zv_rc_iface_open,
    /* config        */ {"rc_zv transport", "RC_ZV_", zv_rc_iface_config_table,
                         sizeof(zv_rc_iface_config), {nullptr, nullptr}},
    /* list          */ {nullptr, nullptr},
};

bool zv_registered = false;

// Runs when the module is loaded (LD_PRELOAD, dlopen by the Open MPI
// component, or linking). Refuses to register when UCX's struct layouts
// differ from the headers we were built with: a wrong layout would corrupt
// memory on the first interface open.
__attribute__((constructor)) void zv_module_init()
{
    char msg[512];
    if (zv_layout_check_builtin(msg, sizeof(msg)) != 0) {
        ucs_warn("zv: not registering the zv transports: the loaded libuct does "
                 "not match the UCX headers zverbs was built with (%s); rebuild "
                 "zverbs against the installed UCX", msg);
        return;
    }
    // zv keeps its own registration cache in its md, invalidated by the
    // kernel. UCP 1.13 would cache the md's registrations a second time,
    // keyed by address and invalidated only by UCM's hooks: a page replaced
    // behind the hooks' back would then reach the wire through UCP's stale
    // entry. So UCP's cache defaults to off where zv is loaded; a user who
    // sets UCX_RCACHE_ENABLE keeps their choice.
    setenv("UCX_RCACHE_ENABLE", "n", 0);
    uct_component_register(&zv_component);
    uct_tl_register(&zv_component, &rc_zv_tl);
    uct_tl_register(&zv_component, zv::glue::ud_tl());
    uct_tl_register(&zv_component, zv::glue::uc_tl());
    zv_registered = true;
}

} // namespace

namespace zv::glue {

ucs_status_t check_ranges(const range_check *checks, size_t count)
{
    for (size_t i = 0; i < count; ++i) {
        if (checks[i].bad) {
            ucs_error("%s is out of range (allowed: %s)", checks[i].name,
                      checks[i].allowed);
            return UCS_ERR_INVALID_PARAM;
        }
    }
    return UCS_OK;
}

ucs_status_t query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                           unsigned *num_devices_p)
{
    return zv::md::query_port_devices(md, devices_p, num_devices_p);
}

unsigned srq_queue_len(uct_md_h md, unsigned wanted, const char *var)
{
    const zv::md::zv_md *zmd = zv::md::from_uct(md);
    const int max_wr         = zmd->dev.attr().orig_attr.max_srq_wr;
    if ((max_wr > 0) && (wanted > static_cast<unsigned>(max_wr))) {
        ucs_debug("%s: %s=%u is more than the device's shared receive queue holds: %d",
                  zmd->dev.name().c_str(), var, wanted, max_wr);
        return static_cast<unsigned>(max_wr);
    }
    return wanted;
}

} // namespace zv::glue
