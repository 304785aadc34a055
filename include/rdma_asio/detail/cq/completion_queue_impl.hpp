// The state of an open completion_queue as its I/O object holds it: the CQ state
// the operations share (cq_shared_state), plus opening, closing and the target of
// the reader that serves others on the CQ (cq_reader.hpp; non-template, see
// src/cq/completion_queue.cpp).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/atomic_mutex.hpp"
#include "rdma_asio/detail/cq/completion_channel_impl.hpp"
#include "rdma_asio/detail/cq/cq_read_target.hpp"
#include "rdma_asio/detail/cq/cq_shared_state.hpp"
#include "rdma_asio/spin_budget.hpp"

#include <infiniband/verbs.h>

#include <memory>
#include <mutex>
#include <utility>

namespace rdma_asio::detail {

class completion_queue_impl final : public cq_shared_state,
                                    public std::enable_shared_from_this<completion_queue_impl> {
public:
    using native_handle_type = ibv_cq*;
    static constexpr native_handle_type no_handle = nullptr;
    using cq_shared_state::cq_shared_state;

    /// ibv_create_cq with at least `entries` entries on `channel`. Null with `ec`
    /// set on failure (bad_descriptor for a null channel).
    static std::shared_ptr<completion_queue_impl>
    open(std::shared_ptr<completion_channel_impl> channel, int entries, unsigned ack_batch,
         bool solicited_only, const spin_budget& spin, error_code& ec);

    /// Completes the CQ's pending wait with operation_aborted, a spinning one too
    /// (at its next round: cancellations() counts it).
    void cancel() noexcept {
        cancellations_.fetch_add(1, std::memory_order_release);
        dispatcher().cancel(cq_context_.cq);
    }
    /// Cancels the pending wait, acks what is owed and destroys the CQ, under the
    /// channel's lock. When ibv_destroy_cq fails (EBUSY: a QP still uses the CQ)
    /// the CQ stays usable and the error is returned.
    error_code try_close() noexcept;
    /// try_close(); when the CQ cannot be destroyed, the channel keeps this state
    /// (acking the CQ's events) and retries the destroy when it goes, and the
    /// error is returned: closed either way.
    error_code close() noexcept;

    /// For a channel that goes while it keeps this state (close()): acks what is
    /// owed and destroys the CQ; false when a QP still uses it.
    bool destroy_now() noexcept;
    /// For that channel, when destroy_now() failed: this state destroys the CQ
    /// when it goes (its last holder is a queue pair on the CQ, whose QP is
    /// destroyed by then), then lets go of `remnant`, the channel's remains.
    void destroy_when_gone(std::shared_ptr<comp_channel_remnant> remnant) noexcept {
        remnant_ = std::move(remnant);
    }
    ~completion_queue_impl();

    /// The target of the reader that takes this CQ's completions for others
    /// (user::reader): the one attached, or make(), which the CQ then names, by
    /// weak reference, until it goes. One kind of target (`Target`) attaches
    /// to a CQ: the user it was claimed for.
    template <class Target, class Make>
    std::shared_ptr<Target> read_target(Make&& make) {
        std::lock_guard lock(reader_mutex_);
        std::shared_ptr<cq_read_target> t = read_target_.lock();
        if (!t) {
            std::shared_ptr<Target> made = std::forward<Make>(make)();
            read_target_ = made;
            return made;
        }
        return std::static_pointer_cast<Target>(std::move(t));
    }
    /// Runs f() where close() cannot take the channel away meanwhile: a reader's
    /// target that starts or cancels a read sees either an open CQ with its
    /// channel or a closed one (closed()) throughout.
    template <class F>
    decltype(auto) excluding_close(F&& f) {
        std::lock_guard lock(reader_mutex_);
        return std::forward<F>(f)();
    }

private:
    // Taken each time a reader of the CQ starts a read (excluding_close), so an
    // atomic_mutex: two for a stream's round trip, and std::mutex's pair cost
    // about 45 instructions each.
    atomic_mutex reader_mutex_;
    std::weak_ptr<cq_read_target> read_target_;
    // Set when the channel went before the CQ could be destroyed: see
    // destroy_when_gone.
    std::shared_ptr<comp_channel_remnant> remnant_;
};

} // namespace rdma_asio::detail
