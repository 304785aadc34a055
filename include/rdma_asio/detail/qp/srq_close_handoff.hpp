// Where a queue pair on a shared receive queue is in async_close, as a decision
// with no I/O: the queue pair carries each step out under its own lock.
//
// Why a stage between open and closed: a QP on an SRQ that is destroyed at once
// may leave receives it took from the SRQ without their completions (a provider
// may drop a destroyed QP's completions from its CQ). The order that loses none:
// move the QP to the error state, wait for IBV_EVENT_QP_LAST_WQE_REACHED (the
// event ibv_get_async_event(3) lists for a QP on an SRQ), read the completions
// still in the receive CQ, then destroy it. Between stop() and close()
// the QP refuses new operations but stays attached to its CQs and its SRQ; close()
// may also come early (the object closed, or its connection's close destroying the
// QP through its id), and then ends async_close's wait for the event itself, since
// the kernel drops that event with the QP.
#pragma once

#include "rdma_asio/detail/core/operation.hpp"

#include <memory>
#include <utility>

namespace rdma_asio::detail {

class async_event_stream_impl;

class srq_close_handoff {
public:
    /// Between stop() and close().
    bool stopped() const noexcept { return stopped_; }

    /// The QP is stopped: in the error state, closed to operations, not destroyed.
    void stop() noexcept { stopped_ = true; }

    /// async_close waits for IBV_EVENT_QP_LAST_WQE_REACHED on `events`: kept, so
    /// that close() can end that wait. False when close() came first (the caller
    /// ends the wait itself).
    bool remember_event_wait(std::weak_ptr<async_event_stream_impl> events) noexcept {
        if (!stopped_)
            return false;
        events_ = std::move(events);
        return true;
    }

    /// async_close asks for the receive CQ to be read out, to be told through
    /// `waiter`: true when the drain is to be requested now (stopped, still routed
    /// to, none requested yet); false when `waiter` is to complete at once.
    bool start_drain(operation& waiter, bool routed) noexcept {
        if (!stopped_ || !routed || drain_waiter_ != nullptr)
            return false;
        drain_waiter_ = &waiter;
        return true;
    }

    /// The drain ended (or the context shuts down): whoever waits for it, or null.
    operation* take_drain_waiter() noexcept { return std::exchange(drain_waiter_, nullptr); }

    /// close() or shutdown(): the stage ends. Returns where async_close's wait for
    /// the event runs, if it was remembered, for the caller to end it (after the
    /// event it is gone already, and ending it does nothing).
    std::weak_ptr<async_event_stream_impl> end() noexcept {
        stopped_ = false;
        return std::exchange(events_, {});
    }

private:
    bool stopped_ = false;
    std::weak_ptr<async_event_stream_impl> events_;
    operation* drain_waiter_ = nullptr;
};

} // namespace rdma_asio::detail
