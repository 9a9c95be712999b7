// SPDX-License-Identifier: BSD-3-Clause
// Every way memory behind a registration changes, under every monitor: zero stale hits.
#include "fake_env.h"

#include <malloc.h>
#include <cerrno>
#include <cstring>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace zv::test {
namespace {

class rcache_events : public cache_fixture {
protected:
    // Unmapped [p, p + pages) is mapped again, fresh, at the same address.
    char *remap_same(char *p, size_t pages)
    {
        char *q = map_pages(pages, p);
        EXPECT_EQ(p, q) << "address reuse failed";
        touch(q, pages * k_page, 2);
        return q;
    }

    // A monitor that sees the change must have dropped the region.
    void expect_dropped(uint32_t before, uint32_t after)
    {
        if (caching()) {
            EXPECT_NE(before, after) << GetParam().name << " kept a region it should have dropped";
        }
    }
};

TEST_P(rcache_events, munmap_whole)
{
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    const uint32_t r1 = use(p, 4 * k_page);
    if (caching()) {
        EXPECT_EQ(r1, use(p, 4 * k_page)) << "second use must hit";
    }
    ASSERT_EQ(0, munmap(p, 4 * k_page));
    p = remap_same(p, 4);
    expect_dropped(r1, use(p, 4 * k_page));
    munmap(p, 4 * k_page);
}

TEST_P(rcache_events, munmap_part)
{
    char *p = map_pages(8);
    touch(p, 8 * k_page);
    const uint32_t r1 = use(p, 8 * k_page);
    ASSERT_EQ(0, munmap(p + 3 * k_page, 2 * k_page));
    remap_same(p + 3 * k_page, 2);
    expect_dropped(r1, use(p, 8 * k_page));
    use(p, 2 * k_page);                  // untouched part
    use(p + 3 * k_page, 2 * k_page);     // replaced part
    munmap(p, 8 * k_page);
}

TEST_P(rcache_events, mmap_fixed_over)
{
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    const uint32_t r1 = use(p, 4 * k_page);
    void *q = mmap(p + k_page, 2 * k_page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(p + k_page, q);
    touch(p, 4 * k_page, 3);
    expect_dropped(r1, use(p, 4 * k_page));
    munmap(p, 4 * k_page);
}

TEST_P(rcache_events, mremap_move)
{
    // Growing past a blocker makes mremap move the pages.
    char *p = map_pages(16);
    ASSERT_EQ(0, munmap(p + 4 * k_page, 12 * k_page));
    char *blocker = map_pages(1, p + 4 * k_page);
    ASSERT_NE(nullptr, blocker);
    touch(p, 4 * k_page);
    const uint32_t r1 = use(p, 4 * k_page);
    void *q = mremap(p, 4 * k_page, 8 * k_page, MREMAP_MAYMOVE);
    ASSERT_NE(MAP_FAILED, q);
    ASSERT_NE(static_cast<void *>(p), q);
    touch(q, 8 * k_page);
    use(q, 4 * k_page); // the moved pages: the old registration must not serve them
    p = remap_same(p, 4);
    expect_dropped(r1, use(p, 4 * k_page));
    munmap(p, 4 * k_page);
    munmap(q, 8 * k_page);
    munmap(blocker, k_page);
}

TEST_P(rcache_events, mremap_fixed_move)
{
    // UCX 1.13.1's UCM mremap hook drops the fifth argument: in any process
    // that loads libucs, mremap(MREMAP_FIXED) through libc fails. A raw
    // syscall is the only way to do it there, and only uffd can see that.
    if (GetParam().kind == rcache::monitor_kind::ucm) {
        GTEST_SKIP() << "interception cannot see a raw mremap syscall";
    }
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    const uint32_t r1 = use(p, 4 * k_page);
    char *dst = map_pages(4);
    ASSERT_NE(nullptr, dst);
    const long q = syscall(SYS_mremap, p, 4 * k_page, 4 * k_page,
                           MREMAP_MAYMOVE | MREMAP_FIXED, dst);
    ASSERT_EQ(reinterpret_cast<long>(dst), q);
    use(dst, 4 * k_page);
    p = remap_same(p, 4);
    expect_dropped(r1, use(p, 4 * k_page));
    munmap(p, 4 * k_page);
    munmap(dst, 4 * k_page);
}

TEST_P(rcache_events, mremap_shrink)
{
    char *p = map_pages(8);
    touch(p, 8 * k_page);
    const uint32_t r1 = use(p, 8 * k_page);
    ASSERT_EQ(p, mremap(p, 8 * k_page, 4 * k_page, 0));
    remap_same(p + 4 * k_page, 4);
    expect_dropped(r1, use(p, 8 * k_page));
    munmap(p, 8 * k_page);
}

TEST_P(rcache_events, mremap_grow)
{
    // Grow in place (the neighbour pages are free), then by moving (blocked).
    char *p = map_pages(16);
    ASSERT_EQ(0, munmap(p + 4 * k_page, 12 * k_page));
    touch(p, 4 * k_page);
    use(p, 4 * k_page);
    size_t pages = 8;
    if (mremap(p, 4 * k_page, 8 * k_page, 0) == MAP_FAILED) {
        // valgrind's address-space manager refuses in-place growth.
        ASSERT_TRUE(RUNNING_ON_VALGRIND) << "in-place mremap failed: " << strerror(errno);
        pages = 4;
    } else {
        touch(p, 8 * k_page);
        use(p, 4 * k_page); // unchanged pages: a hit is correct
        use(p, 8 * k_page); // grown range: must be registered anew
    }

    char *blocker = map_pages(1, p + 8 * k_page);
    ASSERT_NE(nullptr, blocker);
    void *q = mremap(p, pages * k_page, 64 * k_page, MREMAP_MAYMOVE);
    ASSERT_NE(MAP_FAILED, q);
    ASSERT_NE(static_cast<void *>(p), q);
    touch(q, 64 * k_page);
    use(q, 64 * k_page);
    remap_same(p, pages);
    use(p, pages * k_page);
    munmap(p, pages * k_page);
    munmap(q, 64 * k_page);
    munmap(blocker, k_page);
}

TEST_P(rcache_events, madvise_dontneed)
{
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    const uint32_t r1 = use(p, 4 * k_page);
    ASSERT_EQ(0, madvise(p, 2 * k_page, MADV_DONTNEED));
    touch(p, 4 * k_page, 4);
    expect_dropped(r1, use(p, 4 * k_page));
    munmap(p, 4 * k_page);
}

TEST_P(rcache_events, madvise_free)
{
    // Pinned pages are never reclaimed by MADV_FREE; a monitor drops the
    // region anyway (both report it) and a hit would still be correct.
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    use(p, 4 * k_page);
    ASSERT_EQ(0, madvise(p, 4 * k_page, MADV_FREE));
    touch(p, 4 * k_page, 5);
    use(p, 4 * k_page);
    munmap(p, 4 * k_page);
}

TEST_P(rcache_events, madvise_remove)
{
    // MADV_REMOVE works on shared memory only. The uffd monitor never caches
    // shared memory (a fork child could remove it unseen): registered per use.
    char *p = map_pages(4, nullptr, 0);
    munmap(p, 4 * k_page);
    p = static_cast<char *>(mmap(nullptr, 4 * k_page, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(MAP_FAILED, static_cast<void *>(p));
    touch(p, 4 * k_page);
    const uint32_t r1 = use(p, 4 * k_page);
    ASSERT_EQ(0, madvise(p, 4 * k_page, MADV_REMOVE));
    touch(p, 4 * k_page, 6);
    expect_dropped(r1, use(p, 4 * k_page));
    munmap(p, 4 * k_page);
}

TEST_P(rcache_events, brk_shrink)
{
    // uffd: the kernel reports brk shrink as UFFD_EVENT_UNMAP; ucm: sbrk hook.
    // glibc malloc shares the break: give it slack first so that nothing it
    // does during the test moves the break, and skip if it did anyway.
    void *warm = malloc(1 << 20);
    free(warm);
    char *brk0 = static_cast<char *>(sbrk(0));
    char *base = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(brk0) + k_page - 1) &
                                          ~(k_page - 1));
    const size_t grow = (base - brk0) + 8 * k_page;
    ASSERT_NE(reinterpret_cast<void *>(-1), sbrk(static_cast<intptr_t>(grow)));
    touch(base, 8 * k_page);
    const uint32_t r1 = use(base, 8 * k_page);
    if (sbrk(0) != base + 8 * k_page) {
        GTEST_SKIP() << "malloc moved the break during the test";
    }
    ASSERT_NE(reinterpret_cast<void *>(-1), sbrk(-static_cast<intptr_t>(4 * k_page)));
    ASSERT_NE(reinterpret_cast<void *>(-1), sbrk(static_cast<intptr_t>(4 * k_page)));
    touch(base, 8 * k_page, 7);
    const uint32_t r2 = use(base, 8 * k_page);
    if (!RUNNING_ON_VALGRIND) {
        // valgrind simulates brk inside its own mapping: nothing changes.
        expect_dropped(r1, r2);
    }
    ASSERT_NE(reinterpret_cast<void *>(-1), sbrk(-static_cast<intptr_t>(grow)));
}

TEST_P(rcache_events, shmat_remap_and_shmdt)
{
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    const uint32_t r1 = use(p, 4 * k_page);
    const int id = shmget(IPC_PRIVATE, 4 * k_page, IPC_CREAT | 0600);
    ASSERT_GE(id, 0);
    ASSERT_EQ(static_cast<void *>(p), shmat(id, p, SHM_REMAP));
    shmctl(id, IPC_RMID, nullptr);
    touch(p, 4 * k_page, 8);
    const uint32_t r2 = use(p, 4 * k_page);
    expect_dropped(r1, r2);
    // SysV shm cannot be watched by uffd (registered per use); ucm caches it
    // and sees shmdt.
    ASSERT_EQ(0, shmdt(p));
    p = remap_same(p, 4);
    use(p, 4 * k_page);
    munmap(p, 4 * k_page);
}

TEST_P(rcache_events, free_then_malloc_same_address)
{
    // Large blocks come from mmap and go back with munmap inside free().
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    const size_t len = 8 << 20;
    char *p = static_cast<char *>(malloc(len));
    ASSERT_NE(nullptr, p);
    touch(p, len);
    use(p, len);
    free(p);
    char *q = static_cast<char *>(malloc(len));
    ASSERT_NE(nullptr, q);
    touch(q, len, 9);
    use(q, len); // same address or not: never the old pages
    free(q);
}

TEST_P(rcache_events, realloc_moves)
{
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    char *p = static_cast<char *>(malloc(1 << 20));
    ASSERT_NE(nullptr, p);
    touch(p, 1 << 20);
    use(p, 1 << 20);
    char *blocker = map_pages(1, reinterpret_cast<char *>(
        (reinterpret_cast<uintptr_t>(p) + (1 << 20) + 2 * k_page) & ~(k_page - 1)));
    char *q = static_cast<char *>(realloc(p, 32 << 20));
    ASSERT_NE(nullptr, q);
    touch(q, 32 << 20, 10);
    use(q, 32 << 20);
    char *r = static_cast<char *>(malloc(1 << 20)); // may land on p's old pages
    ASSERT_NE(nullptr, r);
    touch(r, 1 << 20, 11);
    use(r, 1 << 20);
    free(r);
    free(q);
    if (blocker != nullptr) {
        munmap(blocker, k_page);
    }
}

TEST_P(rcache_events, invalidated_while_in_use)
{
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    rcache::region *held = get(p, 4 * k_page);
    ASSERT_NE(nullptr, held);
    const size_t live_before = m_be.live();
    ASSERT_EQ(0, munmap(p, 4 * k_page));
    p = remap_same(p, 4);
    rcache::region *fresh = get(p, 4 * k_page);
    EXPECT_NE(held, fresh) << "an invalidated region was handed out again";
    EXPECT_NE(0u, held->lkey()) << "the holder's registration stays valid";
    put(fresh);
    const size_t live_mid = m_be.live();
    put(held); // last reference of an invalidated region: deregistered now
    if (caching()) {
        EXPECT_EQ(live_mid - 1, m_be.live());
        EXPECT_LE(m_be.live(), live_before);
    }
    munmap(p, 4 * k_page);
}

TEST_P(rcache_events, direct_syscall_munmap)
{
    if (GetParam().kind == rcache::monitor_kind::ucm) {
        GTEST_SKIP() << "interception cannot see a raw munmap syscall (documented: the reason "
                        "uffd is preferred)";
    }
    char *p = map_pages(4);
    touch(p, 4 * k_page);
    const uint32_t r1 = use(p, 4 * k_page);
    ASSERT_EQ(0, syscall(SYS_munmap, p, 4 * k_page));
    p = static_cast<char *>(reinterpret_cast<void *>(
        syscall(SYS_mmap, p, 4 * k_page, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0)));
    touch(p, 4 * k_page, 12);
    expect_dropped(r1, use(p, 4 * k_page));
    syscall(SYS_munmap, p, 4 * k_page);
}

INSTANTIATE_TEST_SUITE_P(monitors, rcache_events, testing::ValuesIn(k_all_monitors), param_name);

} // namespace
} // namespace zv::test
