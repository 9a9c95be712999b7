// SPDX-License-Identifier: BSD-3-Clause
// fork() after deregistration, through the zv md with libibverbs' fork
// support on (UCX's test_md_fork): the child has the buffer.
#include "uct_fixture.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char **environ;

namespace zv::test {

namespace {

constexpr const char *child_var = "ZV_TEST_MD_FORK_CHILD";

/// fork(); the child reads p[0] and exits 0 if it is 'value'. Returns the
/// child's wait status.
int fork_and_touch(const char *p, char value)
{
    const pid_t pid = fork();
    if (pid == 0) {
        _exit((static_cast<const volatile char *>(p)[0] == value) ? 0 : 1);
    }
    int status = -1;
    if ((pid < 0) || (waitpid(pid, &status, 0) != pid)) {
        return -1;
    }
    return status;
}

std::string describe(int status)
{
    if (WIFEXITED(status)) {
        return "exit " + std::to_string(WEXITSTATUS(status));
    }
    return WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) : "?";
}

class md_fork : public uct_test {};

/// libibverbs' fork support must be on from its start (ibv_fork_init()
/// fails once anything was registered), so the test runs itself again in a
/// process of its own with RDMAV_FORK_SAFE=1 (what UCX's ib md's
/// ibv_fork_init() does, by default); there a buffer registered through
/// the md and deregistered is in a forked child, as a buffer an MPI code
/// freed before a fork() must be.
TEST_F(md_fork, a_child_forked_after_dereg_has_the_buffer)
{
    if (getenv(child_var) == nullptr) {
        std::vector<std::string> env;
        for (char **e = environ; *e != nullptr; ++e) {
            env.emplace_back(*e);
        }
        env.emplace_back(std::string(child_var) + "=1");
        env.emplace_back("RDMAV_FORK_SAFE=1");
        env.emplace_back("RDMAV_USE_MADVISE=1"); // (rdma-core > 44 skips it otherwise)
        std::vector<char *> envp;
        for (std::string &s : env) {
            envp.push_back(&s[0]);
        }
        envp.push_back(nullptr);
        std::string filter = "--gtest_filter=md_fork.a_child_forked_after_dereg_has_the_buffer";
        char self[] = "/proc/self/exe";
        char *argv[] = {self, &filter[0], nullptr};
        // Its output goes to a file: shown here when it failed, its
        // figures always.
        char out[] = "/tmp/zv-md-fork.XXXXXX";
        const int fd = mkstemp(out);
        ASSERT_GE(fd, 0);
        unlink(out);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd, 1);
        posix_spawn_file_actions_adddup2(&fa, fd, 2);
        pid_t pid;
        const int ret = posix_spawn(&pid, self, &fa, nullptr, argv, envp.data());
        posix_spawn_file_actions_destroy(&fa);
        ASSERT_EQ(0, ret) << strerror(ret);
        int status = -1;
        ASSERT_EQ(pid, waitpid(pid, &status, 0));
        std::string text;
        char buf[4096];
        ssize_t n;
        for (off_t off = 0; (n = pread(fd, buf, sizeof(buf), off)) > 0; off += n) {
            text.append(buf, static_cast<size_t>(n));
        }
        close(fd);
        const bool ok = WIFEXITED(status) && (WEXITSTATUS(status) == 0);
        for (size_t at = 0, end; at < text.size(); at = end + 1) {
            end = text.find('\n', at);
            end = (end == std::string::npos) ? text.size() : end;
            const std::string line = text.substr(at, end - at);
            if (!ok || (line.find("[ info") == 0)) {
                std::printf("%s%s\n", ok ? "" : "  | ", line.c_str());
            }
        }
        EXPECT_TRUE(ok) << "the test in a process of its own: " << describe(status);
        return;
    }
    // In the process of its own: registrations are MADV_DONTFORK.
    constexpr size_t len = 4096;
    char *p = static_cast<char *>(mmap(nullptr, len, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(MAP_FAILED, p);
    std::memset(p, 42, len);
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, p, 100, UCT_MD_MEM_ACCESS_ALL, &memh));
    const int held = fork_and_touch(p, 42);
    ASSERT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    const int freed = fork_and_touch(p, 42);
    std::printf("[ info     ] a child touching the buffer: registered: %s; deregistered: %s\n",
                describe(held).c_str(), describe(freed).c_str());
    // (Registered, it is absent in the child: else this test proves nothing.)
    EXPECT_TRUE(WIFSIGNALED(held) && (WTERMSIG(held) == SIGSEGV))
            << "libibverbs' fork support is not on: " << describe(held);
    EXPECT_TRUE(WIFEXITED(freed) && (WEXITSTATUS(freed) == 0))
            << "a child touching a deregistered buffer: " << describe(freed);
    // Registered again, it is the same buffer as before (nothing stale).
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, p, 100, UCT_MD_MEM_ACCESS_ALL, &memh));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    munmap(p, len);
}

} // namespace
} // namespace zv::test
