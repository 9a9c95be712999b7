// SPDX-License-Identifier: BSD-3-Clause
// Progress without the application: the reliable-datagram core answers its
// peers from the worker's async context while the application computes.
#ifndef ZV_RD_RD_ASYNC_H
#define ZV_RD_RD_ASYNC_H

#include "iface/async_gate.h"
#include "iface/buffer_pool.h"

#include <uct/api/uct.h>

#include <cstdint>
#include <vector>

namespace zv::rd {

/*
 * A rank that computes for minutes calls no progress. Its peers' packets
 * wait in its receive queue, nobody acknowledges them, and after TIMEOUT
 * the peers would declare it dead. So every interface of the core has a
 * timer in the worker's async context (iface/async_gate.h): when a tick
 * finds that the worker has not progressed since the tick before, the
 * async side runs the interface's own progress for it - receives, acks,
 * resends, connection requests, probes - with every call into UCP
 * deferred: an active message it accepts, a completion, an endpoint's
 * failure wait in 'deferred' for the worker's next progress call, which
 * hands them to UCP first, in the order they happened.
 */
using iface::async_gate;
using iface::worker_scope;

/// A call into UCP that the async side made wait for the worker.
struct deferred_op {
    enum class kind : uint8_t { am, completion, ep_fail, done };
    kind              what;
    uint8_t           am_id  = 0;   ///< am
    unsigned          length = 0;   ///< am
    iface::buffer    *buf    = nullptr; ///< am: the receive buffer
    uct_completion_t *comp   = nullptr; ///< completion
    ucs_status_t      status = UCS_OK;  ///< completion, ep_fail
    uint32_t          ep_id  = 0;   ///< completion (whose), ep_fail
    char              why[96] = {}; ///< ep_fail (a copy: recording allocates nothing)
};

/// Records of 'deferred' reserved beyond one per endpoint.
constexpr size_t async_room_base = 256;

/// What the async side of an interface keeps.
struct async_state {
    async_gate               gate;
    iface::async_timer       timer;
    /// The async side is running the core: calls into UCP are deferred.
    bool                     active   = false;
    /// The worker's progress count as the async side last saw it.
    iface::worker_watch      watch;
    /// Active messages waiting in 'deferred' (they hold receive buffers).
    unsigned                 deferred_ams = 0;
    /// Most active messages the async side accepts before it leaves the
    /// rest to the sender's retransmission (it still acknowledges, so the
    /// sender knows it is alive): bounds the receive buffers it holds.
    unsigned                 max_deferred_ams = 0;
    bool                     waiting = false; ///< 'deferred' has some to hand over
    size_t                   head = 0; ///< next of 'deferred' to hand over
    /// Room for async_room_base records and one per endpoint is made when
    /// the interface opens and each endpoint is created; beyond it, the
    /// async side grows it out of line, and out of memory it refuses an
    /// active message (its sender retransmits it).
    std::vector<deferred_op> deferred;
    /// Statistics (debug log at close).
    uint64_t                 runs = 0, ams = 0, refused = 0;
};

} // namespace zv::rd

#endif
