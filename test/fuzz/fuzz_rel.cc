// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the software reliability state machine of ud_zv/uc_zv
// (src/rd/rel.h), driven by an input-chosen script of operations.
//
// Three parts run on every input, each against a small model:
//  1. a sender facing a hostile peer: arbitrary acks and NAKs (any psn),
//     pushes, timers, purges. Checked: outstanding() <= window and equal to
//     the model; each packet released exactly once, in psn order, and only
//     when an ack covers it; an ack outside the window changes nothing; one
//     go-back per NAKed head until the timer fires; 'failed' only after
//     peer_timeout without progress.
//  2. a receiver facing a hostile peer: arbitrary psns. Checked: verdicts
//     (deliver exactly the next psn, duplicate behind, gap ahead), the ack
//     psn, that a duplicate makes an ack due at once, that the first gap
//     after a delivery asks for a NAK, and that ack_every is kept.
//  3. a sender and a receiver over an input-driven wire that drops,
//     duplicates and reorders both ways. Checked: delivery exactly once and
//     in order; the sender releases only what the receiver delivered; then,
//     on a clean wire, everything is delivered and released in a bounded
//     number of round trips unless the peer was declared dead.
#include "rd/rel.h"

#include "fuzz_common.h"

#include <algorithm>
#include <deque>
#include <vector>

using namespace zv::rel;
using zv::fuzz::input;

namespace {

struct pkt : tx_pkt {
    unsigned serial   = 0; ///< push order on its connection
    bool     released = false;
};

/// Packets outlive the parts that use them (the sender links them).
struct pkt_store {
    std::deque<pkt> pkts;
    pkt *make(unsigned serial)
    {
        pkts.emplace_back();
        pkts.back().serial = serial;
        return &pkts.back();
    }
};

settings make_settings(input &in)
{
    settings s;
    s.window       = 1 + in.u16() % max_window;
    if (in.u8() & 1) {
        s.window = 1 + s.window % 8; // small windows fill up: exercise window_full
    }
    s.rto_init     = 1 + in.u8();
    s.rto_max      = s.rto_init * (1 + in.u8() % 64);
    s.peer_timeout = s.rto_init * (1 + in.u16());
    s.ack_every    = 1 + in.u8() % 64;
    s.ack_delay    = in.u8();
    return s;
}

// ------------------------------------------------------------ 1. sender
void hostile_sender(input &in, const settings &s, pkt_store &store)
{
    const psn_t first = static_cast<psn_t>(in.u16());
    sender      tx;
    tx.init(&s, first);
    std::deque<pkt *> model; // unacknowledged, in psn order
    psn_t    next        = first;
    bool     nak_valid   = false;
    psn_t    nak_head    = 0;
    uint64_t now         = 0;
    uint64_t progress_at = 0;
    unsigned serial      = 0;
    // The congestion window: the whole window at first, halved by a loss
    // (down to min_cwnd), one more per ack that releases packets.
    const unsigned floor = (s.window < min_cwnd) ? s.window : min_cwnd;
    unsigned       cwnd  = s.window;
    auto lost = [&]() { cwnd = (cwnd / 2 > floor) ? cwnd / 2 : floor; };
    auto grow = [&]() { cwnd += (cwnd < s.window) ? 1 : 0; };

    auto release = [&](tx_pkt *t) {
        pkt *p = static_cast<pkt *>(t);
        ZV_FUZZ_CHECK(!model.empty() && (p == model.front())); // in psn order
        ZV_FUZZ_CHECK(!p->released);                           // exactly once
        p->released = true;
        model.pop_front();
    };
    // What ack(a) must release: every psn from the head up to a, if a is
    // inside the window; nothing otherwise.
    auto expect_released = [&](psn_t a) -> unsigned {
        if (model.empty() || psn_before(a, model.front()->psn) || !psn_before(a, next)) {
            return 0;
        }
        return static_cast<psn_t>(a - model.front()->psn) + 1u;
    };
    auto pick_psn = [&]() -> psn_t {
        // Half raw (anything a hostile peer may send), half near the window.
        const unsigned b = in.u8();
        if (b & 1) {
            return static_cast<psn_t>(in.u16());
        }
        const psn_t base = model.empty() ? next : model.front()->psn;
        return static_cast<psn_t>(base + (b >> 1) % 24 - 4);
    };

    for (unsigned steps = 0; !in.empty() && steps < 4096; ++steps) {
        const unsigned op = in.u8() % 8;
        if (op == 7) {
            break; // on to the next part
        }
        switch (op) {
        case 0:
        case 1: { // push
            if (tx.window_full()) {
                ZV_FUZZ_CHECK(model.size() >= cwnd);
                break;
            }
            pkt *p = store.make(serial++);
            if (model.empty()) {
                progress_at = now;
            }
            ZV_FUZZ_CHECK(tx.push(p, now) == next);
            ZV_FUZZ_CHECK(p->psn == next);
            ++next;
            model.push_back(p);
            break;
        }
        case 2: { // cumulative ack
            const psn_t    a    = pick_psn();
            const unsigned want = expect_released(a);
            ZV_FUZZ_CHECK(tx.ack(a, now, release) == want);
            if (want > 0) {
                progress_at = now;
                grow();
            }
            break;
        }
        case 3: { // NAK
            const psn_t    a    = pick_psn();
            const unsigned want = expect_released(a);
            const size_t   before = model.size();
            const bool go_back = tx.nak(a, now, release);
            ZV_FUZZ_CHECK(before - model.size() == want);
            if (want > 0) {
                progress_at = now;
                grow();
            }
            const bool want_go_back =
                    !model.empty() && !(nak_valid && (nak_head == model.front()->psn));
            ZV_FUZZ_CHECK(go_back == want_go_back);
            if (go_back) {
                nak_valid = true;
                nak_head  = model.front()->psn;
                lost();
            }
            break;
        }
        case 4:
        case 5: { // time passes, the timer is checked
            now += (op == 4) ? in.u8() : uint64_t(in.u16()) * s.rto_init / 16;
            const uint64_t deadline = tx.deadline();
            const auto     r        = tx.on_timer(now);
            if (model.empty()) {
                ZV_FUZZ_CHECK(r == sender::timer_result::idle);
            } else if (now < deadline) {
                ZV_FUZZ_CHECK(r == sender::timer_result::wait);
            } else if (now - progress_at >= s.peer_timeout) {
                ZV_FUZZ_CHECK(r == sender::timer_result::failed);
            } else {
                ZV_FUZZ_CHECK(r == sender::timer_result::resend);
                ZV_FUZZ_CHECK(tx.deadline() > now);
                nak_valid = false;
                lost();
            }
            break;
        }
        case 6: // connection torn down
            tx.purge(release);
            ZV_FUZZ_CHECK(model.empty());
            break;
        }
        ZV_FUZZ_CHECK(tx.outstanding() == model.size());
        ZV_FUZZ_CHECK(tx.outstanding() <= s.window);
        ZV_FUZZ_CHECK(tx.cwnd() == cwnd);
        ZV_FUZZ_CHECK(tx.window_full() == (model.size() >= cwnd));
        ZV_FUZZ_CHECK(model.empty() || (tx.in_cwnd(model.back()) == (model.size() <= cwnd)));
        ZV_FUZZ_CHECK(tx.idle() == model.empty());
        ZV_FUZZ_CHECK(tx.head() == (model.empty() ? nullptr : model.front()));
        ZV_FUZZ_CHECK(tx.next_psn() == next);
    }
    tx.purge(release);
    ZV_FUZZ_CHECK(model.empty() && tx.idle() && (tx.outstanding() == 0));
}

// ------------------------------------------------------------ 2. receiver
void hostile_receiver(input &in, const settings &s)
{
    const psn_t first = static_cast<psn_t>(in.u16());
    receiver    rx;
    rx.init(&s, first);
    psn_t    expected = first;
    unsigned unacked  = 0;
    uint64_t now      = 0;
    bool     armed    = true;
    for (unsigned steps = 0; !in.empty() && steps < 4096; ++steps) {
        const unsigned op = in.u8() % 6;
        if (op == 5) {
            break;
        }
        switch (op) {
        case 0:
        case 1: { // a packet arrives
            const unsigned b   = in.u8();
            const psn_t    psn = (b & 1) ? static_cast<psn_t>(in.u16())
                                         : static_cast<psn_t>(expected + (b >> 1) % 16 - 8);
            const auto v = rx.on_data(psn, now);
            if (psn == expected) {
                ZV_FUZZ_CHECK(v == receiver::verdict::deliver);
                ++expected;
                ++unacked;
                ZV_FUZZ_CHECK(rx.ack_psn() == psn);
            } else if (psn_before(psn, expected)) {
                ZV_FUZZ_CHECK(v == receiver::verdict::duplicate);
                ZV_FUZZ_CHECK(rx.ack_due(now)); // the sender missed an ack
            } else {
                ZV_FUZZ_CHECK(v == receiver::verdict::gap);
                if (armed) { // the first gap since a delivery asks for a NAK
                    ZV_FUZZ_CHECK(rx.nak_due() && rx.owes());
                }
                armed = false;
            }
            if (v == receiver::verdict::deliver) {
                armed = !rx.nak_due(); // a pending NAK covers the next gap too
            }
            break;
        }
        case 2: // time passes
            now += in.u8();
            break;
        case 3: // an ack (or NAK) went out
            rx.acked();
            unacked = 0;
            ZV_FUZZ_CHECK(!rx.nak_due());
            break;
        case 4:
            break;
        }
        ZV_FUZZ_CHECK(rx.expected() == expected);
        ZV_FUZZ_CHECK(rx.ack_psn() == static_cast<psn_t>(expected - 1));
        if (unacked >= s.ack_every) {
            ZV_FUZZ_CHECK(rx.ack_due(now));
        }
        if (unacked > 0) {
            ZV_FUZZ_CHECK(rx.owes());
        }
        if (!rx.owes()) {
            ZV_FUZZ_CHECK(!rx.ack_due(now) && !rx.nak_due());
        }
    }
}

// ------------------------------------------------------------ 3. over a wire
struct data_msg {
    psn_t    psn;
    unsigned serial;
};
struct ack_msg {
    bool  nak;
    psn_t psn;
};

void over_wire(input &in, const settings &s, pkt_store &store)
{
    const psn_t first = static_cast<psn_t>(in.u16());
    sender      tx;
    receiver    rx;
    tx.init(&s, first);
    rx.init(&s, first);
    std::vector<data_msg> wire;  // sender -> receiver
    std::vector<ack_msg>  back;  // receiver -> sender
    unsigned pushed = 0, delivered = 0, released = 0;
    uint64_t now    = 0;
    bool     failed = false;

    auto release = [&](tx_pkt *t) {
        pkt *p = static_cast<pkt *>(t);
        ZV_FUZZ_CHECK(!p->released);
        ZV_FUZZ_CHECK(p->serial == released);  // in order
        ZV_FUZZ_CHECK(p->serial < delivered);  // only what arrived
        p->released = true;
        ++released;
    };
    auto send_window = [&] {
        for (tx_pkt *t = tx.head(); t != nullptr; t = t->next) {
            wire.push_back({t->psn, static_cast<pkt *>(t)->serial});
        }
    };
    auto receive = [&](const data_msg &m) {
        const auto v = rx.on_data(m.psn, now);
        if (m.serial == delivered) {
            ZV_FUZZ_CHECK(v == receiver::verdict::deliver);
            ++delivered;
        } else if (m.serial < delivered) {
            ZV_FUZZ_CHECK(v == receiver::verdict::duplicate);
        } else {
            ZV_FUZZ_CHECK(v == receiver::verdict::gap);
        }
    };
    auto answer = [&](bool force) {
        if (rx.nak_due()) {
            back.push_back({true, rx.ack_psn()});
            rx.acked();
        } else if (rx.ack_due(now) || (force && rx.owes())) {
            back.push_back({false, rx.ack_psn()});
            rx.acked();
        }
    };
    auto take_ack = [&](const ack_msg &m) {
        if (m.nak) {
            if (tx.nak(m.psn, now, release)) {
                send_window();
            }
        } else {
            tx.ack(m.psn, now, release);
        }
    };
    auto timer = [&] {
        switch (tx.on_timer(now)) {
        case sender::timer_result::resend:
            send_window();
            break;
        case sender::timer_result::failed:
            failed = true;
            break;
        default:
            break;
        }
    };

    for (unsigned steps = 0; !in.empty() && !failed && steps < 4096; ++steps) {
        switch (in.u8() % 6) {
        case 0: // the application sends
            if (!tx.window_full()) {
                pkt *p = store.make(pushed++);
                tx.push(p, now);
                wire.push_back({p->psn, p->serial});
            }
            break;
        case 1: // a data packet leaves the wire: delivered, duplicated, lost or delayed
        case 2: {
            if (wire.empty()) {
                break;
            }
            const size_t   i   = in.u8() % wire.size();
            const data_msg m   = wire[i];
            const unsigned act = in.u8() % 4;
            if (act != 3) {
                wire.erase(wire.begin() + i);
            }
            if (act == 0 || act == 3) {
                receive(m);
            } else if (act == 1) {
                receive(m);
                wire.push_back(m); // delivered again later
            } // act == 2: lost
            break;
        }
        case 3: // the receiver answers
            answer(in.u8() & 1);
            break;
        case 4: { // an ack leaves the wire: delivered, lost or duplicated
            if (back.empty()) {
                break;
            }
            const size_t  i   = in.u8() % back.size();
            const ack_msg m   = back[i];
            const unsigned act = in.u8() % 3;
            if (act != 2) {
                back.erase(back.begin() + i);
            }
            if (act != 1) {
                take_ack(m);
            }
            break;
        }
        case 5: // time passes
            now += in.u8() % 2 ? in.u8() : s.rto_init;
            timer();
            break;
        }
        ZV_FUZZ_CHECK(tx.outstanding() <= s.window);
        ZV_FUZZ_CHECK(tx.outstanding() == pushed - released);
        ZV_FUZZ_CHECK(released <= delivered && delivered <= pushed);
    }

    // The wire turns clean: everything arrives and is acknowledged within a
    // bounded number of round trips (go-back-N needs at most a few).
    for (unsigned round = 0; !failed && !tx.idle(); ++round) {
        ZV_FUZZ_CHECK(round < 64); // no livelock
        std::vector<data_msg> in_flight;
        in_flight.swap(wire);
        for (const data_msg &m : in_flight) {
            receive(m);
        }
        answer(true);
        std::vector<ack_msg> acks;
        acks.swap(back);
        for (const ack_msg &m : acks) {
            take_ack(m);
        }
        if (!tx.idle() && wire.empty()) {
            now = std::max(now, tx.deadline());
            timer();
        }
    }
    if (!failed) {
        ZV_FUZZ_CHECK(delivered == pushed && released == pushed);
    }
    tx.purge([&](tx_pkt *t) {
        pkt *p = static_cast<pkt *>(t);
        ZV_FUZZ_CHECK(!p->released);
        p->released = true;
    });
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    input          in(data, size);
    const settings s = make_settings(in);
    pkt_store      store;
    hostile_sender(in, s, store);
    hostile_receiver(in, s);
    over_wire(in, s, store);
    return 0;
}
