// Bounded collection of async events for rxe tests.
#pragma once

#include "rdma_asio/async_event_stream.hpp"

#include <asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace rdma_asio::test {

using event_list = std::vector<async_event>;

/// Reads events from `stream` for `window`, or until `enough(events)` holds; then
/// cancels the read and leaves `ioc` ready to run again. Bounded by `window`.
inline event_list collect_events(
    asio::io_context& ioc, async_event_stream& stream, std::chrono::milliseconds window,
    const std::function<bool(const event_list&)>& enough = [](const event_list&) {
        return false;
    }) {
    event_list events;
    bool done = false;
    std::function<void()> read_next = [&] {
        stream.async_next([&](std::error_code ec, async_event ev) {
            if (ec) {
                done = true;
                return;
            }
            events.push_back(std::move(ev));
            if (enough(events))
                done = true;
            else
                read_next();
        });
    };
    ioc.restart();
    read_next();
    const auto deadline = std::chrono::steady_clock::now() + window;
    while (!done && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_until(deadline);
    stream.cancel();
    ioc.run_for(std::chrono::seconds(1)); // reap the cancelled read
    ioc.restart();
    return events;
}

/// Keeps a read pending on `stream` and records the type of every event it reads,
/// for tests that run the io_context themselves (the stream reads only while a
/// read is pending: queue_pair::watch_errors needs one). The reads end when one
/// fails (the stream cancelled or closed); the records outlive this object.
class event_type_log {
public:
    explicit event_type_log(async_event_stream& stream) { read_next(stream, types_); }
    const std::vector<event_type>& types() const { return *types_; }

private:
    using shared_types = std::shared_ptr<std::vector<event_type>>;
    static void read_next(async_event_stream& stream, shared_types types) {
        stream.async_next([&stream, types](std::error_code ec, async_event ev) {
            if (ec)
                return;
            types->push_back(ev.type());
            read_next(stream, types);
        });
    }
    shared_types types_ = std::make_shared<std::vector<event_type>>();
};

inline std::size_t count_of(const event_list& events, event_type type) {
    return static_cast<std::size_t>(std::count_if(
        events.begin(), events.end(), [&](const async_event& ev) { return ev.type() == type; }));
}

} // namespace rdma_asio::test
