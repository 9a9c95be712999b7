// SPDX-License-Identifier: BSD-3-Clause
#include "iface/rx_ring.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstring>

namespace zv::iface {

void rx_ring::post(unsigned count)
{
    constexpr unsigned chunk = 64;
    ibv_recv_wr wrs[chunk];
    ibv_sge     sges[chunk];
    if (m_paused) {
        return; // all of them at resume()
    }
    while (count > 0) {
        unsigned n = m_pool->fill_recv_wrs(wrs, sges, std::min(count, chunk));
        if (n == 0) {
            set_starved(true);
            return; // pool exhausted; retried at the next refill()
        }
        ibv_recv_wr *bad;
        int ret = (m_srq != nullptr) ? ibv_post_srq_recv(m_srq, wrs, &bad) :
                                       ibv_post_recv(m_qp, wrs, &bad);
        if (ret != 0) {
            ucs_error("posting receive buffers to %s failed: %s",
                      (m_srq != nullptr) ? "an SRQ" : "a QP", strerror(ret));
            for (ibv_recv_wr *w = bad; w != nullptr; w = w->next) {
                buffer_pool::put(reinterpret_cast<buffer *>(w->wr_id));
                --n;
            }
            m_posted += n;
            return;
        }
        m_posted += n;
        count -= n;
    }
    set_starved((m_posted < m_len) && m_starved);
}

ucs_status_t rx_ring::fill(const char *dev, const char *tl, const char *var)
{
    post(m_len - m_posted);
    if (m_posted == 0) {
        ucs_error("%s: %s: could not post any receive buffer", dev, tl);
        return UCS_ERR_NO_MEMORY;
    }
    if (m_posted < m_len) {
        ucs_warn("%s: %s: %u of %s=%u receive buffers posted", dev, tl, m_posted, var,
                 m_len);
    }
    return UCS_OK;
}

} // namespace zv::iface
