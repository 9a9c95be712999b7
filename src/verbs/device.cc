// SPDX-License-Identifier: BSD-3-Clause
// Verbs device open/close, port and GID discovery.
#include "verbs/device.h"

#include "util/nothrow.h"
#include "verbs/route.h"

#include <ucs/debug/log_def.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace zv::verbs {

ucs_status_t status_from_errno(int err)
{
    switch (err) {
    case 0:
        return UCS_OK;
    case ENOMEM:
        return UCS_ERR_NO_MEMORY;
    case EAGAIN:
    case ENOSPC:
        return UCS_ERR_NO_RESOURCE;
    case EINVAL:
        return UCS_ERR_INVALID_PARAM;
    case EOPNOTSUPP:
    case ENOSYS:
        return UCS_ERR_UNSUPPORTED;
    case ENODEV:
    case ENXIO:
        return UCS_ERR_NO_DEVICE;
    case EPERM:
    case EACCES:
        return UCS_ERR_UNREACHABLE;
    case ETIMEDOUT:
        return UCS_ERR_TIMED_OUT;
    default:
        return UCS_ERR_IO_ERROR;
    }
}

bool srq_usable(const ibv_device_attr &attr, const char **why)
{
    const char *reason = nullptr;
    if (attr.max_srq <= 0) {
        reason = "the device has no shared receive queue";
    } else if ((attr.max_srq_wr < 0) || (static_cast<unsigned>(attr.max_srq_wr) < min_srq_wr)) {
        static_assert(min_srq_wr == 64, "the message below names min_srq_wr");
        reason = "the device's shared receive queue is too small (max_srq_wr below 64)";
    }
    if (why != nullptr) {
        *why = reason;
    }
    return reason == nullptr;
}

unsigned mtu_bytes(ibv_mtu mtu)
{
    switch (mtu) {
    case IBV_MTU_256:  return 256;
    case IBV_MTU_512:  return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
    default:           return 0;
    }
}

void port_speed(const ibv_port_attr &attr, bool is_roce, double *bandwidth,
                double *latency)
{
    // active_width: 1=1x 2=4x 4=8x 8=12x 16=2x (IBTA 14.2.5.6, table 164).
    unsigned lanes;
    switch (attr.active_width) {
    case 2:  lanes = 4;  break;
    case 4:  lanes = 8;  break;
    case 8:  lanes = 12; break;
    case 16: lanes = 2;  break;
    default: lanes = 1;  break;
    }

    // active_speed: per-lane signalling rate and line encoding.
    double gbaud, encoding;
    switch (attr.active_speed) {
    case 2:   gbaud = 5.0;       encoding = 0.8;         *latency = 2.5e-6; break; // DDR
    case 4:   gbaud = 10.0;      encoding = 0.8;         *latency = 1.3e-6; break; // QDR
    case 8:   gbaud = 10.3125;   encoding = 64.0 / 66.0; *latency = 0.7e-6; break; // FDR10
    case 16:  gbaud = 14.0625;   encoding = 64.0 / 66.0; *latency = 0.7e-6; break; // FDR
    case 32:  gbaud = 25.78125;  encoding = 64.0 / 66.0; *latency = 0.6e-6; break; // EDR
    case 64:  gbaud = 51.5625;   encoding = 64.0 / 66.0; *latency = 0.6e-6; break; // HDR
    case 128: gbaud = 100.0;     encoding = 64.0 / 66.0; *latency = 0.6e-6; break; // NDR
    default:  gbaud = 2.5;       encoding = 0.8;         *latency = 5.0e-6; break; // SDR
    }
    if (is_roce) {
        *latency += 0.2e-6;
    }
    *bandwidth = lanes * gbaud * 1e9 * encoding / 8.0;
}

ucs_status_t device_names(std::vector<std::string> &names)
{
    int num                = 0;
    ibv_device **dev_list  = ibv_get_device_list(&num);
    if (dev_list == nullptr) {
        // No rdma subsystem at all (no devices) is not an error for a scan.
        if (errno == ENOSYS || errno == ENOENT || errno == 0) {
            names.clear();
            return UCS_OK;
        }
        ucs_debug("ibv_get_device_list() failed: %m");
        return UCS_ERR_NO_DEVICE;
    }
    std::vector<std::string> result;
    const ucs_status_t status = util::try_alloc([&] {
        for (int i = 0; i < num; ++i) {
            result.emplace_back(ibv_get_device_name(dev_list[i]));
        }
    });
    ibv_free_device_list(dev_list);
    if (status == UCS_OK) {
        names.swap(result);
    }
    return status;
}

namespace {

// RoCE: prefer a RoCE v2 GID with an IPv4-mapped address (routable, what
// rdma_cm picks), then any RoCE v2 GID, then index 0. IB: index 0.
int choose_gid_index(ibv_context *ctx, const port_info &port)
{
    if (!port.is_roce) {
        return 0;
    }
    int v2_any = -1;
    for (int i = 0; i < port.attr.gid_tbl_len; ++i) {
        ibv_gid_entry entry;
        if (ibv_query_gid_ex(ctx, port.port_num, i, &entry, 0) != 0) {
            continue;
        }
        if (entry.gid_type != IBV_GID_TYPE_ROCE_V2) {
            continue;
        }
        uint32_t ipv4;
        if (gid_ipv4(entry.gid.raw, &ipv4)) {
            return i;
        }
        if (v2_any < 0) {
            v2_any = i;
        }
    }
    return (v2_any >= 0) ? v2_any : 0;
}

} // namespace

device::~device() { reset(); }

device::device(device &&other) noexcept { *this = std::move(other); }

device &device::operator=(device &&other) noexcept
{
    if (this != &other) {
        reset();
        m_name  = std::move(other.m_name);
        m_ctx   = std::exchange(other.m_ctx, nullptr);
        m_pd    = std::exchange(other.m_pd, nullptr);
        m_attr  = other.m_attr;
        m_ports = std::move(other.m_ports);
    }
    return *this;
}

void device::reset()
{
    if (m_pd != nullptr) {
        int ret = ibv_dealloc_pd(m_pd);
        if (ret != 0) {
            ucs_warn("%s: ibv_dealloc_pd() failed: %s", m_name.c_str(),
                     strerror(ret));
        }
        m_pd = nullptr;
    }
    if (m_ctx != nullptr) {
        if (ibv_close_device(m_ctx) != 0) {
            ucs_warn("%s: ibv_close_device() failed: %m", m_name.c_str());
        }
        m_ctx = nullptr;
    }
    m_ports.clear();
}

const port_info *device::port(uint8_t port_num) const
{
    for (const auto &p : m_ports) {
        if (p.port_num == port_num) {
            return &p;
        }
    }
    return nullptr;
}

bool gid_present(ibv_context *ctx, const port_info &port)
{
    if (port.gid_index < 0) {
        return true; // (InfiniBand: no GID chosen)
    }
    ibv_gid gid;
    return (ibv_query_gid(ctx, port.port_num, port.gid_index, &gid) == 0) &&
           (std::memcmp(&gid, &port.gid, sizeof(gid)) == 0);
}

std::string port_netdev(ibv_context *ctx, const port_info &port)
{
    ibv_gid_entry entry = {};
    char          ifname[IF_NAMESIZE];
    if (!port.is_roce || (port.gid_index < 0) ||
        (ibv_query_gid_ex(ctx, port.port_num, static_cast<uint32_t>(port.gid_index), &entry,
                          0) != 0) ||
        (entry.ndev_ifindex == 0) || (if_indextoname(entry.ndev_ifindex, ifname) == nullptr)) {
        return {};
    }
    return ifname;
}

ucs_status_t device::open(const std::string &name, int gid_index, device &out)
{
    int num               = 0;
    errno                 = 0;
    ibv_device **dev_list = ibv_get_device_list(&num);
    if (dev_list == nullptr) {
        ucs_error("cannot open verbs device %s: ibv_get_device_list() failed: %m",
                  name.c_str());
        return UCS_ERR_NO_DEVICE;
    }

    device dev;
    dev.m_name = name;
    for (int i = 0; i < num; ++i) {
        if (name == ibv_get_device_name(dev_list[i])) {
            dev.m_ctx = ibv_open_device(dev_list[i]);
            if (dev.m_ctx == nullptr) {
                ucs_error("ibv_open_device(%s) failed: %m", name.c_str());
            }
            break;
        }
    }
    ibv_free_device_list(dev_list);
    if (dev.m_ctx == nullptr) {
        if (errno == 0) {
            ucs_error("%s: no such verbs device", name.c_str());
        }
        return UCS_ERR_NO_DEVICE;
    }

    int ret = ibv_query_device_ex(dev.m_ctx, nullptr, &dev.m_attr);
    if (ret != 0) {
        ucs_error("%s: ibv_query_device_ex() failed: %s", name.c_str(),
                  strerror(ret));
        return status_from_errno(ret);
    }

    const char *mask = std::getenv(testing_no_srq_env);
    if ((mask != nullptr) && (std::strcmp(mask, "1") == 0)) {
        ucs_diag("%s: testing only: %s=1 hides the device's shared receive queue",
                 name.c_str(), testing_no_srq_env);
        dev.m_attr.orig_attr.max_srq    = 0;
        dev.m_attr.orig_attr.max_srq_wr = 0;
    }

    dev.m_pd = ibv_alloc_pd(dev.m_ctx);
    if (dev.m_pd == nullptr) {
        ucs_error("%s: ibv_alloc_pd() failed: %m", name.c_str());
        return UCS_ERR_NO_RESOURCE;
    }

    for (unsigned p = 1; p <= dev.m_attr.orig_attr.phys_port_cnt; ++p) {
        port_info info;
        info.port_num = static_cast<uint8_t>(p);
        ret           = ibv_query_port(dev.m_ctx, info.port_num, &info.attr);
        if (ret != 0) {
            ucs_warn("%s:%u: ibv_query_port() failed: %s", name.c_str(), p,
                     strerror(ret));
            continue;
        }
        if (info.attr.state != IBV_PORT_ACTIVE) {
            ucs_debug("%s:%u: port is not active (state %d), skipped",
                      name.c_str(), p, info.attr.state);
            continue;
        }
        info.is_roce   = (info.attr.link_layer == IBV_LINK_LAYER_ETHERNET);
        info.mtu_bytes = mtu_bytes(info.attr.active_mtu);
        port_speed(info.attr, info.is_roce, &info.bandwidth, &info.latency);
        info.gid_index = (gid_index >= 0) ? gid_index :
                                            choose_gid_index(dev.m_ctx, info);
        ret = ibv_query_gid(dev.m_ctx, info.port_num, info.gid_index, &info.gid);
        if (ret != 0) {
            ucs_warn("%s:%u: ibv_query_gid(index %d) failed: %m", name.c_str(),
                     p, info.gid_index);
            continue;
        }
        dev.m_ports.push_back(info);
    }

    out = std::move(dev);
    return UCS_OK;
}

} // namespace zv::verbs
