// Batched acks of one CQ's completion events (ibv_ack_cq_events).
//
// ibv_destroy_cq waits until every event got with ibv_get_cq_event has been
// acked, and an ack takes the CQ's mutex: acking each event costs a lock per
// event, acking none hangs the destroy. The counter acks in batches as events
// are read and acks the remainder before the CQ is destroyed, and never acks more
// than was got. The CQ's cq_context points at its counter, so the channel's
// reader finds it from the event alone.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

namespace rdma_asio::detail {

class cq_ack_counter {
public:
    /// `batch`: events acked per ibv_ack_cq_events call (0 counts as 1).
    explicit cq_ack_counter(unsigned batch = 64) noexcept : batch_(batch == 0 ? 1 : batch) {}
    cq_ack_counter(const cq_ack_counter&) = delete;
    cq_ack_counter& operator=(const cq_ack_counter&) = delete;

    /// The CQ whose events these are; set once ibv_create_cq returned it.
    ibv_cq* cq = nullptr;

    /// An event of this CQ was got (ibv_get_cq_event): counts it and acks a full
    /// batch. Called by the channel's reader, under the dispatcher's lock.
    void event_got() noexcept;
    /// Acks what is owed; before ibv_destroy_cq, under the dispatcher's lock so
    /// that no read counts another event in between.
    void flush() noexcept;

    unsigned batch() const noexcept { return batch_; }
    /// Events got and not acked yet (under the dispatcher's lock).
    unsigned unacked() const noexcept { return unacked_; }
    /// Events got, readable from any thread.
    std::uint64_t events() const noexcept { return events_.load(std::memory_order_relaxed); }
    /// ibv_ack_cq_events calls, readable from any thread.
    std::uint64_t ack_calls() const noexcept { return ack_calls_.load(std::memory_order_relaxed); }

private:
    unsigned batch_;
    unsigned unacked_ = 0;
    std::atomic<std::uint64_t> events_{0};
    std::atomic<std::uint64_t> ack_calls_{0};
};

} // namespace rdma_asio::detail
