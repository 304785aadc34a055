// Collecting a device's asynchronous events in a test, with a bound: what a port
// going down, a GID added or a QP error produced within a time window.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/event_type.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <system_error>
#include <vector>

namespace rdma_asio::testing {

using event_list = std::vector<async_event>;

/// Reads events from `stream` (an async_event_stream on `ioc`) for `window`, or
/// until `enough(events)` holds, whichever comes first; then cancels the read,
/// lets the cancellation complete and leaves `ioc` ready to run again. Events are
/// values that ack themselves: keep them as long as you look at them.
template <class Stream, class Enough>
event_list collect_events(asio::io_context& ioc, Stream& stream, std::chrono::milliseconds window,
                          Enough enough) {
    struct state {
        event_list events;
        bool done = false;
        bool read_pending = false;
    };
    // Shared with the pending read's handler, which runs after the cancel.
    auto s = std::make_shared<state>();
    struct reader {
        Stream& stream;
        std::shared_ptr<state> s;
        Enough enough;
        void start() {
            s->read_pending = true;
            stream.async_next([r = *this](error_code ec, async_event ev) mutable {
                r.s->read_pending = false;
                if (ec) {
                    r.s->done = true;
                    return;
                }
                // Kept even when it arrives after the window (while the cancel is
                // reaped): an event read is never dropped.
                r.s->events.push_back(std::move(ev));
                if (r.s->done || r.enough(r.s->events))
                    r.s->done = true;
                else
                    r.start();
            });
        }
    };
    ioc.restart();
    reader{stream, s, enough}.start();
    const auto deadline = std::chrono::steady_clock::now() + window;
    while (!s->done && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_until(deadline);
    s->done = true;
    if (s->read_pending) {
        stream.cancel();
        // The cancelled read completes at once (operation_aborted); bounded anyway.
        const auto reap = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        ioc.restart();
        while (s->read_pending && std::chrono::steady_clock::now() < reap)
            ioc.run_one_until(reap);
    }
    ioc.restart();
    return std::move(s->events);
}

/// collect_events for the whole `window`.
template <class Stream>
event_list collect_events(asio::io_context& ioc, Stream& stream, std::chrono::milliseconds window) {
    return collect_events(ioc, stream, window, [](const event_list&) { return false; });
}

/// How many of `events` are of `type`.
inline std::size_t count_of(const event_list& events, event_type type) {
    return static_cast<std::size_t>(std::count_if(
        events.begin(), events.end(), [&](const async_event& ev) { return ev.type() == type; }));
}

} // namespace rdma_asio::testing
