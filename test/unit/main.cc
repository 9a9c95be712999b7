// SPDX-License-Identifier: BSD-3-Clause
// Unit-test main: any UCX warning or error logged during a test that did
// not declare it (expect_log_problems) fails the run, naming the test.
#include "log_guard.h"

#include <gtest/gtest.h>
#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace zv::test {

namespace {
std::mutex               g_lock;
std::vector<std::string> g_problems;
std::vector<std::string> g_expected;
int                      g_expecting = 0;
int                      g_stray_tests = 0;

ucs_log_func_rc_t log_handler(const char *file, unsigned line, const char *,
                              ucs_log_level_t level,
                              const ucs_log_component_config_t *,
                              const char *message, va_list ap)
{
    if (level > UCS_LOG_LEVEL_WARN) {
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
    char buf[1024];
    va_list aq;
    va_copy(aq, ap);
    std::vsnprintf(buf, sizeof(buf), message, aq);
    va_end(aq);
    std::string text = std::string(ucs_log_level_names[level]) + " " + file +
                       ":" + std::to_string(line) + ": " + buf;
    std::lock_guard<std::mutex> guard(g_lock);
    if (g_expecting > 0) {
        g_expected.push_back(text);
        return UCS_LOG_FUNC_RC_STOP;
    }
    g_problems.push_back(text);
    return UCS_LOG_FUNC_RC_CONTINUE;
}

class stray_log_listener : public ::testing::EmptyTestEventListener {
    void OnTestStart(const ::testing::TestInfo &) override
    {
        std::lock_guard<std::mutex> guard(g_lock);
        g_problems.clear();
    }

    void OnTestEnd(const ::testing::TestInfo &info) override
    {
        std::lock_guard<std::mutex> guard(g_lock);
        if (g_problems.empty()) {
            return;
        }
        ++g_stray_tests;
        std::fprintf(stderr, "[  STRAY LOG ] %s.%s logged unexpectedly:\n",
                     info.test_suite_name(), info.name());
        for (const auto &p : g_problems) {
            std::fprintf(stderr, "    %s\n", p.c_str());
        }
    }
};

} // namespace

std::vector<std::string> &logged_problems() { return g_problems; }

expect_log_problems::expect_log_problems()
{
    std::lock_guard<std::mutex> guard(g_lock);
    g_expected.clear();
    ++g_expecting;
}

expect_log_problems::~expect_log_problems()
{
    std::lock_guard<std::mutex> guard(g_lock);
    --g_expecting;
}

const std::vector<std::string> &expect_log_problems::expected() const
{
    return g_expected;
}

size_t expect_log_problems::matching(const char *what) const
{
    std::lock_guard<std::mutex> guard(g_lock);
    size_t n = 0;
    for (const std::string &l : g_expected) {
        n += (l.find(what) != std::string::npos) ? 1 : 0;
    }
    return n;
}

size_t expect_log_problems::others(const char *what) const
{
    std::lock_guard<std::mutex> guard(g_lock);
    return g_expected.size() - std::count_if(g_expected.begin(), g_expected.end(),
                                             [what](const std::string &l) {
                                                 return l.find(what) != std::string::npos;
                                             });
}

std::string expect_log_problems::text() const
{
    std::lock_guard<std::mutex> guard(g_lock);
    std::string s;
    for (const std::string &l : g_expected) {
        s += "\n  " + l;
    }
    return s;
}

int stray_log_tests() { return g_stray_tests; }

} // namespace zv::test

int main(int argc, char **argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    ucs_log_push_handler(zv::test::log_handler);
    ::testing::UnitTest::GetInstance()->listeners().Append(
            new zv::test::stray_log_listener);
    int rc = RUN_ALL_TESTS();
    if (zv::test::stray_log_tests() > 0) {
        std::fprintf(stderr, "%d test(s) logged unexpected warnings/errors\n",
                     zv::test::stray_log_tests());
        rc = 1;
    }
    return rc;
}
