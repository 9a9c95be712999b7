// SPDX-License-Identifier: BSD-3-Clause
// Device-test fixture implementation.
#include "uct_fixture.h"

#include "log_guard.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>

namespace zv::test {

ucs_status_t uct_test::s_last_ep_error = UCS_OK;
unsigned     uct_test::s_ep_errors     = 0;

namespace {
ucs_status_t ep_error_handler(void *, uct_ep_h, ucs_status_t status)
{
    uct_test_error_hook(status);
    return UCS_OK;
}
} // namespace

void uct_test_error_hook(ucs_status_t status)
{
    uct_test::note_ep_error(status);
}

void uct_test::note_ep_error(ucs_status_t status)
{
    s_last_ep_error = status;
    ++s_ep_errors;
}

void uct_test::SetUp()
{
    const bool required = (std::getenv("ZV_REQUIRE_DEVICE") != nullptr);
    uct_component_h *components;
    unsigned num;
    ASSERT_EQ(UCS_OK, uct_query_components(&components, &num));
    for (unsigned i = 0; i < num; ++i) {
        uct_component_attr_t attr = {};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                          UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        ASSERT_EQ(UCS_OK, uct_component_query(components[i], &attr));
        if ((std::strcmp(attr.name, "zv") != 0) || (attr.md_resource_count == 0)) {
            continue;
        }
        std::vector<uct_md_resource_desc_t> res(attr.md_resource_count);
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = res.data();
        ASSERT_EQ(UCS_OK, uct_component_query(components[i], &attr));
        m_component = components[i];
        m_md_name   = res[0].md_name;
        uct_md_config_t *cfg;
        ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, nullptr, nullptr, &cfg));
        ucs_status_t status = uct_md_open(m_component, res[0].md_name, cfg, &m_md);
        uct_config_release(cfg);
        ASSERT_EQ(UCS_OK, status);
        break;
    }
    uct_release_component_list(components);
    if (m_md == nullptr) {
        if (required) {
            FAIL() << "no zv memory domain although a device is required";
        }
        GTEST_SKIP() << "no zv memory domain: no active RDMA port here";
    }
    ASSERT_EQ(UCS_OK, uct_md_query(m_md, &m_md_attr));

    uct_tl_resource_desc_t *tls;
    unsigned num_tls;
    ASSERT_EQ(UCS_OK, uct_md_query_tl_resources(m_md, &tls, &num_tls));
    for (unsigned i = 0; i < num_tls; ++i) {
        if (std::strcmp(tls[i].tl_name, tl_name()) == 0) {
            m_dev = tls[i].dev_name;
            break;
        }
    }
    uct_release_tl_resource_list(tls);
    ASSERT_FALSE(m_dev.empty()) << tl_name() << " has no device";
    s_ep_errors     = 0;
    s_last_ep_error = UCS_OK;
    open_side(m_a);
    open_side(m_b);
}

void uct_test::TearDown()
{
    for (uct_ep_h ep : m_eps) {
        uct_ep_destroy(ep);
    }
    m_eps.clear();
    close_side(m_a);
    close_side(m_b);
    if (m_md != nullptr) {
        uct_md_close(m_md);
    }
}

ucs_status_t config_modify(void *cfg, const std::string &prefix, const char *name,
                           const char *value)
{
    ucs_status_t status = uct_config_modify(cfg, name, value);
    if (status == UCS_ERR_NO_ELEM) {
        status = uct_config_modify(cfg, (prefix + name).c_str(), value);
    }
    return status;
}

std::string tl_config_prefix(const char *tl)
{
    std::string prefix = tl;
    std::transform(prefix.begin(), prefix.end(), prefix.begin(), ::toupper);
    return prefix + "_";
}

void uct_test::open_side(uct_side &side,
                         const std::vector<std::pair<const char *, const char *>> &modify,
                         ucs_async_mode_t mode,
                         const std::function<void(uct_iface_params_t &)> &more)
{
    ASSERT_EQ(UCS_OK, ucs_async_context_create(mode, &side.async));
    ASSERT_EQ(UCS_OK, uct_worker_create(side.async, UCS_THREAD_MODE_SINGLE,
                                        &side.worker));
    uct_iface_config_t *cfg;
    ASSERT_EQ(UCS_OK, uct_md_iface_config_read(m_md, tl_name(), nullptr, nullptr, &cfg));
    // FAULT_*: the testing-only fault injection, which is not in UCX's
    // configuration but in ZV_TESTING_<TL>_FAULT_* while the interface opens.
    std::vector<std::string> fault_vars;
    for (const auto &m : modify) {
        if (std::strncmp(m.first, "FAULT_", 6) == 0) {
            std::string tl = tl_name();
            std::transform(tl.begin(), tl.end(), tl.begin(), ::toupper);
            fault_vars.push_back("ZV_TESTING_" + tl + "_" + m.first);
            ASSERT_EQ(0, setenv(fault_vars.back().c_str(), m.second, 1));
            continue;
        }
        ASSERT_EQ(UCS_OK, config_modify(cfg, tl_config_prefix(tl_name()), m.first, m.second))
            << m.first;
    }
    uct_iface_params_t params = {};
    params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                        UCT_IFACE_PARAM_FIELD_RX_HEADROOM |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                        UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = tl_name();
    params.mode.device.dev_name = m_dev.c_str();
    params.rx_headroom          = 24; // exercise the headroom layout
    params.err_handler          = ep_error_handler;
    params.err_handler_arg      = this;
    params.err_handler_flags    = UCT_CB_FLAG_ASYNC;
    if (more) {
        more(params);
    }
    ucs_status_t status = uct_iface_open(m_md, side.worker, &params, cfg, &side.iface);
    uct_config_release(cfg);
    for (const std::string &v : fault_vars) {
        unsetenv(v.c_str());
    }
    ASSERT_EQ(UCS_OK, status);
    ASSERT_EQ(UCS_OK, uct_iface_query(side.iface, &side.attr));
    uct_iface_progress_enable(side.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    side.dev_addr.resize(side.attr.device_addr_len);
    side.iface_addr.resize(side.attr.iface_addr_len);
    ASSERT_EQ(UCS_OK, uct_iface_get_device_address(
                              side.iface, reinterpret_cast<uct_device_addr_t *>(
                                                  side.dev_addr.data())));
    ASSERT_EQ(UCS_OK, uct_iface_get_address(
                              side.iface, reinterpret_cast<uct_iface_addr_t *>(
                                                  side.iface_addr.data())));
}

ucs_status_t uct_test::try_open_side(
        uct_side &side, const std::vector<std::pair<const char *, const char *>> &modify,
        const std::function<void(uct_iface_params_t &)> &more)
{
    EXPECT_EQ(UCS_OK, ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &side.async));
    EXPECT_EQ(UCS_OK, uct_worker_create(side.async, UCS_THREAD_MODE_SINGLE, &side.worker));
    uct_iface_config_t *cfg;
    EXPECT_EQ(UCS_OK, uct_md_iface_config_read(m_md, tl_name(), nullptr, nullptr, &cfg));
    for (const auto &m : modify) {
        EXPECT_EQ(UCS_OK, config_modify(cfg, tl_config_prefix(tl_name()), m.first, m.second))
            << m.first;
    }
    uct_iface_params_t params   = {};
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = tl_name();
    params.mode.device.dev_name = m_dev.c_str();
    if (more) {
        more(params);
    }
    ucs_status_t status = uct_iface_open(m_md, side.worker, &params, cfg, &side.iface);
    uct_config_release(cfg);
    if (status != UCS_OK) {
        side.iface = nullptr;
    }
    return status;
}

void uct_test::expect_md_closes_cleanly()
{
    close_side(m_a);
    close_side(m_b);
    expect_log_problems logs;
    uct_md_close(m_md);
    m_md = nullptr;
    EXPECT_TRUE(logs.expected().empty()) << "closing the md:" << logs.text();
}

void uct_test::close_side(uct_side &side)
{
    side.close();
}

void uct_side::close()
{
    if (iface != nullptr) {
        uct_iface_close(iface);
        iface = nullptr;
    }
    if (worker != nullptr) {
        uct_worker_destroy(worker);
        worker = nullptr;
    }
    if (async != nullptr) {
        ucs_async_context_destroy(async);
        async = nullptr;
    }
}

uct_ep_h uct_test::connect(uct_side &from, uct_side &to)
{
    uct_ep_h ep = create_ep(from, to);
    if (ep == nullptr) {
        return nullptr;
    }
    m_eps.push_back(ep);
    EXPECT_TRUE(wait_for([&] { return uct_ep_flush(ep, 0, nullptr) == UCS_OK; }))
            << "endpoint did not connect";
    return ep;
}

ucs_status_t uct_test::try_create_ep(uct_side &from, uct_side &to, uct_ep_h *ep_p)
{
    uct_ep_params_t params = {};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = from.iface;
    params.dev_addr   = reinterpret_cast<const uct_device_addr_t *>(to.dev_addr.data());
    params.iface_addr = reinterpret_cast<const uct_iface_addr_t *>(to.iface_addr.data());
    *ep_p = nullptr;
    return uct_ep_create(&params, ep_p);
}

uct_ep_h uct_test::create_ep(uct_side &from, uct_side &to)
{
    uct_ep_h ep;
    EXPECT_EQ(UCS_OK, try_create_ep(from, to, &ep));
    return ep;
}

unsigned uct_test::progress()
{
    return uct_worker_progress(m_a.worker) + uct_worker_progress(m_b.worker);
}

uct_test::region uct_test::reg(size_t length, unsigned flags)
{
    region r;
    r.length = length;
    r.addr   = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(MAP_FAILED, r.addr);
    std::memset(r.addr, 0, length);
    EXPECT_EQ(UCS_OK, uct_md_mem_reg(m_md, r.addr, length, flags, &r.memh));
    std::vector<char> packed(m_md_attr.rkey_packed_size);
    EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, r.memh, packed.data()));
    EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &r.rkey));
    return r;
}

void uct_test::dereg(region &r)
{
    uct_rkey_release(m_component, &r.rkey);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, r.memh));
    munmap(r.addr, r.length);
    r.addr = nullptr;
}

} // namespace zv::test
