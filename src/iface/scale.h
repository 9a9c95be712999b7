// SPDX-License-Identifier: BSD-3-Clause
// How many peers a connected transport (rc_zv, uc_zv) should serve before
// UCP moves to a datagram one: the max_num_eps it reports.
#ifndef ZV_IFACE_SCALE_H
#define ZV_IFACE_SCALE_H

#include <cstddef>
#include <cstdint>

namespace zv::iface {

/*
 * A connected transport costs every process a queue pair (or two) and a
 * send queue per peer; a datagram transport costs one QP whatever the job
 * size. UCP picks, per job, the transports whose max_num_eps covers its
 * estimated number of endpoints (Open MPI passes the job size; UCX_NUM_EPS
 * sets it by hand) and drops the others when a scalable one is there. So
 * rc_zv and uc_zv report what a process can afford, from what one
 * connection costs and from a per-process share of the node:
 *
 *   per peer   = qps * qp_fixed_bytes + sq_wrs * wqe_bytes + state_bytes
 *   memory     = node memory / mem_share_div / local processes
 *   queue pairs= device max_qp / qp_share_div / local processes
 *   max_num_eps= min(memory / per peer, queue pairs / qps), at least 1
 *
 * Connections may take 1/64 of the node's memory and half of the device's
 * QPs (the rest is the application's, the kernel's and other users'),
 * shared evenly by the processes of the node. That keeps a job's memory
 * for connections bounded by design: a job larger than the threshold uses
 * the datagram transport instead of growing until it runs out.
 */
constexpr unsigned mem_share_div  = 64;
constexpr unsigned qp_share_div   = 2;
/// Per queue pair beyond its send queue: QP context, driver and kernel
/// objects, completion bookkeeping (a page on the devices measured).
constexpr size_t   qp_fixed_bytes = 4096;

/// What one connected peer costs this process.
struct conn_cost {
    unsigned qps;         ///< queue pairs held per peer (active and passive)
    unsigned sq_wrs;      ///< send work requests of those QPs together
    size_t   wqe_bytes;   ///< bytes one send work request takes
    size_t   state_bytes; ///< per-peer software state (endpoint, maps)
};

/// This process's share of the node.
struct node_share {
    uint64_t mem_bytes;   ///< physical memory of the node
    uint64_t max_qp;      ///< the device's max_qp
    unsigned local_procs; ///< processes of the job on this node (>= 1)
};

/// Bytes of one send WQE with 'sge' gather entries and 'inline_bytes'
/// inline: a 64-byte control segment and 16 bytes per entry, or the inline
/// data, whichever is larger, rounded up to a power of two (the layout of
/// mlx5 send WQEs; rxe's are of the same order).
[[nodiscard]] size_t wqe_bytes(unsigned sge, unsigned inline_bytes);

/// Bytes one peer costs.
[[nodiscard]] size_t peer_bytes(const conn_cost &cost);

/// The formula above.
[[nodiscard]] size_t max_connections(const conn_cost &cost, const node_share &share);

/// Processes of this job on this node: OMPI_COMM_WORLD_LOCAL_SIZE (Open
/// MPI), MPI_LOCALNRANKS (MPICH's hydra), SLURM_NTASKS_PER_NODE, else the
/// node's online CPUs (at most one busy-polling rank per core). *source
/// names where the figure came from.
[[nodiscard]] unsigned local_processes(const char **source);

/// The node's physical memory in bytes.
[[nodiscard]] uint64_t node_memory();

} // namespace zv::iface

#endif
