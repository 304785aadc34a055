#include "rdma_asio/detail/cq/cq_ack_counter.hpp"

namespace rdma_asio::detail {

void cq_ack_counter::event_got() noexcept {
    events_.fetch_add(1, std::memory_order_relaxed);
    if (++unacked_ >= batch_)
        flush();
}

void cq_ack_counter::flush() noexcept {
    if (unacked_ == 0)
        return; // an ack of 0 events is no ack: never call it
    ibv_ack_cq_events(cq, unacked_);
    unacked_ = 0;
    ack_calls_.fetch_add(1, std::memory_order_relaxed);
}

} // namespace rdma_asio::detail
