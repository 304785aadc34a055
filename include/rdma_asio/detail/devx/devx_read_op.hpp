// devx_event_channel::async_next's parts: which event a read may take, and the
// intermediate handler that copies the event into the caller's buffer.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/devx/devx_event_source.hpp"
#include "rdma_asio/devx_event_info.hpp"

#include <cstddef>
#include <system_error>
#include <utility>

namespace rdma_asio::detail {

/// Takes any event, but refuses (asio::error::message_size) one whose data does not
/// fit: that event stays first in line.
struct devx_read_matcher {
    std::size_t capacity = 0;
    bool operator()(const devx_event&) const noexcept { return true; }
    error_code refuse(const devx_event& ev, devx_event& out) const;
};

/// Turns a delivered event into the caller's view: copies the data into `buffer`,
/// maps a lost-events marker to errc::events_lost.
devx_event_info finish_read(error_code& ec, const devx_event& ev,
                            const asio::mutable_buffer& buffer) noexcept;

template <class Handler>
struct devx_read_handler {
    Handler handler;
    asio::mutable_buffer buffer;

    void operator()(error_code ec, devx_event ev) {
        const devx_event_info info = finish_read(ec, ev, buffer);
        std::move(handler)(ec, info);
    }
};

} // namespace rdma_asio::detail

// The read handler carries the caller's executor, allocator and cancellation slot,
// as Asio's own intermediate handlers do.
template <template <class, class> class Associator, class Handler, class Default>
struct rdma_asio::asio::associator<Associator, rdma_asio::detail::devx_read_handler<Handler>,
                                   Default> : Associator<Handler, Default> {
    static typename Associator<Handler, Default>::type
    get(const rdma_asio::detail::devx_read_handler<Handler>& h,
        const Default& d = Default()) noexcept {
        return Associator<Handler, Default>::get(h.handler, d);
    }
};
