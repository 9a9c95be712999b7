// SPDX-License-Identifier: BSD-3-Clause
// How long a UCP sender takes to learn that its peer died (SIGKILL), over
// any transport: contrib/bench/dead-peer.sh runs it over the zv transports
// and UCX's own, in one run.
//
// usage: zv_dead_peer serve FILE   write the worker's address to FILE, then
//                                  receive 64-byte tag messages until killed
//        zv_dead_peer send FILE [LIMIT]
//                                  connect (UCP_ERR_HANDLING_MODE_PEER), send
//                                  64-byte messages one at a time; print
//                                  "ready" after 16, then, when the endpoint
//                                  fails, "failed STATUS at T" (T: seconds of
//                                  CLOCK_REALTIME) and exit 0; exit 1 when
//                                  LIMIT seconds (default 300) pass first.
#include "ucp_context.h"

#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

using zv::bench::must;
using zv::bench::tag_context;

namespace {

double realtime()
{
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool         g_failed = false;
ucs_status_t g_status = UCS_OK;
double       g_when   = 0;

void on_error(void *, ucp_ep_h, ucs_status_t status)
{
    if (!g_failed) {
        g_failed = true;
        g_status = status;
        g_when   = realtime();
    }
}

/// Wait for 'req' (a request, or an immediate status).
ucs_status_t wait(ucp_worker_h w, void *req, double until)
{
    if (!UCS_PTR_IS_PTR(req)) {
        return UCS_PTR_STATUS(req);
    }
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(w);
        if (realtime() > until) {
            break;
        }
    }
    ucp_request_free(req);
    return st;
}

} // namespace

int main(int argc, char **argv)
{
    if ((argc < 3) || (std::strcmp(argv[1], "serve") && std::strcmp(argv[1], "send"))) {
        std::fprintf(stderr, "usage: zv_dead_peer serve FILE | send FILE [LIMIT]\n");
        return 2;
    }
    zv::bench::prog    = "zv_dead_peer";
    const bool serve   = !std::strcmp(argv[1], "serve");
    const double limit = (argc > 3) ? std::atof(argv[3]) : 300;
    ucp_context_h ctx = tag_context();
    ucp_worker_params_t wp = {};
    wp.field_mask          = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode         = UCS_THREAD_MODE_SINGLE;
    ucp_worker_h w;
    must(ucp_worker_create(ctx, &wp, &w), "ucp_worker_create");
    char buf[64] = {};
    ucp_request_param_t prm = {};
    if (serve) {
        ucp_address_t *addr;
        size_t len;
        must(ucp_worker_get_address(w, &addr, &len), "ucp_worker_get_address");
        const std::string tmp = std::string(argv[2]) + ".tmp";
        std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<char *>(addr),
                                                   static_cast<std::streamsize>(len));
        std::rename(tmp.c_str(), argv[2]);
        ucp_worker_release_address(w, addr);
        for (;;) { // until killed
            (void)wait(w, ucp_tag_recv_nbx(w, buf, sizeof(buf), 1, ~ucp_tag_t(0), &prm), 1e300);
        }
    }
    std::ifstream in(argv[2], std::ios::binary);
    std::vector<char> addr((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (addr.empty()) {
        std::fprintf(stderr, "zv_dead_peer: no address in %s\n", argv[2]);
        return 2;
    }
    ucp_ep_params_t ep     = {};
    ep.field_mask          = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                             UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address             = reinterpret_cast<ucp_address_t *>(addr.data());
    ep.err_mode            = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb      = on_error;
    ep.err_handler.arg     = nullptr;
    ucp_ep_h e;
    must(ucp_ep_create(w, &ep, &e), "ucp_ep_create");
    const double until = realtime() + limit;
    for (unsigned n = 0; !g_failed && (realtime() < until); ++n) {
        ucs_status_t st = wait(w, ucp_tag_send_nbx(e, buf, sizeof(buf), 1, &prm), until);
        if ((st != UCS_OK) && !g_failed) {
            // The request failed before the endpoint's error callback ran.
            for (double t = realtime() + 5; !g_failed && (realtime() < t);) {
                ucp_worker_progress(w);
            }
        }
        if (n == 16) {
            std::printf("ready\n");
            std::fflush(stdout);
        }
    }
    if (!g_failed) {
        std::printf("no failure within %.0f s\n", limit);
        std::fflush(stdout);
        std::_Exit(1); // (nor a close to wait for on a peer that is gone)
    }
    std::printf("failed %s at %.3f\n", ucs_status_string(g_status), g_when);
    std::fflush(stdout);
    std::_Exit(0); // the endpoint is dead: no orderly close to wait for
}
