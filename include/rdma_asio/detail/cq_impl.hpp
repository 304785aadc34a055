// The state of one completion_queue: the CQ and its acks, its channel, the
// decisions of its polls and the completions a cancelled poll gave back.
#pragma once

#include "rdma_asio/detail/asio_flavour.hpp"
#include "rdma_asio/detail/channel_impl.hpp"
#include "rdma_asio/detail/completion_channel_source.hpp"
#include "rdma_asio/detail/cq_ack_counter.hpp"
#include "rdma_asio/detail/cq_poll_machine.hpp"
#include "rdma_asio/spin_budget.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>
#include <vector>

namespace rdma_asio::detail {

struct cq_impl {
    cq_impl(unsigned ack_batch, bool solicited_only, spin_budget spin) noexcept
        : shared(ack_batch), solicited_only(solicited_only), spin(spin) {}

    asio::any_io_executor executor;
    std::shared_ptr<channel_impl> channel;
    cq_ack_counter shared; // ibv_cq::cq_context points here
    bool solicited_only = false;
    spin_policy spin;
    cq_poll_machine machine;
    // Completions a cancelled async_poll had taken: the next poll delivers them
    // first, in their order.
    std::vector<ibv_wc> returned;
    std::atomic<bool> closed{false};
    // Who takes the CQ's completions: nobody yet, its owner (async_poll,
    // async_wait), or queue pairs' operations (cq_demux). Set once, never undone.
    enum class user : std::uint8_t { none, owner, queue_pairs };
    std::atomic<user> taken_by{user::none};
    /// Claims the CQ for `who`; false when the other user has it.
    bool claim(user who) noexcept {
        user expected = user::none;
        return taken_by.compare_exchange_strong(expected, who) || expected == who;
    }
    // Set while an async_poll or async_wait is in progress (one at a time).
    std::atomic<bool> busy{false};
    // cancel() calls so far: a spinning async_poll, which is not waiting in the
    // dispatcher, sees the count change between its rounds and ends.
    std::atomic<std::uint64_t> cancellations{0};

    std::atomic<std::uint64_t> completions{0};
    std::atomic<std::uint64_t> given_back{0};

    ibv_cq* native_handle() const noexcept { return shared.cq; }
    event_dispatcher<completion_channel_source>& dispatcher() const { return *channel->dispatcher; }

    /// Completions given back by a cancelled wait first, else ibv_poll_cq into
    /// wcs: the count (0 when empty) or an error.
    int poll(std::span<ibv_wc> wcs, error_code& ec) noexcept;
    /// Keeps wcs for the next poll, ahead of what is still in the CQ.
    void give_back(std::span<const ibv_wc> wcs);
    /// ibv_req_notify_cq with the CQ's solicited_only setting, nothing more.
    error_code req_notify() noexcept;
    /// req_notify() for a caller that polls itself (request_notify): the CQ is
    /// armed when it succeeds.
    error_code arm() noexcept;
    /// Carries out the machine's poll and arm steps on this CQ, from `s` on,
    /// until it decides to wait, yield or complete, and returns that decision.
    cq_poll_machine::step advance(std::span<ibv_wc> wcs, cq_poll_machine::step s) noexcept;
};

} // namespace rdma_asio::detail
