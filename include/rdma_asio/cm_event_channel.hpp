// The rdma_cm event channel (rdma_create_event_channel) as an Asio I/O object.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/detail/cm_channel_impl.hpp"
#include "rdma_asio/detail/cm_steps.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/compose.hpp>
#include <asio/execution_context.hpp>

#include <rdma/rdma_cma.h>

#include <concepts>
#include <memory>

namespace rdma_asio {

class cm_id;

/// An rdma_event_channel whose fd is registered with Asio's reactor
/// (non-blocking, never closed by the wrapper, which unregisters it before
/// rdma_destroy_event_channel). The cm_id objects created on it share it: each
/// wake-up reads events until EAGAIN and hands each to a wait of the id it is
/// about (a CONNECT_REQUEST to its listening id), or keeps it for that id's next
/// wait. The channel is destroyed when this object and its ids are gone.
///
/// Thread safety: every member may be called from any thread.
class cm_event_channel {
public:
    using executor_type = asio::any_io_executor;

    /// rdma_create_event_channel; throws std::system_error naming the call.
    explicit cm_event_channel(const executor_type& ex);
    template <class ExecutionContext>
    requires std::convertible_to<ExecutionContext&, asio::execution_context&>
    explicit cm_event_channel(ExecutionContext& ioc) : cm_event_channel(ioc.get_executor()) {}

    cm_event_channel(cm_event_channel&&) noexcept = default;
    cm_event_channel& operator=(cm_event_channel&&) noexcept = default;
    cm_event_channel(const cm_event_channel&) = delete;
    cm_event_channel& operator=(const cm_event_channel&) = delete;
    ~cm_event_channel() = default;

    executor_type get_executor() const noexcept { return ex_; }
    rdma_event_channel* native_handle() const noexcept { return impl_ ? impl_->channel : nullptr; }

    /// The next event of any id on the channel, for callers that drive rdma_cm
    /// themselves (cm_id's operations take their own events first come, first
    /// served, like every other wait).
    ///
    /// Signature: void(std::error_code, rdma_asio::cm_event). The event acks when
    /// the value is destroyed.
    ///
    /// Per-operation cancellation: terminal, partial and total. A wait cancelled
    /// before it took an event takes none; one whose cancellation comes after it
    /// took its event (before its handler runs) hands the event back, so the next
    /// wait gets it first, and completes with operation_aborted: `||` with a timer
    /// loses nothing. Closing the event's id meanwhile acks it; the wait then
    /// completes with operation_aborted and an empty event.
    ///
    /// On a moved-from channel: completes with asio::error::bad_descriptor
    /// (posted); throws std::system_error only if there is no executor to run
    /// the handler on.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return detail::async_cm<void(std::error_code, cm_event)>(
            impl_, ex_, "rdma_asio::cm_event_channel::async_next",
            detail::cm_next<detail::match_any>{{}}, std::forward<CompletionToken>(token));
    }

    /// False after a move.
    bool is_open() const noexcept { return impl_ != nullptr; }

    /// Completes every pending wait on the channel (its ids' too) with
    /// operation_aborted; queued events stay. Does nothing after a move.
    void cancel();

private:
    friend class cm_id;

    executor_type ex_;
    std::shared_ptr<detail::cm_channel_impl> impl_;
};

} // namespace rdma_asio
