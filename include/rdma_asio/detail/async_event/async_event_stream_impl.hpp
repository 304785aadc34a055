// The state of an open async_event_stream, shared with its teardown guards and
// its references (async_event_stream_ref) (non-template, see
// src/async_event/async_event_stream.cpp).
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/detail/async_event/async_event_source.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/dispatcher_state.hpp"
#include "rdma_asio/port_state.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <system_error>

namespace rdma_asio::detail {

class async_event_stream_impl : public dispatcher_state<async_event_source, int, -1> {
public:
    /// Registers `ctx`'s async_fd with the executor's reactor; `device` shares
    /// ownership of the device (empty for a context owned elsewhere). Null with
    /// `ec` set when the fd cannot be registered.
    static std::shared_ptr<async_event_stream_impl>
    open(const asio::any_io_executor& ex, ibv_context* ctx, async_event_source::options opts,
         std::shared_ptr<ibv_context> device, error_code& ec);

    async_event_stream_impl(const asio::any_io_executor& ex, ibv_context* ctx,
                            async_event_source::options opts, std::shared_ptr<ibv_context> device);

    /// Unregisters the async_fd (restoring its flags) and acks what nobody took.
    void close() noexcept;

    std::optional<port_state> port(int port_num) const;
    bool removed() const;
    bool watching_removal() const;
    std::size_t queued() const;

private:
    std::shared_ptr<ibv_context> device_; // when opened on a context
};

} // namespace rdma_asio::detail
