// A wait on an async_event_stream's state, for a composed operation of another
// object that waits for one of the device's events (a queue pair's
// IBV_EVENT_QP_LAST_WQE_REACHED, a shared receive queue's limit). The operation
// holds the stream's state and executor, taken when it was initiated, not a
// pointer to the stream object, which its owner may move or destroy meanwhile: a
// wait started after the stream was closed ends as on a closed stream.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/detail/async_event/async_event_stream_impl.hpp"
#include "rdma_asio/detail/core/io_object.hpp"

#include <memory>
#include <utility>

namespace rdma_asio::detail {

template <class Executor>
struct device_event_wait {
    std::shared_ptr<async_event_stream_impl> state; // null: the stream was not open
    Executor io_ex;                                 // the stream's

    /// The stream's async_next with `matcher` (a predicate of async_event, with
    /// a key() when it belongs to an object): void(error_code, async_event);
    /// bad_descriptor, posted, when the stream was not open.
    template <class Matcher, class Handler>
    void async_next(Matcher matcher, Handler&& handler) const {
        if (!state)
            return closed_initiation<void(error_code, async_event)>{}(
                std::forward<Handler>(handler), io_ex, "rdma_asio::async_event_stream::async_next");
        state->dispatcher().async_next(io_ex, std::move(matcher), std::forward<Handler>(handler));
    }
};

/// The wait of `stream` (any async_event_stream), as it is now.
template <class Stream>
auto device_event_wait_of(const Stream& stream) {
    return device_event_wait<typename Stream::executor_type>{io_object_access::state(stream),
                                                             stream.get_executor()};
}

} // namespace rdma_asio::detail
