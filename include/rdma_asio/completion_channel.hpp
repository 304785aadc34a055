// Completion event channels (ibv_comp_channel) as Asio I/O objects.
#pragma once

#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/completion_channel_source.hpp"
#include "rdma_asio/detail/event_dispatcher.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/execution_context.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace rdma_asio {

class completion_queue;

/// Counters of a completion channel, readable from any thread.
struct channel_counters {
    /// Completion events read with ibv_get_cq_event().
    std::uint64_t events = 0;
};

namespace detail {
/// What a channel and its CQs share; the channel is destroyed with the last of them.
struct channel_impl {
    /// `device`: shared ownership of the device when the channel was made from a
    /// context (empty for a raw ibv_context).
    channel_impl(const asio::any_io_executor& ex, ibv_context* ctx,
                 std::shared_ptr<ibv_context> device);
    ~channel_impl();

    // First member, so destroyed last: after ibv_destroy_comp_channel.
    std::shared_ptr<ibv_context> device;

    /// Keeps the state of a CQ whose ibv_destroy_cq failed (a QP still uses it)
    /// until the channel goes: the CQ can still raise events, whose cq_context
    /// points into `state`. The channel acks them and retries the destroy first.
    void keep_until_destroyed(std::shared_ptr<const void> owner, cq_shared_state* state);

    ibv_comp_channel* channel = nullptr;
    std::shared_ptr<event_dispatcher<completion_channel_source>> dispatcher;

private:
    struct undestroyed_cq {
        std::shared_ptr<const void> owner;
        cq_shared_state* state;
    };
    std::mutex mutex_;
    std::vector<undestroyed_cq> undestroyed_;
};
} // namespace detail

/// An ibv_comp_channel whose fd is registered with Asio's reactor (non-blocking,
/// never closed by the wrapper, which unregisters it before
/// ibv_destroy_comp_channel). Several completion_queue objects may share one
/// channel: each wake-up reads events until EAGAIN and hands each to the CQ it
/// names, matched by pointer.
///
/// When the device goes away (`rdma link delete`, hot unplug, a fatal error),
/// every pending and later wait of every CQ on the channel completes with
/// errc::device_removed, once, whether or not an async_event_stream exists;
/// close the CQs, the channel and the context then, so the removal can finish.
///
/// A channel made from a context shares ownership of its device: the device
/// stays open while the channel or any CQ on it exists.
///
/// The channel is destroyed when this object and every completion_queue on it
/// are gone (ibv_destroy_comp_channel fails while CQs use it). CQs on a channel
/// must be created through completion_queue, which owns their acks.
class completion_channel {
public:
    using executor_type = asio::any_io_executor;

    /// ibv_create_comp_channel; throws std::system_error naming the call.
    completion_channel(const executor_type& ex, const context& ctx);
    /// The same on a device context opened elsewhere (e.g. rdma_cm_id::verbs),
    /// which must outlive the channel.
    completion_channel(const executor_type& ex, ibv_context* verbs);
    template <class ExecutionContext>
    requires std::convertible_to<ExecutionContext&, asio::execution_context&>
    completion_channel(ExecutionContext& ioc, const context& ctx)
        : completion_channel(ioc.get_executor(), ctx) {}

    completion_channel(completion_channel&&) noexcept = default;
    completion_channel& operator=(completion_channel&&) noexcept = default;
    completion_channel(const completion_channel&) = delete;
    completion_channel& operator=(const completion_channel&) = delete;
    ~completion_channel() = default;

    executor_type get_executor() const noexcept { return ex_; }
    /// The verbs channel; its fd is native_handle()->fd.
    ibv_comp_channel* native_handle() const noexcept { return impl_ ? impl_->channel : nullptr; }
    /// Completes every pending wait of every CQ on the channel with
    /// operation_aborted; no completion and no event is lost.
    void cancel();
    channel_counters counters() const;
    /// True when the channel watches the device's uverbs node, so that the
    /// device's removal ends every wait of its CQs with errc::device_removed.
    bool watching_removal() const;

private:
    friend class completion_queue;
    completion_channel(const executor_type& ex, ibv_context* verbs,
                       std::shared_ptr<ibv_context> device);

    executor_type ex_;
    ibv_context* ctx_ = nullptr;
    std::shared_ptr<detail::channel_impl> impl_;
};

} // namespace rdma_asio
