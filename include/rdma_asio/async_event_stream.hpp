// The asynchronous events of an RDMA device as Asio operations.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/async_event_stream_ref.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/async_event/async_event_stream_impl.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/event_match.hpp"
#include "rdma_asio/port_state.hpp"

#include <concepts>
#include <memory>
#include <optional>
#include <system_error>
#include <type_traits>

namespace rdma_asio {

class teardown_guard;
template <class Executor = asio::any_io_executor>
class basic_async_event_stream;

namespace detail {
/// Open the stream of a context (sharing its device) or of a raw context.
std::shared_ptr<async_event_stream_impl>
open_async_event_stream(const asio::any_io_executor& ex, const context& ctx, error_code& ec);
std::shared_ptr<async_event_stream_impl> open_async_event_stream(const asio::any_io_executor& ex,
                                                                 ibv_context* ctx, error_code& ec);
} // namespace detail

/// See async_event_stream::teardown.
class teardown_guard {
public:
    teardown_guard(teardown_guard&& other) noexcept;
    teardown_guard& operator=(teardown_guard&&) = delete;
    ~teardown_guard();
    /// Unclaimed events of the object that were acked when the guard was made.
    std::size_t acked() const noexcept { return acked_; }

private:
    template <class>
    friend class basic_async_event_stream;
    using impl_type = detail::event_dispatcher<detail::async_event_source>;
    teardown_guard(std::shared_ptr<impl_type> impl, const void* object);

    std::shared_ptr<impl_type> impl_;
    const void* object_;
    std::size_t acked_ = 0;
};

/// The device's async_fd as an Asio I/O object.
///
/// The fd belongs to libibverbs: the stream registers it with the executor's
/// reactor in non-blocking mode and, when closed, unregisters it and restores its
/// flags, never closing it. On each wake-up it reads events with
/// ibv_get_async_event() until EAGAIN. Each event goes to exactly one waiter, in
/// arrival order, or is kept for the next waiter that accepts it.
///
/// Removal: the stream also watches the device's uverbs node in /dev/infiniband.
/// DEVICE_FATAL, the node's deletion (soft-RoCE sends no DEVICE_FATAL) or a failing
/// async_fd is delivered once, as an event for which is_removal() holds; every
/// other pending and later wait then fails with errc::device_removed. Close the
/// stream and the context afterwards: the kernel finishes removing the device only
/// when every context on it is closed.
///
/// Thread safety: every member may be called from any thread; waits from several
/// threads or strands share the events as described above.
///
/// `Executor` is the type of the executor handlers run on by default;
/// async_event_stream uses asio::any_io_executor, and rebind_executor (or
/// asio::as_default_on) gives the same stream with another executor type or a
/// default completion token.
///
/// A stream opened on a context shares ownership of its device: the device stays
/// open until the stream is closed, even when the context is closed first.
template <class Executor>
class basic_async_event_stream : public detail::io_object<basic_async_event_stream, Executor,
                                                          detail::async_event_stream_impl> {
    using base =
        detail::io_object<basic_async_event_stream, Executor, detail::async_event_stream_impl>;
    using impl_type = detail::async_event_stream_impl;

public:
    using typename base::executor_type;
    /// The async_fd (still owned by libibverbs).
    using typename base::native_handle_type;
    using signature = void(error_code, async_event);

    /// A stream that is not open yet (see open()). `ex`: an executor, or an
    /// execution context such as an io_context, as for Asio's own I/O objects.
    explicit basic_async_event_stream(const detail::executor_or_context<Executor>& ex) : base(ex) {}
    /// Opens the event stream of `ctx` (see open(ctx)); throws system_error.
    basic_async_event_stream(const detail::executor_or_context<Executor>& ex, const context& ctx)
        : base(ex) {
        open(ctx);
    }
    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // closes the stream (see close()).
    using base::base;
    using base::operator=;

    /// Opens the event stream of `ctx`: registers its async_fd with the
    /// executor's reactor. Errors: asio::error::already_open; bad_descriptor for
    /// a closed context; the reactor's refusal (e.g. EEXIST: another stream on
    /// this executor already wraps the fd).
    void open(const context& ctx, error_code& ec) {
        this->open_with(ec, [&](const auto& ex, error_code& e) {
            return detail::open_async_event_stream(ex, ctx, e);
        });
    }
    /// The same; throws system_error naming the step that failed.
    void open(const context& ctx) { this->open_or_throw(open_failed, ctx); }
    /// The same on a device context opened elsewhere (e.g. an rdma_cm id's
    /// `verbs`), which must outlive the stream.
    void open(ibv_context* ctx, error_code& ec) {
        this->open_with(ec, [&](const auto& ex, error_code& e) {
            return detail::open_async_event_stream(ex, ctx, e);
        });
    }
    void open(ibv_context* ctx) { this->open_or_throw(open_failed, ctx); }

    /// Waits for the next event.
    ///
    /// Signature: void(error_code, rdma_asio::async_event). Errors:
    /// asio::error::operation_aborted (cancelled or closed meanwhile),
    /// asio::error::bad_descriptor (the stream is not open), errc::device_removed
    /// (after the removal event was delivered).
    ///
    /// Per-operation cancellation: terminal, partial and total. A cancelled wait
    /// takes no event: the event goes to the next waiter. A wait cancelled after
    /// it had taken an event (its handler queued but not run) gives the event
    /// back, to the next waiter or the front of the queue, and completes with
    /// operation_aborted. The handler never runs inside this call and runs on its
    /// associated executor (by default the stream's).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return async_next(detail::match_any{}, std::forward<CompletionToken>(token));
    }

    /// Waits for the next event `pred` accepts, e.g. event_match(event_type::sq_drained, qp)
    /// or event_match::port(event_type::port_active, 1). An accepted event that
    /// arrived earlier and was not claimed yet completes the wait at once.
    /// Events it does not accept stay for other waiters. Same signature, errors
    /// and cancellation as async_next(token). `pred` runs under the stream's lock:
    /// it must be quick and must not call back into the stream.
    template <class Predicate,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    requires std::predicate<Predicate&, const async_event&>
    auto async_next(Predicate pred,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate<signature, start_next>(
            "rdma_asio::async_event_stream::async_next", std::forward<CompletionToken>(token),
            std::move(pred));
    }

    // cancel(): completes every pending wait with operation_aborted; queued
    // events stay. close(): cancels every wait, unregisters the async_fd
    // (restoring its flags, never closing it) and acks the events nobody
    // claimed.

    /// The cached state of a port (1-based); nullopt for ports the device lacks.
    /// Kept fresh by the port events that waits have read, no verbs call here.
    /// Throws system_error (bad_descriptor) when the stream is not open, as
    /// do the other queries below.
    std::optional<port_state> port(int port_num) const { return checked().port(port_num); }
    /// True once the removal event was read.
    bool removed() const { return checked().removed(); }
    /// False when the uverbs node could not be watched (then only DEVICE_FATAL or
    /// a failing async_fd reveal removal).
    bool watching_removal() const { return checked().watching_removal(); }
    /// Events read but not claimed by any wait yet.
    std::size_t queued() const { return checked().queued(); }

    /// Prepares the destruction of a CQ, QP, SRQ or WQ: acks every event of that
    /// object that was read and not claimed, takes back and acks those a wait took
    /// whose handler has not run yet (it completes with operation_aborted), and
    /// keeps acking (dropping) its events until the guard ends. Destroy the object
    /// while the guard lives. Events of the object that a handler already received
    /// are the holder's to ack first.
    [[nodiscard]] teardown_guard teardown(const ibv_cq* cq) { return teardown_object(cq); }
    [[nodiscard]] teardown_guard teardown(const ibv_qp* qp) { return teardown_object(qp); }
    [[nodiscard]] teardown_guard teardown(const ibv_srq* srq) { return teardown_object(srq); }
    [[nodiscard]] teardown_guard teardown(const ibv_wq* wq) { return teardown_object(wq); }

    /// A reference to the stream's state, through which events from elsewhere
    /// (e.g. a subnet_event_client's) join this stream and its events can be
    /// observed; it stays valid when the stream is moved. See
    /// async_event_stream_ref. Throws system_error (bad_descriptor) when the
    /// stream is not open.
    async_event_stream_ref ref() const {
        checked();
        return async_event_stream_ref(this->impl_);
    }

private:
    struct start_next {
        template <class Handler, class Predicate>
        void operator()(const std::shared_ptr<impl_type>& impl, const Executor& io_ex,
                        Handler&& handler, Predicate pred) const {
            impl->dispatcher().async_next(io_ex, std::move(pred), std::forward<Handler>(handler));
        }
    };

    static constexpr const char* open_failed =
        "rdma_asio::async_event_stream::open: registering the async_fd";
    impl_type& checked() const { return base::checked("rdma_asio::async_event_stream"); }
    teardown_guard teardown_object(const void* object) {
        return teardown_guard(checked().shared_dispatcher(), object);
    }
};

/// A stream on any I/O executor.
using async_event_stream = basic_async_event_stream<>;

} // namespace rdma_asio
