// mlx5 DEVX event channels (mlx5dv_devx_get_event) as Asio I/O objects.
#pragma once

#include <rdma_asio/config.hpp>

#if !defined(RDMA_ASIO_HAVE_MLX5DV)
#error "rdma_asio was built without mlx5 direct verbs (infiniband/mlx5dv.h, libmlx5)"
#endif

#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/devx/devx_event_channel_impl.hpp"
#include "rdma_asio/detail/devx/devx_read_op.hpp"
#include "rdma_asio/devx_event_info.hpp"
#include "rdma_asio/devx_eventfd.hpp"

#include <infiniband/mlx5dv.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>
#include <type_traits>
#include <utility>

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

template <class Executor = asio::any_io_executor>
class basic_devx_event_channel;

namespace detail {
/// Creates a DEVX event channel on `ctx` and registers its fd. On failure: null,
/// `ec` set, and `failed_call` naming the step that failed.
std::shared_ptr<devx_event_channel_impl>
open_devx_event_channel(const asio::any_io_executor& ex, ibv_context* ctx, devx_event_data mode,
                        error_code& ec, const char*& failed_call);
/// The same on a context, whose device the channel then shares.
std::shared_ptr<devx_event_channel_impl>
open_devx_event_channel(const asio::any_io_executor& ex, const context& ctx, devx_event_data mode,
                        error_code& ec, const char*& failed_call);
} // namespace detail

/// A DEVX event channel (mlx5dv_devx_create_event_channel) whose fd is registered
/// with Asio's reactor (non-blocking, never closed by the wrapper, which unregisters
/// it before mlx5dv_devx_destroy_event_channel).
///
/// Each wake-up reads events with mlx5dv_devx_get_event() until EAGAIN. Each event
/// goes to exactly one async_next(), in arrival order; an event read while no read
/// waits is kept, with its bytes, for the next read.
///
/// Subscriptions (DEVX objects, event numbers) need a context opened with
/// mlx5dv_open_device() and MLX5DV_CONTEXT_FLAGS_DEVX. Destroy the channel before
/// that context, unless it was opened on an rdma_asio::context, whose device it then
/// shares: the device stays open until the channel is closed.
///
/// `Executor` is the type of the executor handlers run on by default;
/// devx_event_channel uses asio::any_io_executor, and rebind_executor (or
/// asio::as_default_on) gives the same channel with another executor type or a
/// default completion token. Move-only; a moved-from channel is closed and keeps
/// its executor. Every member may be called from any thread.
template <class Executor>
class basic_devx_event_channel : public detail::io_object<basic_devx_event_channel, Executor,
                                                          detail::devx_event_channel_impl> {
    using base =
        detail::io_object<basic_devx_event_channel, Executor, detail::devx_event_channel_impl>;
    using impl_type = detail::devx_event_channel_impl;

public:
    using typename base::executor_type;
    /// The mlx5dv channel (its fd is native_handle()->fd), still owned by the
    /// channel object; nullptr when not open.
    using typename base::native_handle_type;
    using signature = void(error_code, devx_event_info);

    /// A channel that is not open yet (see open()). `ex`: an executor, or an
    /// execution context such as an io_context, as for Asio's own I/O objects.
    explicit basic_devx_event_channel(const detail::executor_or_context<Executor>& ex) : base(ex) {}
    /// Creates the channel on `ctx` (see open(ctx, mode)); throws system_error.
    basic_devx_event_channel(const detail::executor_or_context<Executor>& ex, ibv_context* ctx,
                             devx_event_data mode = devx_event_data::with_data)
        : base(ex) {
        open(ctx, mode);
    }
    /// The same on a context, whose device the channel shares.
    basic_devx_event_channel(const detail::executor_or_context<Executor>& ex, const context& ctx,
                             devx_event_data mode = devx_event_data::with_data)
        : base(ex) {
        open(ctx, mode);
    }
    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // closes the channel (see close()).
    using base::base;
    using base::operator=;

    /// Creates the channel on `ctx` (mlx5dv_devx_create_event_channel) and
    /// registers its fd with the executor's reactor. Errors:
    /// asio::error::already_open; asio::error::bad_descriptor for a null or closed
    /// context; EOPNOTSUPP when `ctx` is not an mlx5 device (mlx5dv_is_supported);
    /// the errno of mlx5dv_devx_create_event_channel (e.g. EOPNOTSUPP without DEVX
    /// support); the reactor's refusal of the fd.
    void open(ibv_context* ctx, devx_event_data mode, error_code& ec) {
        const char* failed_call = nullptr;
        open_as(ec, failed_call, ctx, mode);
    }
    /// The same; throws system_error naming the call that failed.
    void open(ibv_context* ctx, devx_event_data mode = devx_event_data::with_data) {
        error_code ec;
        const char* failed_call = nullptr;
        open_as(ec, failed_call, ctx, mode);
        detail::throw_if_error(ec, failed_call);
    }
    /// The same on a context: the channel shares its device, which stays open
    /// until the channel is closed.
    void open(const context& ctx, devx_event_data mode, error_code& ec) {
        const char* failed_call = nullptr;
        open_as(ec, failed_call, ctx, mode);
    }
    void open(const context& ctx, devx_event_data mode = devx_event_data::with_data) {
        error_code ec;
        const char* failed_call = nullptr;
        open_as(ec, failed_call, ctx, mode);
        detail::throw_if_error(ec, failed_call);
    }

    /// The mode the channel was created with. Throws system_error
    /// (bad_descriptor) when the channel is not open, as do the other queries
    /// and subscribe calls below.
    devx_event_data mode() const { return checked().mode(); }

    /// mlx5dv_devx_subscribe_devx_event: events `event_nums` of `obj` (nullptr for
    /// unaffiliated events) arrive on this channel with `cookie`. Errors:
    /// bad_descriptor when the channel is not open; the call's errno.
    void subscribe(mlx5dv_devx_obj* obj, std::span<const std::uint16_t> event_nums,
                   std::uint64_t cookie, error_code& ec) {
        if (!this->impl_) {
            ec = asio::error::bad_descriptor;
            return;
        }
        this->impl_->subscribe(obj, event_nums, cookie, ec);
    }
    void subscribe(mlx5dv_devx_obj* obj, std::span<const std::uint16_t> event_nums,
                   std::uint64_t cookie) {
        error_code ec;
        subscribe(obj, event_nums, cookie, ec);
        detail::throw_if_error(ec, "mlx5dv_devx_subscribe_devx_event");
    }
    /// mlx5dv_devx_subscribe_devx_event_fd: event `event_num` of `obj` signals `efd`
    /// instead of queueing on this channel. Errors: bad_descriptor when the channel
    /// or `efd` is not open; the call's errno.
    template <class Executor1>
    void subscribe_fd(const basic_devx_eventfd<Executor1>& efd, mlx5dv_devx_obj* obj,
                      std::uint16_t event_num, error_code& ec) {
        if (!this->impl_ || !efd.is_open()) {
            ec = asio::error::bad_descriptor;
            return;
        }
        this->impl_->subscribe_fd(efd.native_handle(), obj, event_num, ec);
    }
    template <class Executor1>
    void subscribe_fd(const basic_devx_eventfd<Executor1>& efd, mlx5dv_devx_obj* obj,
                      std::uint16_t event_num) {
        error_code ec;
        subscribe_fd(efd, obj, event_num, ec);
        detail::throw_if_error(ec, "mlx5dv_devx_subscribe_devx_event_fd");
    }

    /// Takes the next event: its device data into `buffer`, its cookie into the
    /// completion.
    ///
    /// Signature: void(error_code, rdma_asio::devx_event_info). info.size is
    /// the number of bytes written to `buffer` (0 in omit-data mode, where an empty
    /// buffer will do). Errors:
    /// - errc::events_lost: the kernel lost events (EOVERFLOW) before the next one
    ///   here; re-read the state of every subscribed object, then read on.
    ///   Reported once, in its place among the events.
    /// - asio::error::message_size: `buffer` is smaller than the event's data;
    ///   info.size is the size needed and info.cookie the event's. Nothing was
    ///   written and the event stays first in line for the next read.
    /// - asio::error::operation_aborted: cancelled, or the channel closed meanwhile.
    /// - asio::error::bad_descriptor: the channel is not open (closed or moved
    ///   from); nothing is read.
    /// - the errno of mlx5dv_devx_get_event (e.g. EIO): the channel failed for good.
    ///
    /// Per-operation cancellation: terminal, partial and total. A cancelled read
    /// takes no event: the event goes to the next read, also when the read had
    /// already taken it (its handler queued but not run; nothing is written to
    /// `buffer` then) and completes with operation_aborted. The handler never runs
    /// inside this call and runs on its associated executor (by default the
    /// channel's). `buffer` must stay valid until the handler runs.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(asio::mutable_buffer buffer,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate<signature, start_next>(
            "rdma_asio::devx_event_channel::async_next", std::forward<CompletionToken>(token),
            buffer);
    }

    // cancel(): completes every pending read with operation_aborted; kept events
    // stay. close(): cancels every read, unregisters the fd (restoring its flags),
    // drops the kept events and destroys the channel. Idempotent.

    /// Events read from the channel and not taken by any read yet.
    std::size_t queued() const { return checked().queued(); }

private:
    struct start_next {
        template <class Handler>
        void operator()(const std::shared_ptr<impl_type>& impl, const Executor& io_ex,
                        Handler&& handler, asio::mutable_buffer buffer) const {
            impl->dispatcher().async_next(io_ex, detail::devx_read_matcher{buffer.size()},
                                          detail::devx_read_handler<std::decay_t<Handler>>{
                                              std::forward<Handler>(handler), buffer});
        }
    };

    // The one place both open() forms go through: already_open, or the new state.
    template <class Context>
    void open_as(error_code& ec, const char*& failed_call, const Context& ctx,
                 devx_event_data mode) {
        if (this->is_open()) {
            failed_call = "rdma_asio::devx_event_channel::open";
            ec = asio::error::already_open;
            return;
        }
        this->adopt(detail::open_devx_event_channel(this->ex_, ctx, mode, ec, failed_call));
    }

    const impl_type& checked() const { return base::checked("rdma_asio::devx_event_channel"); }
};

/// A DEVX event channel on any I/O executor.
using devx_event_channel = basic_devx_event_channel<>;

} // namespace rdma_asio
