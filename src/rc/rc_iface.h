// SPDX-License-Identifier: BSD-3-Clause
// rc_zv interface: Reliable Connected transport receiving through one SRQ.
#ifndef ZV_RC_RC_IFACE_H
#define ZV_RC_RC_IFACE_H

#include "iface/zv_iface.h"

namespace zv::rc {

/// rc_zv interface. The transport's data path is its own issue; this
/// interface owns the shared receive resources it will use (one SRQ and
/// completion queues per interface, never per peer).
struct rc_iface {
    iface::zv_iface super;
    ibv_cq         *send_cq = nullptr;
    ibv_cq         *recv_cq = nullptr;
    ibv_srq        *srq     = nullptr;
};

[[nodiscard]] ucs_status_t iface_open(uct_md_h md, uct_worker_h worker,
                                      const uct_iface_params_t *params,
                                      const uct_iface_config_t *config,
                                      const iface::iface_settings &settings,
                                      uct_iface_h *iface_p);

} // namespace zv::rc

#endif
