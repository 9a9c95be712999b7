// SPDX-License-Identifier: BSD-3-Clause
// iface::max_connections: the max_num_eps rc_zv and uc_zv report by
// default, from what a peer costs against a process's share of the node.
#include "iface/scale.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <unistd.h>

namespace zv::test {
namespace {

constexpr uint64_t GiB = 1ull << 30;

// rc_zv's defaults: a 256-WR send queue of 4-entry WQEs with 128 bytes
// inline, plus the one-WR passive QP.
iface::conn_cost rc_default()
{
    return {2, 257, iface::wqe_bytes(4, 128), 512};
}

TEST(scale, wqe_bytes_is_the_larger_of_entries_and_inline_rounded_up)
{
    EXPECT_EQ(iface::wqe_bytes(1, 0), 128u);    // 64 + 16
    EXPECT_EQ(iface::wqe_bytes(4, 0), 128u);    // 64 + 64
    EXPECT_EQ(iface::wqe_bytes(4, 128), 256u);  // 64 + 128
    EXPECT_EQ(iface::wqe_bytes(4, 192), 256u);  // exactly 256
    EXPECT_EQ(iface::wqe_bytes(4, 193), 512u);
}

TEST(scale, memory_bound_follows_the_formula)
{
    iface::conn_cost c   = rc_default();
    iface::node_share sh = {256 * GiB, 1u << 30, 64}; // QPs plentiful
    size_t per           = iface::peer_bytes(c);
    EXPECT_EQ(per, 2 * iface::qp_fixed_bytes + 257 * 256 + 512);
    EXPECT_EQ(iface::max_connections(c, sh),
              256 * GiB / iface::mem_share_div / 64 / per);
}

TEST(scale, queue_pair_bound_follows_the_formula)
{
    iface::conn_cost c   = rc_default();
    iface::node_share sh = {1ull << 50, 131072, 64}; // memory plentiful
    EXPECT_EQ(iface::max_connections(c, sh), 131072u / iface::qp_share_div / 64 / 2);
}

TEST(scale, more_local_processes_give_each_fewer_peers)
{
    iface::conn_cost c = rc_default();
    size_t prev        = SIZE_MAX;
    for (unsigned procs : {1u, 2u, 8u, 64u, 256u}) {
        size_t n = iface::max_connections(c, {64 * GiB, 262144, procs});
        EXPECT_LT(n, prev) << procs << " processes";
        prev = n;
    }
}

TEST(scale, a_two_process_job_stays_connected_and_thousands_do_not)
{
    // The Soft-RoCE VM (2 GiB, rxe's 65536 QPs, 2 CPUs) and a 64-rank node
    // of 256 GiB with an mlx5-like 131072 QPs: rc for 2 ranks, never for
    // 4096, whatever the node.
    for (iface::node_share sh : {iface::node_share{2 * GiB, 65536, 2},
                                 iface::node_share{256 * GiB, 131072, 64},
                                 iface::node_share{1024 * GiB, 1u << 24, 128}}) {
        size_t n = iface::max_connections(rc_default(), sh);
        EXPECT_GE(n, 2u);
        EXPECT_LT(n, 4096u);
    }
}

TEST(scale, never_zero)
{
    EXPECT_EQ(iface::max_connections(rc_default(), {1 << 20, 4, 1024}), 1u);
    EXPECT_EQ(iface::max_connections(rc_default(), {0, 0, 0}), 1u);
}

struct env_guard {
    std::string name;
    explicit env_guard(const char *n) : name(n) { unsetenv(n); }
    ~env_guard() { unsetenv(name.c_str()); }
};

TEST(scale, local_processes_from_the_launcher_else_the_cpus)
{
    env_guard a("OMPI_COMM_WORLD_LOCAL_SIZE"), b("MPI_LOCALNRANKS"),
              c("SLURM_NTASKS_PER_NODE");
    const char *src = nullptr;
    EXPECT_EQ(iface::local_processes(&src), static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN)));
    EXPECT_STREQ(src, "online CPUs");

    setenv("SLURM_NTASKS_PER_NODE", "16", 1);
    EXPECT_EQ(iface::local_processes(&src), 16u);
    EXPECT_STREQ(src, "SLURM_NTASKS_PER_NODE");

    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "64", 1);
    EXPECT_EQ(iface::local_processes(&src), 64u);
    EXPECT_STREQ(src, "OMPI_COMM_WORLD_LOCAL_SIZE");

    // not a count: ignored, the next source answers
    for (const char *bad : {"", "0", "-3", "12abc", "99999999999"}) {
        setenv("OMPI_COMM_WORLD_LOCAL_SIZE", bad, 1);
        EXPECT_EQ(iface::local_processes(&src), 16u) << '"' << bad << '"';
        EXPECT_STREQ(src, "SLURM_NTASKS_PER_NODE");
    }
}

TEST(scale, node_memory_is_read)
{
    EXPECT_GT(iface::node_memory(), 64ull << 20);
}

} // namespace
} // namespace zv::test
