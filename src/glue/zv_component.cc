// SPDX-License-Identifier: BSD-3-Clause
// UCX glue: the "zv" component, its config tables and module registration.
//
// This is the only file that uses UCX's registration conventions (config
// tables, component and transport descriptors). It translates UCX's config
// structs into plain settings for the C++ core.
#include "glue/layout_check.h"
#include "md/zv_md.h"
#include "rc/rc_iface.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>
#include <ucs/debug/log_def.h>

#include <cstddef>

namespace {

// ---------------------------------------------------------------- md config

struct zv_md_config {
    uct_md_config_t super;
    unsigned long   gid_index;
};

ucs_config_field_t zv_md_config_table[] = {
    {"", "", nullptr, offsetof(zv_md_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"GID_INDEX", "auto",
     "Index of the port GID to use. \"auto\" picks, on RoCE ports, the first\n"
     "RoCE v2 GID with an IPv4-mapped address (what rdma_cm uses), else the\n"
     "first RoCE v2 GID; on InfiniBand ports, index 0.",
     offsetof(zv_md_config, gid_index), UCS_CONFIG_TYPE_ULUNITS},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

// ---------------------------------------------------------------- rc_zv config

struct zv_rc_iface_config {
    uct_iface_config_t super;
    unsigned           rx_queue_len;
    unsigned           tx_queue_len;
};

ucs_config_field_t zv_rc_iface_config_table[] = {
    {"", "", nullptr, offsetof(zv_rc_iface_config, super),
     UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"RX_QUEUE_LEN", "4096",
     "Number of receive buffers posted to the interface's shared receive\n"
     "queue. Shared by all endpoints: it does not grow with the number of peers.",
     offsetof(zv_rc_iface_config, rx_queue_len), UCS_CONFIG_TYPE_UINT},

    {"TX_QUEUE_LEN", "256",
     "Number of send work requests that may be outstanding on the interface.",
     offsetof(zv_rc_iface_config, tx_queue_len), UCS_CONFIG_TYPE_UINT},

    {nullptr, nullptr, nullptr, 0, UCS_CONFIG_TYPE_TABLE(nullptr)}
};

// ---------------------------------------------------------------- entry points

// Registration cost reported to UCP (seconds, seconds/byte); it decides the
// eager/rendezvous switch. Figures of the same order as a verbs ibv_reg_mr.
constexpr double reg_cost_overhead = 16e-6;
constexpr double reg_cost_growth   = 0.06e-9;

ucs_status_t zv_md_open(uct_component_t *component, const char *md_name,
                        const uct_md_config_t *uct_config, uct_md_h *md_p)
{
    const auto *config = reinterpret_cast<const zv_md_config *>(uct_config);
    zv::md::md_settings settings;
    if (config->gid_index == UCS_ULUNITS_AUTO) {
        settings.gid_index = -1;
    } else if (config->gid_index > 255) {
        ucs_error("UCX_ZV_GID_INDEX=%lu is out of range (0..255 or auto)",
                  config->gid_index);
        return UCS_ERR_INVALID_PARAM;
    } else {
        settings.gid_index = static_cast<int>(config->gid_index);
    }
    settings.reg_cost_overhead = reg_cost_overhead;
    settings.reg_cost_growth   = reg_cost_growth;
    return zv::md::open(component, md_name, settings, md_p);
}

ucs_status_t zv_rc_iface_open(uct_md_h md, uct_worker_h worker,
                              const uct_iface_params_t *params,
                              const uct_iface_config_t *uct_config,
                              uct_iface_h *iface_p)
{
    const auto *config = reinterpret_cast<const zv_rc_iface_config *>(uct_config);
    zv::iface::iface_settings settings;
    settings.rx_queue_len = config->rx_queue_len;
    settings.tx_queue_len = config->tx_queue_len;
    if ((settings.rx_queue_len == 0) || (settings.tx_queue_len == 0)) {
        ucs_error("UCX_RC_ZV_RX_QUEUE_LEN and UCX_RC_ZV_TX_QUEUE_LEN must be > 0");
        return UCS_ERR_INVALID_PARAM;
    }
    return zv::rc::iface_open(md, worker, params, uct_config, settings, iface_p);
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

ucs_status_t zv_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                              unsigned *num_devices_p)
{
    return zv::md::query_port_devices(md, devices_p, num_devices_p);
}

// ---------------------------------------------------------------- descriptors

uct_component_t zv_component = {
    /* name               */ "zv",
    /* query_md_resources */ zv_query_md_resources,
    /* md_open            */ zv_md_open,
    /* cm_open            */ nullptr,
    /* rkey_unpack        */ zv_rkey_unpack,
    /* rkey_ptr           */ nullptr,
    /* rkey_release       */ zv_rkey_release,
    /* md_config          */ {"zv memory domain", "ZV_", zv_md_config_table,
                              sizeof(zv_md_config), {nullptr, nullptr}},
    /* cm_config          */ {"", "", nullptr, 0, {nullptr, nullptr}},
    /* tl_list            */ {&zv_component.tl_list, &zv_component.tl_list},
    /* list               */ {nullptr, nullptr},
    /* flags              */ 0,
    /* md_vfs_init        */ nullptr,
};

uct_tl_t rc_zv_tl = {
    /* name          */ "rc_zv",
    /* query_devices */ zv_query_devices,
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
    uct_component_register(&zv_component);
    uct_tl_register(&zv_component, &rc_zv_tl);
    zv_registered = true;
}

} // namespace
