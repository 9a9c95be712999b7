// SPDX-License-Identifier: BSD-3-Clause
// max_num_eps of the connected transports (see scale.h).
#include "iface/scale.h"

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <unistd.h>

namespace zv::iface {

size_t wqe_bytes(unsigned sge, unsigned inline_bytes)
{
    size_t need = 64 + std::max<size_t>(16u * sge, inline_bytes);
    size_t b    = 64;
    while (b < need) {
        b <<= 1;
    }
    return b;
}

size_t peer_bytes(const conn_cost &cost)
{
    return cost.qps * qp_fixed_bytes + cost.sq_wrs * cost.wqe_bytes + cost.state_bytes;
}

size_t max_connections(const conn_cost &cost, const node_share &share)
{
    const uint64_t procs   = std::max(1u, share.local_procs);
    const uint64_t per     = std::max<size_t>(1, peer_bytes(cost));
    const uint64_t by_mem  = share.mem_bytes / mem_share_div / procs / per;
    const uint64_t by_qp   = share.max_qp / qp_share_div / procs / std::max(1u, cost.qps);
    return static_cast<size_t>(std::max<uint64_t>(1, std::min(by_mem, by_qp)));
}

namespace {

/// A positive decimal in the variable, or 0.
unsigned env_count(const char *name)
{
    const char *v = std::getenv(name);
    if ((v == nullptr) || (*v == '\0')) {
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long n = std::strtoul(v, &end, 10);
    if ((errno != 0) || (*end != '\0') || (n == 0) || (n > 1u << 20)) {
        return 0;
    }
    return static_cast<unsigned>(n);
}

} // namespace

unsigned local_processes(const char **source)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                       "SLURM_NTASKS_PER_NODE"};
    for (const char *var : vars) {
        unsigned n = env_count(var);
        if (n > 0) {
            *source = var;
            return n;
        }
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *source   = "online CPUs";
    return (cpus > 0) ? static_cast<unsigned>(cpus) : 1;
}

uint64_t node_memory()
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long size  = sysconf(_SC_PAGESIZE);
    return ((pages > 0) && (size > 0)) ?
           static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

} // namespace zv::iface
