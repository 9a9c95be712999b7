// SPDX-License-Identifier: BSD-3-Clause
// The senders and sinks the behaviour fixtures share.
#include "tl_fixture.h"

#include <algorithm>
#include <chrono>

namespace zv::test {

ucs_status_t ordered_sink::handler(void *arg, void *data, size_t length, unsigned)
{
    auto *self = static_cast<ordered_sink *>(arg);
    uint32_t index;
    if (length < sizeof(index)) {
        self->note("short message");
        return UCS_OK;
    }
    std::memcpy(&index, data, sizeof(index));
    if (index != self->next) {
        self->note("message " + std::to_string(index) + " arrived, expected " +
                   std::to_string(self->next));
    } else if (!check(static_cast<char *>(data) + sizeof(index), length - sizeof(index),
                      index)) {
        self->note("message " + std::to_string(index) + " has wrong data");
    }
    self->next = index + 1;
    return UCS_OK;
}

void ordered_sink::note(const std::string &what)
{
    if (bad++ == 0) {
        first_error = what;
    }
}

size_t pack_msg(void *dest, void *arg)
{
    auto *m = static_cast<msg_pack *>(arg);
    std::memcpy(dest, &m->index, sizeof(m->index));
    fill(static_cast<char *>(dest) + sizeof(m->index), m->length, m->index);
    return sizeof(m->index) + m->length;
}

bool refused(ucs_status_t status, uint64_t i, const std::vector<uct_side *> &sides)
{
    if (status != UCS_ERR_NO_RESOURCE) {
        ADD_FAILURE() << "send " << i << ": " << ucs_status_string(status);
        return false;
    }
    for (uct_side *s : sides) {
        uct_worker_progress(s->worker);
    }
    return true;
}

bool send_ordered(uct_ep_h ep, unsigned count, size_t max_payload,
                  const std::vector<uct_side *> &sides, double timeout)
{
    auto start = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < count;) {
        size_t len = (i * 37) % (max_payload - sizeof(uint32_t) + 1);
        ucs_status_t status;
        if ((i % 3 == 0) && (len <= 48)) {
            std::vector<char> buf(sizeof(uint32_t) + len);
            msg_pack m{i, len};
            pack_msg(buf.data(), &m);
            uint64_t hdr;
            std::memcpy(&hdr, buf.data(), std::min<size_t>(8, buf.size()));
            // am_short's 8-byte header carries the first 8 bytes.
            status = (buf.size() >= 8) ?
                     uct_ep_am_short(ep, am_id, hdr, buf.data() + 8,
                                     static_cast<unsigned>(buf.size() - 8)) :
                     UCS_ERR_UNSUPPORTED;
            if (status == UCS_ERR_UNSUPPORTED) {
                msg_pack m2{i, len};
                ssize_t r = uct_ep_am_bcopy(ep, am_id, pack_msg, &m2, 0);
                status    = (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
            }
        } else {
            msg_pack m{i, len};
            ssize_t r = uct_ep_am_bcopy(ep, am_id, pack_msg, &m, 0);
            status    = (r >= 0) ? UCS_OK : static_cast<ucs_status_t>(r);
        }
        if (status == UCS_OK) {
            ++i;
            continue;
        }
        if (!refused(status, i, sides)) {
            return false;
        }
        if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(timeout)) {
            ADD_FAILURE() << "sender stuck at message " << i;
            return false;
        }
    }
    return true;
}

bool deliver(uct_ep_h ep, unsigned n, am_values &to, std::vector<uct_side *> sides)
{
    const size_t want = to.got.size() + n;
    for (unsigned i = 0; i < n;) {
        ucs_status_t st = uct_ep_am_short(ep, am_id, i, nullptr, 0);
        if (st == UCS_OK) {
            ++i;
        } else if (st == UCS_ERR_NO_RESOURCE) {
            for (uct_side *s : sides) {
                uct_worker_progress(s->worker);
            }
        } else {
            ADD_FAILURE() << "send " << i << ": " << ucs_status_string(st);
            return false;
        }
    }
    auto start = std::chrono::steady_clock::now();
    while (to.got.size() < want) {
        for (uct_side *s : sides) {
            uct_worker_progress(s->worker);
        }
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
            return false;
        }
    }
    return to.got.size() == want;
}

bool send_values(uct_ep_h ep, uint64_t &next, uint64_t end, const std::vector<uct_side *> &sides,
                 double timeout)
{
    auto start = std::chrono::steady_clock::now();
    while (next < end) {
        ucs_status_t st = uct_ep_am_short(ep, am_id, next, nullptr, 0);
        if (st == UCS_OK) {
            ++next;
            continue;
        }
        if (!refused(st, next, sides)) {
            return false;
        }
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            timeout) {
            break;
        }
    }
    return true;
}

} // namespace zv::test
