// SPDX-License-Identifier: BSD-3-Clause
// What UCT's callers (UCP) rely on, over every zv transport: bad input is
// refused without harm to the connection (UCX's uct_p2p_err_test and
// uct_p2p_am_alignment ask the same of UCX's own transports).
#include "test_util.h"
#include "uct_fixture.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace zv::test {

namespace {

constexpr uint8_t am_id = 13;

/// UCX's warnings and errors while it lives, kept instead of printed.
class log_capture {
public:
    log_capture()
    {
        std::lock_guard<std::mutex> guard(s_lock);
        s_lines.clear();
        ucs_log_push_handler(handler);
    }
    ~log_capture() { ucs_log_pop_handler(); }

    std::vector<std::string> lines() const
    {
        std::lock_guard<std::mutex> guard(s_lock);
        return s_lines;
    }
    /// Lines that contain 'what', and lines that do not.
    size_t matching(const char *what) const { return count(what, true); }
    size_t others(const char *what) const { return count(what, false); }

private:
    size_t count(const char *what, bool match) const
    {
        size_t n = 0;
        for (const std::string &l : lines()) {
            n += ((l.find(what) != std::string::npos) == match) ? 1 : 0;
        }
        return n;
    }

    static ucs_log_func_rc_t handler(const char *, unsigned, const char *,
                                     ucs_log_level_t level, const ucs_log_component_config_t *,
                                     const char *message, va_list ap)
    {
        if (level > UCS_LOG_LEVEL_WARN) {
            return UCS_LOG_FUNC_RC_CONTINUE;
        }
        char buf[512];
        va_list copy;
        va_copy(copy, ap);
        std::vsnprintf(buf, sizeof(buf), message, copy);
        va_end(copy);
        std::lock_guard<std::mutex> guard(s_lock);
        s_lines.emplace_back(buf);
        return UCS_LOG_FUNC_RC_STOP;
    }

    static std::mutex               s_lock;
    static std::vector<std::string> s_lines;
};

std::mutex               log_capture::s_lock;
std::vector<std::string> log_capture::s_lines;

std::string joined(const std::vector<std::string> &lines)
{
    std::string s;
    for (const std::string &l : lines) {
        s += "\n  " + l;
    }
    return s;
}

class uct_contract : public uct_test, public ::testing::WithParamInterface<const char *> {
protected:
    const char *tl_name() const override { return GetParam(); }
    bool is_rd() const { return std::string(GetParam()) != "rc_zv"; }

    /// An endpoint of 'from' to 'to', connected (progressing both), that
    /// the test destroys itself.
    uct_ep_h connected_ep(uct_side &from, uct_side &to)
    {
        uct_ep_h ep = create_ep(from, to);
        EXPECT_TRUE(progress_until({&from, &to}, [&] {
            return uct_ep_flush(ep, 0, nullptr) == UCS_OK;
        })) << "the endpoint did not connect";
        return ep;
    }

    template <typename P>
    static bool progress_until(const std::vector<uct_side *> &sides, P pred, double timeout = 30)
    {
        auto start = std::chrono::steady_clock::now();
        while (!pred()) {
            for (uct_side *s : sides) {
                uct_worker_progress(s->worker);
            }
            if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                        .count() > timeout) {
                return pred();
            }
        }
        return true;
    }

    /// A message sent on 'ep' now arrives at m_b, and the endpoint flushes:
    /// the connection still works.
    void expect_connection_works(uct_ep_h ep, uint64_t value)
    {
        am_values sink;
        ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler,
                                                   &sink, 0));
        ucs_status_t st = UCS_ERR_NO_RESOURCE;
        ASSERT_TRUE(wait_for([&] {
            st = uct_ep_am_short(ep, am_id, value, nullptr, 0);
            return st != UCS_ERR_NO_RESOURCE;
        }, 10));
        ASSERT_EQ(UCS_OK, st);
        EXPECT_TRUE(wait_for([&] { return !sink.got.empty(); }, 10))
                << "a good message after the refused one was not delivered";
        EXPECT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }, 10))
                << "the endpoint does not flush";
        if (!sink.got.empty()) {
            EXPECT_EQ(value, sink.got.front());
        }
        EXPECT_EQ(0u, s_ep_errors) << "an endpoint failed: "
                                   << ucs_status_string(s_last_ep_error);
    }

    /// uct_iface_open() on m_dev with the fixture's parameters and 'mask',
    /// 'align', 'offset' for the AM alignment fields.
    ucs_status_t try_open(uct_side &side, uint64_t mask, size_t align, size_t offset)
    {
        EXPECT_EQ(UCS_OK, ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                                   &side.async));
        EXPECT_EQ(UCS_OK, uct_worker_create(side.async, UCS_THREAD_MODE_SINGLE,
                                            &side.worker));
        uct_iface_config_t *cfg;
        EXPECT_EQ(UCS_OK, uct_md_iface_config_read(m_md, tl_name(), nullptr, nullptr, &cfg));
        uct_iface_params_t params   = {};
        params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                      UCT_IFACE_PARAM_FIELD_DEVICE | mask;
        params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name  = tl_name();
        params.mode.device.dev_name = m_dev.c_str();
        params.am_alignment         = align;
        params.am_align_offset      = offset;
        ucs_status_t status = uct_iface_open(m_md, side.worker, &params, cfg, &side.iface);
        uct_config_release(cfg);
        if (status != UCS_OK) {
            side.iface = nullptr;
        }
        return status;
    }
};

size_t pack_nothing(void *, void *) { return 0; }

} // namespace

// ---------------------------------------------------------------- item 5

/// An interface opened with an invalid AM alignment or offset is refused
/// (UCS_ERR_INVALID_PARAM, with an error log) and leaves nothing behind:
/// the memory domain then closes without complaint. A valid one opens.
TEST_P(uct_contract, an_invalid_am_alignment_is_refused_at_open)
{
    struct bad {
        uint64_t mask;
        size_t   align, offset;
    };
    const uint64_t A = UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT;
    const uint64_t O = UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET;
    // (as uct_p2p_am_alignment.invalid_align / invalid_offset)
    for (const bad &b : {bad{A, 0, 0}, bad{A, 3, 1}, bad{O, 0, 11}, bad{A | O, 8, 8},
                         bad{A | O, 8, 11}, bad{A | O, 4096 + 1, 0}}) {
        SCOPED_TRACE("alignment " + std::to_string(b.align) + " offset " +
                     std::to_string(b.offset) + ((b.mask & A) ? "" : " (offset only)"));
        uct_side s;
        ucs_status_t status;
        std::vector<std::string> logged;
        {
            log_capture logs;
            status = try_open(s, b.mask, b.align, b.offset);
            logged = logs.lines();
        }
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, status) << ucs_status_string(status);
        EXPECT_FALSE(logged.empty()) << "refused without saying why";
        close_side(s); // (opened: the defect; close it all the same)
    }
    {
        uct_side s;
        EXPECT_EQ(UCS_OK, try_open(s, A | O, 64, 8));
        close_side(s);
        EXPECT_EQ(UCS_OK, try_open(s, A, 1, 0));
        close_side(s);
    }
    // Nothing was left on the device: the md closes cleanly.
    close_side(m_a);
    close_side(m_b);
    log_capture logs;
    uct_md_close(m_md);
    m_md = nullptr;
    EXPECT_TRUE(logs.lines().empty()) << "closing the md:" << joined(logs.lines());
}

/// A send with an active message id >= UCT_AM_ID_MAX is refused
/// (UCS_ERR_INVALID_PARAM, an error log naming the active message id)
/// before anything is posted, by every AM operation; the connection goes
/// on (ud_zv used to post it, its receiver dropped it unacknowledged, and
/// the endpoint died at the peer timeout).
TEST_P(uct_contract, a_send_with_an_invalid_am_id_is_refused_and_the_connection_keeps_working)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    region r = reg(64, UCT_MD_MEM_ACCESS_ALL);
    uint64_t payload = 0;
    const uint8_t bad_id = UCT_AM_ID_MAX;
    const uct_iov_t short_iov = {&payload, sizeof(payload), UCT_MEM_HANDLE_NULL, 0, 1};
    const uct_iov_t zcopy_iov = {r.addr, 64, r.memh, 0, 1};
    const std::pair<const char *, std::function<ucs_status_t()>> ops[] = {
        {"am_short", [&] { return uct_ep_am_short(ep, bad_id, 1, &payload, sizeof(payload)); }},
        {"am_short_iov", [&] { return uct_ep_am_short_iov(ep, bad_id, &short_iov, 1); }},
        {"am_bcopy", [&] {
             ssize_t n = uct_ep_am_bcopy(ep, bad_id, pack_nothing, nullptr, 0);
             return (n >= 0) ? UCS_OK : static_cast<ucs_status_t>(n);
         }},
        {"am_zcopy", [&] {
             return uct_ep_am_zcopy(ep, bad_id, &payload, sizeof(payload), &zcopy_iov, 1, 0,
                                    nullptr);
         }},
    };
    for (const auto &op : ops) {
        SCOPED_TRACE(op.first);
        log_capture logs;
        ucs_status_t st = op.second();
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, st) << ucs_status_string(st);
        EXPECT_GT(logs.matching("active message id"), 0u) << joined(logs.lines());
        EXPECT_EQ(0u, logs.others("active message id")) << joined(logs.lines());
    }
    expect_connection_works(ep, 0x51);
    dereg(r);
}

/// A short send one byte over its maximum (max_short counts the 8-byte AM
/// header, as UCT's does) is refused with an error log naming the length,
/// and so is an am_short_iov and a put_short one byte over: nothing reaches
/// the device (rc_zv's put_short used to fail its post), and the connection
/// goes on.
TEST_P(uct_contract, an_oversized_short_send_is_refused_and_the_connection_keeps_working)
{
    uct_ep_h ep = connect(m_a, m_b);
    ASSERT_NE(nullptr, ep);
    const uct_iface_attr_t &attr = m_a.attr;
    ASSERT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_AM_SHORT);
    std::vector<char> buf(std::max<size_t>(attr.cap.am.max_short, attr.cap.put.max_short) + 1);
    const unsigned over = static_cast<unsigned>(attr.cap.am.max_short + 1 - sizeof(uint64_t));
    const uct_iov_t iov = {buf.data(), attr.cap.am.max_short + 1, UCT_MEM_HANDLE_NULL, 0, 1};
    region remote       = reg(buf.size(), UCT_MD_MEM_ACCESS_ALL);
    std::vector<std::pair<const char *, std::function<ucs_status_t()>>> ops = {
        {"am_short", [&] { return uct_ep_am_short(ep, am_id, 1, buf.data(), over); }},
        {"am_short_iov", [&] { return uct_ep_am_short_iov(ep, am_id, &iov, 1); }},
    };
    if (attr.cap.flags & UCT_IFACE_FLAG_PUT_SHORT) {
        ops.emplace_back("put_short", [&] {
            return uct_ep_put_short(ep, buf.data(),
                                    static_cast<unsigned>(attr.cap.put.max_short + 1),
                                    reinterpret_cast<uintptr_t>(remote.addr),
                                    remote.rkey.rkey);
        });
    }
    // What the receiver gets meanwhile: only the message at the limit.
    am_values early;
    ASSERT_EQ(UCS_OK, uct_iface_set_am_handler(m_b.iface, am_id, am_values::handler, &early, 0));
    for (const auto &op : ops) {
        SCOPED_TRACE(op.first);
        log_capture logs;
        ucs_status_t st = op.second();
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, st) << ucs_status_string(st);
        EXPECT_GT(logs.matching("length"), 0u) << joined(logs.lines());
        EXPECT_EQ(0u, logs.others("length")) << joined(logs.lines());
    }
    // At the limit exactly, each is taken.
    ucs_status_t st;
    ASSERT_TRUE(wait_for([&] {
        st = uct_ep_am_short(ep, am_id, 2, buf.data(), over - 1);
        return st != UCS_ERR_NO_RESOURCE;
    }, 10));
    EXPECT_EQ(UCS_OK, st);
    EXPECT_TRUE(wait_for([&] { return early.got.size() == 1; }, 10))
            << early.got.size() << " messages arrived; only the one at the limit was sent";
    expect_connection_works(ep, 0x52);
    dereg(remote);
}

INSTANTIATE_TEST_SUITE_P(tl, uct_contract, ::testing::Values("rc_zv", "ud_zv", "uc_zv"));

} // namespace zv::test
