// The state of one completion_queue that its operations share: the CQ and its
// acks, its channel, the decisions of its polls, the completions a cancelled poll
// gave back, and who may use it. Every field is private; the operations
// (cq_poll_op, cq_direct_poll, cq_event_op, cq_wait_match) and the CQ's reader
// (cq_reader) use it through the members below.
#pragma once

#include "rdma_asio/cq_counters.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/cq/completion_channel_impl.hpp"
#include "rdma_asio/detail/cq/completion_channel_source.hpp"
#include "rdma_asio/detail/cq/cq_ack_counter.hpp"
#include "rdma_asio/detail/cq/cq_poll_machine.hpp"
#include "rdma_asio/spin_budget.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>
#include <vector>

namespace rdma_asio::detail {

class cq_shared_state {
public:
    /// Who takes the CQ's completions: nobody yet, its owner (async_poll,
    /// async_wait), or the target of a cq_reader (which serves others, e.g. the
    /// operations of queue pairs). Set once, never undone.
    enum class user : std::uint8_t { none, owner, reader };

    cq_shared_state(unsigned ack_batch, bool solicited_only, spin_budget spin) noexcept
        : cq_context_(ack_batch), solicited_only_(solicited_only), spin_(spin) {}
    cq_shared_state(const cq_shared_state&) = delete;
    cq_shared_state& operator=(const cq_shared_state&) = delete;

    ibv_cq* native_handle() const noexcept { return cq_context_.cq; }
    /// The channel's executor, where the CQ's own waits run.
    const asio::any_io_executor& executor() const noexcept { return executor_; }
    event_dispatcher<completion_channel_source>& dispatcher() const {
        return *channel_->dispatcher;
    }
    bool closed() const noexcept { return closed_.load(); }

    /// Claims the CQ for `who`; false when the other user has it.
    bool claim(user who) noexcept {
        user expected = user::none;
        return taken_by_.compare_exchange_strong(expected, who) || expected == who;
    }

    /// One async_poll or async_wait at a time: marks one in progress; false when
    /// one already is (already_started).
    bool begin_operation() noexcept { return !busy_.exchange(true); }
    /// The operation in progress ends; before its handler, which may start the next.
    void end_operation() noexcept { busy_.store(false); }

    /// The decisions of the CQ's polls: used by the one operation in progress, and
    /// by its wait under the channel's lock.
    cq_poll_machine& machine() noexcept { return machine_; }
    /// How long the next wait spins before arming.
    std::chrono::nanoseconds spin_budget_now() const noexcept { return spin_.budget(); }
    /// cancel() calls so far: a spinning async_poll, which is not waiting in the
    /// dispatcher, sees the count change between its rounds and ends.
    std::uint64_t cancellations() const noexcept {
        return cancellations_.load(std::memory_order_acquire);
    }
    /// Whether a spinning poll that started when cancellations() was `at_start`
    /// must stop at its next round: the CQ was closed or cancel()ed since.
    bool stopped_since(std::uint64_t at_start) const noexcept {
        return closed() || cancellations() != at_start;
    }

    /// Completions given back by a cancelled wait first, else ibv_poll_cq into
    /// wcs: the count (0 when empty) or an error.
    int poll(std::span<ibv_wc> wcs, error_code& ec) noexcept;
    /// Keeps wcs for the next poll, ahead of what is still in the CQ.
    void give_back(std::span<const ibv_wc> wcs);
    /// Completions given back and not yet polled again.
    std::size_t returned_pending() const noexcept { return returned_.size(); }
    /// ibv_req_notify_cq with the CQ's solicited_only setting, nothing more.
    error_code req_notify() noexcept;
    /// req_notify() for a caller that polls itself (request_notify): the CQ is
    /// armed when it succeeds.
    error_code arm() noexcept;
    /// Carries out the machine's poll and arm steps on this CQ, from `s` on,
    /// until it decides to wait, yield or complete, and returns that decision.
    cq_poll_machine::step advance(std::span<ibv_wc> wcs, cq_poll_machine::step s) noexcept;

    /// The counters completion_queue::counters() reports.
    cq_counters counters() const noexcept;

protected:
    ~cq_shared_state() = default;

    // For completion_queue_impl, which opens and closes the CQ.
    asio::any_io_executor executor_;
    std::shared_ptr<completion_channel_impl> channel_;
    cq_ack_counter cq_context_; // the CQ and its acks: ibv_cq::cq_context points here
    std::atomic<bool> closed_{false};
    std::atomic<std::uint64_t> cancellations_{0};

private:
    bool solicited_only_ = false;
    spin_policy spin_;
    cq_poll_machine machine_;
    // Completions a cancelled async_poll had taken: the next poll delivers them
    // first, in their order.
    std::vector<ibv_wc> returned_;
    std::atomic<user> taken_by_{user::none};
    std::atomic<bool> busy_{false};
    std::atomic<std::uint64_t> completions_{0};
    std::atomic<std::uint64_t> given_back_{0};
};

} // namespace rdma_asio::detail
