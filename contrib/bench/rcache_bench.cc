// SPDX-License-Identifier: BSD-3-Clause
// Registration-cache benchmark: zv hit path beside UCX's ucs_rcache, and munmap cost per monitor.
//
// Prints figures, never fails on them. Both caches get a registration
// backend that does nothing (the hit path is what is measured), the same
// regions (1 page each, a free page between them so that ucs_rcache does
// not merge them) and the same random sequence of lookups.
#include "monitor/monitor.h"
#include "rcache/cache.h"
#include "ucx/compat.h"

#include <ucm/api/ucm.h>
// 1.13's rcache.h has no C++ guards of its own.
extern "C" {
#include <ucs/memory/rcache.h>
}

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

constexpr size_t k_page = 4096;

double now_ns()
{
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

class noop_backend final : public zv::rcache::backend {
public:
    ucs_status_t reg(void *, size_t, unsigned, bool, zv::rcache::reg_handle *out) override
    {
        out->obj  = this;
        out->lkey = ++m_keys;
        out->rkey = out->lkey;
        return UCS_OK;
    }
    void dereg(const zv::rcache::reg_handle &) override {}

private:
    std::atomic<uint32_t> m_keys{0};
};

ucs_status_t ucs_noop_reg(void *, ucs_rcache_t *, void *, ucs_rcache_region_t *, uint16_t)
{
    return UCS_OK;
}
void ucs_noop_dereg(void *, ucs_rcache_t *, ucs_rcache_region_t *) {}
void ucs_noop_dump(void *, ucs_rcache_t *, ucs_rcache_region_t *, char *buf, size_t max)
{
    if (max > 0) {
        buf[0] = '\0';
    }
}
const ucs_rcache_ops_t g_ucs_ops = zv::ucx::rcache_ops(ucs_noop_reg, ucs_noop_dereg, ucs_noop_dump);

ucs_rcache_t *make_ucs_rcache()
{
    ucs_rcache_params_t params = {};
    params.region_struct_size  = sizeof(ucs_rcache_region_t);
    zv::ucx::rcache_set_alignment(&params, k_page);
    params.ucm_events          = UCM_EVENT_VM_UNMAPPED;
    params.ucm_event_priority  = 1000;
    params.ops                 = &g_ucs_ops;
    params.context             = nullptr;
    params.flags               = 0;
    params.max_regions         = ULONG_MAX;
    params.max_size            = SIZE_MAX;
    params.max_unreleased      = SIZE_MAX;
    ucs_rcache_t *rc           = nullptr;
    if (ucs_rcache_create(&params, "bench", nullptr, &rc) != UCS_OK) {
        fprintf(stderr, "ucs_rcache_create failed\n");
        exit(1);
    }
    return rc;
}

struct hit_result {
    double zv_ns;
    double ucs_ns;
};

// ns per get+put pair, per thread, averaged over threads.
template <class Fn> double run_threads(int threads, size_t iters, Fn &&fn)
{
    std::vector<double>      per(threads);
    std::vector<std::thread> ts;
    std::atomic<int>         ready{0};
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            ++ready;
            while (ready.load() < threads) {
            }
            const double t0 = now_ns();
            fn(t, iters);
            per[t] = (now_ns() - t0) / static_cast<double>(iters);
        });
    }
    for (auto &th : ts) {
        th.join();
    }
    double sum = 0;
    for (double v : per) {
        sum += v;
    }
    return sum / threads;
}

// shared: every thread looks up any region (their reference counts bounce
// between cores); otherwise thread t only uses regions i with i % threads == t,
// as UCX worker threads sending from their own buffers do.
hit_result bench_hits(zv::monitor::monitor *mon, size_t regions, int threads, size_t iters,
                      bool shared)
{
    const size_t len = 2 * regions * k_page;
    char *buf = static_cast<char *>(mmap(nullptr, len, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (size_t i = 0; i < regions; ++i) {
        madvise(buf + 2 * i * k_page, k_page, MADV_POPULATE_WRITE);
    }

    // The same lookup sequence for both caches: random region, 256 bytes
    // at a random offset inside it.
    std::vector<uint32_t> seq(1 << 16);
    unsigned              seed = 42;
    for (auto &s : seq) {
        s = static_cast<uint32_t>(rand_r(&seed) % regions) * 16 + (rand_r(&seed) % 15);
    }
    auto addr_of = [&](uint32_t s, int t) {
        size_t region = s / 16;
        if (!shared) {
            region = region - (region % threads) + t;
            if (region >= regions) {
                region = t;
            }
        }
        return buf + region * 2 * k_page + (s % 16) * 256;
    };

    noop_backend        be;
    zv::rcache::config  cfg;
    cfg.max_regions = regions + 16;
    cfg.max_size    = zv::rcache::k_units_inf;
    zv::rcache::cache *zc = nullptr;
    if (zv::rcache::cache::create(cfg, &be, mon, "bench", &zc) != UCS_OK) {
        exit(1);
    }
    ucs_rcache_t *uc = make_ucs_rcache();

    const unsigned access = 0x7;
    for (size_t i = 0; i < regions; ++i) {
        zv::rcache::region  *zr = nullptr;
        ucs_rcache_region_t *ur = nullptr;
        char                *a  = buf + 2 * i * k_page;
        if ((zc->get(a, k_page, access, &zr) != UCS_OK) ||
            (zv::ucx::rcache_get(uc, a, k_page, k_page, PROT_READ | PROT_WRITE, nullptr, &ur) != UCS_OK)) {
            fprintf(stderr, "warm-up registration failed\n");
            exit(1);
        }
        zc->put(zr);
        ucs_rcache_region_put(uc, ur);
    }
    const auto before = zc->stats();

    hit_result res;
    res.zv_ns = run_threads(threads, iters, [&](int t, size_t n) {
        size_t k = static_cast<size_t>(t) * 7919;
        for (size_t i = 0; i < n; ++i, ++k) {
            zv::rcache::region *r = nullptr;
            if (zc->get(addr_of(seq[k & (seq.size() - 1)], t), 256, access, &r) != UCS_OK) {
                abort();
            }
            zc->put(r);
        }
    });
    res.ucs_ns = run_threads(threads, iters, [&](int t, size_t n) {
        size_t k = static_cast<size_t>(t) * 7919;
        for (size_t i = 0; i < n; ++i, ++k) {
            ucs_rcache_region_t *r = nullptr;
            if (zv::ucx::rcache_get(uc, addr_of(seq[k & (seq.size() - 1)], t), 256, k_page,
                                    PROT_READ | PROT_WRITE, nullptr, &r) != UCS_OK) {
                abort();
            }
            ucs_rcache_region_put(uc, r);
        }
    });
    if (zc->stats().misses != before.misses) {
        fprintf(stderr, "warning: zv cache missed during the hit benchmark\n");
    }

    ucs_rcache_destroy(uc);
    zv::rcache::cache::destroy(zc);
    munmap(buf, len);
    return res;
}

// Mean ns of munmap() of a 4-page populated buffer; registered: it was
// registered through a zv cache on `kind` first.
double bench_munmap(zv::rcache::monitor_kind kind, bool registered, int iters)
{
    zv::rcache::config cfg;
    cfg.monitor               = kind;
    zv::monitor::monitor *mon = nullptr;
    if (zv::monitor::create(cfg.monitor_settings(), &mon) != UCS_OK) {
        return -1;
    }
    noop_backend       be;
    zv::rcache::cache *zc = nullptr;
    if (zv::rcache::cache::create(cfg, &be, mon, "bench", &zc) != UCS_OK) {
        return -1;
    }
    // Registered memory elsewhere, so the monitor is busy watching something.
    char *other = static_cast<char *>(mmap(nullptr, 64 * k_page, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    madvise(other, 64 * k_page, MADV_POPULATE_WRITE);
    zv::rcache::region *keep = nullptr;
    if (zc->get(other, 64 * k_page, 7, &keep) != UCS_OK) {
        return -1;
    }

    double total = 0;
    for (int i = 0; i < iters; ++i) {
        char *p = static_cast<char *>(mmap(nullptr, 4 * k_page, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        madvise(p, 4 * k_page, MADV_POPULATE_WRITE);
        if (registered) {
            zv::rcache::region *r = nullptr;
            if (zc->get(p, 4 * k_page, 7, &r) != UCS_OK) {
                return -1;
            }
            zc->put(r);
        }
        const double t0 = now_ns();
        munmap(p, 4 * k_page);
        total += now_ns() - t0;
    }
    zc->put(keep);
    zv::rcache::cache::destroy(zc);
    munmap(other, 64 * k_page);
    zv::monitor::destroy(mon);
    return total / iters;
}

// Runs fn in a child so that hooks installed by one monitor (UCM patches
// libc for good) cannot slow the next measurement.
double isolated(double (*fn)(zv::rcache::monitor_kind, bool, int), zv::rcache::monitor_kind k,
                bool reg, int iters)
{
    int fds[2];
    if (pipe(fds) != 0) {
        return -1;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        double v = fn(k, reg, iters);
        (void)!write(fds[1], &v, sizeof(v));
        _exit(0);
    }
    double v = -1;
    (void)!read(fds[0], &v, sizeof(v));
    waitpid(pid, nullptr, 0);
    close(fds[0]);
    close(fds[1]);
    return v;
}

} // namespace

int main(int argc, char **argv)
{
    const double scale = (argc > 1) ? atof(argv[1]) : 1.0;
    const int    munmap_iters = std::max(200, static_cast<int>(5000 * scale));

    printf("zverbs registration cache benchmark (figures only; targets in brackets)\n\n");

    // munmap first, each in a fresh child: no UCM hooks installed yet.
    using zv::rcache::monitor_kind;
    const double base_unreg = isolated(bench_munmap, monitor_kind::none, false, munmap_iters);
    const double base_reg   = isolated(bench_munmap, monitor_kind::none, true, munmap_iters);
    const double uffd_unreg = isolated(bench_munmap, monitor_kind::uffd, false, munmap_iters);
    const double uffd_reg   = isolated(bench_munmap, monitor_kind::uffd, true, munmap_iters);
    const double ucm_unreg  = isolated(bench_munmap, monitor_kind::ucm, false, munmap_iters);
    const double ucm_reg    = isolated(bench_munmap, monitor_kind::ucm, true, munmap_iters);
    printf("munmap of a 16 KiB populated buffer, mean ns (%d each)\n", munmap_iters);
    printf("  %-8s %14s %14s %12s %12s\n", "monitor", "unregistered", "registered", "unreg/none",
           "reg/none");
    auto row = [&](const char *name, double u, double r) {
        if (u < 0) {
            printf("  %-8s %14s\n", name, "unavailable");
            return;
        }
        printf("  %-8s %14.0f %14.0f %12.3f %12.3f\n", name, u, r, u / base_unreg, r / base_reg);
    };
    row("none", base_unreg, base_reg);
    row("uffd", uffd_unreg, uffd_reg);
    row("ucm", ucm_unreg, ucm_reg);
    printf("  [uffd unregistered/none <= 1.05]\n\n");

    zv::rcache::config cfg;
    zv::monitor::monitor *mon = nullptr;
    if (zv::monitor::create(cfg.monitor_settings(), &mon) != UCS_OK) {
        return 1;
    }
    const size_t iters = std::max<size_t>(20000, static_cast<size_t>(2000000 * scale));
    printf("hit path: get+put of 256 B inside a random cached region, ns per pair\n");
    printf("  zv monitor: %s; %zu pairs per thread\n", mon->name(), iters);
    printf("  %8s %8s %-9s %10s %10s %8s\n", "regions", "threads", "regions", "zv",
           "ucs_rcache", "zv/ucs");
    for (size_t regions : {size_t(1000), size_t(100000)}) {
        for (int threads : {1, 2}) {
            for (bool shared : {false, true}) {
                if ((threads == 1) && shared) {
                    continue;
                }
                const hit_result r = bench_hits(mon, regions, threads, iters, shared);
                printf("  %8zu %8d %-9s %10.1f %10.1f %8.3f\n", regions, threads,
                       (threads == 1) ? "-" : (shared ? "shared" : "per-thread"), r.zv_ns,
                       r.ucs_ns, r.zv_ns / r.ucs_ns);
            }
        }
    }
    printf("  [zv/ucs <= 0.5]\n");
    zv::monitor::destroy(mon);
    return 0;
}
