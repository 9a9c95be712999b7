// SPDX-License-Identifier: BSD-3-Clause
// A survivor and peers that come and go, at the UCT level: what a peer that
// is killed leaves behind in the survivor (test/device/restart-check.sh
// kills and restarts one 1,000 times and reads the survivor's QP count
// and resident memory).
//
// Usage:
//   zv_restart serve TRANSPORT DEVICE FILE
//       Open an interface, write its addresses to FILE (hex, one line),
//       then progress until SIGTERM, taking the peers' active messages.
//   zv_restart peer TRANSPORT DEVICE FILE
//       Connect to the interface FILE names, deliver 16 active messages,
//       print "ready", then progress until killed.
#include "uct_side.h"

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <sys/prctl.h>
#include <unistd.h>

using namespace zv::bench;

namespace {

volatile std::sig_atomic_t g_stop = 0;

std::string to_hex(const std::vector<char> &v)
{
    static const char *digits = "0123456789abcdef";
    std::string s;
    for (char c : v) {
        s += digits[(static_cast<unsigned char>(c) >> 4) & 15];
        s += digits[static_cast<unsigned char>(c) & 15];
    }
    return s;
}

std::vector<char> from_hex(const std::string &s)
{
    std::vector<char> v;
    for (size_t i = 0; i + 1 < s.size(); i += 2) {
        v.push_back(static_cast<char>(std::stoi(s.substr(i, 2), nullptr, 16)));
    }
    return v;
}

int serve(side &s, const char *file)
{
    // The survivor's resident memory is what the faults suite judges: keep
    // khugepaged from collapsing its heap into 2 MiB pages, which raises
    // RSS by up to 2 MiB at a moment of the kernel's choosing (THP "always"
    // in the VM: one CI run showed +1,980 KiB with no allocation of ours).
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
        std::perror("prctl(PR_SET_THP_DISABLE)");
    }
    uct_iface_set_am_handler(s.iface, 1,
                             [](void *, void *, size_t, unsigned) { return UCS_OK; },
                             nullptr, 0);
    std::string tmp = std::string(file) + ".tmp";
    {
        std::ofstream out(tmp);
        out << to_hex(s.dev_addr) << ' ' << to_hex(s.iface_addr) << '\n';
        if (!out) {
            std::perror(tmp.c_str());
            return 1;
        }
    }
    if (std::rename(tmp.c_str(), file) != 0) {
        std::perror(file);
        return 1;
    }
    std::signal(SIGTERM, [](int) { g_stop = 1; });
    while (!g_stop) {
        if (uct_worker_progress(s.worker) == 0) {
            usleep(100); // the peers are starting on the same CPUs
        }
    }
    return 0;
}

int peer(side &s, const char *file)
{
    std::ifstream in(file);
    std::string dev_hex, iface_hex;
    if (!(in >> dev_hex >> iface_hex)) {
        std::fprintf(stderr, "%s: cannot read %s\n", prog, file);
        return 1;
    }
    uct_ep_h ep = connect_to_iface(s, from_hex(dev_hex), from_hex(iface_hex));
    for (uint64_t i = 0; i < 16;) {
        ucs_status_t st = uct_ep_am_short(ep, 1, i, nullptr, 0);
        if (st == UCS_OK) {
            ++i;
        } else if (st == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(s.worker);
        } else {
            die("uct_ep_am_short", st);
        }
    }
    ucs_status_t st;
    while ((st = uct_ep_flush(ep, 0, nullptr)) != UCS_OK) {
        if (UCS_STATUS_IS_ERR(st) && (st != UCS_ERR_NO_RESOURCE)) {
            die("uct_ep_flush", st);
        }
        uct_worker_progress(s.worker);
    }
    std::printf("ready\n");
    std::fflush(stdout);
    for (;;) {
        if (uct_worker_progress(s.worker) == 0) {
            usleep(100);
        }
    }
}

} // namespace

int main(int argc, char **argv)
{
    prog = "zv_restart";
    if ((argc != 5) ||
        ((std::strcmp(argv[1], "serve") != 0) && (std::strcmp(argv[1], "peer") != 0))) {
        std::fprintf(stderr, "usage: %s serve|peer TRANSPORT DEVICE FILE\n", prog);
        return 1;
    }
    uct_md_h md = open_md(argv[2], argv[3]);
    side s;
    open_side(s, md, argv[2], argv[3]);
    int rc = (std::strcmp(argv[1], "serve") == 0) ? serve(s, argv[4]) : peer(s, argv[4]);
    uct_iface_close(s.iface);
    uct_worker_destroy(s.worker);
    ucs_async_context_destroy(s.async);
    uct_md_close(md);
    return rc;
}
