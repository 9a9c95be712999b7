// SPDX-License-Identifier: BSD-3-Clause
// The kernel notifier: userfaultfd UNMAP/REMOVE/REMAP events for registered ranges.
//
// Rationale: why a cache hit after munmap() returned can never be stale.
//
//  1. The cache calls watch() (UFFDIO_REGISTER) *before* the backend pins
//     the pages, so any change after the pin is reported.
//  2. For munmap/mremap/mmap(MAP_FIXED)/brk shrink the kernel changes the
//     page tables, then queues UFFD_EVENT_UNMAP/REMAP and puts the
//     unmapping thread to sleep until the event has been read(). For
//     madvise(DONTNEED/FREE/REMOVE) it queues UFFD_EVENT_REMOVE and sleeps
//     before zapping. Either way the syscall cannot return before our read().
//  3. The monitor thread calls ring->begin() (a seq_cst RMW on m_begins)
//     before read() and ring->end() after the ranges are in the ring. The
//     kernel's wake-up of the unmapper is ordered after read() (waitqueue
//     spinlock: release in our read, acquire in the sleeper), so anything
//     that happens after munmap() returned sees m_begins already changed.
//  4. Every lookup compares m_begins with the value its cache saw after its
//     last drain (one load, no syscall). Changed: slow path, which waits
//     until begins == ends (our read() batch is fully in the ring), applies
//     the ranges, then looks up again. So a lookup that starts after the
//     unmapping syscall returned either hits a region that survived the
//     invalidation or misses.
//
// The thread never takes a lock, never allocates and never logs between
// poll() and the end of a batch: the thread blocked in munmap may hold the
// malloc arena, stdio or any cache lock. It blocks all signals, so an
// application handler that unmaps memory cannot run on it and wait for itself.
// Under valgrind, whose big lock stays held while a thread sleeps in munmap,
// a thread could never run to read the event; there the same loop runs in a
// forked helper process that writes into a MAP_SHARED ring (CRIU's lazy-pages
// daemon reads another process's userfaultfd the same way).
//
// Registration mode: WP without ever write-protecting a page. Events are
// delivered for any mode, and WP sends no faults at all, so nothing can hang
// on the monitor and kernel accesses (read(2) into a fresh buffer) work even
// under UFFD_USER_MODE_ONLY. MISSING (kernels before 5.7) sends first
// touches to the monitor, which maps a zero page; it is refused with
// UFFD_USER_MODE_ONLY, where a kernel-mode first touch fails with EFAULT.
//
// What the kernel does not report, and how the cache stays correct:
//  - file-backed and SysV shm mappings cannot be registered (EINVAL): such
//    memory is registered for each use (truncate/punch-hole are invisible);
//  - MAP_SHARED anonymous memory registers but a fork child can MADV_REMOVE
//    it unseen: cacheable() reads /proc/self/pagemap after pinning and keeps
//    only pages that are private anonymous;
//  - shmat(SHM_REMAP) replaces a mapping without an event (ipc/shm.c passes
//    no unmap list to do_mmap): when UCM events are enabled the monitor takes
//    UCM's SHMAT event for that one call; otherwise it is a documented gap.
//  - brk shrink: reported as UFFD_EVENT_UNMAP (measured on 6.1 and 6.18).
#include "monitor/monitor.h"

#include "util/log.h"
#include "util/nothrow.h"

#include <linux/userfaultfd.h>
#include <ucm/api/ucm.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

// PROCMAP_QUERY (Linux 6.11, <linux/fs.h>): the VMA covering an address in
// one ioctl on /proc/self/maps. Declared here for older headers.
struct zv_procmap_query {
    uint64_t size;
    uint64_t query_flags;
    uint64_t query_addr;
    uint64_t vma_start;
    uint64_t vma_end;
    uint64_t vma_flags;
    uint64_t vma_page_size;
    uint64_t vma_offset;
    uint64_t inode;
    uint32_t dev_major;
    uint32_t dev_minor;
    uint32_t vma_name_size;
    uint32_t build_id_size;
    uint64_t vma_name_addr;
    uint64_t build_id_addr;
};
#define ZV_PROCMAP_QUERY _IOWR('f', 17, struct zv_procmap_query)

namespace zv::monitor {

namespace {

constexpr uint64_t k_pagemap_present = 1ULL << 63;
constexpr uint64_t k_pagemap_swapped = 1ULL << 62;
constexpr uint64_t k_pagemap_file    = 1ULL << 61; // file page or shared anonymous
constexpr size_t   k_page            = 4096;

alignas(4096) const char g_zero_page[k_page] = {};

int open_uffd(int flags)
{
    // valgrind 3.19 lacks the syscall (and warns loudly about it).
    int fd = RUNNING_ON_VALGRIND ? -1 :
             static_cast<int>(syscall(SYS_userfaultfd, flags | O_CLOEXEC | O_NONBLOCK));
    if (fd >= 0) {
        return fd;
    }
    if (RUNNING_ON_VALGRIND) {
        errno = ENOSYS;
    }
    // /dev/userfaultfd (Linux 6.1+) is governed by file permissions instead
    // of vm.unprivileged_userfaultfd, and valgrind (which lacks the syscall)
    // passes its ioctl through.
    const int saved = errno;
    int       dev   = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev < 0) {
        errno = saved;
        return -1;
    }
    fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags | O_CLOEXEC | O_NONBLOCK);
    close(dev);
    if (fd < 0) {
        errno = saved;
    }
    return fd;
}

// Resolves a MISSING fault with a zero page. Failures other than "already
// there" fall back to copying zeros, and the faulting thread is always woken
// so it retries instead of sleeping forever.
void resolve_fault(int uffd, uint64_t address)
{
    const uint64_t page = address & ~uint64_t(k_page - 1);

    struct uffdio_zeropage zp = {};
    zp.range.start            = page;
    zp.range.len              = k_page;
    if (ioctl(uffd, UFFDIO_ZEROPAGE, &zp) == 0) {
        return;
    }
    if (errno != EEXIST) {
        struct uffdio_copy copy = {};
        copy.dst                = page;
        copy.src                = reinterpret_cast<uintptr_t>(g_zero_page);
        copy.len                = k_page;
        if (ioctl(uffd, UFFDIO_COPY, &copy) == 0) {
            return;
        }
    }
    struct uffdio_range wake = {page, k_page};
    (void)ioctl(uffd, UFFDIO_WAKE, &wake);
}

// The monitor loop (thread or helper process). See the rationale above:
// nothing here may block on anything but poll() or allocate or log.
// Returns true when stopped, false on an error (set in the ring).
bool event_loop(int uffd, int stop_fd, event_ring *ring)
{
    struct uffd_msg msgs[64];
    uint64_t        faults[64];

    for (;;) {
        struct pollfd pfd[2] = {{uffd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            ring->set_error(errno);
            ring->poke();
            return false;
        }
        if (pfd[1].revents != 0) {
            return true; // stop requested, or the parent process is gone
        }
        if (pfd[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            ring->set_error(EIO);
            ring->poke();
            return false;
        }

        int nfaults = 0;
        ring->begin();
        for (;;) {
            const ssize_t n = read(uffd, msgs, sizeof(msgs));
            if (n <= 0) {
                if ((n < 0) && (errno != EAGAIN) && (errno != EINTR)) {
                    ring->set_error(errno);
                }
                break;
            }
            const size_t count = static_cast<size_t>(n) / sizeof(msgs[0]);
            for (size_t i = 0; i < count; ++i) {
                const struct uffd_msg &m = msgs[i];
                switch (m.event) {
                case UFFD_EVENT_UNMAP:
                case UFFD_EVENT_REMOVE:
                    ring->push(m.arg.remove.start, m.arg.remove.end);
                    break;
                case UFFD_EVENT_REMAP:
                    ring->push(m.arg.remap.from, m.arg.remap.from + m.arg.remap.len);
                    break;
                case UFFD_EVENT_PAGEFAULT:
                    if (nfaults < 64) {
                        faults[nfaults++] = m.arg.pagefault.address;
                    } else {
                        resolve_fault(uffd, m.arg.pagefault.address);
                    }
                    break;
                default:
                    // Not requested (FORK); dropping everything is the safe answer.
                    ring->push_all();
                    break;
                }
            }
        }
        ring->end();

        for (int i = 0; i < nfaults; ++i) {
            resolve_fault(uffd, faults[i]);
        }
        if (ring->error() != 0) {
            ring->poke();
            return false;
        }
    }
}

class uffd_monitor final : public monitor {
public:
    uffd_monitor() : monitor(monitor_kind::uffd) {}
    ~uffd_monitor() override;

    ucs_status_t init(const settings &cfg, bool quiet);
    ucs_status_t watch(uintptr_t start, uintptr_t end) override;
    bool         cacheable(uintptr_t start, uintptr_t end) override;

private:
    bool         vma_of(uintptr_t addr, uintptr_t *start, uintptr_t *end);
    bool         vma_span(uintptr_t start, uintptr_t end, uintptr_t *vs, uintptr_t *ve);
    void         sync_watched();
    void         forget(uintptr_t start, uintptr_t end);
    bool         watched(uintptr_t start, uintptr_t end) const;
    bool         do_register(uintptr_t start, uintptr_t end);

    static void *thread_main(void *arg);
    static void  shmat_cb(ucm_event_type_t type, ucm_event_t *event, void *arg);
    ucs_status_t start_thread();
    ucs_status_t start_helper();

    int       m_uffd       = -1;
    int       m_pagemap    = -1;
    int       m_stop[2]    = {-1, -1};
    uint64_t  m_reg_mode   = 0;
    pid_t     m_owner      = 0;
    pid_t     m_helper     = 0;
    bool      m_has_thread = false;
    bool      m_ucm_shmat  = false;
    bool      m_no_query   = false;
    int       m_maps       = -1;
    pthread_t m_thread{};

    // Ranges registered with the kernel, so that a miss inside one costs no
    // system call. Pruned by this monitor's own events (its own cursor on
    // the ring) before every use, under m_watch_lock, which the monitor
    // thread never takes.
    std::mutex                     m_watch_lock;
    std::map<uintptr_t, uintptr_t> m_watched; // start -> end, disjoint
    event_ring::cursor             m_watch_cursor;
};

ucs_status_t uffd_monitor::init(const settings &cfg, bool quiet)
{
    const auto fail = [quiet](const char *what, int err) {
        if (quiet) {
            zv_log_debug("uffd monitor unavailable: %s: %s", what, strerror(err));
        } else {
            zv_log_error("UCX_ZV_RCACHE_MONITOR=uffd: %s: %s", what, strerror(err));
        }
        return UCS_ERR_UNSUPPORTED;
    };

    bool user_mode_only = false;
    m_uffd              = open_uffd(0);
    if (m_uffd < 0) {
        // vm.unprivileged_userfaultfd=0: only user-mode faults may be handled.
        m_uffd         = open_uffd(UFFD_USER_MODE_ONLY);
        user_mode_only = true;
    }
    if (m_uffd < 0) {
        return fail("userfaultfd() and /dev/userfaultfd both refused (needs "
                    "CAP_SYS_PTRACE, vm.unprivileged_userfaultfd=1, a kernel "
                    "with UFFD_USER_MODE_ONLY (5.11+) or access to /dev/userfaultfd)",
                    errno);
    }

    struct uffdio_api probe = {};
    probe.api               = UFFD_API;
    if (ioctl(m_uffd, UFFDIO_API, &probe) != 0) {
        return fail("UFFDIO_API", errno);
    }
    const uint64_t needed = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |
                            UFFD_FEATURE_EVENT_REMAP;
    if ((probe.features & needed) != needed) {
        return fail("kernel lacks UFFD_FEATURE_EVENT_UNMAP/REMOVE/REMAP", ENOTSUP);
    }
    const bool has_wp = (probe.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP) != 0;

    uint64_t features = needed;
    switch (cfg.uffd) {
    case uffd_mode::wp:
        if (!has_wp) {
            return fail("UCX_ZV_RCACHE_UFFD_MODE=wp: kernel lacks UFFD_FEATURE_PAGEFAULT_FLAG_WP",
                        ENOTSUP);
        }
        m_reg_mode = UFFDIO_REGISTER_MODE_WP;
        break;
    case uffd_mode::missing:
        m_reg_mode = UFFDIO_REGISTER_MODE_MISSING;
        break;
    case uffd_mode::automatic:
        m_reg_mode = has_wp ? UFFDIO_REGISTER_MODE_WP : UFFDIO_REGISTER_MODE_MISSING;
        break;
    }
    if (m_reg_mode == UFFDIO_REGISTER_MODE_WP) {
        features |= UFFD_FEATURE_PAGEFAULT_FLAG_WP;
    } else if (user_mode_only) {
        return fail("missing-fault mode with UFFD_USER_MODE_ONLY would make kernel "
                    "accesses to fresh pages fail with EFAULT",
                    ENOTSUP);
    }

    // UFFDIO_API may be issued once per descriptor: the probe above used it.
    close(m_uffd);
    m_uffd = open_uffd(user_mode_only ? UFFD_USER_MODE_ONLY : 0);
    if (m_uffd < 0) {
        return fail("reopening userfaultfd", errno);
    }
    struct uffdio_api api = {};
    api.api               = UFFD_API;
    api.features          = features;
    if (ioctl(m_uffd, UFFDIO_API, &api) != 0) {
        return fail("UFFDIO_API with event features", errno);
    }
    if (!(api.ioctls & (1ULL << _UFFDIO_REGISTER))) {
        return fail("UFFDIO_REGISTER not offered", ENOTSUP);
    }

    m_pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (m_pagemap < 0) {
        return fail("open(/proc/self/pagemap)", errno);
    }

    m_maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (m_maps < 0) {
        return fail("open(/proc/self/maps)", errno);
    }

    ucs_status_t status = event_ring::create(cfg.event_queue, RUNNING_ON_VALGRIND != 0, &m_ring);
    if (status != UCS_OK) {
        return status;
    }
    m_watch_cursor = m_ring->make_cursor();
    if (pipe2(m_stop, O_CLOEXEC) != 0) {
        return fail("pipe2", errno);
    }
    m_owner = getpid();
    status  = RUNNING_ON_VALGRIND ? start_helper() : start_thread();
    if (status != UCS_OK) {
        return fail("starting the monitor", errno);
    }
    detail::track_ring(m_ring);

    // The one change the kernel does not report (see the rationale above).
    // Priority above the original call's (0): runs after shmat() replaced the
    // mapping, before it returns.
    m_ucm_shmat = (ucm_set_event_handler(UCM_EVENT_SHMAT, 1000, shmat_cb, this) == UCS_OK);
    if (!m_ucm_shmat) {
        zv_log_debug("uffd monitor: UCM shmat event unavailable: shmat(SHM_REMAP) over "
                     "registered memory will not be seen");
    }

    zv_log_debug("uffd monitor: %s mode%s, %s, queue %zu", m_reg_mode == UFFDIO_REGISTER_MODE_WP ?
                 "wp" : "missing", user_mode_only ? " (user-mode only)" : "",
                 RUNNING_ON_VALGRIND ? "helper process" : "thread", m_ring->capacity());
    return UCS_OK;
}

void *uffd_monitor::thread_main(void *arg)
{
    auto    *self = static_cast<uffd_monitor *>(arg);
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    if (event_loop(self->m_uffd, self->m_stop[0], self->m_ring)) {
        // Stopped: from here on nobody reads events, yet this thread's exit
        // (ASAN unmaps its per-thread data) and the owner's join (glibc may
        // unmap cached thread stacks) can unmap memory inside a watched
        // mapping and would wait forever for the read. Closing the
        // descriptor first unregisters every range; the join tells the
        // owner (m_uffd itself is the owner's to change).
        close(self->m_uffd);
        return self;
    }
    return nullptr;
}

ucs_status_t uffd_monitor::start_thread()
{
    // Created with all signals blocked so none is delivered before
    // thread_main blocks them itself.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    const int rc = pthread_create(&m_thread, nullptr, thread_main, this);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc != 0) {
        errno = rc;
        return UCS_ERR_NO_RESOURCE;
    }
    pthread_setname_np(m_thread, "zv-uffd");
    m_has_thread = true;
    return UCS_OK;
}

ucs_status_t uffd_monitor::start_helper()
{
    const pid_t pid = fork();
    if (pid < 0) {
        return UCS_ERR_NO_RESOURCE;
    }
    if (pid == 0) {
        // Child: async-signal-safe calls only. It leaves when the stop pipe's
        // write end closes in every process (the monitor's owner is gone).
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, nullptr);
        close(m_stop[1]);
        (void)event_loop(m_uffd, m_stop[0], m_ring);
        _exit(0);
    }
    m_helper = pid;
    return UCS_OK;
}

uffd_monitor::~uffd_monitor()
{
    if (m_ucm_shmat) {
        ucm_unset_event_handler(UCM_EVENT_SHMAT, shmat_cb, this);
    }
    const bool owner = (getpid() == m_owner);
    if (m_stop[1] >= 0) {
        close(m_stop[1]); // wakes the thread or the helper (POLLHUP)
    }
    if (owner && m_has_thread) {
        void *closed_uffd = nullptr;
        pthread_join(m_thread, &closed_uffd);
        if (closed_uffd != nullptr) {
            m_uffd = -1; // closed by the thread (thread_main)
        }
    }
    if (owner && (m_helper > 0)) {
        (void)waitpid(m_helper, nullptr, 0);
    }
    if (m_stop[0] >= 0) {
        close(m_stop[0]);
    }
    if (m_uffd >= 0) {
        // Closing the descriptor unregisters every range it watched.
        close(m_uffd);
    }
    if (m_pagemap >= 0) {
        close(m_pagemap);
    }
    if (m_maps >= 0) {
        close(m_maps);
    }
    if (m_ring != nullptr) {
        detail::untrack_ring(m_ring);
        event_ring::destroy(m_ring);
    }
}

// Watches the whole mappings (VMAs) that contain [start, end), not just the
// range: registering part of a mapping splits it in the kernel, and scattered
// registrations would multiply the process's mappings towards
// vm.max_map_count (65530), after which the application's own mmap() fails.
// Whole mappings are never split, and a later miss anywhere in a watched
// mapping needs no system call. The price: every munmap/madvise in a watched
// mapping, registered part or not, waits for the monitor (~10 us). In
// missing mode only the range itself is registered, so that first touches
// elsewhere in the mapping do not all detour through the monitor.
ucs_status_t uffd_monitor::watch(uintptr_t start, uintptr_t end)
{
    if (getpid() != m_owner) {
        // The descriptor still refers to the parent's address space.
        return UCS_ERR_UNSUPPORTED;
    }

    std::lock_guard<std::mutex> guard(m_watch_lock);
    sync_watched();
    if (watched(start, end)) {
        return UCS_OK;
    }

    uintptr_t vs = start, ve = end;
    if ((m_reg_mode == UFFDIO_REGISTER_MODE_WP) && vma_span(start, end, &vs, &ve) &&
        ((vs != start) || (ve != end)) && do_register(vs, ve)) {
        return UCS_OK;
    }
    if (do_register(start, end)) {
        return UCS_OK;
    }
    // EINVAL: file-backed or SysV shm memory; EBUSY: watched by another
    // userfaultfd; ENOMEM: a hole in the range. All mean "do not cache".
    zv_log_debug("uffd monitor: cannot watch [0x%lx, 0x%lx): %m, registering uncached",
                 start, end);
    return UCS_ERR_UNSUPPORTED;
}

bool uffd_monitor::do_register(uintptr_t start, uintptr_t end)
{
    struct uffdio_register reg = {};
    reg.range.start            = start;
    reg.range.len              = end - start;
    reg.mode                   = m_reg_mode;
    if (ioctl(m_uffd, UFFDIO_REGISTER, &reg) != 0) {
        return false;
    }
    // Insert, merging with neighbours. m_watched only saves system calls: a
    // range missing from it is registered again when next watched (the
    // kernel takes that), so running out of memory here loses nothing.
    auto it = m_watched.lower_bound(start);
    if ((it != m_watched.begin()) && (std::prev(it)->second >= start)) {
        --it;
    }
    while ((it != m_watched.end()) && (it->first <= end)) {
        start = std::min(start, it->first);
        end   = std::max(end, it->second);
        it    = m_watched.erase(it);
    }
    (void)util::try_alloc([&] { m_watched.emplace(start, end); });
    return true;
}

bool uffd_monitor::watched(uintptr_t start, uintptr_t end) const
{
    auto it = m_watched.upper_bound(start);
    if (it == m_watched.begin()) {
        return false;
    }
    --it;
    return (it->first <= start) && (it->second >= end);
}

void uffd_monitor::forget(uintptr_t start, uintptr_t end)
{
    start   = start & ~(k_page - 1);
    end     = (end + k_page - 1) & ~(k_page - 1);
    auto it = m_watched.upper_bound(start);
    if (it != m_watched.begin()) {
        --it;
    }
    while ((it != m_watched.end()) && (it->first < end)) {
        const uintptr_t s = it->first, e = it->second;
        if (e <= start) {
            ++it;
            continue;
        }
        it = m_watched.erase(it);
        // (Out of memory: the rest is registered again when next watched.)
        if (s < start) {
            (void)util::try_alloc([&] { m_watched.emplace(s, start); });
        }
        if (e > end) {
            (void)util::try_alloc([&] { m_watched.emplace(end, e); });
        }
    }
}

// Applies this monitor's own events to m_watched: an unmapped range is no
// longer registered, and whatever is mapped there next must be registered
// again. Lost events: forget everything.
void uffd_monitor::sync_watched()
{
    bool stuck = false;
    m_ring->wait_quiescent(5000, &stuck);
    if (stuck) {
        m_watched.clear(); // registering again is always safe
        return;
    }
    const bool intact = m_ring->drain(m_watch_cursor, [this](uintptr_t s, uintptr_t e) {
        forget(s, e);
    });
    if (!intact) {
        m_watched.clear();
    }
}

bool uffd_monitor::vma_of(uintptr_t addr, uintptr_t *start, uintptr_t *end)
{
    if (!m_no_query) {
        zv_procmap_query q = {};
        q.size             = sizeof(q);
        q.query_addr       = addr;
        if (ioctl(m_maps, ZV_PROCMAP_QUERY, &q) == 0) {
            *start = q.vma_start;
            *end   = q.vma_end;
            return true;
        }
        if (errno == ENOENT) {
            return false;
        }
        m_no_query = true; // before Linux 6.11: parse the text instead
    }

    // Read /proc/self/maps in chunks and find the line covering addr.
    char   buf[8192];
    size_t have = 0;
    off_t  off  = 0;
    for (;;) {
        const ssize_t n = pread(m_maps, buf + have, sizeof(buf) - 1 - have, off);
        if (n <= 0) {
            return false;
        }
        off += n;
        have += static_cast<size_t>(n);
        buf[have]  = '\0';
        char *line = buf;
        char *nl;
        while ((nl = strchr(line, '\n')) != nullptr) {
            unsigned long s = 0, e = 0;
            if ((sscanf(line, "%lx-%lx", &s, &e) == 2) && (s <= addr) && (addr < e)) {
                *start = s;
                *end   = e;
                return true;
            }
            line = nl + 1;
        }
        have = static_cast<size_t>(buf + have - line);
        if (have == sizeof(buf) - 1) {
            return false; // a line longer than the buffer: give up
        }
        memmove(buf, line, have);
    }
}

bool uffd_monitor::vma_span(uintptr_t start, uintptr_t end, uintptr_t *vs, uintptr_t *ve)
{
    uintptr_t addr = start;
    for (int i = 0; (i < 64) && (addr < end); ++i) {
        uintptr_t s, e;
        if (!vma_of(addr, &s, &e) || (s > addr)) {
            return false;
        }
        if (addr == start) {
            *vs = s;
        }
        *ve  = e;
        addr = e;
    }
    return addr >= end;
}

bool uffd_monitor::cacheable(uintptr_t start, uintptr_t end)
{
    uint64_t entries[512];
    for (uintptr_t page = start; page < end;) {
        const size_t  count = std::min<size_t>(512, (end - page) / k_page);
        const ssize_t n     = pread(m_pagemap, entries, count * sizeof(uint64_t),
                                    static_cast<off_t>((page / k_page) * sizeof(uint64_t)));
        if (n != static_cast<ssize_t>(count * sizeof(uint64_t))) {
            return false;
        }
        for (size_t i = 0; i < count; ++i) {
            const uint64_t e = entries[i];
            if (!(e & k_pagemap_present) || (e & (k_pagemap_swapped | k_pagemap_file))) {
                return false;
            }
        }
        page += count * k_page;
    }
    return true;
}

void uffd_monitor::shmat_cb(ucm_event_type_t, ucm_event_t *event, void *arg)
{
    auto *self = static_cast<uffd_monitor *>(arg);
    if (!(event->shmat.shmflg & SHM_REMAP) || (event->shmat.shmaddr == nullptr) ||
        (event->shmat.result == MAP_FAILED)) {
        return;
    }
    struct shmid_ds ds = {};
    const uintptr_t addr = reinterpret_cast<uintptr_t>(event->shmat.shmaddr);
    if (shmctl(event->shmat.shmid, IPC_STAT, &ds) == 0) {
        self->m_ring->push(addr, addr + ds.shm_segsz);
    } else {
        self->m_ring->push_all();
    }
}

} // namespace

namespace detail {

ucs_status_t create_uffd(const settings &cfg, bool quiet, monitor **out)
{
    return create_initialized<uffd_monitor>(cfg, quiet, out);
}

} // namespace detail

} // namespace zv::monitor
