// What a wait accepts, and what it may do with an event: the Matcher of an
// event_dispatcher wait. The dispatcher asks these functions only; every optional
// member of a Matcher has its default here, so the dispatcher never tests for one.
//
// A Matcher is callable as `bool(const value_type&)`: whether the wait accepts
// the event. It may also offer:
//
// `const void* key() const`: the object the wait belongs to (a CQ, a QP, an
// rdma_cm id); cancel(object) and retire(object) end the waits with that key.
//
// `static constexpr bool only_own_events = true`: it accepts no event whose
// Source::object_of is not its key(), so the dispatcher may index it by object
// (waits of many CQs on one shared channel).
//
// `bool on_wake(value_type& out)`: on a wake-up, before anything is read, the
// dispatcher asks the only pending waiter whether it can complete without an
// event (a CQ wait polls its CQ). That takes the read off the path from the
// wake-up to the handler; the event itself is read later, by the next wait.
// With several waiters the events are read first: they name the one object to
// look at, where asking every waiter would cost a poll of every CQ.
//
// `error_code refuse(const value_type& ev, value_type& out)`: asked about an
// event it accepts, a non-empty error completes its waiter with that error and
// `out`, and the event stays, in its place, for the next waiter (a DEVX read
// whose buffer is too small for the event).
//
// `bool consume(const value_type& ev, value_type& out, error_code& ec)`: the
// waiter uses the event up itself, under the lock, instead of completing with it.
// True completes the waiter with `ec` and `out`; false keeps it waiting. Either
// way the event is gone. (A CQ's async_poll polls its CQ on its event: an event
// whose completions an earlier poll took leaves the wait pending, with no
// completion, post and new wait in between.)
//
// `bool give_back(value_type& ev)`: a wait cancelled after it took `ev` restores
// that result itself (a CQ wait's completions, already polled into the caller's
// span); false leaves it to the dispatcher, which hands it to the next waiter or
// puts it back at the front of the queue.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <utility>

namespace rdma_asio::detail {

/// Matcher that accepts every event.
struct match_any {
    template <class Event>
    constexpr bool operator()(const Event&) const noexcept {
        return true;
    }
};

/// What a waiter does with an event offered to it.
enum class acceptance {
    declined, // not an event it waits for; the event is untouched
    taken,    // `result` is the event
    refused,  // completes with `ec`; the event stays for the next waiter
    consumed, // used the event up and completes with `ec` and `result`
    absorbed, // used the event up and keeps waiting
};

namespace wait_matcher {

/// The object the wait belongs to, or nullptr.
template <class Matcher>
const void* key(const Matcher& m) noexcept {
    if constexpr (requires { m.key(); })
        return m.key();
    else
        return nullptr;
}

/// Whether the wait accepts only events of its key() (see only_own_events).
template <class Matcher>
constexpr bool only_own_events() noexcept {
    if constexpr (requires { Matcher::only_own_events; })
        return Matcher::only_own_events;
    else
        return false;
}

/// The matcher's test and what follows it, one call per event and wait asked:
/// declines `ev`, or takes it (moving it into `result`), refuses it or uses it up.
template <class Matcher, class Value>
acceptance offer(Matcher& m, Value& ev, Value& result, error_code& ec) {
    if (!m(std::as_const(ev)))
        return acceptance::declined;
    if constexpr (requires { m.refuse(ev, result); }) {
        ec = m.refuse(ev, result);
        if (ec)
            return acceptance::refused;
    }
    if constexpr (requires { m.consume(ev, result, ec); }) {
        return m.consume(ev, result, ec) ? acceptance::consumed : acceptance::absorbed;
    } else {
        result = std::move(ev);
        return acceptance::taken;
    }
}

/// On a wake-up, before reading: true when the wait completes with `result`
/// without an event.
template <class Matcher, class Value>
bool on_wake(Matcher& m, Value& result) {
    if constexpr (requires { m.on_wake(result); })
        return m.on_wake(result);
    else
        return false;
}

/// A cancelled wait's result: true when the matcher restored it itself.
template <class Matcher, class Value>
bool give_back(Matcher& m, Value& ev) {
    if constexpr (requires { m.give_back(ev); })
        return m.give_back(ev);
    else
        return false;
}

} // namespace wait_matcher
} // namespace rdma_asio::detail
