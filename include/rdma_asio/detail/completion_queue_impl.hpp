// The state of an open completion_queue as its I/O object holds it: the CQ state
// the operations share (cq_impl), plus what opening and closing need
// (non-template, see src/completion_queue.cpp).
#pragma once

#include "rdma_asio/detail/asio_flavour.hpp"
#include "rdma_asio/detail/channel_impl.hpp"
#include "rdma_asio/detail/cq_impl.hpp"
#include "rdma_asio/spin_budget.hpp"

#include <infiniband/verbs.h>

#include <memory>
#include <mutex>

namespace rdma_asio::detail {

class cq_demux;

struct completion_queue_impl : cq_impl, std::enable_shared_from_this<completion_queue_impl> {
    using native_handle_type = ibv_cq*;
    static constexpr native_handle_type no_handle = nullptr;
    using cq_impl::cq_impl;

    // The demultiplexer that reads this CQ for queue pairs (cq_demux::of), while
    // one is attached. The lock also keeps close() from taking the channel away
    // while the demultiplexer starts or cancels a poll.
    std::mutex demux_mutex;
    std::weak_ptr<cq_demux> demux;

    /// ibv_create_cq with at least `entries` entries on `channel`. Null with `ec`
    /// set on failure (bad_descriptor for a null channel).
    static std::shared_ptr<completion_queue_impl> open(std::shared_ptr<channel_impl> channel,
                                                       int entries, unsigned ack_batch,
                                                       bool solicited_only, const spin_budget& spin,
                                                       error_code& ec);

    /// Completes the CQ's pending wait with operation_aborted, a spinning one too
    /// (at its next round: cancellations counts it).
    void cancel() noexcept {
        cancellations.fetch_add(1, std::memory_order_release);
        dispatcher().cancel(shared.cq);
    }
    /// Cancels the pending wait, acks what is owed and destroys the CQ, under the
    /// channel's lock. When ibv_destroy_cq fails (EBUSY: a QP still uses the CQ)
    /// the CQ stays usable and the error is returned.
    error_code try_close() noexcept;
    /// try_close(); when the CQ cannot be destroyed, the channel keeps this state
    /// (acking the CQ's events) and retries the destroy when it goes.
    void close() noexcept;
};

} // namespace rdma_asio::detail
