// SPDX-License-Identifier: BSD-3-Clause
// An interface whose verbs objects cannot all be made fails to open and
// leaves none of those it made behind: no QP, CQ or SRQ in the kernel's
// count, no completion channel or other file open, nothing on the PD (the
// md closes without a word), and no failed destroy logged on the way.
#include "kernel_objects.h"
#include "log_guard.h"
#include "uct_fixture.h"

#include <dirent.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace zv::test {

namespace {

/// What the process holds: compared before and after a failed open.
struct held {
    int qps = 0, cqs = 0, srqs = 0, channels = 0, files = 0;

    bool operator==(const held &o) const
    {
        return (qps == o.qps) && (cqs == o.cqs) && (srqs == o.srqs) &&
               (channels == o.channels) && (files == o.files);
    }
    std::string str() const
    {
        return std::to_string(qps) + " QPs, " + std::to_string(cqs) + " CQs, " +
               std::to_string(srqs) + " SRQs, " + std::to_string(channels) +
               " event files, " + std::to_string(files) + " files";
    }
};

int open_files()
{
    DIR *d = opendir("/proc/self/fd");
    if (d == nullptr) {
        return -1;
    }
    int n = 0;
    while (readdir(d) != nullptr) {
        ++n;
    }
    closedir(d);
    return n;
}

held now()
{
    // (srq: -1 where the tool lists none at all, ours or another process's:
    // the other gtest shard's come and go)
    return {kernel_objects("qp"), kernel_objects("cq"), std::max(0, kernel_objects("srq")),
            event_files(),
            open_files()};
}

/// A setting that makes one verbs object fail to be made, and where.
struct breaker {
    const char *var;
    std::string value;
    const char *fails;     ///< what fails, after what
    bool        must_fail; ///< false: the device's limit is not known here
};

class failed_open : public uct_test, public ::testing::WithParamInterface<const char *> {
protected:
    const char *tl_name() const override { return GetParam(); }

    /// The device's limits, for settings beyond them.
    ibv_device_attr device_attr()
    {
        ibv_device_attr attr = {};
        const std::string name = m_dev.substr(0, m_dev.find(':'));
        int num;
        ibv_device **list = ibv_get_device_list(&num);
        for (int i = 0; (list != nullptr) && (i < num); ++i) {
            if (name == ibv_get_device_name(list[i])) {
                ibv_context *ctx = ibv_open_device(list[i]);
                if (ctx != nullptr) {
                    EXPECT_EQ(0, ibv_query_device(ctx, &attr));
                    ibv_close_device(ctx);
                }
            }
        }
        ibv_free_device_list(list);
        EXPECT_GT(attr.max_cqe, 0) << "cannot query " << name;
        return attr;
    }

    /// The settings that break this transport's open on this device. Those
    /// the configuration's ranges cannot push beyond the device are left
    /// out (a real HCA takes more CQEs than UCX_RC_ZV_TX_CQ_LEN allows).
    std::vector<breaker> breakers()
    {
        constexpr uint32_t rxe_vendor_id = 0xffffff;
        const ibv_device_attr attr = device_attr();
        const bool rc = (std::strcmp(GetParam(), "rc_zv") == 0);
        const bool ud = (std::strcmp(GetParam(), "ud_zv") == 0);
        // Beyond what Soft-RoCE inlines (400 or 512 bytes, by kernel); verbs
        // do not say what another device does.
        std::vector<breaker> b = {{"TX_MAX_INLINE", "1024",
                                   rc   ? "the inline probe QP, after the channel, CQs, SRQ and pools"
                                   : ud ? "the interface's QP, after its CQs"
                                        : "the inline probe QP, after the CQs and the SRQ",
                                   attr.vendor_id == rxe_vendor_id}};
        if (rc && (attr.max_cqe < 262144)) {
            b.push_back({"TX_CQ_LEN", std::to_string(attr.max_cqe + 1),
                         "the send CQ, after the channel", true});
        }
        if (ud && (attr.max_cqe < 65536)) {
            b.push_back({"RX_QUEUE_LEN", std::to_string(attr.max_cqe + 1),
                         "the receive CQ, after the send CQ", true});
        }
        return b;
    }
};

} // namespace

TEST_P(failed_open, leaves_no_verbs_object_behind)
{
    unsigned failed = 0;
    for (const breaker &b : breakers()) {
        SCOPED_TRACE(std::string(b.var) + "=" + b.value + ": " + b.fails);
        const held before = now();
        ASSERT_GE(before.qps, 0) << "`rdma resource show qp` does not run here";
        ASSERT_GE(before.cqs, 0) << "`rdma resource show cq` does not run here";
        uct_side s;
        ucs_status_t status;
        std::vector<std::string> logged;
        {
            expect_log_problems logs;
            status = try_open_side(s, {{b.var, b.value.c_str()}});
            close_side(s); // (opened after all: closed, and the case proves nothing)
            logged = logs.expected();
            EXPECT_EQ(0u, logs.matching("destroy")) << logs.text();
        }
        if (status == UCS_OK) {
            EXPECT_FALSE(b.must_fail) << "it opened";
            continue;
        }
        ++failed;
        EXPECT_FALSE(logged.empty()) << "failed without saying why";
        const held after = now();
        EXPECT_TRUE(after == before) << "before: " << before.str() << "; after: " << after.str();
    }
    EXPECT_GT(failed, 0u) << "no setting made the open fail: nothing was shown";
    expect_md_closes_cleanly(); // nothing was left on the PD
}

INSTANTIATE_TEST_SUITE_P(tl, failed_open, ::testing::Values("rc_zv", "ud_zv", "uc_zv"),
                         tl_param_name());

} // namespace zv::test
