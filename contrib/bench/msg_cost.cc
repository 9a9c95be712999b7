// SPDX-License-Identifier: BSD-3-Clause
// Instructions per message, as valgrind's callgrind counts them
// (contrib/bench/msg-cost.sh runs this and prints the ratios): a count the
// emulator's speed and the host's load cannot move, and on a real HCA,
// where the wire is fast, the part of the latency that is software.
//
// Usage: zv_msg_cost SPEC [-- SPEC]...   (one after the other, in order)
//   SPEC: uct TRANSPORT DEVICE OP SIZE ROUNDS [WINDOW]
//       OP: am_short (SIZE includes its 8-byte header), am_bcopy, put_zcopy
//       (SIZE bytes moved by puts of at most the transport's max_zcopy each:
//       one for rc, one per MTU for uc_zv)
//   SPEC: ucp[:TLS] SIZE ROUNDS [WINDOW]
//       UCP tag messages; the transports are TLS's (UCX_TLS's form, e.g.
//       ucp:rc_verbs,ud_verbs), else UCX_TLS's; the device UCX_NET_DEVICES's.
//
// Two interfaces (UCT) or two workers (UCP) of this process, on one
// device, ping-pong ROUNDS times: A sends to B, B to A. With a WINDOW
// (default 1; am_short, am_bcopy and UCP), each turn is a stream of WINDOW
// messages posted back to back before the receiver waits for them all:
// what a stream costs per message (send completions reported in batches,
// acknowledgements covering several packets) rather than a round trip's
// share. What is counted is
// each send call and each progress call, nothing else: under
// `valgrind --tool=callgrind --collect-atstart=no` the program turns
// collection on around exactly those calls. Before each progress call it
// sleeps (the device, not this process, moves the packet), so most calls
// find work; the ones that find none are counted ("empty"), and afterwards
// IDLE progress calls with nothing to do are collected apart, so that the
// script can take the empty ones out at the idle cost. Dumps: "messages"
// (the rounds, then a drain until nothing is left: late acks and send
// completions belong to the messages), then "idle". The program also
// turns callgrind's instrumentation on around each measurement (warm-up,
// rounds, drain, idle) and off after it: under `--instr-atstart=no` the
// setup (UCX's initialisation, opening interfaces) then runs several times
// faster and the counts are the same.
//
// Prints: "messages M empty E idle K", a line per SPEC (its dumps are the
// 2n-1th and 2nth). Natively (no valgrind) the client
// requests do nothing and the program only checks that the ping-pong runs.
#include "ucp_context.h"
#include "uct_side.h"

#include <ucp/api/ucp.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_DUMP_STATS_AT(s) ((void)(s))
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>

using namespace zv::bench;

namespace {

constexpr unsigned idle_polls  = 2000;
constexpr unsigned sleep_us    = 100; ///< before each progress call
constexpr unsigned warmup      = 10;  ///< rounds not counted (connection, caches), at most ROUNDS
constexpr unsigned drain_empty = 20;  ///< empty polls in a row that end the drain

bool     g_counting = false;
unsigned g_empty    = 0;
auto     g_deadline = std::chrono::steady_clock::now();

/// f(), collected when counting.
template <class F> auto counted(F &&f)
{
    if (g_counting) {
        CALLGRIND_TOGGLE_COLLECT;
    }
    auto r = f();
    if (g_counting) {
        CALLGRIND_TOGGLE_COLLECT;
    }
    return r;
}

void check_deadline()
{
    if (std::chrono::steady_clock::now() > g_deadline) {
        die("no progress within 300 s", UCS_ERR_TIMED_OUT);
    }
}

/// One progress call after a pause, counted; true if it found work.
template <class P> bool poll(P &&progress)
{
    usleep(sleep_us);
    check_deadline();
    unsigned n = counted(progress);
    if (n == 0) {
        g_empty += g_counting;
    }
    return n != 0;
}

/// The end of the measured rounds: progress until nothing is left, the
/// "messages" dump, then idle_polls empty progress calls, the "idle" dump.
template <class PA, class PB> void drain_and_idle(PA &&pa, PB &&pb)
{
    for (unsigned quiet = 0; quiet < drain_empty;) {
        bool a = poll(pa), b = poll(pb);
        quiet  = (a || b) ? 0 : quiet + 1;
    }
    CALLGRIND_DUMP_STATS_AT("messages");
    for (unsigned i = 0; i < idle_polls / 2; ++i) {
        counted(pa);
        counted(pb);
    }
    CALLGRIND_DUMP_STATS_AT("idle");
}

// ---------------------------------------------------------------- UCT

struct uct_party {
    side             s;
    uct_ep_h         ep    = nullptr;
    unsigned         got   = 0; ///< active messages received
    std::vector<char> buf;
    uct_mem_h        memh  = UCT_MEM_HANDLE_NULL;
    uct_rkey_bundle_t rkey = {};  ///< the other party's buffer
    uct_completion_t done  = {};
    size_t           put_off = 0; ///< bytes of the current message posted
    unsigned progress() { return uct_worker_progress(s.worker); }
};

struct pack_arg {
    const char *buf;
    size_t      len;
};

size_t pack(void *dest, void *arg)
{
    auto *a = static_cast<pack_arg *>(arg);
    std::memcpy(dest, a->buf, a->len);
    return a->len;
}

/// The next of the puts that move 'size' bytes from p to q, each at most
/// the transport's max_zcopy (uc_zv's are one MTU); UCS_OK once all are
/// posted. They share p.done.
ucs_status_t put_chunks(uct_party &p, uct_party &q, size_t size)
{
    const size_t max = p.s.attr.cap.put.max_zcopy;
    while (p.put_off < size) {
        size_t len    = std::min(max, size - p.put_off);
        uct_iov_t iov = {p.buf.data() + p.put_off, len, p.memh, 0, 1};
        ucs_status_t status = counted([&] {
            return uct_ep_put_zcopy(p.ep, &iov, 1,
                                    reinterpret_cast<uintptr_t>(q.buf.data() + p.put_off),
                                    p.rkey.rkey, &p.done);
        });
        if (status == UCS_OK) {
            --p.done.count;
        } else if (status != UCS_INPROGRESS) {
            return status;
        }
        p.put_off += len;
    }
    return UCS_OK;
}

/// 'window' messages of 'op' from p to q (put_zcopy: one), posted back to
/// back; returns once their completion (put) or their arrival (am) has
/// been seen.
void uct_send(uct_party &p, uct_party &q, const char *op, size_t size, unsigned window)
{
    ucs_status_t status = UCS_OK;
    unsigned before = q.got;
    if (std::strcmp(op, "put_zcopy") == 0) {
        const size_t max = p.s.attr.cap.put.max_zcopy;
        p.done.count     = static_cast<int>((size + max - 1) / max) + 1; // +1: ours
        p.done.status    = UCS_OK;
        p.put_off        = 0;
    }
    for (unsigned sent = 0; sent < window;) {
        if (std::strcmp(op, "am_short") == 0) {
            uint64_t hdr = 0;
            status = counted([&] {
                return uct_ep_am_short(p.ep, 1, hdr, p.buf.data(),
                                       static_cast<unsigned>(size - sizeof(hdr)));
            });
        } else if (std::strcmp(op, "am_bcopy") == 0) {
            pack_arg a = {p.buf.data(), size};
            ssize_t n  = counted([&] { return uct_ep_am_bcopy(p.ep, 1, pack, &a, 0); });
            status     = (n < 0) ? static_cast<ucs_status_t>(n) : UCS_OK;
        } else {
            status = put_chunks(p, q, size);
        }
        if (status == UCS_ERR_NO_RESOURCE) {
            poll([&] { return p.progress(); });
            poll([&] { return q.progress(); });
        } else if (UCS_STATUS_IS_ERR(status)) {
            die(op, status);
        } else {
            ++sent;
        }
    }
    if (std::strcmp(op, "put_zcopy") == 0) {
        --p.done.count; // all posted
        while (p.done.count != 0) { // the peer's progress may be what acks it
            poll([&] { return q.progress(); });
            poll([&] { return p.progress(); });
        }
    } else {
        // (both: a send taken before the connection existed leaves at the
        // sender's progress, rc_zv's at its worker's)
        while (q.got - before < window) {
            poll([&] { return q.progress(); });
            poll([&] { return p.progress(); });
        }
    }
}

int run_uct(const char *tl, const char *dev, const char *op, size_t size, unsigned rounds,
            unsigned window)
{
    const bool put = (std::strcmp(op, "put_zcopy") == 0);
    if (!put && (std::strcmp(op, "am_short") != 0) && (std::strcmp(op, "am_bcopy") != 0)) {
        std::fprintf(stderr, "%s: unknown operation '%s' (am_short, am_bcopy, put_zcopy)\n",
                     prog, op);
        return 1;
    }
    if (put && (window != 1)) {
        std::fprintf(stderr, "%s: put_zcopy takes no WINDOW (one message of SIZE bytes a turn)\n",
                     prog);
        return 1;
    }
    if ((std::strcmp(op, "am_short") == 0) && (size < sizeof(uint64_t))) {
        std::fprintf(stderr, "%s: am_short's SIZE includes its 8-byte header\n", prog);
        return 1;
    }
    uct_component_h component;
    uct_md_h md = open_md(tl, dev, &component);
    uct_party a, b;
    open_side(a.s, md, tl, dev);
    open_side(b.s, md, tl, dev);
    const uint64_t need = put ? UCT_IFACE_FLAG_PUT_ZCOPY :
                          (std::strcmp(op, "am_short") == 0) ? UCT_IFACE_FLAG_AM_SHORT :
                                                                UCT_IFACE_FLAG_AM_BCOPY;
    if (!(a.s.attr.cap.flags & need)) {
        std::fprintf(stderr, "%s: %s does not support %s\n", prog, tl, op);
        return 2;
    }
    const size_t max = put ? SIZE_MAX :
                       (std::strcmp(op, "am_short") == 0) ? a.s.attr.cap.am.max_short :
                                                             a.s.attr.cap.am.max_bcopy;
    if (size > max) {
        std::fprintf(stderr, "%s: %s takes at most %zu bytes in one %s\n", prog, tl, max, op);
        return 2;
    }
    for (uct_party *p : {&a, &b}) {
        p->buf.assign(size, 'z');
        uct_iface_set_am_handler(p->s.iface, 1,
                                 [](void *arg, void *, size_t, unsigned) {
                                     ++*static_cast<unsigned *>(arg);
                                     return UCS_OK;
                                 },
                                 &p->got, 0);
        p->done.func = [](uct_completion_t *) {};
        if (put) {
            must(uct_md_mem_reg(md, p->buf.data(), size, UCT_MD_MEM_ACCESS_ALL, &p->memh),
                 "uct_md_mem_reg");
        }
    }
    if (put) {
        uct_md_attr_t md_attr;
        must(uct_md_query(md, &md_attr), "uct_md_query");
        std::vector<char> packed(md_attr.rkey_packed_size);
        must(uct_md_mkey_pack(md, b.memh, packed.data()), "uct_md_mkey_pack");
        must(uct_rkey_unpack(component, packed.data(), &a.rkey), "uct_rkey_unpack");
        must(uct_md_mkey_pack(md, a.memh, packed.data()), "uct_md_mkey_pack");
        must(uct_rkey_unpack(component, packed.data(), &b.rkey), "uct_rkey_unpack");
    }
    if (a.s.attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) {
        a.ep = connect_to_iface(a.s, b.s.dev_addr, b.s.iface_addr);
        b.ep = connect_to_iface(b.s, a.s.dev_addr, a.s.iface_addr);
    } else {
        a.ep = create_p2p(a.s);
        b.ep = create_p2p(b.s);
        connect_p2p(a.ep, b.s, b.ep);
        connect_p2p(b.ep, a.s, a.ep);
    }
    g_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    const unsigned warm = std::min(warmup, rounds);
    CALLGRIND_START_INSTRUMENTATION;
    for (unsigned i = 0; i < warm + rounds; ++i) {
        g_counting = (i >= warm);
        uct_send(a, b, op, size, window);
        uct_send(b, a, op, size, window);
    }
    drain_and_idle([&] { return a.progress(); }, [&] { return b.progress(); });
    CALLGRIND_STOP_INSTRUMENTATION;
    g_counting = false;
    std::printf("messages %u empty %u idle %u\n", 2 * rounds * window, g_empty, idle_polls);
    for (uct_party *p : {&a, &b}) {
        uct_ep_destroy(p->ep);
        if (put) {
            uct_rkey_release(component, &p->rkey);
            uct_md_mem_dereg(md, p->memh);
        }
        uct_iface_close(p->s.iface);
        uct_worker_destroy(p->s.worker);
        ucs_async_context_destroy(p->s.async);
    }
    uct_md_close(md);
    return 0;
}

// ---------------------------------------------------------------- UCP

struct ucp_party {
    ucp_worker_h      worker = nullptr;
    ucp_ep_h          ep     = nullptr;
    std::vector<char> sbuf, rbuf;
    unsigned progress() { return ucp_worker_progress(worker); }
};

/// Wait for a request of UCP's (or none: done at once), then free it.
template <class P, class Q> void ucp_wait(void *req, P &&pp, Q &&pq)
{
    if (req == nullptr) {
        return;
    }
    if (UCS_PTR_IS_ERR(req)) {
        die("ucp request", UCS_PTR_STATUS(req));
    }
    while (ucp_request_check_status(req) == UCS_INPROGRESS) {
        poll(pp);
        poll(pq);
    }
    ucp_request_free(req);
}

/// 'window' tag messages from p to q: q's receives are posted first, then
/// p's sends back to back, then all are waited for. (They share one
/// buffer each side: every message carries the same bytes.)
void ucp_messages(ucp_party &p, ucp_party &q, size_t size, unsigned window)
{
    ucp_request_param_t prm = {};
    std::vector<void *> reqs;
    reqs.reserve(2 * window);
    for (unsigned i = 0; i < window; ++i) {
        reqs.push_back(counted([&] {
            return ucp_tag_recv_nbx(q.worker, q.rbuf.data(), size, 7, ~ucp_tag_t(0), &prm);
        }));
    }
    for (unsigned i = 0; i < window; ++i) {
        reqs.push_back(counted([&] {
            return ucp_tag_send_nbx(p.ep, p.sbuf.data(), size, 7, &prm);
        }));
    }
    auto pp = [&] { return p.progress(); };
    auto pq = [&] { return q.progress(); };
    for (unsigned i = 0; i < window; ++i) {
        ucp_wait(reqs[window + i], pq, pp);
    }
    for (unsigned i = 0; i < window; ++i) {
        ucp_wait(reqs[i], pq, pp);
    }
}

int run_ucp(const char *tls, size_t size, unsigned rounds, unsigned window)
{
    ucp_context_h ctx = tag_context(tls);
    ucp_party a, b;
    std::vector<ucp_address_t *> addrs(2);
    std::vector<size_t> lens(2);
    int i = 0;
    for (ucp_party *p : {&a, &b}) {
        ucp_worker_params_t wp = {};
        wp.field_mask          = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode         = UCS_THREAD_MODE_SINGLE;
        must(ucp_worker_create(ctx, &wp, &p->worker), "ucp_worker_create");
        must(ucp_worker_get_address(p->worker, &addrs[i], &lens[i]),
                 "ucp_worker_get_address");
        p->sbuf.assign(size, 'z');
        p->rbuf.assign(size, 0);
        ++i;
    }
    i = 1;
    for (ucp_party *p : {&a, &b}) {
        ucp_ep_params_t ep = {};
        ep.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep.address         = addrs[i--];
        must(ucp_ep_create(p->worker, &ep, &p->ep), "ucp_ep_create");
    }
    g_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    const unsigned warm = std::min(warmup, rounds);
    CALLGRIND_START_INSTRUMENTATION;
    for (unsigned r = 0; r < warm + rounds; ++r) {
        g_counting = (r >= warm);
        ucp_messages(a, b, size, window);
        ucp_messages(b, a, size, window);
    }
    if (std::memcmp(a.rbuf.data(), b.sbuf.data(), size) != 0) {
        std::fprintf(stderr, "%s: received data differ from what was sent\n", prog);
        return 1;
    }
    drain_and_idle([&] { return a.progress(); }, [&] { return b.progress(); });
    CALLGRIND_STOP_INSTRUMENTATION;
    g_counting = false;
    std::printf("messages %u empty %u idle %u\n", 2 * rounds * window, g_empty, idle_polls);
    ucp_request_param_t prm = {};
    for (ucp_party *p : {&a, &b}) {
        void *req = ucp_ep_close_nbx(p->ep, &prm);
        while (UCS_PTR_IS_PTR(req) && (ucp_request_check_status(req) == UCS_INPROGRESS)) {
            a.progress();
            b.progress();
        }
        if (UCS_PTR_IS_PTR(req)) {
            ucp_request_free(req);
        }
    }
    i = 0;
    for (ucp_party *p : {&a, &b}) {
        ucp_worker_release_address(p->worker, addrs[i++]);
        ucp_worker_destroy(p->worker);
    }
    ucp_cleanup(ctx);
    return 0;
}

} // namespace

/// A positive count from argv, or 0.
unsigned count_arg(const char *arg)
{
    char *end;
    long v = std::strtol(arg, &end, 10);
    return ((*end == '\0') && (v > 0) && (v <= (1L << 30))) ? static_cast<unsigned>(v) : 0;
}

/// One measurement, argv[0..argc): "uct TL DEV OP SIZE ROUNDS [WINDOW]" or
/// "ucp[:TLS] SIZE ROUNDS [WINDOW]"; -1 when the words are not one.
int run_spec(int argc, char **argv)
{
    g_empty = 0;
    if (((argc == 6) || (argc == 7)) && (std::strcmp(argv[0], "uct") == 0)) {
        unsigned size = count_arg(argv[4]), rounds = count_arg(argv[5]);
        unsigned window = (argc == 7) ? count_arg(argv[6]) : 1;
        if ((size > 0) && (rounds > 0) && (window > 0)) {
            return run_uct(argv[1], argv[2], argv[3], size, rounds, window);
        }
    } else if (((argc == 3) || (argc == 4)) &&
               ((std::strcmp(argv[0], "ucp") == 0) || (std::strncmp(argv[0], "ucp:", 4) == 0))) {
        unsigned size = count_arg(argv[1]), rounds = count_arg(argv[2]);
        unsigned window = (argc == 4) ? count_arg(argv[3]) : 1;
        const char *tls = (argv[0][3] == ':') ? argv[0] + 4 : nullptr;
        if ((size > 0) && (rounds > 0) && (window > 0)) {
            return run_ucp(tls, size, rounds, window);
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    prog = "zv_msg_cost";
    // Measurements separated by "--" run one after the other in this
    // process (one valgrind start for all of them), each with its two dumps.
    int status = -1;
    for (int first = 1, i = 1; i <= argc; ++i) {
        if ((i < argc) && (std::strcmp(argv[i], "--") != 0)) {
            continue;
        }
        status = run_spec(i - first, argv + first);
        if (status != 0) {
            break;
        }
        first = i + 1;
    }
    if (status >= 0) {
        return status;
    }
    std::fprintf(stderr,
                 "usage: %s SPEC [-- SPEC]...   (one line of figures and two callgrind dumps each)\n"
                 "  SPEC: uct TRANSPORT DEVICE am_short|am_bcopy|put_zcopy SIZE ROUNDS [WINDOW]\n"
                 "        ucp[:TLS] SIZE ROUNDS [WINDOW]   (TLS, or else UCX_TLS, and UCX_NET_DEVICES\n"
                 "                                         choose the lanes)\n"
                 "  (SIZE, ROUNDS, WINDOW: 1..2^30)\n",
                 argv[0]);
    return 1;
}
