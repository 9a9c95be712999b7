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
#include "glue/zv_ucp_defaults.h"
#include "md/zv_md.h"

#include <ucs/debug/log_def.h>

#include <cstdlib>
#include <cstring>

namespace {

// Is a component of this name registered with the libuct in the process?
// Another copy of the module may have registered it: a process can load
// libuct_zv.so.0 from two files (LD_PRELOAD of the build tree's and UCX
// 1.22's loader finding the installed one, or the Open MPI component's
// path and a UCX_PLUGIN_PATH). Each file is a library of its own with its
// own constructor; the first to run registers, the others stand aside, so
// UCX never lists zv twice. (Loading the same file twice runs no
// constructor again.)
bool component_registered(const char *name)
{
    uct_component_t *component;
    ucs_list_for_each(component, &uct_components_list, list) {
        if (std::strcmp(component->name, name) == 0) {
            return true;
        }
    }
    return false;
}

// Runs when the module is loaded (LD_PRELOAD, dlopen by the Open MPI
// component or by UCX 1.22's module loader, or linking). Refuses to
// register when UCX's struct layouts differ from the headers we were built
// with: a wrong layout would corrupt memory on the first interface open.
__attribute__((constructor)) void zv_module_init()
{
    uct_component_t *component = zv::glue::component();
    if (component_registered(component->name)) {
        ucs_debug("zv: the %s component is already registered by another copy of "
                  "the module; this one stays unused", component->name);
        return;
    }
    char msg[512];
    if (zv_layout_check_builtin(msg, sizeof(msg)) != 0) {
        ucs_warn("zv: not registering the zv transports: the loaded libuct does "
                 "not match the UCX headers zverbs was built with (%s); rebuild "
                 "zverbs against the installed UCX", msg);
        return;
    }
    // UCP's registration cache off by default where zv may be selected
    // (zv_ucp_defaults.h says why). In time for UCP under LD_PRELOAD and the
    // Open MPI component; UCX 1.22's loader opens this module after UCP has
    // read its configuration, and libucs_zv sets it there.
    zv_set_ucp_defaults();
    uct_component_register(component);
    uct_tl_register(component, zv::glue::rc_tl());
    uct_tl_register(component, zv::glue::ud_tl());
    uct_tl_register(component, zv::glue::uc_tl());
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