// The lifetime of a queue pair's state (queue_pair_impl.hpp): refusing new
// operations, stopping a QP on a shared receive queue for async_close, draining
// its receive CQ, destroying it (close), the execution context's shutdown, and
// letting go of the SRQ and of the demultiplexers afterwards.
#include "rdma_asio/detail/async_event/async_event_stream_impl.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/qp/cq_demux.hpp"
#include "rdma_asio/detail/qp/datagram_support.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/detail/qp/shared_receive_queue_impl.hpp"

#include <utility>

namespace rdma_asio::detail {

void queue_pair_impl::leave_srq() noexcept {
    if (!srq_)
        return;
    // The receives the QP took may still have completions in its CQ, unread
    // (rxe leaves a destroyed QP's completions there): the SRQ takes them.
    if (recv_demux_)
        recv_demux_->retire(qp_num_, srq_);
    // The QP was destroyed (only then does ibv_destroy_srq accept): this object
    // keeps the SRQ's state, whose receives other QPs may still complete.
    srq_->detach_queue_pair();
}

void queue_pair_impl::refuse_new_locked(std::vector<event_subscription>& watches) noexcept {
    closed_.store(true, std::memory_order_release);
    machine_.refuse_new(asio::error::bad_descriptor);
    watches = error_watch_.take();
}

bool queue_pair_impl::release_locked(std::vector<event_subscription>& watches) noexcept {
    refuse_new_locked(watches);
    if (owner_ == qp_owner::verbs) {
        if (datagram_) // ibv_destroy_qp refuses a QP still attached to a group
            datagram_->detach_all(qp_);
        if (ibv_destroy_qp(qp_) != 0)
            return false;
        if (datagram_) // its address handles and ring go before the protection domain
            datagram_->release();
        return true;
    }
    if (owner_ == qp_owner::rdma_cm && cm_id_->qp == qp_) {
        rdma_destroy_qp(cm_id_); // sets cm_id_->qp to null: the id's close skips it
        return true;
    }
    return false;
}

bool queue_pair_impl::stop() noexcept {
    wr_actions a;
    posted_now now;
    std::vector<event_subscription> watches; // ended outside the lock
    bool stopped = false;
    {
        std::lock_guard lock(mutex_);
        if (closed_)
            return false;
        // Only a QP this object destroys, on a shared receive queue, has receives
        // the device may still be taking for it.
        if (srq_ && owner_ != qp_owner::borrowed) {
            refuse_new_locked(watches);
            srq_close_.stop();
            stopped = true;
            // Posted operations end by their flush completions; the QP stays
            // attached, so that the SRQ's receives it took still reach the SRQ.
            machine_.set_error(asio::error::operation_aborted, a);
            // Also when already in the error state (a device error, a disconnect):
            // moved again, which is harmless.
            a.move_qp_to_error = true;
            now = act(a);
        }
    }
    if (!stopped) {
        close();
        return false;
    }
    finish(a, now);
    end_address_waits();
    return true;
}

void queue_pair_impl::drain(operation& waiter) noexcept {
    bool ask = false;
    {
        std::lock_guard lock(mutex_);
        // Only a stopped QP still routed to (close() and shutdown() come later).
        ask = srq_close_.start_drain(waiter, recv_demux_ != nullptr);
    }
    if (ask)
        recv_demux_->request_drain(shared_from_this());
    else
        waiter.complete(delivery::post);
}

bool queue_pair_impl::end_last_wqe_wait_on_close(
    std::weak_ptr<async_event_stream_impl> events) noexcept {
    std::lock_guard lock(mutex_);
    return srq_close_.remember_event_wait(std::move(events));
}

void queue_pair_impl::drained() noexcept {
    operation* waiter = nullptr;
    {
        std::lock_guard lock(mutex_);
        waiter = srq_close_.take_drain_waiter();
    }
    if (waiter != nullptr)
        waiter->complete(delivery::post);
}

void queue_pair_impl::close() noexcept {
    wr_actions a;
    posted_now now;
    bool detach = false;
    std::vector<event_subscription> watches;                  // ended outside the lock
    std::shared_ptr<ibv_pd> pd;                               // released outside the lock
    std::shared_ptr<async_event_stream_impl> last_wqe_events; // its wait ended outside the lock
    bool destroyed = false;
    {
        std::lock_guard lock(mutex_);
        if (closed_ && !srq_close_.stopped())
            return;
        last_wqe_events = srq_close_.end().lock();
        destroyed = release_locked(watches);
        if (destroyed) {
            // Destroyed: the device no longer touches any buffer, and the posted
            // work requests will have no completions. Its protection domain may go.
            pd = std::move(pd_);
            machine_.fail_all(asio::error::operation_aborted, a);
        } else {
            // Borrowed (or not destroyable): flushed, and each posted operation
            // ends by its flush completion, as the buffers require.
            machine_.set_error(asio::error::operation_aborted, a);
        }
        now = act(a);
        detach = machine_.outstanding() == 0;
        if (!detach)
            draining_self_ = shared_from_this();
    }
    finish(a, now);
    if (destroyed)
        leave_srq();
    if (detach)
        detach_all();
    if (last_wqe_events) // async_close's wait, if it is still pending (after the event, nothing)
        last_wqe_events->dispatcher().cancel(this);
    end_address_waits();
}

void queue_pair_impl::shutdown() noexcept {
    std::shared_ptr<queue_pair_impl> drained; // released last; the registry holds this too
    operation* drain_waiter = nullptr;
    datagram_support::waiting_sends address_waits;
    wr_actions a;
    std::vector<event_subscription> watches;
    std::shared_ptr<ibv_pd> pd;
    bool destroyed = false;
    {
        std::lock_guard lock(mutex_);
        if (!closed_ || srq_close_.stopped()) {
            destroyed = release_locked(watches);
            if (destroyed) {
                pd = std::move(pd_);
            } else {
                // Borrowed: stopped, so that the device takes no further work
                // request of it; what it still completes is ignored (fail_all).
                ibv_qp_attr attr{};
                attr.qp_state = IBV_QPS_ERR;
                ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
            }
        }
        // Every operation, the posted ones too (a closed borrowed QP's that were
        // waiting for their flush completions): no handler runs any more.
        machine_.fail_all(asio::error::operation_aborted, a);
        posted_send_.store(0);
        posted_recv_.store(0);
        drained = std::move(draining_self_);
        drain_waiter = srq_close_.take_drain_waiter();
        srq_close_.end(); // its wait for the event goes with the context
        if (datagram_)    // destroyed outside the lock, their handlers not invoked
            address_waits = datagram_->take_all_waiters();
    }
    if (drain_waiter != nullptr)
        drain_waiter->destroy();
    // Outside the lock: a handler may own the queue_pair (a coroutine frame), whose
    // close() then finds it closed.
    while (work_request_op* op = a.to_complete.pop_front())
        static_cast<qp_operation&>(*op).destroy();
    if (destroyed)
        leave_srq();
    detach_all();
}

void queue_pair_impl::detach_all() noexcept {
    send_demux_->detach(qp_num_);
    if (recv_demux_ != send_demux_)
        recv_demux_->detach(qp_num_);
}

} // namespace rdma_asio::detail
