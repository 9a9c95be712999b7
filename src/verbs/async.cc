// SPDX-License-Identifier: BSD-3-Clause
#include "verbs/async.h"

#include "util/nothrow.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstdio>

namespace zv::verbs {

async_event translate(const ibv_async_event &ev)
{
    async_event e;
    e.type = ev.event_type;
    switch (ev.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
        e.what   = async_event::kind::qp_fatal;
        e.qp_num = (ev.element.qp != nullptr) ? ev.element.qp->qp_num : 0;
        break;
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        e.qp_num = (ev.element.qp != nullptr) ? ev.element.qp->qp_num : 0;
        break;
    case IBV_EVENT_SRQ_LIMIT_REACHED:
        e.what = async_event::kind::srq_limit;
        e.srq  = ev.element.srq;
        break;
    case IBV_EVENT_SRQ_ERR:
        e.srq = ev.element.srq;
        break;
    case IBV_EVENT_PORT_ERR:
        e.what     = async_event::kind::port_down;
        e.port_num = static_cast<uint8_t>(ev.element.port_num);
        break;
    case IBV_EVENT_PORT_ACTIVE:
        e.what     = async_event::kind::port_up;
        e.port_num = static_cast<uint8_t>(ev.element.port_num);
        break;
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
        e.port_num = static_cast<uint8_t>(ev.element.port_num);
        break;
    case IBV_EVENT_DEVICE_FATAL:
        e.what = async_event::kind::device_fatal;
        break;
    default:
        break;
    }
    return e;
}

ucs_log_level_t log_level(const async_event &ev)
{
    switch (ev.type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_DEVICE_FATAL:
        return UCS_LOG_LEVEL_ERROR;
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_GID_CHANGE:
        return UCS_LOG_LEVEL_WARN;
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
        return UCS_LOG_LEVEL_DIAG;
    default:
        return UCS_LOG_LEVEL_DEBUG;
    }
}

void describe(const async_event &ev, char *buf, size_t len)
{
    const char *name = ibv_event_type_str(ev.type);
    switch (ev.what) {
    case async_event::kind::qp_fatal:
        snprintf(buf, len, "%s on qp 0x%x: its endpoint fails", name, ev.qp_num);
        break;
    case async_event::kind::srq_limit:
        snprintf(buf, len, "%s on srq %p: refilled", name, static_cast<const void *>(ev.srq));
        break;
    case async_event::kind::port_down:
        snprintf(buf, len, "%s: port %u is down", name, ev.port_num);
        break;
    case async_event::kind::port_up:
        snprintf(buf, len, "%s: port %u is active", name, ev.port_num);
        break;
    case async_event::kind::device_fatal:
        snprintf(buf, len, "%s: the device is lost, every endpoint on it fails", name);
        break;
    default:
        if (ev.qp_num != 0) {
            snprintf(buf, len, "%s on qp 0x%x", name, ev.qp_num);
        } else if (ev.port_num != 0) {
            snprintf(buf, len, "%s on port %u", name, ev.port_num);
        } else {
            snprintf(buf, len, "%s (%d)", name, static_cast<int>(ev.type));
        }
        break;
    }
}

async_dispatcher::listener *async_dispatcher::find(int id)
{
    for (listener &l : m_listeners) {
        if (l.id == id) {
            return &l;
        }
    }
    return nullptr;
}

int async_dispatcher::add(notify_fn notify, void *arg)
{
    std::lock_guard<std::mutex> g(m_lock);
    const int id = m_next_id;
    if (util::try_alloc([&] {
            m_listeners.push_back({id, notify, arg, no_token, {}});
            m_listeners.back().queue.reserve(batch_len);
        }) != UCS_OK) {
        if (!m_listeners.empty() && (m_listeners.back().id == id)) {
            m_listeners.pop_back(); // (its queue could not be reserved)
        }
        return -1;
    }
    ++m_next_id;
    return id;
}

int async_dispatcher::remove(int id)
{
    std::lock_guard<std::mutex> g(m_lock);
    auto it = std::find_if(m_listeners.begin(), m_listeners.end(),
                           [id](const listener &l) { return l.id == id; });
    if (it == m_listeners.end()) {
        return no_token;
    }
    int token = it->token;
    m_listeners.erase(it);
    return token;
}

void async_dispatcher::deliver(const async_event &ev)
{
    std::lock_guard<std::mutex> g(m_lock);
    if (ev.what == async_event::kind::device_fatal) {
        m_lost = true;
    }
    for (listener &l : m_listeners) {
        // Room for batch_len was made by add(); a longer queue (events
        // faster than the worker takes them) grows here, out of the way.
        if (__builtin_expect(l.queue.size() == l.queue.capacity(), 0) &&
            (util::try_alloc([&] { util::reserve_at_least(l.queue, l.queue.size() + 1); }) !=
             UCS_OK)) {
            if (m_dropped++ == 0) {
                ucs_error("out of memory: device events dropped (%s first)",
                          ibv_event_type_str(ev.type));
            }
            if (ev.what == async_event::kind::device_fatal) {
                l.queue.back() = ev; // (what every endpoint needs to hear)
            }
        } else {
            l.queue.push_back(ev);
        }
        if (l.token == no_token) {
            l.token = l.notify(l.arg);
        }
    }
}

size_t async_dispatcher::take(int id, async_event *out)
{
    std::lock_guard<std::mutex> g(m_lock);
    listener *l = find(id);
    if (l == nullptr) {
        return 0;
    }
    const size_t n = std::min(l->queue.size(), batch_len);
    std::copy(l->queue.begin(), l->queue.begin() + static_cast<ptrdiff_t>(n), out);
    l->queue.erase(l->queue.begin(), l->queue.begin() + static_cast<ptrdiff_t>(n));
    if (l->queue.empty()) {
        l->token = no_token;
    }
    return n;
}

uint64_t async_dispatcher::dropped() const
{
    std::lock_guard<std::mutex> g(m_lock);
    return m_dropped;
}

bool async_dispatcher::device_lost() const
{
    std::lock_guard<std::mutex> g(m_lock);
    return m_lost;
}

size_t async_dispatcher::listeners() const
{
    std::lock_guard<std::mutex> g(m_lock);
    return m_listeners.size();
}

} // namespace zv::verbs
