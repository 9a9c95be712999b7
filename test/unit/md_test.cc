// SPDX-License-Identifier: BSD-3-Clause
// Memory-domain logic that needs no device: rkey packing, port names.
#include "md/zv_md.h"

#include <gtest/gtest.h>

namespace {

TEST(md, rkey_unpack_roundtrip)
{
    zv::md::packed_rkey packed{0xdeadbeef};
    uct_rkey_t rkey = 0;
    void *handle    = reinterpret_cast<void *>(1);
    ASSERT_EQ(UCS_OK, zv::md::rkey_unpack(nullptr, &packed, &rkey, &handle));
    EXPECT_EQ(0xdeadbeefu, rkey);
    EXPECT_EQ(nullptr, handle);
    EXPECT_EQ(UCS_OK, zv::md::rkey_release(nullptr, rkey, handle));
}

TEST(md, find_port_rejects_malformed_names)
{
    zv::md::zv_md md{};
    // No device opened: no port can match, whatever the name.
    for (const char *name : {"", "rxe0", "rxe0:", "rxe0:1x", "rxe0:0", "rxe0:256",
                             ":1", "rxe0:-1"}) {
        EXPECT_EQ(nullptr, zv::md::find_port(&md, name)) << name;
    }
}

TEST(md, no_devices_gives_empty_resource_list)
{
    // On a host without RDMA devices the component must still load and
    // report zero memory domains rather than fail.
    uct_md_resource_desc_t *res = nullptr;
    unsigned num                = 99;
    ASSERT_EQ(UCS_OK, zv::md::query_md_resources(nullptr, &res, &num));
    EXPECT_LE(num, 16u);
    free(res);
}

} // namespace
