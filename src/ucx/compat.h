// SPDX-License-Identifier: BSD-3-Clause
// The UCX compatibility layer: what a UCT transport implements, under the
// project's own names, for every UCX from 1.13 to 1.23. The rest of zverbs
// writes its md, component and interface functions with the signatures
// below and never tests a UCX version; this header adapts them to the
// signatures of the UCX it is compiled against.
//
// Every choice here follows a configure feature test on the UCX headers
// found (HAVE_* / ZV_UCX_* in ucx-config/zv_ucx_compat.h), not a version number: Debian
// and others backport, and a version would lie. The differences, with the
// UCX release that brought each:
//   - md ops: query fills uct_md_attr_v2_t; mem_reg takes
//     uct_md_mem_reg_params_t; mkey_pack takes the address and length; the
//     slot after mkey_pack is mem_attach (was is_sockaddr_accessible) (1.15+)
//   - uct_component_t::rkey_compare (1.16+)
//   - uct_iface_internal_ops_t::ep_connect_to_ep_v2, iface_is_reachable_v2,
//     ep_is_connected, called by UCP without a NULL check (1.16+)
//   - UCT_IFACE_FLAG_INTER_NODE: without it UCP takes a lane as intra-node
//   - one-shot progress callbacks: ucs_callbackq_add_oneshot with a key,
//     where ucs_callbackq_add_safe took UCS_CALLBACKQ_FLAG_ONESHOT (1.15+)
//   - ucs_topo_sys_device_set_name's priority (1.15+)
//   - ucs_rcache: the alignment moved from the params to ucs_rcache_get,
//     and the ops gained merge, called without a NULL check
// and, as the v1.22.0 tag shows (built against here only for syntax):
//   - rkey_unpack takes uct_rkey_unpack_params_t; ep_invalidate takes
//     uct_ep_invalidate_params_t; the md ops gained mem_elem_pack and the
//     internal ops iface_query_v2, ep_get_device_ep, ep_put_sgl_zcopy, all
//     called without a NULL check
// and, as UCX's master of 2026-08-21 shows (Debian unstable's 1.23.0~rc1
// has no tag; its libuct asserts the first):
//   - the internal op ep_outstanding_purge, asserted non-NULL when an
//     interface opens; mem_elem_pack returns a release handle
#ifndef ZV_UCX_COMPAT_H
#define ZV_UCX_COMPAT_H

#include "zv_ucx_compat.h" // configure's feature tests (in ucx-config/)
#include "ucx/internal.h"

#include <ucs/datastruct/callbackq.h>
#include <ucs/memory/rcache.h>
#include <ucs/sys/topo/base/topo.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace zv::ucx {

// ------------------------------------------------------------------ md

/// What a zv md reports (query_md), whatever struct UCX asks for.
struct md_caps {
    uint64_t          flags            = 0;
    size_t            max_reg          = 0;
    uint64_t          reg_mem_types    = 0;
    uint64_t          access_mem_types = 0;
    ucs_linear_func_t reg_cost         = {};
    size_t            rkey_packed_size = 0;
    const char       *component_name   = "";
    /// Names the md among those of the same component across processes
    /// (UCX 1.16+'s global_id; the device name is enough for zv).
    const char       *device_name      = "";
    ucs_cpu_set_t     local_cpus       = {};
};

/// The struct UCX's md query fills.
#ifdef ZV_UCX_MD_QUERY_V2
using md_attr_t = uct_md_attr_v2_t;
#else
using md_attr_t = uct_md_attr_t;
#endif

/// Fill UCX's md attributes from 'caps'. cache_mem_types (UCX 1.16+) says
/// which memory types UCP may keep in its own registration cache. UCP 1.18's
/// protocols register user buffers through its datatype iterator, which
/// asserts that every md of the lanes is in that set (datatype_iter.inl:
/// "Iterator may work with cacheable MDs only"; Debian's UCX is built with
/// assertions, so MPI's rendezvous over rc_zv aborted there). So zv reports
/// what it registers: UCP's cache itself is off by default wherever zv may
/// be selected (zv_ucp_defaults.h), and then every registration goes to
/// zv's md, which caches it, invalidated by the kernel.
inline void fill_md_attr(md_attr_t *attr, const md_caps &caps)
{
#ifdef ZV_UCX_MD_QUERY_V2
    const uint64_t field_mask = attr->field_mask;
    std::memset(attr, 0, sizeof(*attr));
    attr->field_mask       = field_mask;
    attr->flags            = caps.flags;
    attr->max_alloc        = 0;
    attr->max_reg          = caps.max_reg;
    attr->reg_mem_types    = caps.reg_mem_types;
    attr->access_mem_types = caps.access_mem_types;
    attr->cache_mem_types  = caps.reg_mem_types;
#ifdef HAVE_UCT_MD_ATTR_V2_T_REG_ALIGNMENT
    attr->reg_alignment = 1;
#endif
#ifdef HAVE_UCT_MD_ATTR_V2_T_GLOBAL_ID
    std::snprintf(attr->global_id, sizeof(attr->global_id), "%s:%s", caps.component_name,
                  caps.device_name);
#endif
#else
    std::memset(attr, 0, sizeof(*attr));
    attr->cap.flags            = caps.flags;
    attr->cap.max_alloc        = 0;
    attr->cap.max_reg          = caps.max_reg;
    attr->cap.reg_mem_types    = caps.reg_mem_types;
    attr->cap.access_mem_types = caps.access_mem_types;
#endif
    attr->reg_cost         = caps.reg_cost;
    attr->rkey_packed_size = caps.rkey_packed_size;
    std::snprintf(attr->component_name, sizeof(attr->component_name), "%s",
                  caps.component_name);
    attr->local_cpus = caps.local_cpus;
}

/// A zv md's functions, with the project's signatures.
using md_close_fn = void (*)(uct_md_h md);
using md_query_fn = ucs_status_t (*)(uct_md_h md, md_caps *caps);
/// flags: UCT_MD_MEM_ACCESS_* and UCT_MD_MEM_FLAG_*.
using md_mem_reg_fn   = ucs_status_t (*)(uct_md_h md, void *address, size_t length,
                                         uint64_t flags, uct_mem_h *memh_p);
using md_mem_dereg_fn = ucs_status_t (*)(uct_md_h md,
                                         const uct_md_mem_dereg_params_t *params);
using md_mkey_pack_fn = ucs_status_t (*)(uct_md_h md, uct_mem_h memh, void *buffer);

namespace detail {

template <md_query_fn Query>
ucs_status_t md_query(uct_md_h md, md_attr_t *attr)
{
    md_caps caps;
    ucs_status_t status = Query(md, &caps);
    if (status == UCS_OK) {
        fill_md_attr(attr, caps);
    }
    return status;
}

#ifdef ZV_UCX_MD_MEM_REG_PARAMS
template <md_mem_reg_fn Reg>
ucs_status_t md_mem_reg(uct_md_h md, void *address, size_t length,
                        const uct_md_mem_reg_params_t *params, uct_mem_h *memh_p)
{
    const uint64_t flags = ((params != nullptr) &&
                            (params->field_mask & UCT_MD_MEM_REG_FIELD_FLAGS)) ?
                                   params->flags :
                                   0;
    return Reg(md, address, length, flags, memh_p);
}
#else
template <md_mem_reg_fn Reg>
ucs_status_t md_mem_reg(uct_md_h md, void *address, size_t length, unsigned flags,
                        uct_mem_h *memh_p)
{
    return Reg(md, address, length, flags, memh_p);
}
#endif

#ifdef ZV_UCX_MKEY_PACK_ADDRESS
template <md_mkey_pack_fn Pack>
ucs_status_t md_mkey_pack(uct_md_h md, uct_mem_h memh, void *, size_t,
                          const uct_md_mkey_pack_params_t *, void *buffer)
{
    return Pack(md, memh, buffer);
}
#else
template <md_mkey_pack_fn Pack>
ucs_status_t md_mkey_pack(uct_md_h md, uct_mem_h memh, const uct_md_mkey_pack_params_t *,
                          void *buffer)
{
    return Pack(md, memh, buffer);
}
#endif

#ifdef HAVE_UCT_MD_OPS_T_IS_SOCKADDR_ACCESSIBLE
inline int md_no_sockaddr(uct_md_h, const ucs_sock_addr_t *, uct_sockaddr_accessibility_t)
{
    return 0;
}
#endif

} // namespace detail

/// UCX's md ops for a registering md (no allocation, no memory type
/// detection, no sockaddr, no attach of exported keys), set member by
/// member: their order and number differ between UCX versions.
template <md_close_fn Close, md_query_fn Query, md_mem_reg_fn Reg, md_mem_dereg_fn Dereg,
          md_mkey_pack_fn Pack>
constexpr uct_md_ops_t make_md_ops()
{
    uct_md_ops_t ops{};
    ops.close     = Close;
    ops.query     = detail::md_query<Query>;
    ops.mem_reg   = detail::md_mem_reg<Reg>;
    ops.mem_dereg = Dereg;
    ops.mkey_pack = detail::md_mkey_pack<Pack>;
#ifdef HAVE_UCT_MD_OPS_T_IS_SOCKADDR_ACCESSIBLE
    ops.is_sockaddr_accessible = detail::md_no_sockaddr;
#endif
#if defined(ZV_UCX_MEM_ELEM_PACK_RELEASE)
    // (UCX after 1.22: with a release handle for mem_elem_release; zv
    // packs no device memory elements, so there is none to release)
    ops.mem_elem_pack = [](uct_md_h, uct_mem_h, uct_rkey_t, uct_device_mem_elem_t *, void **) {
        return UCS_ERR_UNSUPPORTED;
    };
#elif defined(HAVE_UCT_MD_OPS_T_MEM_ELEM_PACK)
    ops.mem_elem_pack = [](uct_md_h, uct_mem_h, uct_rkey_t, uct_device_mem_elem_t *) {
        return UCS_ERR_UNSUPPORTED;
    };
#endif
    return ops;
}

/// Name a system device for UCX's topology (as UCX's ib md does, at the
/// priority of a device that has a name of its own).
inline ucs_status_t set_sys_device_name(ucs_sys_device_t dev, const char *name)
{
#ifdef ZV_UCX_TOPO_SET_NAME_PRIORITY
    return ucs_topo_sys_device_set_name(dev, name, 10);
#else
    return ucs_topo_sys_device_set_name(dev, name);
#endif
}

// ------------------------------------------------------------ component

namespace detail {

#ifdef HAVE_UCT_COMPONENT_T_RKEY_COMPARE
/// Two unpacked zv rkeys are equal when their values are (as UCX's
/// uct_base_rkey_compare).
inline ucs_status_t rkey_compare(uct_component_t *, uct_rkey_t rkey1, uct_rkey_t rkey2,
                                 const uct_rkey_compare_params_t *params, int *result)
{
    if ((params == nullptr) || (params->field_mask != 0) || (result == nullptr)) {
        return UCS_ERR_INVALID_PARAM;
    }
    *result = (rkey1 > rkey2) ? 1 : (rkey1 < rkey2) ? -1 : 0;
    return UCS_OK;
}
#endif

} // namespace detail

/// A component's rkey_unpack, with the project's signature.
using rkey_unpack_fn = ucs_status_t (*)(uct_component_t *component, const void *rkey_buffer,
                                        uct_rkey_t *rkey_p, void **handle_p);

/// UCX's rkey_unpack for Unpack (UCX 1.22 adds parameters zv needs not).
#ifdef ZV_UCX_RKEY_UNPACK_PARAMS
template <rkey_unpack_fn Unpack>
ucs_status_t rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                         const uct_rkey_unpack_params_t *, uct_rkey_t *rkey_p, void **handle_p)
{
    return Unpack(component, rkey_buffer, rkey_p, handle_p);
}
#else
template <rkey_unpack_fn Unpack>
ucs_status_t rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                         uct_rkey_t *rkey_p, void **handle_p)
{
    return Unpack(component, rkey_buffer, rkey_p, handle_p);
}
#endif

/// A uct_component_t is initialised in member order (its name is const):
/// put ZV_UCX_COMPONENT_RKEY_COMPARE after rkey_release. Where UCX has
/// rkey_compare (UCP calls it without a NULL check), it is the generic one.
#ifdef HAVE_UCT_COMPONENT_T_RKEY_COMPARE
#define ZV_UCX_COMPONENT_RKEY_COMPARE /* rkey_compare */ zv::ucx::detail::rkey_compare,
#else
#define ZV_UCX_COMPONENT_RKEY_COMPARE
#endif

// ---------------------------------------------------------------- iface

/// UCT_IFACE_FLAG_INTER_NODE where UCX has it (UCP without it takes the
/// lane for intra-node only), 0 before.
#ifdef HAVE_DECL_UCT_IFACE_FLAG_INTER_NODE
#if HAVE_DECL_UCT_IFACE_FLAG_INTER_NODE
constexpr uint64_t iface_flag_inter_node = UCT_IFACE_FLAG_INTER_NODE;
#else
constexpr uint64_t iface_flag_inter_node = 0;
#endif
#else
constexpr uint64_t iface_flag_inter_node = 0;
#endif

/// Why a peer is not reachable (is_reachable_fn): a buffer that may be
/// null, in which case nothing is written.
struct reach_reason {
    char  *buf = nullptr;
    size_t len = 0;

    void say(const char *fmt, ...) const __attribute__((format(printf, 2, 3)))
    {
        if ((buf == nullptr) || (len == 0)) {
            return;
        }
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
};

/// Whether an interface reaches a peer's device (and interface) address;
/// same_device: only if it is this very device (UCX's device scope). On
/// "no", says why in 'why'.
using is_reachable_fn = int (*)(uct_iface_h iface, const uct_device_addr_t *dev_addr,
                                const uct_iface_addr_t *iface_addr, bool same_device,
                                const reach_reason &why);
/// Whether an endpoint is connected to the peer interface of these
/// addresses (both given).
using ep_is_connected_fn = int (*)(uct_ep_h ep, const uct_device_addr_t *dev_addr,
                                   const uct_iface_addr_t *iface_addr);

namespace detail {

#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_IS_REACHABLE_V2
template <is_reachable_fn Reachable>
int iface_is_reachable_v2(const uct_iface_h iface,
                          const uct_iface_is_reachable_params_t *params)
{
    reach_reason why;
    if (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING) {
        why.buf = params->info_string;
        why.len = (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_INFO_STRING_LENGTH) ?
                          params->info_string_length :
                          0;
    }
    const uct_device_addr_t *dev = (params->field_mask &
                                    UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR) ?
                                           params->device_addr :
                                           nullptr;
    const uct_iface_addr_t *ifa = (params->field_mask &
                                   UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR) ?
                                          params->iface_addr :
                                          nullptr;
    const bool same_device = (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_SCOPE) &&
                             (params->scope == UCT_IFACE_REACHABILITY_SCOPE_DEVICE);
    return Reachable(iface, dev, ifa, same_device, why);
}
#endif

#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_IS_CONNECTED
template <ep_is_connected_fn Connected>
int ep_is_connected(uct_ep_h ep, const uct_ep_is_connected_params_t *params)
{
    const uint64_t need = UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR |
                          UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR;
    if ((params->field_mask & need) != need) {
        // zv endpoints connect to interfaces: without both addresses
        // there is nothing to compare (UCX's ib transports say no too).
        return 0;
    }
    return Connected(ep, params->device_addr, params->iface_addr);
}
#endif

} // namespace detail

/// UCX's internal interface ops, set member by member. The v2 members
/// (UCX 1.16+) are called by UCP without a NULL check: zv's interfaces
/// connect to interfaces, so connect_to_ep_v2 is unsupported, as in UCX's
/// ud transports. zv invalidates no endpoint, and has no device endpoints
/// or scatter-gather puts (UCX 1.22).
template <uct_iface_estimate_perf_func_t EstimatePerf, uct_iface_vfs_refresh_func_t Vfs,
          uct_ep_query_func_t EpQuery, is_reachable_fn Reachable, ep_is_connected_fn Connected>
constexpr uct_iface_internal_ops_t make_internal_ops()
{
    uct_iface_internal_ops_t ops{};
    ops.iface_estimate_perf = EstimatePerf;
    ops.iface_vfs_refresh   = Vfs;
    ops.ep_query            = EpQuery;
#ifdef ZV_UCX_EP_INVALIDATE_PARAMS
    ops.ep_invalidate = [](uct_ep_h, const uct_ep_invalidate_params_t *) {
        return UCS_ERR_UNSUPPORTED;
    };
#else
    ops.ep_invalidate = [](uct_ep_h, unsigned) { return UCS_ERR_UNSUPPORTED; };
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_QUERY_V2
    ops.iface_query_v2 = uct_iface_base_query_v2;
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_GET_DEVICE_EP
    ops.ep_get_device_ep = [](uct_ep_h, uct_device_ep_h *) { return UCS_ERR_UNSUPPORTED; };
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_PUT_SGL_ZCOPY
    ops.ep_put_sgl_zcopy = [](uct_ep_h, void *const *, const size_t *, uct_mem_h const *,
                              const uint64_t *, uct_rkey_t const *, const size_t *,
                              const size_t *, size_t, uct_completion_t *) {
        return UCS_ERR_UNSUPPORTED;
    };
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_CONNECT_TO_EP_V2
    ops.ep_connect_to_ep_v2 = [](uct_ep_h, const uct_device_addr_t *, const uct_ep_addr_t *,
                                 const uct_ep_connect_to_ep_params_t *) {
        return UCS_ERR_UNSUPPORTED;
    };
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_IFACE_IS_REACHABLE_V2
    ops.iface_is_reachable_v2 = detail::iface_is_reachable_v2<Reachable>;
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_IS_CONNECTED
    ops.ep_is_connected = detail::ep_is_connected<Connected>;
#endif
#ifdef HAVE_UCT_IFACE_INTERNAL_OPS_T_EP_OUTSTANDING_PURGE
    // (as UCX's rc_verbs and ud_verbs: only rc_mlx5 hands back what it had
    // not delivered)
    ops.ep_outstanding_purge = [](uct_ep_h, const uct_ep_outstanding_purge_params_t *) {
        return UCS_ERR_UNSUPPORTED;
    };
#endif
    return ops;
}

// ------------------------------------------------------ progress queue

/// A one-shot callback on a worker's progress queue, scheduled from any
/// thread: add returns a token that cancel takes. 'key' (the owner, one
/// per owner) names the callbacks cancel removes.
inline int oneshot_add(ucs_callbackq_t *cbq, void *key, ucs_callback_t cb, void *arg)
{
#if HAVE_DECL_UCS_CALLBACKQ_ADD_ONESHOT
    ucs_callbackq_add_oneshot(cbq, key, cb, arg);
    return 0;
#else
    (void)key;
    return ucs_callbackq_add_safe(cbq, cb, arg, UCS_CALLBACKQ_FLAG_ONESHOT);
#endif
}

inline void oneshot_cancel(ucs_callbackq_t *cbq, void *key, int token)
{
#if HAVE_DECL_UCS_CALLBACKQ_ADD_ONESHOT
    (void)token;
    ucs_callbackq_remove_oneshot(
            cbq, key, [](const ucs_callbackq_elem_t *, void *) { return 1; }, nullptr);
#else
    (void)key;
    ucs_callbackq_remove_safe(cbq, token);
#endif
}

// ---------------------------------------------------------------- rcache

/// ucs_rcache's ops from the three every UCX has; merge (UCX 1.16+, called
/// without a NULL check when regions merge) does nothing.
inline ucs_rcache_ops_t rcache_ops(decltype(ucs_rcache_ops_t::mem_reg) reg,
                                   decltype(ucs_rcache_ops_t::mem_dereg) dereg,
                                   decltype(ucs_rcache_ops_t::dump_region) dump)
{
    ucs_rcache_ops_t ops{};
    ops.mem_reg     = reg;
    ops.mem_dereg   = dereg;
    ops.dump_region = dump;
#ifdef HAVE_UCS_RCACHE_OPS_T_MERGE
    ops.merge = [](void *, ucs_rcache_t *, void *, ucs_rcache_region_t *) {};
#endif
    return ops;
}

/// The registrations' alignment: a create parameter before UCX 1.16, an
/// argument of ucs_rcache_get since (rcache_get).
inline void rcache_set_alignment(ucs_rcache_params_t *params, size_t alignment)
{
#ifdef HAVE_UCS_RCACHE_PARAMS_T_ALIGNMENT
    params->alignment     = alignment;
    params->max_alignment = alignment;
#else
    (void)params;
    (void)alignment;
#endif
}

inline ucs_status_t rcache_get(ucs_rcache_t *rcache, void *address, size_t length,
                               size_t alignment, int prot, void *arg,
                               ucs_rcache_region_t **region_p)
{
#ifdef ZV_UCX_RCACHE_GET_ALIGNMENT
    return ucs_rcache_get(rcache, address, length, alignment, prot, arg, region_p);
#else
    (void)alignment;
    return ucs_rcache_get(rcache, address, length, prot, arg, region_p);
#endif
}

} // namespace zv::ucx

#endif
