// Tells the completion channels of a device context that the device failed, when
// the failure shows elsewhere: a DEVICE_FATAL event or a failing async_fd is read
// by the context's async_event_stream, never by the channels, whose fds stay silent.
//
// The channels are known per execution context (an Asio service holds the list),
// as Asio keeps its own per-context state in services: an async_event_stream tells
// the channels that run on its own execution context, and nothing outlives the
// context it was made for. Channels on another execution context still end their
// waits when the device's node goes (their own removal watch); a DEVICE_FATAL
// reaches them through an async_event_stream on their own context.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/event_dispatcher.hpp"
#include "rdma_asio/detail/cq/completion_channel_source.hpp"

#include <infiniband/verbs.h>

#include <memory>
#include <mutex>
#include <vector>

namespace rdma_asio::detail {

using channel_dispatcher = event_dispatcher<completion_channel_source>;

/// The completion channels of one execution context, by device.
class device_failures {
public:
    /// Registers a channel's dispatcher for the failures of `ctx`. Nothing to undo:
    /// the list forgets dispatchers that are gone.
    void watch(ibv_context* ctx, std::weak_ptr<channel_dispatcher> dispatcher);

    /// Fails every pending and later wait of the channels of `ctx` with `ec`. Called
    /// by the async event source under its own lock: it takes only this list's and
    /// each channel's lock, never the other way round.
    void announce(ibv_context* ctx, const error_code& ec) noexcept;

private:
    struct watched_channel {
        ibv_context* ctx;
        std::weak_ptr<channel_dispatcher> dispatcher;
    };

    std::mutex mutex_;
    std::vector<watched_channel> channels_;
};

/// The list of the execution context `ex` runs on. Shared, so that a holder may
/// outlive the context without a dangling reference.
std::shared_ptr<device_failures> device_failures_of(const asio::any_io_executor& ex);

} // namespace rdma_asio::detail
