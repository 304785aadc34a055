// The rdma_cm event channel (rdma_create_event_channel) as an Asio I/O object.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/detail/cm/cm_channel_impl.hpp"
#include "rdma_asio/detail/cm/cm_steps.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <rdma/rdma_cma.h>

#include <concepts>
#include <memory>
#include <system_error>
#include <type_traits>

namespace rdma_asio {

template <class Executor = asio::any_io_executor>
class basic_cm_event_channel;

/// An rdma_event_channel whose fd is registered with Asio's reactor
/// (non-blocking, never closed by the wrapper, which unregisters it before
/// rdma_destroy_event_channel). The cm_id objects created on it share it: each
/// wake-up reads events until EAGAIN and hands each to a wait of the id it is
/// about (a CONNECT_REQUEST to its listening id), or keeps it for that id's next
/// wait.
///
/// Lifetime: the channel (rdma_destroy_event_channel) is destroyed when this
/// object is closed (or destroyed) and its ids are closed too, whichever comes
/// last; close() does not end the ids' operations.
///
/// Thread safety: every member may be called from any thread.
///
/// `Executor` is the type of the executor handlers run on by default (and whose
/// reactor watches the channel's fd); cm_event_channel uses
/// asio::any_io_executor, and rebind_executor (or asio::as_default_on) gives the
/// same channel with another executor type or a default completion token. Ids
/// made on the channel take its executor unless given their own.
template <class Executor>
class basic_cm_event_channel
    : public detail::io_object<basic_cm_event_channel, Executor, detail::cm_channel_impl> {
    using base = detail::io_object<basic_cm_event_channel, Executor, detail::cm_channel_impl>;

public:
    using typename base::executor_type;
    /// The rdma_event_channel (owned by the channel until its last user goes).
    using typename base::native_handle_type;

    /// Opens a channel (see open()); throws system_error naming
    /// rdma_create_event_channel. Opening takes no argument, so unlike the
    /// objects whose open() needs one (a cm_id, a stream), the one-argument
    /// constructors open; the error_code forms below leave the channel closed
    /// instead of throwing.
    /// `ex`: an executor, or an execution context such as an io_context, as for
    /// Asio's own I/O objects.
    explicit basic_cm_event_channel(const detail::executor_or_context<Executor>& ex) : base(ex) {
        open();
    }
    /// Opens a channel; on failure the channel is not open and `ec` says why.
    basic_cm_event_channel(const detail::executor_or_context<Executor>& ex, error_code& ec)
        : base(ex) {
        open(ec);
    }
    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // closes the channel object (see close()).
    using base::base;
    using base::operator=;

    /// rdma_create_event_channel, then registers its fd with the executor's
    /// reactor. Errors: asio::error::already_open; the call's errno (ENODEV
    /// without rdma_cm, e.g. no /dev/infiniband/rdma_cm); the reactor's refusal.
    void open(error_code& ec) { this->open_with(ec, detail::open_cm_event_channel); }
    /// The same; throws system_error naming the call.
    void open() { this->open_or_throw("rdma_create_event_channel"); }

    /// The next event of any id on the channel, for callers that drive rdma_cm
    /// themselves (cm_id's operations take their own events first come, first
    /// served, like every other wait).
    ///
    /// Signature: void(error_code, rdma_asio::cm_event). The event acks when
    /// the value is destroyed.
    ///
    /// Per-operation cancellation: terminal, partial and total. A wait cancelled
    /// before it took an event takes none; one whose cancellation comes after it
    /// took its event (before its handler runs) hands the event back, so the next
    /// wait gets it first, and completes with operation_aborted: `||` with a timer
    /// loses nothing. Closing the event's id meanwhile acks it; the wait then
    /// completes with operation_aborted and an empty event. Closing the channel
    /// object ends the wait with operation_aborted.
    ///
    /// On a channel that is not open (closed, moved-from): completes with
    /// asio::error::bad_descriptor (posted); throws system_error only if
    /// there is no executor to run the handler on.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        const void* key = this->impl_ ? this->impl_->key() : nullptr;
        return this->template initiate<void(error_code, cm_event),
                                       detail::cm_start<void(error_code, cm_event)>>(
            "rdma_asio::cm_event_channel::async_next", std::forward<CompletionToken>(token),
            detail::cm_next<detail::cm_channel_match>{{key}});
    }

    // cancel(): completes every pending wait on the channel, its ids' too, with
    // operation_aborted; queued events stay. Does nothing when not open.
    //
    // close(): ends this object's own waits (async_next) with operation_aborted
    // and lets go of the channel; the ids made on it keep working, and the
    // channel is destroyed with the last of them (at once when there is none).
    // Events nobody took are acked then (connection requests rejected).
    // Idempotent.
};

/// A channel on any I/O executor.
using cm_event_channel = basic_cm_event_channel<>;

} // namespace rdma_asio
