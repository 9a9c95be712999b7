// SPDX-License-Identifier: BSD-3-Clause
// Device locality from hwloc, on synthetic topologies (test/unit/data): a
// two-socket node with one NIC per socket, with and without the NUMA
// distances a BIOS reports. No hardware involved.
#include "verbs/locality.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <string>
#include <vector>

namespace zv::test {

namespace {

std::string data_file(const char *name)
{
    const char *src = std::getenv("ZV_SRCDIR");
    return std::string(src != nullptr ? src : ".") + "/test/unit/data/" + name;
}

class locality : public ::testing::TestWithParam<const char *> {
protected:
    void SetUp() override
    {
        ASSERT_EQ(0, hwloc_topology_init(&m_topo));
        ASSERT_EQ(0, hwloc_topology_set_io_types_filter(m_topo,
                                                       HWLOC_TYPE_FILTER_KEEP_IMPORTANT));
        ASSERT_EQ(0, hwloc_topology_set_xml(m_topo, data_file(GetParam()).c_str()))
                << data_file(GetParam());
        ASSERT_EQ(0, hwloc_topology_load(m_topo));
    }
    void TearDown() override
    {
        if (m_topo != nullptr) {
            hwloc_topology_destroy(m_topo);
        }
    }

    /// A binding to the given PUs.
    hwloc_bitmap_t pus(std::initializer_list<unsigned> list)
    {
        hwloc_bitmap_t b = hwloc_bitmap_alloc();
        for (unsigned p : list) {
            hwloc_bitmap_set(b, p);
        }
        m_sets.push_back(b);
        return b;
    }
    ~locality() override
    {
        for (hwloc_bitmap_t b : m_sets) {
            hwloc_bitmap_free(b);
        }
    }

    bool has_slit() const { return std::string(GetParam()).find("slit") != std::string::npos; }

    hwloc_topology_t            m_topo = nullptr;
    std::vector<hwloc_bitmap_t> m_sets;
};

TEST_P(locality, each_nic_is_local_to_its_socket)
{
    verbs::locality a = verbs::find_device(m_topo, "mlx5_0");
    verbs::locality b = verbs::find_device(m_topo, "mlx5_1");
    ASSERT_TRUE(a.found);
    ASSERT_TRUE(b.found);
    EXPECT_EQ((std::vector<unsigned>{0, 1}), a.cpus);
    EXPECT_EQ((std::vector<unsigned>{2, 3}), b.cpus);
    EXPECT_EQ(0, a.numa_node);
    EXPECT_EQ(1, b.numa_node);
    ASSERT_TRUE(a.has_bus_id);
    ASSERT_TRUE(b.has_bus_id);
    EXPECT_EQ(0, a.domain);
    EXPECT_EQ(0x03, a.bus);
    EXPECT_EQ(0x83, b.bus);
    EXPECT_EQ(0, b.dev);
    EXPECT_EQ(0, b.func);
}

TEST_P(locality, a_device_hwloc_does_not_place_has_no_locality)
{
    // rxe: a software device over a netdev, no PCI function of its own.
    verbs::locality r = verbs::find_device(m_topo, "rxe0");
    EXPECT_FALSE(r.found);
    EXPECT_FALSE(r.has_bus_id);
    EXPECT_EQ(-1, r.numa_node);
    EXPECT_EQ(0, verbs::remote_latency(m_topo, r, pus({2})));
    EXPECT_FALSE(verbs::find_device(nullptr, "mlx5_0").found);
    // Nor does naming a network interface hwloc does not know (a bridge,
    // a tunnel, veth) give it one.
    EXPECT_FALSE(verbs::find_device(m_topo, "rxe0", "veth3").found);
}

TEST_P(locality, a_software_device_is_where_its_network_interface_is)
{
    // rxe0 over ens7, a NIC on socket 1: its traffic goes through ens7.
    verbs::locality r = verbs::find_device(m_topo, "rxe0", "ens7");
    ASSERT_TRUE(r.found);
    EXPECT_EQ((std::vector<unsigned>{2, 3}), r.cpus);
    EXPECT_EQ(1, r.numa_node);
    ASSERT_TRUE(r.has_bus_id);
    EXPECT_EQ(0x84, r.bus);
    EXPECT_EQ(0, verbs::remote_latency(m_topo, r, pus({2})));
    EXPECT_GT(verbs::remote_latency(m_topo, r, pus({0})), 0);
    // A device of its own is found as itself, whatever interface is named.
    EXPECT_EQ(0x83, verbs::find_device(m_topo, "mlx5_1", "ens7").bus);
}

TEST_P(locality, a_process_bound_to_a_socket_prefers_its_nic)
{
    verbs::locality a = verbs::find_device(m_topo, "mlx5_0");
    verbs::locality b = verbs::find_device(m_topo, "mlx5_1");
    // UCP picks the device with the lower latency: the near one.
    const double remote = has_slit() ? (21 - 10) * 20e-9 : 200e-9;
    EXPECT_EQ(0, verbs::remote_latency(m_topo, b, pus({2, 3})));
    EXPECT_DOUBLE_EQ(remote, verbs::remote_latency(m_topo, a, pus({2, 3})));
    EXPECT_EQ(0, verbs::remote_latency(m_topo, a, pus({1})));
    EXPECT_DOUBLE_EQ(remote, verbs::remote_latency(m_topo, b, pus({1})));
}

TEST_P(locality, an_unbound_process_sees_both_nics_alike)
{
    verbs::locality a = verbs::find_device(m_topo, "mlx5_0");
    verbs::locality b = verbs::find_device(m_topo, "mlx5_1");
    hwloc_bitmap_t all = pus({0, 1, 2, 3});
    EXPECT_DOUBLE_EQ(verbs::remote_latency(m_topo, a, all),
                     verbs::remote_latency(m_topo, b, all));
}

// This machine's topology: pages bound to its first NUMA node (the
// interfaces' buffer pools, bound to their device's node) are placed there
// when first touched.
TEST(numa_binding, pages_bound_to_a_node_are_placed_there)
{
    hwloc_topology_t topo = verbs::node_topology();
    ASSERT_NE(nullptr, topo);
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, 0);
    ASSERT_NE(nullptr, node);
    const size_t len = 16 * 4096;
    void *mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, mem);
    EXPECT_FALSE(verbs::bind_to_numa_node(mem, len, -1));
    EXPECT_FALSE(verbs::bind_to_numa_node(mem, len, 100000)) << "no such node";
    ASSERT_TRUE(verbs::bind_to_numa_node(mem, len, static_cast<int>(node->os_index)));
    std::memset(mem, 1, len);
    hwloc_bitmap_t where = hwloc_bitmap_alloc();
    ASSERT_EQ(0, hwloc_get_area_memlocation(topo, mem, len, where, HWLOC_MEMBIND_BYNODESET));
    EXPECT_TRUE(hwloc_bitmap_isequal(where, node->nodeset));
    hwloc_bitmap_free(where);
    munmap(mem, len);
}

INSTANTIATE_TEST_SUITE_P(topology, locality,
                         ::testing::Values("two-socket-two-nics.xml",
                                           "two-socket-two-nics-slit.xml"));

} // namespace

} // namespace zv::test
