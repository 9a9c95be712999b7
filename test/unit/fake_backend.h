// SPDX-License-Identifier: BSD-3-Clause
// Test registration backend: pins pages like ibv_reg_mr and detects stale hits by page frame.
#ifndef ZV_TEST_FAKE_BACKEND_H_
#define ZV_TEST_FAKE_BACKEND_H_

#include "rcache/backend.h"
#include "rcache/region.h"

#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace zv::test {

// What ibv_reg_mr does to memory, without a device: MADV_POPULATE_WRITE
// faults the pages in writable (and fails on unmapped or read-only memory,
// like ibv_reg_mr's EFAULT), and an io_uring fixed-buffer registration pins
// them with FOLL_LONGTERM exactly as the RDMA core does, so a page freed by
// munmap is not recycled while "registered" and a replaced page always has a
// new frame number. reg() records the frame of every page from
// /proc/self/pagemap (root only shows frames); check() compares the frames
// behind an address range now with the ones recorded: any difference is a
// stale hit, which every test asserts never happens.
class fake_backend final : public rcache::backend {
public:
    static constexpr size_t k_page = 4096;

    fake_backend()
    {
        m_pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        uint64_t probe = 0;
        static char self_page[k_page] __attribute__((aligned(4096)));
        self_page[0] = 1;
        m_detect = (m_pagemap >= 0) && (read_pfns(reinterpret_cast<uintptr_t>(self_page), 1,
                                                  &probe)) && (probe != 0);
        int ring_index = -1;
        m_detect = m_detect && add_ring(&ring_index);
    }

    ~fake_backend() override
    {
        for (auto &ring : m_rings) {
            close(ring.fd);
        }
        if (m_pagemap >= 0) {
            close(m_pagemap);
        }
    }

    // True when stale hits can be detected (frames readable and pinning works).
    bool can_detect() const { return m_detect; }

    ucs_status_t reg(void *addr, size_t len, unsigned access, bool odp,
                     rcache::reg_handle *out) override
    {
        if (m_on_reg) {
            m_on_reg(addr, len);
        }
        auto *rec   = new record();
        rec->start  = reinterpret_cast<uintptr_t>(addr);
        rec->len    = len;
        rec->access = access;
        rec->odp    = odp;
        if (!odp) {
            if ((m_fail_after >= 0) && (m_live.load() >= static_cast<size_t>(m_fail_after))) {
                delete rec;
                return UCS_ERR_NO_MEMORY; // as ibv_reg_mr's ENOMEM (memlock, MR table)
            }
            if (!m_light && (madvise(addr, len, MADV_POPULATE_WRITE) != 0)) {
                delete rec;
                return UCS_ERR_IO_ERROR;
            }
            if (m_dontfork && (madvise(addr, len, MADV_DONTFORK) == 0)) {
                rec->dontfork = true;
            }
            std::lock_guard<std::mutex> guard(m_lock);
            rec->light = m_light;
            if (m_light) {
                // counted only: no pin, no frames
            } else if (m_detect && !pin(rec)) {
                // Linux 6.1's io_uring refuses file-backed mappings (SysV
                // shm) as fixed buffers; frames are still compared, only a
                // recycled frame could go unnoticed there.
                ++m_unpinned;
            }
            if (m_detect && !m_light) {
                rec->pfns.resize(len / k_page);
                if (!read_pfns(rec->start, rec->pfns.size(), rec->pfns.data())) {
                    unpin(rec);
                    delete rec;
                    return UCS_ERR_IO_ERROR;
                }
            }
        }
        out->obj  = rec;
        out->lkey = static_cast<uint32_t>(++m_next_key);
        out->rkey = out->lkey;
        ++m_regs;
        ++m_live;
        m_odp_regs += odp;
        return UCS_OK;
    }

    void dereg(const rcache::reg_handle &handle) override
    {
        auto *rec = static_cast<record *>(handle.obj);
        {
            std::lock_guard<std::mutex> guard(m_lock);
            unpin(rec);
        }
        if (rec->dontfork) {
            (void)madvise(reinterpret_cast<void *>(rec->start), rec->len, MADV_DOFORK);
        }
        delete rec;
        ++m_deregs;
        --m_live;
    }

    unsigned odp_access() const override { return m_odp_access; }
    bool     odp_implicit() const override { return m_odp_implicit; }

    // Verifies that [addr, addr + len) is still backed by the pages r pinned.
    bool check(const rcache::region *r, const void *addr, size_t len)
    {
        auto *rec = static_cast<record *>(r->obj());
        if (!m_detect || rec->odp || rec->light) {
            return true;
        }
        const uintptr_t first = reinterpret_cast<uintptr_t>(addr) & ~(k_page - 1);
        const uintptr_t last  = (reinterpret_cast<uintptr_t>(addr) + len + k_page - 1) & ~(k_page - 1);
        if ((first < rec->start) || (last > rec->start + rec->len)) {
            ++m_stale; // the region does not even cover the range
            return false;
        }
        std::vector<uint64_t> now((last - first) / k_page);
        if (!read_pfns(first, now.size(), now.data())) {
            ++m_stale;
            return false;
        }
        for (size_t i = 0; i < now.size(); ++i) {
            if (now[i] != rec->pfns[(first - rec->start) / k_page + i]) {
                ++m_stale;
                return false;
            }
        }
        return true;
    }

    uint64_t stale() const { return m_stale.load(); }
    void     reset_stale() { m_stale = 0; }
    uint64_t regs() const { return m_regs.load(); }
    uint64_t odp_regs() const { return m_odp_regs.load(); }
    uint64_t deregs() const { return m_deregs.load(); }
    size_t   live() const { return m_live.load(); }
    // Registered range and access of a region's registration.
    static uintptr_t reg_start(const rcache::region *r) { return static_cast<record *>(r->obj())->start; }
    static size_t    reg_len(const rcache::region *r) { return static_cast<record *>(r->obj())->len; }

    // Test knobs.
    void set_odp(unsigned access_mask, bool implicit)
    {
        m_odp_access   = access_mask;
        m_odp_implicit = implicit;
    }
    void fail_when_live(int n) { m_fail_after = n; }
    // Light mode: registrations are only counted (no populate, no pin, no
    // frames, no stale detection), for endurance loops: on this VM a first
    // touch plus the munmap of a populated page costs ~60 us.
    void set_light(bool light) { m_light = light; }
    void on_reg(std::function<void(void *, size_t)> fn) { m_on_reg = std::move(fn); }
    // What libibverbs does once ibv_fork_init() ran: registered pages are
    // MADV_DONTFORK (absent in a fork child) until deregistered.
    void set_dontfork(bool on) { m_dontfork = on; }
    bool purge_before_fork() const override { return m_dontfork; }

private:
    struct record {
        uintptr_t             start  = 0;
        size_t                len    = 0;
        unsigned              access = 0;
        bool                  odp    = false;
        bool                  light  = false;
        bool                  dontfork = false;
        std::vector<uint64_t> pfns;
        std::vector<std::pair<int, unsigned>> pins; // (ring, slot)
    };

    struct ring {
        int                   fd = -1;
        std::vector<unsigned> free_slots;
    };

    static constexpr unsigned k_slots   = 16384;
    static constexpr size_t   k_max_pin = size_t(1) << 30; // io_uring buffer limit

    bool read_pfns(uintptr_t start, size_t count, uint64_t *out) const
    {
        const ssize_t n = pread(m_pagemap, out, count * sizeof(uint64_t),
                                static_cast<off_t>((start / k_page) * sizeof(uint64_t)));
        if (n != static_cast<ssize_t>(count * sizeof(uint64_t))) {
            return false;
        }
        for (size_t i = 0; i < count; ++i) {
            // present bit + frame number; not present reads as 0
            out[i] = (out[i] & (1ULL << 63)) ? (out[i] & ((1ULL << 55) - 1)) : 0;
        }
        return true;
    }

    bool update(int ring_fd, unsigned slot, void *base, size_t len)
    {
        struct iovec                 iov = {base, len};
        struct io_uring_rsrc_update2 up  = {};
        up.offset                        = slot;
        up.data                          = reinterpret_cast<uintptr_t>(&iov);
        up.nr                            = 1;
        return syscall(__NR_io_uring_register, ring_fd, IORING_REGISTER_BUFFERS_UPDATE, &up,
                       sizeof(up)) == 1;
    }

    bool pin(record *rec)
    {
        for (size_t off = 0; off < rec->len; off += k_max_pin) {
            const size_t chunk = std::min(k_max_pin, rec->len - off);
            int          ri    = -1;
            for (size_t i = 0; i < m_rings.size(); ++i) {
                if (!m_rings[i].free_slots.empty()) {
                    ri = static_cast<int>(i);
                    break;
                }
            }
            if ((ri < 0) && !add_ring(&ri)) {
                unpin(rec);
                return false;
            }
            const unsigned slot = m_rings[ri].free_slots.back();
            if (!update(m_rings[ri].fd, slot, reinterpret_cast<void *>(rec->start + off), chunk)) {
                unpin(rec);
                return false;
            }
            m_rings[ri].free_slots.pop_back();
            rec->pins.emplace_back(ri, slot);
        }
        return true;
    }

    void unpin(record *rec)
    {
        for (auto &p : rec->pins) {
            update(m_rings[p.first].fd, p.second, nullptr, 0);
            m_rings[p.first].free_slots.push_back(p.second);
        }
        rec->pins.clear();
    }

    bool add_ring(int *index)
    {
        struct io_uring_params params = {};
        const int fd = static_cast<int>(syscall(__NR_io_uring_setup, 1, &params));
        if (fd < 0) {
            return false;
        }
        struct io_uring_rsrc_register reg = {};
        reg.nr                            = k_slots;
        reg.flags                         = IORING_RSRC_REGISTER_SPARSE;
        if (syscall(__NR_io_uring_register, fd, IORING_REGISTER_BUFFERS2, &reg, sizeof(reg)) != 0) {
            close(fd);
            return false;
        }
        ring r;
        r.fd = fd;
        for (unsigned s = k_slots; s > 0; --s) {
            r.free_slots.push_back(s - 1);
        }
        m_rings.push_back(std::move(r));
        *index = static_cast<int>(m_rings.size() - 1);
        return true;
    }

    int                   m_pagemap = -1;
    bool                  m_detect  = false;
    std::mutex            m_lock;
    std::vector<ring>     m_rings;
    std::atomic<uint64_t> m_stale{0}, m_regs{0}, m_deregs{0}, m_odp_regs{0}, m_next_key{0};
    std::atomic<size_t>   m_live{0};
    unsigned              m_odp_access   = 0;
    bool                  m_odp_implicit = false;
    int                   m_fail_after   = -1;
    uint64_t              m_unpinned     = 0;
    bool                  m_light        = false;
    std::function<void(void *, size_t)> m_on_reg;
    bool m_dontfork = false;
};

} // namespace zv::test

#endif
