// What a completion_queue counts of its own work: completion_queue::counters().
#pragma once

#include <cstdint>

namespace rdma_asio {

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

} // namespace rdma_asio
