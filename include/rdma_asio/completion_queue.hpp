// Completion queues bound to a completion_channel, with batched acks, as Asio
// I/O objects.
#pragma once

#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/cq_counters.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/cq/completion_queue_impl.hpp"
#include "rdma_asio/detail/cq/cq_event_op.hpp"
#include "rdma_asio/detail/cq/cq_poll_start.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/spin_budget.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>
#include <type_traits>

namespace rdma_asio {

template <class Executor = asio::any_io_executor>
class basic_completion_queue;

/// Options of a completion_queue.
struct cq_options {
    /// Events acked per ibv_ack_cq_events() call. The remainder is acked before
    /// the CQ is destroyed, so a larger batch costs nothing but a bigger count.
    unsigned ack_batch = 64;
    /// Arm with solicited_only = 1: only solicited or error completions raise an
    /// event.
    bool solicited_only = false;
    /// Poll this long before arming; off by default (see spin_budget).
    spin_budget spin = spin_budget::off();
};

namespace detail {
/// Make a CQ on a channel's state (null: the channel is not open).
std::shared_ptr<completion_queue_impl>
open_completion_queue(std::shared_ptr<completion_channel_impl> channel, int entries,
                      const cq_options& options, error_code& ec);
} // namespace detail

/// An ibv_cq bound to a completion_channel. It owns its event count: every
/// event read for it is counted when read and acked in batches of
/// cq_options::ack_batch, and the remainder is acked before ibv_destroy_cq, so
/// destruction neither hangs on unacked events nor acks more than was got.
///
/// One async_poll (or async_wait) at a time per CQ, like a socket's reads (a
/// second one while one is in progress completes with already_started);
/// CQs on one channel may be used from different threads or strands.
///
/// `Executor` is the type of the executor handlers run on by default. A CQ made
/// on a channel takes the channel's executor (a channel of any executor type
/// that converts to `Executor`); completion_queue uses asio::any_io_executor,
/// and rebind_executor (or asio::as_default_on) gives the same CQ with another
/// executor type or a default completion token.
template <class Executor>
class basic_completion_queue
    : public detail::io_object<basic_completion_queue, Executor, detail::completion_queue_impl> {
    using base = detail::io_object<basic_completion_queue, Executor, detail::completion_queue_impl>;
    using impl_type = detail::completion_queue_impl;

public:
    using typename base::executor_type;
    /// The ibv_cq (created and destroyed by this object).
    using typename base::native_handle_type;

    /// A CQ that is not open yet (see open()).
    /// `ex`: an executor, or an execution context such as an io_context, as for
    /// Asio's own I/O objects.
    explicit basic_completion_queue(const detail::executor_or_context<Executor>& ex) : base(ex) {}

    /// A CQ on `channel`, with the channel's executor (see open()); throws
    /// system_error.
    template <class Executor1>
    requires std::is_convertible_v<const Executor1&, Executor>
    basic_completion_queue(const basic_completion_channel<Executor1>& channel, int entries,
                           cq_options options = {})
        : base(channel.get_executor()) {
        open(channel, entries, options);
    }

    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // cancels the pending wait, acks what is owed and destroys the CQ; completions
    // still in the CQ are discarded with it. When the CQ cannot be destroyed (a QP
    // still uses it), its state stays with the channel, which acks its events and
    // retries the destroy when the channel goes. A move assignment does the same
    // with the CQ it replaces.
    using base::base;
    using base::operator=;

    /// ibv_create_cq with at least `entries` entries on `channel`'s device,
    /// bound to `channel`. Handlers keep running on this object's executor
    /// (normally the channel's: see the constructor). Errors:
    /// asio::error::already_open; bad_descriptor for a closed channel; the errno
    /// of ibv_create_cq.
    template <class Executor1>
    void open(const basic_completion_channel<Executor1>& channel, int entries,
              const cq_options& options, error_code& ec) {
        // The channel's shared state, through io_object's accessor: the two
        // objects are not friends.
        this->open_with(ec, [&](error_code& e) {
            return detail::open_completion_queue(this->state_of(channel), entries, options, e);
        });
    }
    template <class Executor1>
    void open(const basic_completion_channel<Executor1>& channel, int entries, error_code& ec) {
        open(channel, entries, cq_options{}, ec);
    }
    /// The same; throws system_error naming the call.
    template <class Executor1>
    void open(const basic_completion_channel<Executor1>& channel, int entries,
              const cq_options& options = {}) {
        this->open_or_throw("rdma_asio::completion_queue::open: ibv_create_cq", channel, entries,
                            options);
    }

    /// Delivers work completions into `wcs`: polls first; when the CQ is empty,
    /// spins (if configured), then arms (ibv_req_notify_cq), polls again to close
    /// the race with a completion that came before the arm, and only then waits for
    /// the channel's event. An event that finds the CQ empty is counted and
    /// handled quietly.
    ///
    /// Signature: void(error_code, std::size_t n), 1 <= n <= wcs.size() on
    /// success. Errors: operation_aborted; bad_descriptor on a closed or
    /// moved-from CQ; invalid_argument for an empty span; already_started while
    /// another async_poll or async_wait of this CQ is in progress;
    /// errc::completion_queue_in_use when the CQ's completions go to queue_pair
    /// operations; the errno of ibv_poll_cq or ibv_req_notify_cq; the channel's error
    /// (errc::device_removed once the device is gone). Every error is posted, never reported inside
    /// the initiating call.
    ///
    /// Per-operation cancellation: terminal, partial and total. A wait cancelled
    /// before it found completions takes none; one that had already polled
    /// completions when the cancellation came (its handler queued but not run)
    /// gives them back to the CQ, where the next async_poll delivers them first,
    /// and completes with operation_aborted. So `poll || timer` and parallel
    /// groups lose no completion, as long as the race runs on one strand or one
    /// thread (on several threads without a strand, `||` can throw away a poll
    /// that completed as the timer won: docs/cancellation.md).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_poll(std::span<ibv_wc> wcs,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate<void(error_code, std::size_t), start_poll>(
            "rdma_asio::completion_queue::async_poll", std::forward<CompletionToken>(token), wcs);
    }

    /// Waits for the CQ's next completion event (the pattern of
    /// ibv_get_cq_event(3), for callers that poll themselves). The library counts
    /// the event and acks it in batches; the caller re-arms (request_notify) and
    /// polls (native_handle).
    ///
    /// Signature: void(error_code). Errors as async_poll's (no
    /// invalid_argument). Per-operation cancellation: terminal, partial and total;
    /// a wait cancelled after it had taken the event gives it back, so the next
    /// async_wait of this CQ completes with it.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_wait(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate<void(error_code), start_wait>(
            "rdma_asio::completion_queue::async_wait", std::forward<CompletionToken>(token));
    }

    /// ibv_req_notify_cq with the CQ's solicited_only setting; bad_descriptor
    /// when the CQ is not open.
    void request_notify(error_code& ec) noexcept {
        ec = this->impl_ ? this->impl_->arm() : error_code(asio::error::bad_descriptor);
    }
    void request_notify() {
        error_code ec;
        request_notify(ec);
        detail::throw_if_error(ec, "ibv_req_notify_cq");
    }

    // cancel(): completes this CQ's pending wait with operation_aborted.

    /// Closes the object, as every I/O object's close() does, and as the
    /// destructor does: cancels the pending wait, acks what is owed and destroys
    /// the CQ; a CQ that a QP still uses (EBUSY) stays with the channel, which acks
    /// its events and destroys it when the channel goes. Never fails.
    using base::close;
    /// The same, and `ec` says EBUSY when the CQ could not be destroyed yet (a QP
    /// still uses it; the channel destroys it when it goes). Closed either way,
    /// as Asio's socket close(ec) is. Nothing when not open.
    void close(error_code& ec) noexcept {
        ec.clear();
        if (std::shared_ptr<impl_type> impl = std::move(this->impl_))
            ec = impl->close();
    }
    /// Cancels the pending wait, acks what is owed and destroys the CQ, only if it
    /// can be destroyed now: when ibv_destroy_cq fails (EBUSY while a QP still
    /// uses the CQ), `ec` says so and the CQ stays open and usable: destroy the QP,
    /// then try again. Nothing when not open.
    void try_close(error_code& ec) noexcept {
        ec.clear();
        if (!this->impl_)
            return;
        ec = this->impl_->try_close();
        if (!ec)
            this->impl_.reset();
    }

    /// The CQ's counters; all zero when it is not open.
    cq_counters counters() const noexcept {
        return this->impl_ ? this->impl_->counters() : cq_counters{};
    }

private:
    struct start_poll {
        template <class Handler>
        void operator()(const std::shared_ptr<impl_type>& impl, const Executor& io_ex,
                        Handler&& handler, std::span<ibv_wc> wcs) const {
            if (!impl->claim(detail::cq_shared_state::user::owner))
                return detail::closed_initiation<void(error_code, std::size_t)>::fail(
                    std::forward<Handler>(handler), io_ex,
                    "rdma_asio::completion_queue::async_poll", errc::completion_queue_in_use);
            detail::start_cq_poll(impl, io_ex, std::forward<Handler>(handler), wcs);
        }
    };

    struct start_wait {
        template <class Handler>
        void operator()(const std::shared_ptr<impl_type>& impl, const Executor& io_ex,
                        Handler&& handler) const {
            if (!impl->claim(detail::cq_shared_state::user::owner))
                return detail::closed_initiation<void(error_code)>::fail(
                    std::forward<Handler>(handler), io_ex,
                    "rdma_asio::completion_queue::async_wait", errc::completion_queue_in_use);
            detail::start_composed<void(error_code)>(detail::cq_event_op{impl},
                                                     std::forward<Handler>(handler), io_ex);
        }
    };
};

/// A CQ made on a channel has the channel's executor type.
template <class Executor>
basic_completion_queue(const basic_completion_channel<Executor>&, int, cq_options = {})
    -> basic_completion_queue<Executor>;

/// A CQ on any I/O executor.
using completion_queue = basic_completion_queue<>;

} // namespace rdma_asio
