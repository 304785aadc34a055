// What a cm_event_channel and its cm_ids share.
#pragma once

#include "rdma_asio/detail/cm_event_source.hpp"
#include "rdma_asio/detail/cm_held_events.hpp"
#include "rdma_asio/detail/event_dispatcher.hpp"

#include <asio/any_io_executor.hpp>

#include <rdma/rdma_cma.h>

#include <memory>

namespace rdma_asio::detail {

/// The channel, its dispatcher and the events its operations hold; destroyed
/// with the last of the channel object, its ids and their pending operations.
struct cm_channel_impl {
    explicit cm_channel_impl(const asio::any_io_executor& ex);
    ~cm_channel_impl();
    cm_channel_impl(const cm_channel_impl&) = delete;
    cm_channel_impl& operator=(const cm_channel_impl&) = delete;
    rdma_event_channel* channel = nullptr;
    std::shared_ptr<event_dispatcher<cm_event_source>> dispatcher;
    cm_held_events held;
};

} // namespace rdma_asio::detail
