// async_read_event's parts: which event a read may take, and the intermediate
// handler that copies the event into the caller's buffer.
#pragma once

#include "rdma_asio/detail/devx_event_source.hpp"

#include <asio/associator.hpp>
#include <asio/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>
#include <utility>

namespace rdma_asio {

/// What devx_event_channel::async_read_event completes with.
struct devx_event_info {
    /// The cookie given to subscribe().
    std::uint64_t cookie = 0;
    /// Bytes of device data written to the buffer (0 in omit-data mode); with
    /// asio::error::message_size, the size the buffer needs.
    std::size_t size = 0;
};

namespace detail {

/// Takes any event, but refuses (asio::error::message_size) one whose data does not
/// fit: that event stays first in line.
struct devx_read_matcher {
    std::size_t capacity = 0;
    bool operator()(const devx_event&) const noexcept { return true; }
    std::error_code refuse(const devx_event& ev, devx_event& out) const;
};

/// Turns a delivered event into the caller's view: copies the data into `buffer`,
/// maps a lost-events marker to errc::events_lost.
devx_event_info finish_read(std::error_code& ec, const devx_event& ev,
                            const asio::mutable_buffer& buffer) noexcept;

template <class Handler>
struct devx_read_handler {
    Handler handler;
    asio::mutable_buffer buffer;

    void operator()(std::error_code ec, devx_event ev) {
        const devx_event_info info = finish_read(ec, ev, buffer);
        std::move(handler)(ec, info);
    }
};

template <class Dispatcher>
struct devx_read_initiation {
    std::shared_ptr<Dispatcher> dispatcher;
    auto get_executor() const noexcept { return dispatcher->get_executor(); }

    template <class Handler>
    void operator()(Handler&& handler, asio::mutable_buffer buffer) const {
        dispatcher->async_next(
            devx_read_matcher{buffer.size()},
            devx_read_handler<std::decay_t<Handler>>{std::forward<Handler>(handler), buffer});
    }
};

} // namespace detail
} // namespace rdma_asio

// The read handler carries the caller's executor, allocator and cancellation slot,
// as Asio's own intermediate handlers do.
template <template <class, class> class Associator, class Handler, class Default>
struct asio::associator<Associator, rdma_asio::detail::devx_read_handler<Handler>, Default>
    : Associator<Handler, Default> {
    static typename Associator<Handler, Default>::type
    get(const rdma_asio::detail::devx_read_handler<Handler>& h,
        const Default& d = Default()) noexcept {
        return Associator<Handler, Default>::get(h.handler, d);
    }
};
