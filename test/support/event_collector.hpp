// Bounded collection of async events for rxe tests: the installed helpers, and a
// log of event types for tests that run the io_context themselves.
#pragma once

#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/testing/collect_events.hpp"

#include "asio_alias.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace rdma_asio::test {

// The installed helpers (rdma_asio/testing/collect_events.hpp).
using rdma_asio::testing::collect_events;
using rdma_asio::testing::count_of;
using rdma_asio::testing::event_list;

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
        stream.async_next([&stream, types](rdma_asio::error_code ec, async_event ev) {
            if (ec)
                return;
            types->push_back(ev.type());
            read_next(stream, types);
        });
    }
    shared_types types_ = std::make_shared<std::vector<event_type>>();
};

} // namespace rdma_asio::test
