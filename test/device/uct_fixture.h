// SPDX-License-Identifier: BSD-3-Clause
// Device-test fixture: two zv interfaces on the first active port, connected.
#ifndef ZV_TEST_DEVICE_UCT_FIXTURE_H
#define ZV_TEST_DEVICE_UCT_FIXTURE_H

#include <gtest/gtest.h>
#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace zv::test {

/// An opened zv md + worker + one interface of transport 'tl'.
struct uct_side {
    ucs_async_context_t *async  = nullptr;
    uct_worker_h         worker = nullptr;
    uct_iface_h          iface  = nullptr;
    uct_iface_attr_t     attr   = {};
    std::vector<char>    dev_addr;
    std::vector<char>    iface_addr;

    uct_side() = default;
    uct_side(const uct_side &)            = delete;
    uct_side &operator=(const uct_side &) = delete;
    /// Closes what is still open (a test that ended early): nothing of it
    /// outlives the test, not even its async timers.
    ~uct_side() { close(); }
    void close();
};

/// uct_config_modify() of 'name' as ucx_info prints it after UCX_<prefix>
/// (RX_QUEUE_LEN, TIMEOUT). UCX 1.13 matches that name at every level of a
/// configuration table; UCX 1.18 matches a field of the table's own level
/// only by its prefixed name (RC_ZV_TIMEOUT), and an embedded table's
/// either way. The name as given first, then with 'prefix' (RC_ZV_, ZV_).
ucs_status_t config_modify(void *cfg, const std::string &prefix, const char *name,
                           const char *value);
/// Transport 'tl''s configuration prefix: "RC_ZV_" for rc_zv.
std::string tl_config_prefix(const char *tl);

class uct_test : public ::testing::Test {
protected:
    /// Transport under test (rc_zv for now; a parameter as transports land).
    virtual const char *tl_name() const { return "rc_zv"; }

    void SetUp() override;
    void TearDown() override;

    /// Open one more interface (a peer) on the same md.
    /// Open one more interface (a peer) on the same md; 'modify' holds
    /// transport config overrides as name/value pairs (e.g. RX_QUEUE_LEN).
    /// 'mode': of the side's async context (UCS_ASYNC_MODE_POLL: no async
    /// thread, so the side is silent while it does not progress).
    /// 'more': sets further interface parameters (field_mask and values).
    void open_side(uct_side &side,
                   const std::vector<std::pair<const char *, const char *>> &modify = {},
                   ucs_async_mode_t mode = UCS_ASYNC_MODE_THREAD_SPINLOCK,
                   const std::function<void(uct_iface_params_t &)> &more = nullptr);
    void close_side(uct_side &side);
    /// uct_iface_open() of 'side' on m_dev with the device mode's parameters
    /// only, 'modify' as open_side()'s, and 'more' setting further ones: its
    /// status, whatever it is (side.iface stays null on a failure).
    ucs_status_t try_open_side(uct_side &side,
                               const std::vector<std::pair<const char *, const char *>> &modify,
                               const std::function<void(uct_iface_params_t &)> &more = nullptr);
    /// Close both sides and the md, which must say nothing: a QP, SRQ, AH
    /// or MR left on the device would keep its PD.
    void expect_md_closes_cleanly();
    /// Create an endpoint of 'from' to 'to' (connect-to-iface), no waiting.
    uct_ep_h create_ep(uct_side &from, uct_side &to);
    /// The same, returning uct_ep_create()'s status (no expectation).
    ucs_status_t try_create_ep(uct_side &from, uct_side &to, uct_ep_h *ep_p);
    /// Connect an endpoint of 'from' to 'to' and wait until it can send.
    uct_ep_h connect(uct_side &from, uct_side &to);
    /// Progress both sides once.
    unsigned progress();
    /// Progress 'sides' until pred() or 'timeout' seconds; returns pred().
    template <typename P>
    static bool run_until(const std::vector<uct_side *> &sides, P pred, double timeout = 60)
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
    /// Progress until pred() or timeout (seconds); returns pred().
    template <typename P> bool wait_for(P pred, double timeout = 30.0);

    struct region {
        void      *addr = nullptr;
        size_t     length = 0;
        uct_mem_h  memh = UCT_MEM_HANDLE_NULL;
        uct_rkey_bundle_t rkey = {};
    };
    region reg(size_t length, unsigned flags);
    void dereg(region &r);

    uct_component_h m_component = nullptr;
    uct_md_h        m_md        = nullptr;
    std::string     m_md_name;
    uct_md_attr_t   m_md_attr   = {};
    std::string     m_dev;
    uct_side        m_a, m_b;
    std::vector<uct_ep_h> m_eps;
public:
    static void note_ep_error(ucs_status_t status);

protected:
    static ucs_status_t s_last_ep_error;
    static unsigned     s_ep_errors;
};

void uct_test_error_hook(ucs_status_t status);

/// gtest's name for an instance of a test parameterised by transport: the
/// transport's name (and the rest of a tuple parameter, with '_' for what
/// gtest does not take), so that '--gtest_filter=*/rc_zv' selects one
/// transport's tests. The fourth argument of INSTANTIATE_TEST_SUITE_P.
struct tl_param_name {
    std::string operator()(const ::testing::TestParamInfo<const char *> &info) const
    {
        return info.param;
    }
    template <typename... T>
    std::string
    operator()(const ::testing::TestParamInfo<std::tuple<const char *, T...>> &info) const
    {
        std::string name = std::get<0>(info.param);
        std::apply([&name](const char *, const auto &...rest) {
            ((name += std::string("_") + rest), ...);
        }, info.param);
        for (char &ch : name) {
            if (!std::isalnum(static_cast<unsigned char>(ch))) {
                ch = '_';
            }
        }
        return name;
    }
};

template <typename P> bool uct_test::wait_for(P pred, double timeout)
{
    auto start = std::chrono::steady_clock::now();
    while (!pred()) {
        progress();
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                    .count() > timeout) {
            return pred();
        }
    }
    return true;
}

} // namespace zv::test

#endif
