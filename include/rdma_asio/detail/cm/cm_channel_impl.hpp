// What a cm_event_channel and its cm_ids share.
#pragma once

#include "rdma_asio/detail/cm/cm_event_source.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/event_dispatcher.hpp"

#include <rdma/rdma_cma.h>

#include <memory>
#include <system_error>

namespace rdma_asio::detail {

/// The channel and its dispatcher (which also keeps the events operations took
/// until their handlers run); destroyed with the last of the channel object, its
/// ids and their pending operations.
struct cm_channel_impl {
    using native_handle_type = rdma_event_channel*;
    static constexpr native_handle_type no_handle = nullptr;

    /// Takes `channel` (from rdma_create_event_channel); open() registers its fd.
    cm_channel_impl(const asio::any_io_executor& ex, rdma_event_channel* channel);
    ~cm_channel_impl();
    cm_channel_impl(const cm_channel_impl&) = delete;
    cm_channel_impl& operator=(const cm_channel_impl&) = delete;

    native_handle_type native_handle() const noexcept { return channel; }
    /// The key of the channel object's own waits (async_next on the channel).
    const void* key() const noexcept { return this; }
    /// Every wait on the channel, its ids' too.
    void cancel() noexcept { dispatcher->cancel(); }
    /// The channel object lets go: its own waits end; the ids keep the channel.
    void close() noexcept { dispatcher->cancel(key()); }

    rdma_event_channel* channel = nullptr;
    std::shared_ptr<event_dispatcher<cm_event_source>> dispatcher;
};

/// rdma_create_event_channel, its fd registered with the executor's reactor;
/// null with `ec` set when either fails.
std::shared_ptr<cm_channel_impl> open_cm_event_channel(const asio::any_io_executor& ex,
                                                       error_code& ec);

} // namespace rdma_asio::detail
