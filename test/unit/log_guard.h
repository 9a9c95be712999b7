// SPDX-License-Identifier: BSD-3-Clause
// Test helper: fail a test on any unexpected UCX warning or error log.
#ifndef ZV_TEST_LOG_GUARD_H
#define ZV_TEST_LOG_GUARD_H

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

namespace zv::test {

/// Messages at WARN or ERROR logged since the current test started.
std::vector<std::string> &logged_problems();

/// A test that expects warnings/errors declares it with this guard: while
/// it lives, such messages are collected in expected() instead of failing.
class expect_log_problems {
public:
    expect_log_problems();
    ~expect_log_problems();
    const std::vector<std::string> &expected() const;
    /// Messages so far that contain 'what', and those that do not.
    size_t matching(const char *what) const;
    size_t others(const char *what) const;
    /// The messages, one per line (for a failed expectation's output).
    std::string text() const;
};

/// 'logs' holds messages, and every one of them names 'what'.
inline ::testing::AssertionResult logged_only(const expect_log_problems &logs, const char *what)
{
    if ((logs.matching(what) > 0) && (logs.others(what) == 0)) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "expected messages naming '" << what
                                         << "' and no other:" << logs.text();
}

/// Number of tests that logged warnings/errors they did not expect.
int stray_log_tests();

} // namespace zv::test

#endif
