// SPDX-License-Identifier: BSD-3-Clause
// The layout check that guards module registration.
#include "glue/layout_check.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(layout_check, installed_ucx_matches_headers)
{
    char msg[512];
    EXPECT_EQ(0, zv_layout_check_builtin(msg, sizeof(msg))) << msg;
}

TEST(layout_check, mismatch_is_reported_with_sizes)
{
    const zv_layout_entry entries[] = {
        {"uct_base_iface_t", sizeof(uct_base_iface_t) + 8, &uct_base_iface_t_class},
        {"uct_base_ep_t", sizeof(uct_base_ep_t), &uct_base_ep_t_class},
    };
    char msg[512];
    EXPECT_EQ(1, zv_layout_check_entries(entries, 2, msg, sizeof(msg)));
    std::string text(msg);
    EXPECT_NE(std::string::npos, text.find("uct_base_iface_t")) << text;
    EXPECT_NE(std::string::npos,
              text.find(std::to_string(sizeof(uct_base_iface_t) + 8))) << text;
    EXPECT_EQ(std::string::npos, text.find("uct_base_ep_t")) << text;
}

TEST(layout_check, message_is_truncated_safely)
{
    const zv_layout_entry entries[] = {
        {"a_very_long_struct_name_for_truncation", 1, &uct_base_iface_t_class},
        {"another_long_struct_name", 2, &uct_base_ep_t_class},
    };
    char msg[16];
    // (volatile: GCC would see the truncation this test is about through
    // the inlined snprintf and warn in every build)
    volatile size_t len = sizeof(msg);
    EXPECT_EQ(2, zv_layout_check_entries(entries, 2, msg, len));
    EXPECT_EQ('\0', msg[sizeof(msg) - 1]);
}

} // namespace
