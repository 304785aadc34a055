// Completion queues bound to a completion_channel, with batched acks, as Asio
// I/O objects.
#pragma once

#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/detail/cq_event_op.hpp"
#include "rdma_asio/detail/cq_poll_op.hpp"
#include "rdma_asio/spin_budget.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/compose.hpp>
#include <asio/post.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

namespace rdma_asio {

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

/// Counters of one CQ, readable from any thread.
struct cq_counters {
    std::uint64_t events = 0;        ///< completion events read for this CQ
    std::uint64_t ack_calls = 0;     ///< ibv_ack_cq_events() calls
    std::uint64_t completions = 0;   ///< work completions delivered by async_poll
    std::uint64_t empty_wakeups = 0; ///< events after which the CQ was empty
    std::uint64_t repoll_hits = 0;   ///< polls right after arming that found completions
    std::uint64_t spin_hits = 0;     ///< polls while spinning that found completions
    std::uint64_t arms = 0;          ///< ibv_req_notify_cq() calls
    std::uint64_t wake_hits = 0;     ///< polls on a channel wake-up, before the event
                                     ///< was read, that found completions
    std::uint64_t given_back = 0;    ///< completions that cancelled waits had polled
                                     ///< and gave back for the next poll
};

/// An ibv_cq bound to a completion_channel. It owns its event count: every
/// event read for it is counted when read and acked in batches of
/// cq_options::ack_batch, and the remainder is acked before ibv_destroy_cq, so
/// destruction neither hangs on unacked events nor acks more than was got.
///
/// One async_poll (or async_wait_event) at a time per CQ, like a socket's reads (a
/// second one while one is in progress completes with already_started);
/// CQs on one channel may be used from different threads or strands.
class completion_queue {
public:
    using executor_type = asio::any_io_executor;

    /// ibv_create_cq with at least `entries` entries on `channel`'s device;
    /// throws std::system_error naming the call.
    completion_queue(completion_channel& channel, int entries, cq_options options = {});
    completion_queue(completion_queue&& other) noexcept;
    completion_queue& operator=(completion_queue&& other) noexcept;
    completion_queue(const completion_queue&) = delete;
    completion_queue& operator=(const completion_queue&) = delete;
    /// Cancels pending waits, acks what is owed and destroys the CQ. Completions
    /// still in the CQ are discarded with it.
    ~completion_queue();

    executor_type get_executor() const noexcept { return executor_; }
    ibv_cq* native_handle() const noexcept { return impl_ ? impl_->shared.cq : nullptr; }

    /// Delivers work completions into `wcs`: polls first; when the CQ is empty,
    /// spins (if configured), then arms (ibv_req_notify_cq), polls again to close
    /// the race with a completion that came before the arm, and only then waits for
    /// the channel's event. An event that finds the CQ empty is counted and
    /// handled quietly.
    ///
    /// Signature: void(std::error_code, std::size_t n), 1 <= n <= wcs.size() on
    /// success. Errors: operation_aborted; bad_descriptor on a closed CQ;
    /// invalid_argument for an empty span; already_started while another
    /// async_poll or async_wait_event of this CQ is in progress; the errno of
    /// ibv_poll_cq or ibv_req_notify_cq; the channel's error (errc::device_removed
    /// once the device is gone). Every error is posted, never reported inside the
    /// initiating call.
    ///
    /// Per-operation cancellation: terminal, partial and total. A wait cancelled
    /// before it found completions takes none; one that had already polled
    /// completions when the cancellation came (its handler queued but not run)
    /// gives them back to the CQ, where the next async_poll delivers them first,
    /// and completes with operation_aborted. So `poll || timer` and parallel
    /// groups lose no completion.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_poll(std::span<ibv_wc> wcs,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return asio::async_compose<CompletionToken, void(std::error_code, std::size_t)>(
            detail::cq_poll_op{impl_, wcs}, token, executor_);
    }

    /// The raw seed pattern for callers that poll themselves: completes at the
    /// next completion event of this CQ, which the library counts and acks in
    /// batches. The caller re-arms (request_notify) and polls (native_handle).
    ///
    /// Signature: void(std::error_code). Errors as async_poll's (no
    /// invalid_argument). Per-operation cancellation: terminal, partial and total;
    /// a wait cancelled after it had taken the event gives it back, so the next
    /// async_wait_event of this CQ completes with it.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_wait_event(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return asio::async_compose<CompletionToken, void(std::error_code)>(
            detail::cq_event_op{impl_}, token, executor_);
    }

    /// ibv_req_notify_cq with the CQ's solicited_only setting.
    void request_notify(std::error_code& ec) noexcept;
    void request_notify();

    /// Completes this CQ's pending wait with operation_aborted.
    void cancel();
    /// Cancels pending waits, acks what is owed and destroys the CQ. When
    /// ibv_destroy_cq fails (EBUSY while a QP still uses the CQ), `ec` says so and
    /// the CQ stays open and usable: destroy the QP, then close again. The
    /// destructor does the same; if the CQ still cannot be destroyed then, its
    /// state stays with the channel, which acks its events and retries the destroy
    /// when the channel goes.
    void close(std::error_code& ec) noexcept;
    bool is_open() const noexcept { return impl_ != nullptr; }
    cq_counters counters() const noexcept;

private:
    void close_or_keep() noexcept;

    executor_type executor_;
    std::shared_ptr<detail::cq_impl> impl_;
};

} // namespace rdma_asio
