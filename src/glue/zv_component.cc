// SPDX-License-Identifier: BSD-3-Clause
// UCX glue: the module's registration (the "zv" component and its
// transports) and what the glue files share.
//
// The glue files are the only ones that use UCX's registration conventions
// (config tables, component and transport descriptors), one per thing they
// glue: the md (zv_md_glue.cc), rc_zv (zv_rc_glue.cc), the reliability
// settings ud_zv and uc_zv share (zv_rd_glue.cc), ud_zv (zv_ud_glue.cc),
// uc_zv (zv_uc_glue.cc) and every transport's queues (zv_queue_config.cc).
// They translate UCX's config structs into plain settings for the C++ core.
#include "glue/layout_check.h"
#include "glue/zv_glue.h"
#include "md/zv_md.h"

#include <ucs/debug/log_def.h>

#include <cstdlib>

namespace {

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
    uct_component_t *component = zv::glue::component();
    uct_component_register(component);
    uct_tl_register(component, zv::glue::rc_tl());
    uct_tl_register(component, zv::glue::ud_tl());
    uct_tl_register(component, zv::glue::uc_tl());
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