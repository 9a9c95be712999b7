// SPDX-License-Identifier: BSD-3-Clause
// Faults: a peer that is gone or never answers, the device's fatal events,
// a port that goes down; and, over the transports with fault injection
// (ud_zv, uc_zv: UCX_*_ZV_FAULT_* in the testing build's variables),
// messages and puts through a wire that drops, duplicates and reorders,
// each delivered exactly once, in order, data checked.
#include "tl_fixture.h"
#include "log_guard.h"

#include "md/zv_md.h"
#include "rd/rd_iface.h"
#include "uc/uc_iface.h"
#include "ud/ud_iface.h"

#include <chrono>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

namespace zv::test {

namespace {

/// Faults every transport answers for.
class faults : public tl_test {};

/// The peer timeout of the software reliability (ud_zv, uc_zv): TIMEOUT,
/// CONN_TIMEOUT, RTO, probes, the port's state.
class peer_timeout : public tl_test {};

/// Fault injection, chosen when an interface opens (ud_zv, uc_zv).
class fault_injection : public tl_test {};

/// Injected faults on both sides' receive paths (data one way, acks the
/// other), by transport and "drop,dup,reorder" rates.
class am_under_faults : public tl_test_t<std::tuple<const char *, const char *>> {};

/// uc_zv puts: short, bcopy and zcopy up to MAX_WRITE, clean and with
/// faults injected at the target (whose completions carry the psn), by
/// transport and "drop,dup,reorder,ONE_PACKET".
class put_under_faults : public tl_test_t<std::tuple<const char *, const char *>> {
protected:
    uint64_t needs() const override
    {
        return UCT_IFACE_FLAG_PUT_SHORT | UCT_IFACE_FLAG_PUT_BCOPY | UCT_IFACE_FLAG_PUT_ZCOPY;
    }
};

/// A device event for side's port (white-box: what the md's event
/// handler hands the interface).
void port_event(const uct_side &side, verbs::async_event::kind what)
{
    rd::rd_iface *r = rd::to_rd(side.iface);
    verbs::async_event ev;
    ev.what     = what;
    ev.port_num = r->super.port->port_num;
    rd::handle_event(&r->super, ev);
}

} // namespace

/// UCP's keepalive calls uct_ep_check() on every transport (UCX 1.13 does
/// not look at UCT_IFACE_FLAG_EP_CHECK there): the zv transports had none,
/// and every UCP job with UCP_ERR_HANDLING_MODE_PEER jumped to address 0.
/// It answers on a live connection; over rc_zv, it finds a peer that is gone
/// (a zero-length RDMA WRITE whose retries run out).
TEST_P(faults, ep_check_answers_and_rc_zv_finds_a_gone_peer)
{
    uct_side c, d;
    if (is_rd()) {
        open_side(c);
    } else {
        open_side(c, {{"TIMEOUT", "20ms"}, {"RETRY_COUNT", "3"}});
    }
    open_side(d);
    uct_ep_h ep = connected_ep(c, d);
    EXPECT_EQ(UCS_OK, uct_ep_check(ep, 0, nullptr));
    EXPECT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 10));
    EXPECT_EQ(0u, s_ep_errors) << "a live peer was found dead";
    if (!is_rd()) {
        expect_log_problems logs; // (a failure may be logged, as any)
        close_side(d);            // gone, with its QPs
        EXPECT_EQ(UCS_OK, uct_ep_check(ep, 0, nullptr));
        EXPECT_TRUE(run_until({&c}, [&] { return s_ep_errors > 0; }, 30))
                << "the gone peer was not found";
        EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, s_last_ep_error)
                << ucs_status_string(s_last_ep_error) << logs.text();
    }
    uct_ep_destroy(ep);
}

/// A device-fatal event (from the md's reader in UCX's async thread,
/// through the worker's progress) fails every endpoint of every interface
/// on the device, and new endpoints are refused.
TEST_P(faults, device_fatal_event_fails_every_endpoint_and_refuses_new_ones)
{
    expect_log_problems logs; // (what it provokes is logged, checked at the end)
    uct_ep_h ab = connect(m_a, m_b), ba = connect(m_b, m_a);
    ASSERT_TRUE(ab && ba);
    verbs::async_event ev;
    ev.what = verbs::async_event::kind::device_fatal;
    ev.type = IBV_EVENT_DEVICE_FATAL;
    md::from_uct(m_md)->events.deliver(ev);
    ASSERT_TRUE(wait_for([&] { return s_ep_errors == 2; }, 10)) << s_ep_errors << " of 2 failed";
    EXPECT_EQ(UCS_ERR_IO_ERROR, s_last_ep_error);
    EXPECT_TRUE(md::from_uct(m_md)->events.device_lost());
    uct_ep_h ep;
    EXPECT_EQ(UCS_ERR_IO_ERROR, try_create_ep(m_a, m_b, &ep));
    EXPECT_EQ(2u, s_ep_errors);
    EXPECT_TRUE(logged_only(logs, "is lost"));
}

/// Every zv transport connects to an interface: an endpoint asked for
/// without the peer's device or interface address is refused, with the
/// reason, and the interface still connects after.
TEST_P(faults, an_endpoint_without_the_peers_addresses_is_refused)
{
    expect_log_problems logs;
    const uint64_t fields[] = {UCT_EP_PARAM_FIELD_IFACE,
                               UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR,
                               UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_IFACE_ADDR};
    for (const uint64_t mask : fields) {
        uct_ep_params_t params = {};
        params.field_mask      = mask;
        params.iface           = m_a.iface;
        params.dev_addr   = reinterpret_cast<const uct_device_addr_t *>(m_b.dev_addr.data());
        params.iface_addr = reinterpret_cast<const uct_iface_addr_t *>(m_b.iface_addr.data());
        uct_ep_h ep       = nullptr;
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ep_create(&params, &ep)) << "field_mask " << mask;
        EXPECT_EQ(nullptr, ep);
    }
    EXPECT_TRUE(logged_only(logs, "the device and interface addresses are required"));
    EXPECT_NE(nullptr, connect(m_a, m_b)); // (connected: the fixture destroys it)
}

ZV_INSTANTIATE(faults, ZV_TLS_ALL);


TEST_P(peer_timeout, dead_peer_is_an_endpoint_error_in_bounded_time)
{
    uct_side c, d;
    open_side(c, {{"TIMEOUT", "2s"}, {"RTO", "10ms"}, {"RTO_MAX", "200ms"}});
    open_side(d);
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    close_side(d); // the peer is gone: nothing acknowledges any more
    region r = reg(512, UCT_MD_MEM_ACCESS_LOCAL_READ);
    uct_iov_t iov = {r.addr, 512, r.memh, 0, 1};
    counting_comp comp;
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_am_zcopy(ep, am_id, nullptr, 0, &iov, 1, 0, &comp.super));
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(run_until({&c}, [&] { return s_ep_errors > 0; }, 10));
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(took, 1.9);
    EXPECT_LE(took, 2.0 + 0.2 + 1.0); // TIMEOUT + RTO_MAX + slack
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, s_last_ep_error);
    ASSERT_TRUE(run_until({&c}, [&] { return comp.done == 1; }, 5));
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, comp.status);
    EXPECT_EQ(1u, s_ep_errors);
    // Further sends report the error instead of queueing forever.
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, uct_ep_am_short(ep, am_id, 0, nullptr, 0));
    uct_ep_destroy(ep);
    dereg(r);
    close_side(c);
}

TEST_P(peer_timeout, unanswered_connection_request_times_out)
{
    uct_side c, d;
    open_side(c, {{is_uc() ? "CONN_TIMEOUT" : "TIMEOUT", "1s"}, {"RTO", "10ms"},
                  {"RTO_MAX", "100ms"}});
    open_side(d);
    std::vector<char> dev = d.dev_addr, addr = d.iface_addr;
    close_side(d); // an address nobody answers at
    d.dev_addr   = dev;
    d.iface_addr = addr;
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(run_until({&c}, [&] { return s_ep_errors > 0; }, 10));
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, s_last_ep_error);
    EXPECT_EQ(UCS_ERR_ENDPOINT_TIMEOUT, uct_ep_flush(ep, 0, nullptr));
    uct_ep_destroy(ep);
    close_side(c);
}

TEST_P(peer_timeout, an_idle_peer_that_progresses_keeps_its_connection)
{
    // The receiving side probes what has been silent for a TIMEOUT (uc_zv:
    // its unused QP, every CONN_TIMEOUT) and frees it when the probe goes
    // unanswered: a live endpoint answers, however long it stays silent.
    const char *t = is_uc() ? "CONN_TIMEOUT" : "TIMEOUT";
    uct_side c, d;
    am_values sink;
    uct_ep_h ep = delivering_pair(c, {{t, "1s"}}, d, {{t, "1s"}}, sink);
    ASSERT_NE(nullptr, ep);
    run_until({&c, &d}, [] { return false; }, 4.0); // four TIMEOUTs of silence
    ASSERT_TRUE(deliver(ep, 10, sink, {&c, &d})) << "after 4 s idle: " << sink.got.size();
    EXPECT_EQ(0u, s_ep_errors);
    if (is_uc()) {
        EXPECT_EQ(0u, uc::to_uc(d.iface)->conn.reclaimed());
    } else {
        ud::ud_iface *di = ud::to_ud(d.iface);
        EXPECT_EQ(0u, di->super.reclaimed);
        EXPECT_EQ(1u, di->super.conns.count());
        EXPECT_GE(di->probed, 2u) << "the silent connection was not probed";
    }
    uct_ep_destroy(ep);
    close_side(c);
    close_side(d);
}

/// The interface's own port goes down: its peers' silence is explained, so
/// its endpoints neither send nor time out (a port flap longer than
/// TIMEOUT is ridden out); when the port is back, what waited goes out.
/// A port that stays down for 3 x TIMEOUT fails the endpoints, naming it.
TEST_P(peer_timeout, a_port_down_holds_the_endpoints_and_a_port_that_stays_down_fails_them)
{
    uct_side c, d;
    am_values sink;
    uct_ep_h ep = delivering_pair(c, {{"TIMEOUT", "1s"}}, d, {{"TIMEOUT", "1s"}}, sink);
    ASSERT_NE(nullptr, ep);
    port_event(c, verbs::async_event::kind::port_down);
    // 2 x TIMEOUT: nothing can be sent, nothing fails.
    ucs_status_t last = UCS_OK;
    run_until({&c, &d}, [&] {
        last = uct_ep_am_short(ep, am_id, 10, nullptr, 0);
        return last == UCS_OK;
    }, 2.0);
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, last) << "sent while the port is down";
    EXPECT_EQ(0u, s_ep_errors) << "an endpoint timed out while its own port was down";
    port_event(c, verbs::async_event::kind::port_up);
    ASSERT_TRUE(deliver(ep, 10, sink, {&c, &d})) << "nothing goes out after the port is back";
    EXPECT_EQ(0u, s_ep_errors);
    // Down for good: after 3 x TIMEOUT, the endpoint fails.
    {
        expect_log_problems expect;
        port_event(c, verbs::async_event::kind::port_down);
        run_until({&c, &d}, [&] { return s_ep_errors > 0; }, 6.0);
        EXPECT_EQ(1u, s_ep_errors) << "a port down for good never ended its endpoints";
        EXPECT_TRUE(logged_only(expect, "its port has been down")) << expect.text();
    }
    uct_ep_destroy(ep);
}

/// Fault injection takes a progress function of its own, chosen when the
/// interface opens (without it the receive path does not look at it): an
/// interface told to drop every packet receives nothing, beside one that
/// receives everything, from the same sender.
TEST_P(fault_injection, reaches_the_receive_path_of_its_interface)
{
    uct_side c, clean, lossy;
    open_side(c);
    open_side(clean);
    open_side(lossy, {{"FAULT_DROP", "1"}});
    unsigned got_clean = 0, got_lossy = 0;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(clean.iface, am_id, count_am, &got_clean, 0));
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(lossy.iface, am_id, count_am, &got_lossy, 0));
    uct_ep_h to_clean = create_ep(c, clean);
    uct_ep_h to_lossy = create_ep(c, lossy);
    ASSERT_NE(nullptr, to_clean);
    ASSERT_NE(nullptr, to_lossy);
    const std::vector<uct_side *> all = {&c, &clean, &lossy};
    // The lossy side drops the connection traffic as well (ud_zv), so its
    // endpoint may never take a message: try for a while, and count.
    unsigned sent_clean = 0, sent_lossy = 0;
    run_until(all, [&] {
        if ((sent_clean < 5) && (uct_ep_am_short(to_clean, am_id, 0, nullptr, 0) == UCS_OK)) {
            ++sent_clean;
        }
        if ((sent_lossy < 5) && (uct_ep_am_short(to_lossy, am_id, 0, nullptr, 0) == UCS_OK)) {
            ++sent_lossy;
        }
        return false;
    }, 0.5);
    EXPECT_EQ(5u, sent_clean);
    EXPECT_TRUE(run_until(all, [&] { return got_clean == 5; }, 10)) << got_clean;
    run_until(all, [] { return false; }, 0.2);
    EXPECT_EQ(0u, got_lossy) << "of " << sent_lossy << " sent to the interface dropping all";
    uct_ep_destroy(to_lossy);
    uct_ep_destroy(to_clean);
    close_side(lossy);
    close_side(clean);
    close_side(c);
}

ZV_INSTANTIATE(peer_timeout, ZV_TLS_RD);
ZV_INSTANTIATE(fault_injection, ZV_TLS_RD);


TEST_P(am_under_faults, every_message_exactly_once_in_order)
{
    // "drop,dup,reorder" rates
    std::string spec = std::get<1>(GetParam());
    std::string rates[3];
    for (int i = 0, pos = 0; i < 3; ++i) {
        size_t comma = spec.find(',', pos);
        rates[i]     = spec.substr(pos, comma - pos);
        pos          = static_cast<int>(comma + 1);
    }
    for (const char *seed : {"7", "1234"}) {
        SCOPED_TRACE(std::string("faults ") + spec + " seed " + seed);
        uct_side c, d;
        const std::vector<std::pair<const char *, const char *>> cfg = {
            {"FAULT_DROP", rates[0].c_str()}, {"FAULT_DUP", rates[1].c_str()},
            {"FAULT_REORDER", rates[2].c_str()}, {"FAULT_SEED", seed},
            {"RTO", "5ms"}, {"WINDOW", "64"}};
        open_side(c, cfg);
        open_side(d, cfg);
        ordered_sink sink;
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(d.iface, am_id, ordered_sink::handler,
                                                   &sink, 0));
        uct_ep_h ep = create_ep(c, d);
        ASSERT_NE(nullptr, ep);
        const unsigned count = 1500;
        ASSERT_TRUE(send_ordered(ep, count, c.attr.cap.am.max_bcopy, {&c, &d}));
        ASSERT_TRUE(run_until({&c, &d}, [&] { return sink.next >= count; }))
                << "delivered " << sink.next << " of " << count;
        ASSERT_TRUE(run_until({&c, &d}, [&] {
            return uct_ep_flush(ep, 0, nullptr) == UCS_OK;
        })) << "flush never completed";
        // Nothing more arrives after everything was acknowledged.
        run_until({&c, &d}, [] { return false; }, 0.05);
        EXPECT_EQ(count, sink.next);
        EXPECT_EQ(0u, sink.bad) << sink.first_error;
        EXPECT_EQ(0u, s_ep_errors);
        uct_ep_destroy(ep);
        close_side(c);
        close_side(d);
    }
}

TEST_P(put_under_faults, puts_land_whole_data_checked)
{
    // "drop,dup,reorder,ONE_PACKET"
    std::string spec = std::get<1>(GetParam());
    std::string f[4];
    for (int i = 0, pos = 0; i < 4; ++i) {
        size_t comma = spec.find(',', pos);
        f[i]         = spec.substr(pos, comma - pos);
        pos          = static_cast<int>(comma + 1);
    }
    uct_side c, d;
    const std::vector<std::pair<const char *, const char *>> cfg = {
        {"FAULT_DROP", f[0].c_str()}, {"FAULT_DUP", f[1].c_str()},
        {"FAULT_REORDER", f[2].c_str()}, {"FAULT_SEED", "99"}, {"RTO", "5ms"},
        {"ONE_PACKET", f[3].c_str()}};
    open_side(c, cfg);
    open_side(d, cfg);
    uct_ep_h ep = create_ep(c, d);
    ASSERT_TRUE(run_until({&c, &d}, [&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }));
    const size_t max = c.attr.cap.put.max_zcopy;
    ASSERT_GE(max, 256u);
    region src = reg(max, UCT_MD_MEM_ACCESS_LOCAL_READ);
    region dst = reg(max * 4, UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_LOCAL_WRITE);
    std::vector<uint8_t> want(max * 4, 0);
    unsigned round = 0;
    for (size_t len : {size_t(1), size_t(8), size_t(100), size_t(1000), size_t(4096), max}) {
        if (len > max) {
            continue;
        }
        for (unsigned k = 0; k < 12; ++k, ++round) {
            size_t off   = (round * 4099) % (max * 3);
            uint64_t raddr = reinterpret_cast<uint64_t>(dst.addr) + off;
            fill(src.addr, len, round);
            std::memcpy(want.data() + off, src.addr, len);
            ucs_status_t status;
            counting_comp comp;
            ASSERT_TRUE(run_until({&c, &d}, [&] {
                if ((k % 3 == 0) && (len <= c.attr.cap.put.max_short)) {
                    status = uct_ep_put_short(ep, src.addr, static_cast<unsigned>(len),
                                              raddr, dst.rkey.rkey);
                } else if (k % 3 == 1) {
                    pack_arg a{src.addr, len};
                    ssize_t r = uct_ep_put_bcopy(ep, pack_cb, &a, raddr, dst.rkey.rkey);
                    status    = (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
                } else {
                    uct_iov_t iov = {src.addr, len, src.memh, 0, 1};
                    status = uct_ep_put_zcopy(ep, &iov, 1, raddr, dst.rkey.rkey, &comp.super);
                }
                return status != UCS_ERR_NO_RESOURCE;
            }));
            ASSERT_FALSE(UCS_STATUS_IS_ERR(status)) << ucs_status_string(status);
            // The source buffer is reused: wait for this put to be acknowledged.
            ASSERT_TRUE(run_until({&c, &d}, [&] {
                return uct_ep_flush(ep, 0, nullptr) == UCS_OK;
            })) << "put " << round << " of " << len << " B never acknowledged";
            if (status == UCS_INPROGRESS) {
                EXPECT_EQ(1, comp.done);
                EXPECT_EQ(UCS_OK, comp.status);
            }
        }
    }
    EXPECT_EQ(0, std::memcmp(dst.addr, want.data(), want.size())) << "target memory differs";
    EXPECT_EQ(0u, s_ep_errors);
    uct_ep_destroy(ep);
    dereg(src);
    dereg(dst);
    close_side(c);
    close_side(d);
}


INSTANTIATE_TEST_SUITE_P(loss, am_under_faults,
                         ::testing::Combine(::testing::Values(ZV_TLS_RD),
                                            ::testing::Values("0.01,0,0", "0.05,0,0",
                                                              "0,0.05,0", "0,0,0.05",
                                                              "0.01,0.01,0.01",
                                                              "0.05,0.05,0.05")),
                         tl_param_name());
// (RDMA WRITE with fault injection: uc_zv alone of ZV_TLS_PUT and ZV_TLS_RD.)
INSTANTIATE_TEST_SUITE_P(clean_and_lossy, put_under_faults,
                         ::testing::Combine(::testing::Values("uc_zv"),
                                            ::testing::Values("0,0,0,auto",
                                                              "0.05,0.05,0.05,auto",
                                                              "0,0,0,off",
                                                              "0.05,0.05,0.05,off")),
                         tl_param_name());

} // namespace zv::test
