// SPDX-License-Identifier: BSD-3-Clause
// The intercept: UCM's UCM_EVENT_VM_UNMAPPED, fed by UCM's own hooks (no hooks of ours).
//
// UCM 1.13.1 dispatches VM_UNMAPPED, before the call, for munmap, mremap (old
// range), mmap(MAP_FIXED), madvise(DONTNEED/FREE/REMOVE), shmat(SHM_REMAP),
// shmdt and brk/sbrk shrink (measured here). It runs in the unmapping thread
// under UCM's event read-lock: the callback only pushes into the lock-free
// ring. Anything that bypasses the hooks (a raw syscall, a statically linked
// library, a custom allocator calling the kernel directly) is invisible: the
// reason uffd is preferred.
#include "monitor/monitor.h"

#include "util/log.h"

#include <ucm/api/ucm.h>

#include <unistd.h>

namespace zv::monitor {

namespace {

class ucm_monitor final : public monitor {
public:
    ucm_monitor() : monitor(monitor_kind::ucm) {}
    ~ucm_monitor() override
    {
        if (m_installed) {
            ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, unmapped_cb, this);
        }
        if (m_ring != nullptr) {
            detail::untrack_ring(m_ring);
            event_ring::destroy(m_ring);
        }
    }

    ucs_status_t init(const settings &cfg, bool quiet)
    {
        ucs_status_t status = event_ring::create(cfg.event_queue, false, &m_ring);
        if (status != UCS_OK) {
            return status;
        }
        status = ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 1000, unmapped_cb, this);
        if (status != UCS_OK) {
            if (quiet) {
                zv_log_debug("ucm monitor unavailable: ucm_set_event_handler: %s",
                             ucs_status_string(status));
            } else {
                zv_log_error("UCX_ZV_RCACHE_MONITOR=ucm: ucm_set_event_handler(VM_UNMAPPED) "
                             "failed: %s (UCX_MEM_EVENTS=no?)",
                             ucs_status_string(status));
            }
            return status;
        }
        m_installed = true;
        detail::track_ring(m_ring);
        return UCS_OK;
    }

    ucs_status_t watch(uintptr_t, uintptr_t) override { return UCS_OK; }
    bool         cacheable(uintptr_t, uintptr_t) override { return true; }

private:
    static void unmapped_cb(ucm_event_type_t, ucm_event_t *event, void *arg)
    {
        auto           *self  = static_cast<ucm_monitor *>(arg);
        const uintptr_t start = reinterpret_cast<uintptr_t>(event->vm_unmapped.address);
        const size_t    size  = event->vm_unmapped.size;
        // Size 0 means "unknown extent" (device memory frees): drop all.
        if (size == 0) {
            self->m_ring->push_all();
        } else {
            self->m_ring->push(start, start + size);
        }
    }

    bool m_installed = false;
};

} // namespace

namespace detail {

ucs_status_t create_ucm(const settings &cfg, bool quiet, monitor **out)
{
    return create_initialized<ucm_monitor>(cfg, quiet, out);
}

} // namespace detail

} // namespace zv::monitor
