// SPDX-License-Identifier: BSD-3-Clause
// Shared by the UCT-level harnesses in contrib/bench: an opened interface
// of one transport on one device ("side"), and fatal error checks.
#ifndef ZV_CONTRIB_BENCH_UCT_SIDE_H
#define ZV_CONTRIB_BENCH_UCT_SIDE_H

#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace zv::bench {

/// The program's name in error messages (set by main).
inline const char *prog = "zv";

struct side {
    ucs_async_context_t *async  = nullptr;
    uct_worker_h         worker = nullptr;
    uct_iface_h          iface  = nullptr;
    uct_iface_attr_t     attr   = {};
    std::vector<char>    dev_addr, iface_addr;
};

[[noreturn]] inline void die(const char *what, ucs_status_t status)
{
    std::fprintf(stderr, "%s: %s: %s\n", prog, what, ucs_status_string(status));
    std::exit(1);
}

inline void must(ucs_status_t status, const char *what)
{
    if (status != UCS_OK) {
        die(what, status);
    }
}

/// Find the md that offers 'tl' on 'dev' (and its component, if asked).
inline uct_md_h open_md(const char *tl, const char *dev, uct_component_h *component = nullptr)
{
    uct_component_h *components;
    unsigned num;
    must(uct_query_components(&components, &num), "uct_query_components");
    for (unsigned i = 0; i < num; ++i) {
        uct_component_attr_t attr = {};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        must(uct_component_query(components[i], &attr), "uct_component_query");
        std::vector<uct_md_resource_desc_t> res(attr.md_resource_count);
        attr.field_mask   = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = res.data();
        must(uct_component_query(components[i], &attr), "uct_component_query");
        for (auto &r : res) {
            uct_md_config_t *cfg;
            must(uct_md_config_read(components[i], nullptr, nullptr, &cfg), "md config");
            uct_md_h md;
            ucs_status_t status = uct_md_open(components[i], r.md_name, cfg, &md);
            uct_config_release(cfg);
            if (status != UCS_OK) {
                continue;
            }
            uct_tl_resource_desc_t *tls;
            unsigned ntl;
            must(uct_md_query_tl_resources(md, &tls, &ntl), "tl resources");
            bool found = false;
            for (unsigned t = 0; t < ntl; ++t) {
                found = found || ((std::strcmp(tls[t].tl_name, tl) == 0) &&
                                  (std::strcmp(tls[t].dev_name, dev) == 0));
            }
            uct_release_tl_resource_list(tls);
            if (found) {
                if (component != nullptr) {
                    *component = components[i];
                }
                uct_release_component_list(components);
                return md;
            }
            uct_md_close(md);
        }
    }
    std::fprintf(stderr, "%s: no memory domain offers %s on %s\n", prog, tl, dev);
    std::exit(1);
}

/// Open an interface of 'tl' on 'dev' in s (its own worker), with its
/// addresses.
inline void open_side(side &s, uct_md_h md, const char *tl, const char *dev)
{
    must(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &s.async), "async");
    must(uct_worker_create(s.async, UCS_THREAD_MODE_SINGLE, &s.worker), "worker");
    uct_iface_config_t *cfg;
    must(uct_md_iface_config_read(md, tl, nullptr, nullptr, &cfg), "iface config");
    uct_iface_params_t params   = {};
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = tl;
    params.mode.device.dev_name = dev;
    ucs_status_t status = uct_iface_open(md, s.worker, &params, cfg, &s.iface);
    uct_config_release(cfg);
    must(status, "uct_iface_open");
    must(uct_iface_query(s.iface, &s.attr), "uct_iface_query");
    uct_iface_progress_enable(s.iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    s.dev_addr.resize(s.attr.device_addr_len);
    s.iface_addr.resize(s.attr.iface_addr_len);
    must(uct_iface_get_device_address(s.iface, reinterpret_cast<uct_device_addr_t *>(
                                                       s.dev_addr.data())), "dev addr");
    must(uct_iface_get_address(s.iface, reinterpret_cast<uct_iface_addr_t *>(
                                                s.iface_addr.data())), "iface addr");
    if (!(s.attr.cap.flags &
          (UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_CONNECT_TO_EP))) {
        std::fprintf(stderr, "%s: %s connects neither to interfaces nor to endpoints\n", prog, tl);
        std::exit(1);
    }
}


/// An endpoint of 'from' connected to the interface with these addresses.
inline uct_ep_h connect_to_iface(side &from, const std::vector<char> &dev_addr,
                                 const std::vector<char> &iface_addr)
{
    uct_ep_params_t p = {};
    p.field_mask      = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    p.iface           = from.iface;
    p.dev_addr        = reinterpret_cast<const uct_device_addr_t *>(dev_addr.data());
    p.iface_addr      = reinterpret_cast<const uct_iface_addr_t *>(iface_addr.data());
    uct_ep_h ep;
    must(uct_ep_create(&p, &ep), "uct_ep_create");
    return ep;
}

/// An endpoint of 'from' with no peer yet (endpoint-to-endpoint transports).
inline uct_ep_h create_p2p(side &from)
{
    uct_ep_params_t p = {};
    p.field_mask      = UCT_EP_PARAM_FIELD_IFACE;
    p.iface           = from.iface;
    uct_ep_h ep;
    must(uct_ep_create(&p, &ep), "uct_ep_create");
    return ep;
}

/// Connect ep (of an endpoint-to-endpoint transport) to peer_ep of peer_side.
inline void connect_p2p(uct_ep_h ep, const side &peer_side, uct_ep_h peer_ep)
{
    std::vector<char> ep_addr(peer_side.attr.ep_addr_len);
    must(uct_ep_get_address(peer_ep, reinterpret_cast<uct_ep_addr_t *>(ep_addr.data())),
         "uct_ep_get_address");
    must(uct_ep_connect_to_ep(ep, reinterpret_cast<const uct_device_addr_t *>(
                                          peer_side.dev_addr.data()),
                              reinterpret_cast<const uct_ep_addr_t *>(ep_addr.data())),
         "uct_ep_connect_to_ep");
}

} // namespace zv::bench

#endif
