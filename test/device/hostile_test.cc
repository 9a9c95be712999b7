// SPDX-License-Identifier: BSD-3-Clause
// Hostile peers at the connection handshake, from a raw UD queue pair that
// speaks the wire format itself: a peer interface cannot open more than
// MAX_PEER_CONNS connections (others still connect), and a message that
// names a UD QP or GID other than its sender's gets no answer.
#include "uct_fixture.h"
#include "log_guard.h"

#include <infiniband/verbs.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace zv::test {

namespace {

// The wire formats (src/iface/conn.h, src/rd/rd_iface.h), restated here on
// purpose: the test speaks the documented format, not the code's structs.
struct __attribute__((packed)) wire_dev {
    uint8_t  flags;
    uint16_t lid;
    uint8_t  gid[16];
};
struct __attribute__((packed)) wire_conn_msg { // rc_zv, uc_zv
    uint32_t magic;                            // "ZVCN"
    uint8_t  type;                             // 1 REQ, 2 REP (3 DISC, 4 ACK, 5 DONE)
    uint8_t  transport;                        // IBV_QPT_RC / IBV_QPT_UC
    uint16_t reserved;
    uint64_t conn_id;
    uint32_t qpn;
    uint32_t ud_qpn;
    wire_dev dev;
    uint32_t peer_qpn;                         // REQ: 0, a new queue pair
};
struct __attribute__((packed)) wire_ud_creq { // ud_zv: header + CREQ body
    uint32_t dest, ack_dest;
    uint16_t psn, ack_psn;
    uint8_t  type, am_id;                     // 4 CREQ, 5 CREP
    uint16_t magic;                           // "ZU"
    uint32_t ep_id;
    wire_dev dev;
};
constexpr uint32_t conn_qkey = 0x1a2b3c4d, ud_qkey = 0x1ee7a330;

/// A UD QP of our own on the port the interfaces use, sending with a
/// chosen source GID index.
class raw_ud {
public:
    bool open(const std::string &dev_port, uint32_t qkey)
    {
        std::string name = dev_port.substr(0, dev_port.find(':'));
        m_port           = static_cast<uint8_t>(std::stoi(dev_port.substr(name.size() + 1)));
        int n;
        ibv_device **list = ibv_get_device_list(&n);
        for (int i = 0; (list != nullptr) && (i < n); ++i) {
            if (name == ibv_get_device_name(list[i])) {
                m_ctx = ibv_open_device(list[i]);
            }
        }
        ibv_free_device_list(list);
        if ((m_ctx == nullptr) || ((m_pd = ibv_alloc_pd(m_ctx)) == nullptr) ||
            ((m_cq = ibv_create_cq(m_ctx, 512, nullptr, nullptr, 0)) == nullptr)) {
            return false;
        }
        ibv_qp_init_attr ia = {};
        ia.send_cq = ia.recv_cq = m_cq;
        ia.qp_type          = IBV_QPT_UD;
        ia.cap.max_send_wr  = 256;
        ia.cap.max_recv_wr  = 256;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data = 64;
        if ((m_qp = ibv_create_qp(m_pd, &ia)) == nullptr) {
            return false;
        }
        ibv_qp_attr a = {};
        a.qp_state    = IBV_QPS_INIT;
        a.port_num    = m_port;
        a.qkey        = qkey;
        if (ibv_modify_qp(m_qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                        IBV_QP_QKEY) != 0) {
            return false;
        }
        a.qp_state = IBV_QPS_RTR;
        if (ibv_modify_qp(m_qp, &a, IBV_QP_STATE) != 0) {
            return false;
        }
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn   = 0;
        if (ibv_modify_qp(m_qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) {
            return false;
        }
        m_rx.resize(256 * slot);
        m_mr = ibv_reg_mr(m_pd, m_rx.data(), m_rx.size(), IBV_ACCESS_LOCAL_WRITE);
        if (m_mr == nullptr) {
            return false;
        }
        for (unsigned i = 0; i < 256; ++i) {
            post_recv(i);
        }
        return true;
    }
    ~raw_ud()
    {
        for (ibv_ah *ah : m_ahs) {
            ibv_destroy_ah(ah);
        }
        if (m_qp != nullptr) ibv_destroy_qp(m_qp);
        if (m_mr != nullptr) ibv_dereg_mr(m_mr);
        if (m_cq != nullptr) ibv_destroy_cq(m_cq);
        if (m_pd != nullptr) ibv_dealloc_pd(m_pd);
        if (m_ctx != nullptr) ibv_close_device(m_ctx);
    }
    uint32_t qpn() const { return m_qp->qp_num; }
    ibv_context *ctx() const { return m_ctx; }
    uint8_t port() const { return m_port; }

    /// Send 'len' bytes to (dgid, qpn) from source GID index sgid_index.
    bool send(const uint8_t dgid[16], int sgid_index, uint32_t qpn, uint32_t qkey,
              const void *buf, size_t len)
    {
        ibv_ah_attr aa    = {};
        aa.is_global      = 1;
        aa.port_num       = m_port;
        aa.grh.hop_limit  = 64;
        aa.grh.sgid_index = static_cast<uint8_t>(sgid_index);
        std::memcpy(aa.grh.dgid.raw, dgid, 16);
        ibv_ah *ah = ibv_create_ah(m_pd, &aa);
        if (ah == nullptr) {
            return false;
        }
        m_ahs.push_back(ah);
        ibv_sge sge  = {reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(len), 0};
        ibv_send_wr wr = {};
        wr.opcode      = IBV_WR_SEND;
        wr.send_flags  = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
        wr.sg_list     = &sge;
        wr.num_sge     = 1;
        wr.wr.ud.ah    = ah;
        wr.wr.ud.remote_qpn  = qpn;
        wr.wr.ud.remote_qkey = qkey;
        ibv_send_wr *bad;
        return ibv_post_send(m_qp, &wr, &bad) == 0;
    }
    /// Received payloads (after the 40-byte GRH area) so far.
    std::vector<std::vector<char>> &poll()
    {
        ibv_wc wc[16];
        int n;
        while ((n = ibv_poll_cq(m_cq, 16, wc)) > 0) {
            for (int i = 0; i < n; ++i) {
                if ((wc[i].opcode & IBV_WC_RECV) && (wc[i].status == IBV_WC_SUCCESS) &&
                    (wc[i].byte_len >= 40)) {
                    const char *p = m_rx.data() + wc[i].wr_id * slot + 40;
                    m_got.emplace_back(p, p + wc[i].byte_len - 40);
                }
                if (wc[i].opcode & IBV_WC_RECV) {
                    post_recv(static_cast<unsigned>(wc[i].wr_id));
                }
            }
        }
        return m_got;
    }

private:
    static constexpr size_t slot = 40 + 512;
    void post_recv(unsigned i)
    {
        ibv_sge sge   = {reinterpret_cast<uintptr_t>(m_rx.data() + i * slot), slot, m_mr->lkey};
        ibv_recv_wr wr = {};
        wr.wr_id      = i;
        wr.sg_list    = &sge;
        wr.num_sge    = 1;
        ibv_recv_wr *bad;
        ibv_post_recv(m_qp, &wr, &bad);
    }
    ibv_context *m_ctx = nullptr;
    ibv_pd      *m_pd  = nullptr;
    ibv_cq      *m_cq  = nullptr;
    ibv_qp      *m_qp  = nullptr;
    ibv_mr      *m_mr  = nullptr;
    uint8_t      m_port = 1;
    std::vector<char> m_rx;
    std::vector<ibv_ah *> m_ahs;
    std::vector<std::vector<char>> m_got;
};

class hostile_peer : public uct_test, public ::testing::WithParamInterface<const char *> {
protected:
    const char *tl_name() const override { return GetParam(); }
    bool is_ud() const { return std::string(GetParam()) == "ud_zv"; }

    void SetUp() override
    {
        uct_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        // The target with a small limit: the default (4096) would take
        // thousands of queue pairs to reach.
        close_side(m_a);
        open_side(m_a, {{"MAX_PEER_CONNS", "64"}});
        ASSERT_TRUE(m_raw.open(m_dev, is_ud() ? ud_qkey : conn_qkey)) << m_dev;
        ASSERT_GE(m_a.dev_addr.size(), sizeof(wire_dev));
        std::memcpy(&m_target, m_a.dev_addr.data(), sizeof(m_target));
        ASSERT_GE(m_a.iface_addr.size(), 3u);
        const auto *q = reinterpret_cast<const uint8_t *>(m_a.iface_addr.data());
        m_target_qpn  = q[0] | (q[1] << 8) | (q[2] << 16);
        // The GID index of the interface's GID, and another one of the same
        // family (RoCE v2 cannot send from IPv6 to IPv4 or back).
        static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        auto is_v4 = [](const uint8_t *g) { return std::memcmp(g, v4_mapped, 12) == 0; };
        ibv_port_attr pa;
        ASSERT_EQ(0, ibv_query_port(m_raw.ctx(), m_raw.port(), &pa));
        for (int i = 0; i < pa.gid_tbl_len; ++i) {
            ibv_gid g;
            if (ibv_query_gid(m_raw.ctx(), m_raw.port(), i, &g) != 0) {
                continue;
            }
            static const uint8_t zero[16] = {};
            if (std::memcmp(g.raw, zero, 16) == 0) {
                continue;
            }
            if (std::memcmp(g.raw, m_target.gid, 16) == 0) {
                m_own_index = (m_own_index < 0) ? i : m_own_index;
            } else if ((m_other_index < 0) && (is_v4(g.raw) == is_v4(m_target.gid))) {
                m_other_index = i;
                std::memcpy(m_other_gid, g.raw, 16);
            }
        }
        ASSERT_GE(m_own_index, 0) << "the interface's GID is not in the port's table";
    }

    /// A connection request for conn_id claiming (gid, ud_qpn), sent from
    /// source GID index sgid_index.
    bool request(uint64_t conn_id, const uint8_t gid[16], uint32_t ud_qpn, int sgid_index)
    {
        wire_dev dev = m_target;
        std::memcpy(dev.gid, gid, 16);
        if (is_ud()) {
            wire_ud_creq m = {};
            m.type  = 4;
            m.magic = 0x5a55;
            m.ep_id = static_cast<uint32_t>(conn_id);
            m.dev   = dev;
            return m_raw.send(m_target.gid, sgid_index, m_target_qpn, ud_qkey, &m, sizeof(m));
        }
        wire_conn_msg m = {};
        m.magic     = 0x5a56434e;
        m.type      = 1;
        m.transport = (std::string(GetParam()) == "rc_zv") ? IBV_QPT_RC : IBV_QPT_UC;
        m.conn_id   = conn_id;
        m.qpn       = 0x100 + static_cast<uint32_t>(conn_id); // never used: no data flows
        m.ud_qpn    = ud_qpn;
        m.dev       = dev;
        return m_raw.send(m_target.gid, sgid_index, m_target_qpn, conn_qkey, &m, sizeof(m));
    }

    /// Distinct connections answered so far (REP / CREP received).
    size_t answered()
    {
        std::set<uint64_t> ids;
        for (const auto &p : m_raw.poll()) {
            if (is_ud() && (p.size() >= 18) && (p[12] == 5)) {
                uint32_t dest;
                std::memcpy(&dest, p.data(), 4);
                ids.insert(dest);
            } else if (!is_ud() && (p.size() >= sizeof(wire_conn_msg)) && (p[4] == 2)) {
                wire_conn_msg m;
                std::memcpy(&m, p.data(), sizeof(m));
                ids.insert(m.conn_id);
            }
        }
        return ids.size();
    }

    /// Progress the target for 'seconds' (answers need its progress).
    void settle(double seconds)
    {
        auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < end) {
            uct_worker_progress(m_a.worker);
        }
    }

    raw_ud   m_raw;
    wire_dev m_target = {};
    uint32_t m_target_qpn = 0;
    int      m_own_index = -1, m_other_index = -1;
    uint8_t  m_other_gid[16] = {};
};

ucs_status_t count_am(void *arg, void *, size_t, unsigned)
{
    ++*static_cast<unsigned *>(arg);
    return UCS_OK;
}

} // namespace

TEST_P(hostile_peer, one_peer_gets_at_most_max_peer_conns_and_others_still_connect)
{
    expect_log_problems logs; // (what it provokes is logged, checked at the end)
    const unsigned limit = 64, asked = 100; // limit: MAX_PEER_CONNS, set in SetUp
    for (unsigned i = 1; i <= asked; ++i) {
        ASSERT_TRUE(request(i, m_target.gid, m_raw.qpn(), m_own_index)) << i;
        if ((i % 16) == 0) {
            settle(0.05);
        }
    }
    // Requests are answered as progress sees them (retries come from the
    // peer, here none): wait for the answers, then a little longer.
    ASSERT_TRUE(wait_for([&] { return answered() >= limit; }, 30));
    settle(1.0);
    EXPECT_EQ(limit, answered()) << "of " << asked << " requests from one peer interface";

    // A different peer interface still connects and delivers.
    unsigned got = 0;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_a.iface, 9, count_am, &got, 0));
    uct_ep_h ep = connect(m_b, m_a);
    ASSERT_NE(nullptr, ep);
    ucs_status_t st;
    ASSERT_TRUE(wait_for([&] {
        st = uct_ep_am_short(ep, 9, 42, nullptr, 0);
        return st != UCS_ERR_NO_RESOURCE;
    }));
    ASSERT_EQ(UCS_OK, st);
    EXPECT_TRUE(wait_for([&] { return got == 1; }));
    EXPECT_TRUE(logged_only(logs, "MAX_PEER_CONNS"));
}

TEST_P(hostile_peer, a_request_naming_another_sender_gets_no_answer)
{
    if (m_other_index < 0) {
        GTEST_SKIP() << "the port has no second GID of its interface GID's family "
                        "(device-tests.sh gives the VM's port one)";
    }
    // Control: from the other GID, claiming it: answered (so packets from
    // that source do arrive and would be answered).
    ASSERT_TRUE(request(1, m_other_gid, m_raw.qpn(), m_other_index));
    ASSERT_TRUE(wait_for([&] { return answered() == 1; }, 10)) << "control request unanswered";
    // From the other GID, claiming the interface's own GID: dropped.
    ASSERT_TRUE(request(2, m_target.gid, m_raw.qpn(), m_other_index));
    if (!is_ud()) {
        // From our QP, naming another UD QP (the answer would go there).
        raw_ud victim;
        ASSERT_TRUE(victim.open(m_dev, conn_qkey));
        ASSERT_TRUE(request(3, m_target.gid, victim.qpn(), m_own_index));
        settle(1.0);
        EXPECT_EQ(0u, victim.poll().size()) << "an answer went to the QP the request named";
    }
    settle(1.0);
    EXPECT_EQ(1u, answered()) << "a request not from the GID it names was answered";
}

INSTANTIATE_TEST_SUITE_P(tl, hostile_peer, ::testing::Values("rc_zv", "uc_zv", "ud_zv"),
                         tl_param_name());

} // namespace zv::test
