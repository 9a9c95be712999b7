// SPDX-License-Identifier: BSD-3-Clause
// Receive buffers posted to a shared receive queue or to one QP's receive
// queue, reposted as they are consumed (rc_zv, ud_zv, uc_zv).
#ifndef ZV_IFACE_RX_RING_H
#define ZV_IFACE_RX_RING_H

#include "iface/buffer_pool.h"

namespace zv::iface {

class rx_ring {
public:
    /// Buffers come from 'pool' and go to 'srq', or to 'qp' when srq is
    /// null; 'len' are kept posted, reposted 'batch' or more at a time.
    void init(buffer_pool *pool, ibv_srq *srq, ibv_qp *qp, unsigned len, unsigned batch)
    {
        m_pool  = pool;
        m_srq   = srq;
        m_qp    = qp;
        m_len      = len;
        m_batch    = batch;
        m_refill_at = batch;
    }

    /// At interface open: post the whole ring. Fails, with the reason, if
    /// not one buffer could be posted; warns if fewer than 'len' ('var'
    /// names the setting, as UCX_RC_ZV_RX_QUEUE_LEN).
    [[nodiscard]] ucs_status_t fill(const char *dev, const char *tl, const char *var);

    /// A receive completed (its buffer is the caller's now).
    void consumed() { --m_posted; }
    /// Post again what was consumed, once at least 'batch' are missing
    /// (any number while starved). True when it posted (starved() may
    /// have changed).
    bool refill()
    {
        const unsigned missing = m_len - m_posted;
        if (__builtin_expect(missing >= m_refill_at, 0)) {
            post(missing);
            return true;
        }
        return false;
    }
    /// Post up to 'count' buffers (fewer if the pool runs dry; the next
    /// refill() tries again). Nothing while paused.
    void post(unsigned count);
    /// While a QP is reset (ud_zv), nothing is posted; resume() posts the ring.
    void pause() { m_paused = true; }
    void resume()
    {
        m_paused = false;
        top_up();
    }
    /// Post every buffer missing, however few.
    void top_up() { post(m_len - m_posted); }

    unsigned posted() const { return m_posted; }
    unsigned len() const { return m_len; }
    /// The last post could not take every buffer it needed from the pool
    /// (exhausted, or it cannot grow): until a post fills the ring again,
    /// a transport that can refuse what it receives does, so that buffers
    /// come back and the ring never runs empty.
    bool starved() const { return m_starved; }

private:
    buffer_pool *m_pool   = nullptr;
    ibv_srq     *m_srq    = nullptr;
    ibv_qp      *m_qp     = nullptr;
    unsigned     m_len    = 0;
    unsigned     m_batch  = 1;
    /// refill() posts once this many are missing: 'batch', or 1 while
    /// starved (one compare on the receive path for both).
    unsigned     m_refill_at = 1;
    unsigned     m_posted = 0;
    bool         m_paused  = false;
    bool         m_starved = false;

    void set_starved(bool starved)
    {
        m_starved   = starved;
        m_refill_at = starved ? 1 : m_batch;
    }
};

} // namespace zv::iface

#endif
