// mlx5 DEVX event channels (mlx5dv_devx_get_event) as Asio I/O objects.
#pragma once

#if !defined(RDMA_ASIO_HAVE_MLX5DV)
#error "rdma_asio was built without mlx5 direct verbs (infiniband/mlx5dv.h, libmlx5)"
#endif

#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/devx_event_source.hpp"
#include "rdma_asio/detail/devx_read_op.hpp"
#include "rdma_asio/detail/event_dispatcher.hpp"
#include "rdma_asio/devx_eventfd.hpp"

#include <infiniband/mlx5dv.h>

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/buffer.hpp>
#include <asio/execution_context.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

namespace rdma_asio {

/// Whether events carry the device's data (the EQE) or only the cookie.
enum class devx_event_data {
    /// Each event is the cookie and the device's data, in order; events lost for
    /// lack of kernel memory are reported as errc::events_lost.
    with_data,
    /// MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA: each event is the cookie
    /// only; repeated events of one subscription merge until read, and their order
    /// against other events is not kept. Nothing is ever lost.
    omit_data,
};

/// A DEVX event channel (mlx5dv_devx_create_event_channel) whose fd is registered
/// with Asio's reactor (non-blocking, never closed by the wrapper, which unregisters
/// it before mlx5dv_devx_destroy_event_channel).
///
/// Each wake-up reads events with mlx5dv_devx_get_event() until EAGAIN. Each event
/// goes to exactly one async_read_event(), in arrival order; an event read while no
/// read waits is kept, with its bytes, for the next read.
///
/// Subscriptions (DEVX objects, event numbers) need a context opened with
/// mlx5dv_open_device() and MLX5DV_CONTEXT_FLAGS_DEVX. Destroy the channel before
/// that context. Move-only; every member may be called from any thread.
class devx_event_channel {
public:
    using executor_type = asio::any_io_executor;

    /// Creates the channel on `ctx`. Throws std::system_error naming the call:
    /// "mlx5dv_is_supported" (EOPNOTSUPP: not an mlx5 device), or the errno of
    /// "mlx5dv_devx_create_event_channel" (e.g. EOPNOTSUPP without DEVX).
    devx_event_channel(const executor_type& ex, ibv_context* ctx,
                       devx_event_data mode = devx_event_data::with_data);
    /// The channel shares ownership of `ctx`'s device: the device stays open
    /// until the channel is closed.
    devx_event_channel(const executor_type& ex, const context& ctx,
                       devx_event_data mode = devx_event_data::with_data)
        : devx_event_channel(ex, ctx.native_handle(), mode) {
        device_ = ctx.share();
    }
    template <class ExecutionContext>
    requires std::convertible_to<ExecutionContext&, asio::execution_context&>
    devx_event_channel(ExecutionContext& ioc, ibv_context* ctx,
                       devx_event_data mode = devx_event_data::with_data)
        : devx_event_channel(ioc.get_executor(), ctx, mode) {}
    /// As above; on failure ec is set (what() of the throwing form is lost, the
    /// errno is the same) and the channel is not open.
    devx_event_channel(const executor_type& ex, ibv_context* ctx, devx_event_data mode,
                       std::error_code& ec);
    /// Lower-level: wraps a channel that the caller owns and destroys after this
    /// object, with the source's options (tests use this to imitate the kernel).
    devx_event_channel(const executor_type& ex, mlx5dv_devx_event_channel* channel,
                       devx_event_data mode, detail::devx_event_source::options opts);

    devx_event_channel(devx_event_channel&& other) noexcept;
    devx_event_channel& operator=(devx_event_channel&& other) noexcept;
    devx_event_channel(const devx_event_channel&) = delete;
    devx_event_channel& operator=(const devx_event_channel&) = delete;
    /// Closes the channel (see close()).
    ~devx_event_channel();

    executor_type get_executor() const noexcept { return ex_; }
    /// The mlx5dv channel; its fd is native_handle()->fd. nullptr when not open.
    mlx5dv_devx_event_channel* native_handle() const noexcept { return channel_; }
    bool is_open() const noexcept { return impl_ != nullptr; }
    devx_event_data mode() const noexcept { return mode_; }

    /// mlx5dv_devx_subscribe_devx_event: events `event_nums` of `obj` (nullptr for
    /// unaffiliated events) arrive on this channel with `cookie`.
    void subscribe(mlx5dv_devx_obj* obj, std::span<const std::uint16_t> event_nums,
                   std::uint64_t cookie);
    void subscribe(mlx5dv_devx_obj* obj, std::span<const std::uint16_t> event_nums,
                   std::uint64_t cookie, std::error_code& ec);
    /// mlx5dv_devx_subscribe_devx_event_fd: event `event_num` of `obj` signals `efd`
    /// instead of queueing on this channel.
    void subscribe_fd(devx_eventfd& efd, mlx5dv_devx_obj* obj, std::uint16_t event_num);
    void subscribe_fd(devx_eventfd& efd, mlx5dv_devx_obj* obj, std::uint16_t event_num,
                      std::error_code& ec);

    /// Reads the next event: its device data into `buffer` and its cookie into the
    /// completion.
    ///
    /// Signature: void(std::error_code, rdma_asio::devx_event_info). info.size is
    /// the number of bytes written to `buffer` (0 in omit-data mode, where an empty
    /// buffer will do). Errors:
    /// - errc::events_lost: the kernel lost events (EOVERFLOW) before the next one
    ///   here; re-read the state of every subscribed object, then read on.
    ///   Reported once, in its place among the events.
    /// - asio::error::message_size: `buffer` is smaller than the event's data;
    ///   info.size is the size needed and info.cookie the event's. Nothing was
    ///   written and the event stays first in line for the next read.
    /// - asio::error::operation_aborted: cancelled, or the channel closed.
    /// - the errno of mlx5dv_devx_get_event (e.g. EIO): the channel failed for good.
    ///
    /// Per-operation cancellation: terminal, partial and total. A cancelled read
    /// takes no event: the event goes to the next read, also when the read had
    /// already taken it (its handler queued but not run; nothing is written to
    /// `buffer` then) and completes with operation_aborted. The handler never runs
    /// inside this call and runs on its associated executor. `buffer` must stay
    /// valid until the handler runs.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_read_event(asio::mutable_buffer buffer,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return asio::async_initiate<CompletionToken, void(std::error_code, devx_event_info)>(
            detail::devx_read_initiation<impl_type>{checked_impl_ptr()}, token, buffer);
    }

    /// Completes every pending read with operation_aborted; kept events stay.
    void cancel();
    /// Cancels every read, unregisters the fd (restoring its flags), drops the kept
    /// events and destroys the channel if this object created it. Idempotent.
    void close() noexcept;
    /// Events read from the channel and not taken by any read yet.
    std::size_t queued() const;

private:
    using impl_type = detail::event_dispatcher<detail::devx_event_source>;
    const std::shared_ptr<impl_type>& checked_impl_ptr() const;
    void open(detail::devx_event_source::options opts, std::error_code& ec);

    executor_type ex_;
    mlx5dv_devx_event_channel* channel_ = nullptr;
    bool owned_ = false;
    devx_event_data mode_ = devx_event_data::with_data;
    std::shared_ptr<impl_type> impl_;
    std::shared_ptr<ibv_context> device_; // when made from a context
};

} // namespace rdma_asio
