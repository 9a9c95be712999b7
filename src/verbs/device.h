// SPDX-License-Identifier: BSD-3-Clause
// RAII over a verbs device context and protection domain; port discovery.
#ifndef ZV_VERBS_DEVICE_H
#define ZV_VERBS_DEVICE_H

#include <infiniband/verbs.h>
#include <ucs/type/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zv::verbs {

/// Convert an errno value (from ibv_* calls) to a UCX status.
[[nodiscard]] ucs_status_t status_from_errno(int err);

/// One active port of a device, with what UCT reports about it.
struct port_info {
    uint8_t       port_num   = 0;
    ibv_port_attr attr       = {};
    bool          is_roce    = false;  ///< Ethernet link layer
    int           gid_index  = -1;     ///< chosen GID (RoCE v2 IPv4 first)
    ibv_gid       gid        = {};
    unsigned      mtu_bytes  = 0;      ///< active MTU in bytes
    double        bandwidth  = 0;      ///< payload bytes/s at active speed
    double        latency    = 0;      ///< base one-way latency, seconds
};

/// Active MTU enum to bytes (256..4096); 0 for an unknown value.
unsigned mtu_bytes(ibv_mtu mtu);

/// Payload bandwidth (bytes/s) and base latency of a port from its active
/// width/speed, following the IBTA PortInfo encodings.
void port_speed(const ibv_port_attr &attr, bool is_roce, double *bandwidth,
                double *latency);

/// The smallest shared receive queue a connected transport (rc_zv, uc_zv)
/// is offered with. A device without one, or with a smaller one, gets
/// ud_zv only: "without SRQ support the right answer is UD", never receive
/// buffers per peer.
constexpr unsigned min_srq_wr = 64;

/// Whether a device with 'attr' has a usable shared receive queue; when not,
/// *why (if not null) says what it lacks.
[[nodiscard]] bool srq_usable(const ibv_device_attr &attr, const char **why);

/// Testing only: the environment variable that makes device::open() hide
/// the SRQ of every device (max_srq = max_srq_wr = 0), to show rc_zv and
/// uc_zv stepping aside on a device without one ("1" turns it on). Not a
/// UCX setting, not in the user's reference.
constexpr const char *testing_no_srq_env = "ZV_TESTING_NO_SRQ";

/// The network interface (e.g. eth0) that carries RoCE port 'port''s
/// chosen GID; empty for InfiniBand, or when the kernel does not say.
[[nodiscard]] std::string port_netdev(ibv_context *ctx, const port_info &port);

/// Whether the port's table holds its chosen GID again: after a RoCE port
/// comes back, its addresses (and so the GIDs) return a moment later, and
/// a QP brought up or used before then fails.
[[nodiscard]] bool gid_present(ibv_context *ctx, const port_info &port);

/// Names of all verbs devices in the system (may be empty).
[[nodiscard]] ucs_status_t device_names(std::vector<std::string> &names);

/// An opened device (ibv_context) and its PD. Movable, not copyable.
class device {
public:
    device() = default;
    ~device();
    device(device &&other) noexcept;
    device &operator=(device &&other) noexcept;
    device(const device &)            = delete;
    device &operator=(const device &) = delete;

    /// Open device 'name' and allocate a PD. gid_index < 0 means automatic.
    [[nodiscard]] static ucs_status_t open(const std::string &name,
                                           int gid_index, device &out);

    ibv_context *ctx() const { return m_ctx; }
    ibv_pd *pd() const { return m_pd; }
    const std::string &name() const { return m_name; }
    const ibv_device_attr_ex &attr() const { return m_attr; }
    /// Active ports only (state ACTIVE), in port order.
    const std::vector<port_info> &ports() const { return m_ports; }
    const port_info *port(uint8_t port_num) const;

private:
    void reset();

    std::string            m_name;
    ibv_context           *m_ctx = nullptr;
    ibv_pd                *m_pd  = nullptr;
    ibv_device_attr_ex     m_attr = {};
    std::vector<port_info> m_ports;
};

} // namespace zv::verbs

#endif
