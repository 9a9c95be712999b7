// SPDX-License-Identifier: BSD-3-Clause
// rc_zv: Reliable Connected transport receiving through one SRQ.
#ifndef ZV_RC_RC_IFACE_H
#define ZV_RC_RC_IFACE_H

#include "iface/async_gate.h"
#include "iface/buffer_pool.h"
#include "iface/conn.h"
#include "iface/rx_ring.h"
#include "iface/zv_iface.h"
#include "verbs/owned.h"
#include "verbs/qp.h"

#include <atomic>
#include <string>
#include <unordered_map>
#include <vector>

namespace zv::rc {

struct rc_ep;

/// The slot (high half of a send wr_id) of the connection manager's probes
/// of unused QPs (conn_callbacks::probe): no endpoint has it.
constexpr uint32_t probe_slot = 0xffffffffu;

/// am_zcopy's limits, as iface_query advertises them: the header is copied
/// into a send buffer, which takes the first of the WR's four SGEs.
constexpr unsigned am_zcopy_max_hdr = 128;
constexpr unsigned am_zcopy_max_iov = 3;

/// rc_zv settings (the glue fills them from UCX_RC_ZV_*).
struct rc_settings {
    iface::iface_settings common;
    unsigned              seg_size;       ///< receive/bounce buffer payload
    unsigned              max_inline;     ///< requested inline size
    unsigned              tx_cq_len;      ///< send completions per interface
    unsigned              tx_moderation;  ///< signal one send in this many
    unsigned              rx_batch;       ///< receive buffers re-posted at once
    double                conn_timeout;   ///< seconds to establish a connection
    verbs::rc_timing      timing;
};

/// Outstanding work on an endpoint, retired in posting order. A bounced
/// operation's op lives in its send buffer's headroom (bounce_op()) and
/// goes back to the pool with it; the others come from the interface's
/// free list (op_get()).
struct tx_op {
    enum : uint8_t { plain, get_bcopy, atomic_fetch, flush_waiter };

    tx_op                 *next;
    uint32_t               seq;     ///< sequence of the WR it waits for
    uint8_t                type;
    uct_completion_t      *comp;
    iface::buffer         *bounce;  ///< released when the op retires
    uct_unpack_callback_t  unpack;  ///< get_bcopy
    void                  *arg;     ///< get_bcopy unpack argument
    uint64_t              *result;  ///< atomic fetch destination
    uint32_t               length;
};

/// An outcome of connecting that the async side left for the worker
/// (rc_async.cc): established (status UCS_OK) or failed.
struct async_outcome {
    uint64_t     conn_id;
    uint32_t     peer_qpn; ///< established
    ucs_status_t status;
    char         why[96];  ///< failed (a copy: recording one allocates nothing)
};

/// The rc_zv interface. 'super' first: UCT casts uct_iface_h to it.
/// iface_close() destroys the verbs objects in their order (see there).
struct rc_iface {
    iface::zv_iface         super;
    rc_settings             settings;
    verbs::comp_channel     channel;
    verbs::cq               send_cq;
    verbs::cq               recv_cq;
    verbs::srq              srq;
    iface::buffer_pool      rx_pool;
    iface::buffer_pool      tx_pool;
    iface::release_desc     release_desc;
    iface::rx_ring          rx_ring;
    unsigned                max_inline = 0;    ///< granted by the device
    unsigned                tx_outstanding = 0; ///< WRs posted, not completed
    /// What sends may take of the send CQ: TX_CQ_LEN less a reserve for
    /// the signaled tails that cq_starve() posts.
    unsigned                tx_cq_limit = 0;
    /// cq_starve() signaled the unsignaled tails; until entries come back.
    bool                    cq_starved  = false;
    bool                    atomics = false;
    /// RDMA READ both ways (get_bcopy, get_zcopy): the device serves and
    /// issues at least one at a time (settings.timing, capped to it).
    bool                    reads   = false;
    iface::conn_manager     conn;
    uint64_t                next_conn_id = 1;
    /// Progress calls so far; read by the async side (async_tick) while
    /// the worker may be counting, hence atomic (relaxed: plain moves).
    std::atomic<unsigned>   progress_count{0};
    unsigned long           srq_limit_events = 0; ///< SRQ ran low (refill_srq)

    // Endpoints by slot (the high half of every send wr_id).
    std::vector<rc_ep *>    slots;
    /// Room for every slot (ep_create): freeing one allocates nothing.
    std::vector<uint32_t>   free_slots;
    std::unordered_map<uint64_t, rc_ep *> connecting; ///< conn_id -> ep
    rc_ep                  *pending_eps = nullptr;  ///< eps with queued requests
    /// The last dispatch left requests it had the resources for (its
    /// budget ran out): dispatch again without waiting for completions.
    bool                    pending_more = false;
    /// No bounce buffer left and the pool cannot grow (registration
    /// failed): pending_add queues instead of answering BUSY, until a
    /// completion returns one. See tx_starve().
    bool                    tx_starved  = false;
    /// Inside progress (or an event batch): callbacks run from there may
    /// destroy endpoints, which are then freed when it returns (see
    /// ep_destroy() and progress_guard).
    bool                    in_progress = false;
    unsigned                deferred_frees = 0;     ///< eps destroyed meanwhile

    // Progress without the application (rc_async.cc): the async side runs
    // the connection manager while the worker is away.
    iface::async_gate       gate;
    /// Its timer, which sleeps while the manager has nothing in hand; the
    /// manager's CQ is then on the timer's channel, and UCT's event fd is
    /// an epoll set over 'channel' and 'notify_fd', which the async side
    /// raises when it has something for the worker (async_outcomes).
    iface::async_timer      timer;
    int                     event_epfd = -1;
    int                     notify_fd  = -1;
    bool                    async_active = false; ///< the async side runs it now
    iface::worker_watch     async_watch;          ///< the worker's progress count
    /// For the worker, in order; room for one per connecting endpoint is
    /// made when the endpoint is created, so the async side allocates nothing.
    std::vector<async_outcome> async_outcomes;
    size_t                  async_head = 0;       ///< next to hand over

    // Completions polled by event_arm(), handled by the next progress.
    static constexpr int    stash_capacity = 16;
    ibv_wc                  stash_rx[stash_capacity];
    ibv_wc                  stash_tx[stash_capacity];
    unsigned                stash_rx_count = 0;
    unsigned                stash_tx_count = 0;
    bool                    stash_pending  = false; ///< either count is not 0

    // Free list of tx_op, grown in chunks.
    tx_op                  *free_ops = nullptr;
    std::vector<tx_op *>    op_chunks;
};

inline rc_iface *to_rc(uct_iface_h iface) { return reinterpret_cast<rc_iface *>(iface); }

[[nodiscard]] ucs_status_t iface_open(uct_md_h md, uct_worker_h worker,
                                      const uct_iface_params_t *params,
                                      const uct_iface_config_t *config,
                                      const rc_settings &settings,
                                      uct_iface_h *iface_p);

// rc_async.cc
/// Start the async side's timer (where the worker's async mode allows).
void async_open(rc_iface *iface);
/// Stop it (waits for a running tick); what it left is dropped.
void async_close(rc_iface *iface);
/// The worker's connection progress: what the async side left first, then
/// the connection manager's own (under the gate).
unsigned progress_conn(rc_iface *iface);

// Shared with rc_ep.cc.
/// Grow the free list of ops by a chunk; false when out of memory.
bool op_grow(rc_iface *iface);

/// An op, reset (plain, no completion, no bounce buffer), or nullptr.
inline tx_op *op_get(rc_iface *iface)
{
    if (__builtin_expect(iface->free_ops == nullptr, 0) && !op_grow(iface)) {
        return nullptr;
    }
    tx_op *op       = iface->free_ops;
    iface->free_ops = op->next;
    op->next        = nullptr;
    op->comp        = nullptr;
    op->bounce      = nullptr;
    op->type        = tx_op::plain;
    return op;
}

inline void op_put(rc_iface *iface, tx_op *op)
{
    op->next        = iface->free_ops;
    iface->free_ops = op;
}

/// The op in a send buffer's headroom (the send pool has sizeof(tx_op) of
/// it, right before the payload at 'data', which the pool aligns to 8).
inline tx_op *bounce_op(char *data)
{
    static_assert((alignof(tx_op) <= 8) && (sizeof(tx_op) % 8 == 0),
                  "an op right before an 8-aligned payload is aligned");
    return reinterpret_cast<tx_op *>(data - sizeof(tx_op));
}

void dispatch_pending(rc_iface *iface);
/// Out of bounce buffers: mark the iface starved and, the first time,
/// signal every unsignaled send-queue tail, so that the completions that
/// return the buffers held by unsignaled sends do arrive.
void tx_starve(rc_iface *iface);
/// The send CQ's entries ran out (tx_cq_limit): every posted WR holds one
/// until a completion reports it, and only signaled ones do. The first
/// time, signal the unsignaled tails (from the reserve), so that entries
/// held by endpoints that send no more come back.
void cq_starve(rc_iface *iface);
void free_deferred(rc_iface *iface);

/// Marks the interface as in progress for its lifetime; on leaving the
/// outermost one, frees the endpoints destroyed meanwhile.
class progress_guard {
public:
    explicit progress_guard(rc_iface *iface) : m_iface(iface), m_outer(!iface->in_progress)
    {
        iface->in_progress = true;
    }
    ~progress_guard()
    {
        if (m_outer) {
            m_iface->in_progress = false;
            if (__builtin_expect(m_iface->deferred_frees > 0, 0)) {
                free_deferred(m_iface);
            }
        }
    }
    progress_guard(const progress_guard &)            = delete;
    progress_guard &operator=(const progress_guard &) = delete;

private:
    rc_iface *m_iface;
    bool      m_outer;
};

} // namespace zv::rc

#endif
