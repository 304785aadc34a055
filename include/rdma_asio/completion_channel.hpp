// Completion event channels (ibv_comp_channel) as Asio I/O objects.
#pragma once

#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/cq/completion_channel_impl.hpp"

#include <concepts>
#include <cstdint>
#include <memory>
#include <system_error>
#include <type_traits>

namespace rdma_asio {

template <class Executor = asio::any_io_executor>
class basic_completion_channel;

/// Counters of a completion channel, readable from any thread.
struct channel_counters {
    /// Completion events read with ibv_get_cq_event().
    std::uint64_t events = 0;
};

namespace detail {
/// Make the channel of a context (sharing its device) or of a raw context.
std::shared_ptr<completion_channel_impl>
open_completion_channel(const asio::any_io_executor& ex, const context& ctx, error_code& ec);
std::shared_ptr<completion_channel_impl> open_completion_channel(const asio::any_io_executor& ex,
                                                                 ibv_context* ctx, error_code& ec);
} // namespace detail

/// An ibv_comp_channel whose fd is registered with Asio's reactor (non-blocking,
/// never closed by the wrapper, which unregisters it before
/// ibv_destroy_comp_channel). Several completion_queue objects may share one
/// channel: each wake-up reads events until EAGAIN and hands each to the CQ it
/// names, matched by pointer.
///
/// When the device goes away (`rdma link delete`, hot unplug), every pending and
/// later wait of every CQ on the channel completes with errc::device_removed,
/// once, whether or not an async_event_stream exists; likewise when an
/// async_event_stream on the same device context reads DEVICE_FATAL (or its
/// async_fd fails);
/// close the CQs, the channel and the context then, so the removal can finish.
///
/// A channel made from a context shares ownership of its device: the device
/// stays open while the channel or any CQ on it exists.
///
/// Lifetime: the object and every completion_queue made on it share the channel.
/// close() (or the destructor) ends the object's share only; the
/// ibv_comp_channel is destroyed when the object is closed and every CQ on it is
/// gone (ibv_destroy_comp_channel fails while CQs use it). CQs on a channel must
/// be created through completion_queue, which owns their acks.
///
/// Thread safety: every member may be called from any thread, and CQs on one
/// channel may be used from different threads or strands.
///
/// `Executor` is the type of the executor that handlers of the CQs made on the
/// channel run on by default; completion_channel uses asio::any_io_executor, and
/// rebind_executor gives the same channel with another executor type.
template <class Executor>
class basic_completion_channel : public detail::io_object<basic_completion_channel, Executor,
                                                          detail::completion_channel_impl> {
    using base =
        detail::io_object<basic_completion_channel, Executor, detail::completion_channel_impl>;

public:
    using typename base::executor_type;
    /// The verbs channel (still owned by libibverbs; its fd is native_handle()->fd).
    using typename base::native_handle_type;

    /// A channel that is not open yet (see open()). `ex`: an executor, or an
    /// execution context such as an io_context, as for Asio's own I/O objects.
    explicit basic_completion_channel(const detail::executor_or_context<Executor>& ex) : base(ex) {}
    /// Opens a channel on `ctx` (see open(ctx)); throws system_error.
    basic_completion_channel(const detail::executor_or_context<Executor>& ex, const context& ctx)
        : base(ex) {
        open(ctx);
    }
    /// Opens a channel on a device context opened elsewhere (see open(verbs)).
    basic_completion_channel(const detail::executor_or_context<Executor>& ex, ibv_context* verbs)
        : base(ex) {
        open(verbs);
    }
    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // closes the object (see close()).
    using base::base;
    using base::operator=;

    /// ibv_create_comp_channel on `ctx`, whose fd is then registered with the
    /// executor's reactor. Errors: asio::error::already_open; bad_descriptor for
    /// a closed context; the errno of ibv_create_comp_channel; the reactor's
    /// refusal.
    void open(const context& ctx, error_code& ec) {
        this->open_with(ec, [&](const auto& ex, error_code& e) {
            return detail::open_completion_channel(ex, ctx, e);
        });
    }
    /// The same; throws system_error naming the call.
    void open(const context& ctx) { this->open_or_throw(open_failed, ctx); }
    /// The same on a device context opened elsewhere (e.g. an rdma_cm id's
    /// `verbs`), which must outlive the channel and its CQs; bad_descriptor for
    /// a null one.
    void open(ibv_context* verbs, error_code& ec) {
        this->open_with(ec, [&](const auto& ex, error_code& e) {
            return detail::open_completion_channel(ex, verbs, e);
        });
    }
    void open(ibv_context* verbs) { this->open_or_throw(open_failed, verbs); }

    // cancel(): completes every pending wait of every CQ on the channel with
    // operation_aborted; no completion and no event is lost. Nothing when closed.
    // close(): cancels those waits and ends this object's share of the channel;
    // the CQs made on it keep working, and the channel is destroyed with the last
    // of them. Idempotent; a closed channel cannot make new CQs.

    /// Counters of the channel. Throws system_error (bad_descriptor) when
    /// the object is not open, as does watching_removal().
    channel_counters counters() const { return {checked().events()}; }
    /// True when the channel watches the device's uverbs node, so that the
    /// device's removal ends every wait of its CQs with errc::device_removed.
    bool watching_removal() const { return checked().watching_removal(); }

private:
    static constexpr const char* open_failed = "rdma_asio::completion_channel::open";
    detail::completion_channel_impl& checked() const {
        return base::checked("rdma_asio::completion_channel");
    }
};

/// A channel on any I/O executor.
using completion_channel = basic_completion_channel<>;

} // namespace rdma_asio
