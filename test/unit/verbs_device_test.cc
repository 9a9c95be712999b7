// SPDX-License-Identifier: BSD-3-Clause
// Port attribute decoding: MTU, speed and width to what UCT reports.
#include "verbs/device.h"

#include "log_guard.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace {

ibv_port_attr port(uint8_t width, uint8_t speed)
{
    ibv_port_attr attr = {};
    attr.active_width  = width;
    attr.active_speed  = speed;
    return attr;
}

TEST(verbs_device, mtu_bytes)
{
    EXPECT_EQ(256u, zv::verbs::mtu_bytes(IBV_MTU_256));
    EXPECT_EQ(1024u, zv::verbs::mtu_bytes(IBV_MTU_1024));
    EXPECT_EQ(4096u, zv::verbs::mtu_bytes(IBV_MTU_4096));
    EXPECT_EQ(0u, zv::verbs::mtu_bytes(static_cast<ibv_mtu>(42)));
}

TEST(verbs_device, port_speed_edr_4x)
{
    double bw, lat;
    zv::verbs::port_speed(port(2, 32), false, &bw, &lat);
    // 4 lanes * 25.78125 Gbaud * 64/66 = 100 Gb/s = 12.5 GB/s of payload.
    EXPECT_NEAR(12.5e9, bw, 1e6);
    EXPECT_DOUBLE_EQ(0.6e-6, lat);
}

TEST(verbs_device, port_speed_sdr_1x_and_roce_latency)
{
    double bw, lat_ib, lat_roce;
    zv::verbs::port_speed(port(1, 1), false, &bw, &lat_ib);
    EXPECT_NEAR(2.5e9 * 0.8 / 8, bw, 1);
    zv::verbs::port_speed(port(1, 1), true, &bw, &lat_roce);
    EXPECT_GT(lat_roce, lat_ib);
}

TEST(verbs_device, unknown_speed_falls_back_to_sdr)
{
    double bw_unknown, bw_sdr, lat;
    zv::verbs::port_speed(port(1, 99), false, &bw_unknown, &lat);
    zv::verbs::port_speed(port(1, 1), false, &bw_sdr, &lat);
    EXPECT_EQ(bw_sdr, bw_unknown);
}

TEST(verbs_device, errno_mapping)
{
    EXPECT_EQ(UCS_OK, zv::verbs::status_from_errno(0));
    EXPECT_EQ(UCS_ERR_NO_MEMORY, zv::verbs::status_from_errno(ENOMEM));
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, zv::verbs::status_from_errno(EAGAIN));
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, zv::verbs::status_from_errno(EOPNOTSUPP));
    EXPECT_EQ(UCS_ERR_IO_ERROR, zv::verbs::status_from_errno(EIO));
}

// rc_zv and uc_zv are offered only on a device whose shared receive queue
// they can use; the device layer says which, from the attributes alone.
TEST(verbs_device, srq_usable_needs_an_srq_of_min_srq_wr)
{
    ibv_device_attr attr = {};
    const char *why      = "unset";
    attr.max_srq         = 1024;
    attr.max_srq_wr      = 16384;
    EXPECT_TRUE(zv::verbs::srq_usable(attr, &why));
    EXPECT_EQ(nullptr, why);

    attr.max_srq_wr = zv::verbs::min_srq_wr;
    EXPECT_TRUE(zv::verbs::srq_usable(attr, nullptr));
    attr.max_srq_wr = zv::verbs::min_srq_wr - 1;
    EXPECT_FALSE(zv::verbs::srq_usable(attr, &why));
    ASSERT_NE(nullptr, why);
    EXPECT_NE(std::string::npos, std::string(why).find("too small")) << why;

    attr.max_srq    = 0;   // what ZV_TESTING_NO_SRQ=1 makes of a device
    attr.max_srq_wr = 0;
    EXPECT_FALSE(zv::verbs::srq_usable(attr, &why));
    ASSERT_NE(nullptr, why);
    EXPECT_NE(std::string::npos, std::string(why).find("no shared receive queue")) << why;
    attr.max_srq_wr = 16384; // an SRQ size without SRQs is still none
    EXPECT_FALSE(zv::verbs::srq_usable(attr, nullptr));
}

TEST(verbs_device, open_unknown_device_fails_cleanly)
{
    zv::verbs::device dev;
    zv::test::expect_log_problems logs;
    ucs_status_t status = zv::verbs::device::open("no_such_dev_zv", -1, dev);
    EXPECT_NE(UCS_OK, status);
    EXPECT_EQ(nullptr, dev.ctx());
    ASSERT_EQ(1u, logs.expected().size());
    EXPECT_NE(std::string::npos, logs.expected()[0].find("no_such_dev_zv"))
            << logs.expected()[0];
}

} // namespace
