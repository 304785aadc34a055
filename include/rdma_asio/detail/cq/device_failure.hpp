// Tells every completion channel of a device context that the device failed, when
// the failure shows elsewhere: a DEVICE_FATAL event or a failing async_fd is read
// by the context's async_event_stream, never by the channels, whose fds stay silent.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/event_dispatcher.hpp"
#include "rdma_asio/detail/cq/completion_channel_source.hpp"

#include <infiniband/verbs.h>

#include <memory>

namespace rdma_asio::detail {

using channel_dispatcher = event_dispatcher<completion_channel_source>;

/// Registers a channel's dispatcher for the failures of `ctx`. Nothing to undo:
/// the registry forgets dispatchers that are gone.
void watch_device_failure(ibv_context* ctx, std::weak_ptr<channel_dispatcher> dispatcher);

/// Fails every pending and later wait of the channels of `ctx` with `ec`. Called
/// by the async event source under its own lock: it takes only the registry's and
/// each channel's lock, never the other way round.
void announce_device_failure(ibv_context* ctx, const error_code& ec) noexcept;

} // namespace rdma_asio::detail
