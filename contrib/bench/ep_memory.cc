// SPDX-License-Identifier: BSD-3-Clause
// Memory per endpoint: open two interfaces of one transport in this
// process, connect N endpoints from the first to the second, and report the
// growth of resident memory, of the heap, of registered memory and of queue
// pairs per endpoint (both sides' per-connection state together: what N
// connections cost a node). Transports that connect to interfaces (the zv
// ones, ud_verbs) get one endpoint per connection on the first interface;
// those that connect endpoint to endpoint (rc_verbs) get one on each side.
// With "both", each connection is used both ways, as by two MPI processes
// that talk to each other: transports that connect to interfaces get an
// endpoint on each side too (rc_zv's two then share one QP at each end).
// Registered bytes and QPs are the kernel's counts for this process
// (`rdma resource show mr|qp`, iproute2), 0 where the tool is missing.
//
// Usage: zv_ep_memory TRANSPORT DEVICE N [both]   (e.g. ud_zv rxe0:1 1024)
// Prints: "<transport> <N> <rss bytes/ep> <heap bytes/ep> <registered
// bytes/ep> <QPs/ep>" (the last two with two decimals); exit 1 on error.
#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <unistd.h>
#include <vector>

#include "uct_side.h"

using namespace zv::bench;

namespace {

long rss_bytes()
{
    long pages = 0, resident = 0;
    FILE *f = std::fopen("/proc/self/statm", "r");
    if ((f == nullptr) || (std::fscanf(f, "%ld %ld", &pages, &resident) != 2)) {
        std::perror("/proc/self/statm");
        std::exit(1);
    }
    std::fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

/// Sum of one column of `rdma resource show KIND` for this process: the
/// number of lines (field null) or the sum of 'field's values.
double rdma_res(const char *kind, const char *field)
{
    char cmd[160];
    std::snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>/dev/null", kind);
    FILE *f = popen(cmd, "r");
    if (f == nullptr) {
        return 0;
    }
    char line[1024];
    char key[40];
    std::snprintf(key, sizeof(key), " %s ", (field != nullptr) ? field : "");
    double sum = 0;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        // (the kernel names the thread that created it: any of ours)
        const char *pid = std::strstr(line, " pid ");
        char task[64];
        std::snprintf(task, sizeof(task), "/proc/self/task/%d",
                      (pid != nullptr) ? std::atoi(pid + 5) : -1);
        if ((pid == nullptr) || (access(task, F_OK) != 0)) {
            continue;
        }
        if (field == nullptr) {
            sum += 1;
            continue;
        }
        const char *v = std::strstr(line, key);
        if (v != nullptr) {
            sum += std::strtod(v + std::strlen(key), nullptr);
        }
    }
    pclose(f);
    return sum;
}

long heap_bytes()
{
    struct mallinfo2 mi = mallinfo2();
    return static_cast<long>(mi.uordblks + mi.hblkhd);
}

} // namespace

int main(int argc, char **argv)
{
    prog = "zv_ep_memory";
    if ((argc != 4) && !((argc == 5) && (std::strcmp(argv[4], "both") == 0))) {
        std::fprintf(stderr, "usage: %s TRANSPORT DEVICE N [both]\n", argv[0]);
        return 1;
    }
    const char *tl = argv[1], *dev = argv[2];
    const bool both = (argc == 5);
    const long n   = std::atol(argv[3]);
    if (n <= 0) {
        std::fprintf(stderr, "zv_ep_memory: N must be positive\n");
        return 1;
    }
    uct_md_h md = open_md(tl, dev);
    side a, b;
    open_side(a, md, tl, dev);
    open_side(b, md, tl, dev);
    // Warm up: one endpoint through connection and one message, so that
    // lazily created per-interface resources are not counted per endpoint.
    std::vector<uct_ep_h> eps, peer_eps;
    const bool p2p = !(a.attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE);
    auto create = [&] {
        if (p2p) {
            uct_ep_h ea = create_p2p(a), eb = create_p2p(b);
            connect_p2p(ea, b, eb);
            connect_p2p(eb, a, ea);
            eps.push_back(ea);
            peer_eps.push_back(eb);
            return;
        }
        eps.push_back(connect_to_iface(a, b.dev_addr, b.iface_addr));
        if (both) {
            peer_eps.push_back(connect_to_iface(b, a.dev_addr, a.iface_addr));
        }
    };
    auto settle = [&] {
        auto start = std::chrono::steady_clock::now();
        std::vector<uct_ep_h> all(eps);
        if (both) {
            all.insert(all.end(), peer_eps.begin(), peer_eps.end());
        }
        for (uct_ep_h ep : all) {
            // Connected and idle: flush completes; also send one message
            // so that each connection's send path has been used.
            while (uct_ep_am_short(ep, 1, 0, nullptr, 0) != UCS_OK) {
                uct_worker_progress(a.worker);
                uct_worker_progress(b.worker);
                if (std::chrono::steady_clock::now() - start > std::chrono::seconds(300)) {
                    die("endpoints did not connect", UCS_ERR_TIMED_OUT);
                }
            }
        }
        for (int i = 0; i < 1000; ++i) {
            uct_worker_progress(a.worker);
            uct_worker_progress(b.worker);
        }
    };
    for (side *s : {&a, &b}) {
        uct_iface_set_am_handler(s->iface, 1,
                                 [](void *, void *, size_t, unsigned) { return UCS_OK; },
                                 nullptr, 0);
    }
    create();
    settle();
    long rss0 = rss_bytes(), heap0 = heap_bytes();
    double mr0 = rdma_res("mr", "mrlen"), qp0 = rdma_res("qp", nullptr);
    for (long i = 0; i < n; ++i) {
        create();
    }
    settle();
    long rss1 = rss_bytes(), heap1 = heap_bytes();
    double mr1 = rdma_res("mr", "mrlen"), qp1 = rdma_res("qp", nullptr);
    std::printf("%s %ld %ld %ld %.2f %.2f\n", tl, n, (rss1 - rss0) / n, (heap1 - heap0) / n,
                (mr1 - mr0) / static_cast<double>(n), (qp1 - qp0) / static_cast<double>(n));
    for (uct_ep_h ep : eps) {
        uct_ep_destroy(ep);
    }
    for (uct_ep_h ep : peer_eps) {
        uct_ep_destroy(ep);
    }
    for (side *s : {&a, &b}) {
        uct_iface_close(s->iface);
        uct_worker_destroy(s->worker);
        ucs_async_context_destroy(s->async);
    }
    uct_md_close(md);
    return 0;
}
