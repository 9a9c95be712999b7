// SPDX-License-Identifier: BSD-3-Clause
// verbs::async: what a device's asynchronous events mean to the
// interfaces, and their fan-out from the reading thread (UCX's async
// thread) to each interface's own. Synthetic events: no device needed.
#include "verbs/async.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

namespace zv::test {
namespace {

using kind = verbs::async_event::kind;

ibv_async_event port_event(ibv_event_type type, int port)
{
    ibv_async_event ev;
    std::memset(&ev, 0, sizeof(ev));
    ev.event_type       = type;
    ev.element.port_num = port;
    return ev;
}

TEST(async, events_are_translated_to_what_an_interface_does)
{
    ibv_qp qp;
    std::memset(&qp, 0, sizeof(qp));
    qp.qp_num = 0x1234;
    ibv_async_event ev;
    std::memset(&ev, 0, sizeof(ev));
    ev.element.qp = &qp;
    for (ibv_event_type t : {IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR}) {
        ev.event_type        = t;
        verbs::async_event e = verbs::translate(ev);
        EXPECT_EQ(kind::qp_fatal, e.what) << ibv_event_type_str(t);
        EXPECT_EQ(0x1234u, e.qp_num);
    }
    ev.event_type = IBV_EVENT_QP_LAST_WQE_REACHED; // a flushed QP: no failure of its own
    EXPECT_EQ(kind::other, verbs::translate(ev).what);

    ibv_srq srq;
    ibv_async_event sev;
    std::memset(&sev, 0, sizeof(sev));
    sev.event_type  = IBV_EVENT_SRQ_LIMIT_REACHED;
    sev.element.srq = &srq;
    EXPECT_EQ(kind::srq_limit, verbs::translate(sev).what);
    EXPECT_EQ(&srq, verbs::translate(sev).srq);

    verbs::async_event down = verbs::translate(port_event(IBV_EVENT_PORT_ERR, 2));
    EXPECT_EQ(kind::port_down, down.what);
    EXPECT_EQ(2, down.port_num);
    EXPECT_EQ(kind::port_up, verbs::translate(port_event(IBV_EVENT_PORT_ACTIVE, 1)).what);
    EXPECT_EQ(kind::device_fatal, verbs::translate(port_event(IBV_EVENT_DEVICE_FATAL, 0)).what);
    EXPECT_EQ(kind::other, verbs::translate(port_event(IBV_EVENT_LID_CHANGE, 1)).what);
}

TEST(async, log_levels_follow_ucx_and_descriptions_name_the_object)
{
    EXPECT_EQ(UCS_LOG_LEVEL_DIAG, verbs::log_level(verbs::translate(port_event(IBV_EVENT_PORT_ERR, 1))));
    EXPECT_EQ(UCS_LOG_LEVEL_ERROR,
              verbs::log_level(verbs::translate(port_event(IBV_EVENT_DEVICE_FATAL, 0))));
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              verbs::log_level(verbs::translate(port_event(IBV_EVENT_PKEY_CHANGE, 1))));
    char buf[160];
    verbs::describe(verbs::translate(port_event(IBV_EVENT_PORT_ERR, 1)), buf, sizeof(buf));
    EXPECT_NE(nullptr, std::strstr(buf, "port 1 is down")) << buf;
    verbs::describe(verbs::translate(port_event(IBV_EVENT_DEVICE_FATAL, 0)), buf, sizeof(buf));
    EXPECT_NE(nullptr, std::strstr(buf, "device is lost")) << buf;
}

struct counter {
    int notified = 0;
    int token    = 100;
};

int notify(void *arg)
{
    auto *c = static_cast<counter *>(arg);
    ++c->notified;
    return c->token++;
}

// Every event the listener has queued (take() hands them over batch_len at
// a time).
std::vector<verbs::async_event> take_all(verbs::async_dispatcher &d, int id)
{
    std::vector<verbs::async_event> out;
    verbs::async_event batch[verbs::async_dispatcher::batch_len];
    size_t n;
    do {
        n = d.take(id, batch);
        out.insert(out.end(), batch, batch + n);
    } while (n == verbs::async_dispatcher::batch_len);
    return out;
}

TEST(async, each_listener_gets_every_event_and_one_notification_until_it_takes_them)
{
    verbs::async_dispatcher d;
    counter a, b;
    int ia = d.add(notify, &a), ib = d.add(notify, &b);
    d.deliver(verbs::translate(port_event(IBV_EVENT_PORT_ERR, 1)));
    d.deliver(verbs::translate(port_event(IBV_EVENT_PORT_ACTIVE, 1)));
    EXPECT_EQ(1, a.notified); // the second event rides on the first notification
    EXPECT_EQ(1, b.notified);
    auto ea = take_all(d, ia);
    ASSERT_EQ(2u, ea.size());
    EXPECT_EQ(kind::port_down, ea[0].what); // in order
    EXPECT_EQ(kind::port_up, ea[1].what);
    EXPECT_TRUE(take_all(d, ia).empty());
    d.deliver(verbs::translate(port_event(IBV_EVENT_PORT_ERR, 1)));
    EXPECT_EQ(2, a.notified); // taken: notified again
    EXPECT_EQ(1, b.notified); // b has not taken its two yet
    EXPECT_EQ(3u, take_all(d, ib).size());
    EXPECT_EQ(2u, d.listeners());
}

TEST(async, removing_a_listener_returns_the_notification_to_cancel)
{
    verbs::async_dispatcher d;
    counter a;
    int ia = d.add(notify, &a);
    EXPECT_EQ(verbs::async_dispatcher::no_token, d.remove(d.add(notify, &a)));
    d.deliver(verbs::translate(port_event(IBV_EVENT_PORT_ERR, 1)));
    EXPECT_EQ(100, d.remove(ia)); // scheduled, never taken: the caller cancels it
    d.deliver(verbs::translate(port_event(IBV_EVENT_PORT_ACTIVE, 1)));
    EXPECT_EQ(1, a.notified);     // never called after remove()
    EXPECT_TRUE(take_all(d, ia).empty());
    EXPECT_EQ(0u, d.listeners());
}

// The device-fatal path of the device layer: every interface hears it and
// the device is marked lost (interfaces then refuse new endpoints).
TEST(async, device_fatal_reaches_every_listener_and_marks_the_device_lost)
{
    verbs::async_dispatcher d;
    counter a, b;
    int ia = d.add(notify, &a), ib = d.add(notify, &b);
    EXPECT_FALSE(d.device_lost());
    d.deliver(verbs::translate(port_event(IBV_EVENT_DEVICE_FATAL, 0)));
    EXPECT_TRUE(d.device_lost());
    for (int id : {ia, ib}) {
        auto ev = take_all(d, id);
        ASSERT_EQ(1u, ev.size());
        EXPECT_EQ(kind::device_fatal, ev[0].what);
    }
}

// deliver() from another thread (UCX's async thread) while the listener
// takes its events: nothing lost, nothing twice, and it was notified
// whenever it had events it had not taken.
TEST(async, delivery_from_another_thread_loses_nothing)
{
    verbs::async_dispatcher d;
    std::atomic<int> notified{0};
    struct arg_t { std::atomic<int> *n; } arg{&notified};
    int id = d.add([](void *p) { static_cast<arg_t *>(p)->n->fetch_add(1); return 1; }, &arg);
    constexpr int count = 20000;
    std::thread t([&] {
        for (int i = 0; i < count; ++i) {
            verbs::async_event e;
            e.what   = kind::qp_fatal;
            e.qp_num = static_cast<uint32_t>(i);
            d.deliver(e);
        }
    });
    uint32_t next = 0;
    while (next < count) {
        for (const verbs::async_event &e : take_all(d, id)) {
            ASSERT_EQ(next, e.qp_num);
            ++next;
        }
    }
    t.join();
    EXPECT_TRUE(take_all(d, id).empty());
    EXPECT_GE(notified.load(), 1);
    EXPECT_LE(notified.load(), count);
}

} // namespace
} // namespace zv::test
