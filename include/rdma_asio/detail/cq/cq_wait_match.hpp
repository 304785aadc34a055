// Which events of a shared completion channel a CQ's wait takes.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/cq/completion_channel_source.hpp"
#include "rdma_asio/detail/cq/cq_shared_state.hpp"

#include <infiniband/verbs.h>

#include <span>

namespace rdma_asio::detail {

/// The wait of async_wait: the events of one CQ.
struct cq_match {
    const ibv_cq* cq;
    bool operator()(const cq_event& e) const noexcept { return e.cq == cq; }
    const void* key() const noexcept { return cq; }
    static constexpr bool only_own_events = true;
};

/// The wait of async_poll: the events of one CQ, and on each wake-up of the
/// channel a poll of that CQ before any event is read, so that completions reach
/// the handler without the read on their path.
struct cq_poll_match {
    cq_shared_state* impl;
    std::span<ibv_wc> wcs;

    bool operator()(const cq_event& e) const noexcept { return e.cq == impl->native_handle(); }
    const void* key() const noexcept { return impl->native_handle(); }
    static constexpr bool only_own_events = true;
    // The CQ's event, read while the wait is pending: the wait carries on at once,
    // under the dispatcher's lock, as after any event (poll; if empty, arm and
    // poll again). It completes with what it found, or stays pending when an
    // earlier poll took the completion the event was raised for: no completion,
    // post and new wait in between.
    bool consume(const cq_event&, cq_event& out, error_code& ec) const noexcept {
        const auto s = impl->advance(wcs, impl->machine().event({}, impl->closed(), 0));
        if (s.what == cq_poll_machine::action::wait)
            return false;
        // Only a completion follows an event (spinning comes before arming).
        out = cq_event{impl->native_handle(), s.n};
        ec = s.ec;
        return true;
    }
    // A wait cancelled after on_wake polled: its completions go back to the CQ's
    // object; a real event goes back to the channel's queue.
    bool give_back(cq_event& e) const {
        if (e.polled == 0)
            return false;
        impl->give_back(wcs.first(e.polled));
        return true;
    }
    // Runs under the dispatcher's lock while the wait is pending.
    bool on_wake(cq_event& out) const noexcept {
        error_code ec;
        const int n = impl->poll(wcs, ec);
        if (!impl->machine().on_wake(n))
            return false;
        out = cq_event{impl->native_handle(), static_cast<std::size_t>(n)};
        return true;
    }
};

} // namespace rdma_asio::detail
