// The asynchronous events of an RDMA device as Asio operations.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/async_event_source.hpp"
#include "rdma_asio/detail/event_dispatcher.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/execution_context.hpp>

#include <concepts>
#include <memory>
#include <optional>
#include <system_error>

namespace rdma_asio {

class teardown_guard;
class subnet_event_client;

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
/// A stream opened on a context shares ownership of its device: the device stays
/// open until the stream is closed, even when the context is closed first.
class async_event_stream {
public:
    using executor_type = asio::any_io_executor;

    /// Opens the event stream of `ctx`. Throws std::system_error naming the
    /// registration of the async_fd when the reactor refuses it (e.g. EEXIST: the
    /// fd is already wrapped by another stream on this executor).
    async_event_stream(const executor_type& ex, const context& ctx);
    template <class ExecutionContext>
    requires std::convertible_to<ExecutionContext&, asio::execution_context&>
    async_event_stream(ExecutionContext& ioc, const context& ctx)
        : async_event_stream(ioc.get_executor(), ctx) {}
    /// Lower-level: a raw context, with the source's options (tests use this to
    /// imitate the kernel's side).
    async_event_stream(const executor_type& ex, ibv_context* ctx,
                       detail::async_event_source::options opts);

    async_event_stream(async_event_stream&& other) noexcept;
    async_event_stream& operator=(async_event_stream&& other) noexcept;
    async_event_stream(const async_event_stream&) = delete;
    async_event_stream& operator=(const async_event_stream&) = delete;
    /// Closes the stream (see close()).
    ~async_event_stream();

    executor_type get_executor() const noexcept { return ex_; }
    /// The device's async_fd (still owned by libibverbs).
    int native_handle() const noexcept { return fd_; }
    bool is_open() const noexcept { return impl_ != nullptr; }

    /// Waits for the next event.
    ///
    /// Signature: void(std::error_code, rdma_asio::async_event). Errors:
    /// asio::error::operation_aborted (cancelled or closed), errc::device_removed
    /// (after the removal event was delivered).
    ///
    /// Per-operation cancellation: terminal, partial and total. A cancelled wait
    /// takes no event: the event goes to the next waiter. A wait cancelled after
    /// it had taken an event (its handler queued but not run) gives the event
    /// back, to the next waiter or the front of the queue, and completes with
    /// operation_aborted. The handler never runs inside this call and runs on its
    /// associated executor.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return checked_impl().async_next(detail::match_any{}, std::forward<CompletionToken>(token));
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
        return checked_impl().async_next(std::move(pred), std::forward<CompletionToken>(token));
    }

    /// Completes every pending wait with operation_aborted; queued events stay.
    void cancel();
    /// Cancels every wait, unregisters the async_fd (restoring its flags) and
    /// acks the events nobody claimed. Later waits fail with operation_aborted.
    void close() noexcept;

    /// The cached state of a port (1-based); nullopt for ports the device lacks.
    /// Kept fresh by the port events that waits have read, no verbs call here.
    std::optional<port_state> port(int port_num) const;
    /// True once the removal event was read.
    bool removed() const;
    /// False when the uverbs node could not be watched (then only DEVICE_FATAL or
    /// a failing async_fd reveal removal).
    bool watching_removal() const;
    /// Events read but not claimed by any wait yet.
    std::size_t queued() const;

    /// Prepares the destruction of a CQ, QP, SRQ or WQ: acks every event of that
    /// object that was read and not claimed, and keeps acking (dropping) its
    /// events until the guard ends. Destroy the object while the guard lives.
    /// Events of the object that a wait already delivered are the holder's to ack
    /// first.
    [[nodiscard]] teardown_guard teardown(const ibv_cq* cq);
    [[nodiscard]] teardown_guard teardown(const ibv_qp* qp);
    [[nodiscard]] teardown_guard teardown(const ibv_srq* srq);
    [[nodiscard]] teardown_guard teardown(const ibv_wq* wq);

private:
    friend class subnet_event_client; // delivers subnet events into the stream
    using impl_type = detail::event_dispatcher<detail::async_event_source>;
    impl_type& checked_impl() const;
    teardown_guard teardown_object(const void* object);

    executor_type ex_;
    int fd_ = -1;
    std::shared_ptr<impl_type> impl_;
    std::shared_ptr<ibv_context> device_; // when opened on a context
};

/// See async_event_stream::teardown.
class teardown_guard {
public:
    teardown_guard(teardown_guard&& other) noexcept;
    teardown_guard& operator=(teardown_guard&&) = delete;
    ~teardown_guard();
    /// Unclaimed events of the object that were acked when the guard was made.
    std::size_t acked() const noexcept { return acked_; }

private:
    friend class async_event_stream;
    using impl_type = detail::event_dispatcher<detail::async_event_source>;
    teardown_guard(std::shared_ptr<impl_type> impl, const void* object);

    std::shared_ptr<impl_type> impl_;
    const void* object_;
    std::size_t acked_ = 0;
};

} // namespace rdma_asio
