// A queue pair's watch of the device's error events (queue_pair::watch_errors):
// one subscription per object on an async_event_stream (the QP, its send CQ, its
// receive CQ when it is another), whose observer hands the event to the queue
// pair's state on the executor given. What an event then means is
// qp_error_event's decision.
//
// Why posted: the observers run under the stream's lock, on the thread reading the
// stream, and the queue pair's state takes its own lock to act: posting keeps the
// two locks apart (the stream's lock is taken under the queue pair's when a watch
// starts or ends, never the other way round).
#pragma once

#include "rdma_asio/async_event_stream_ref.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/event_type.hpp"

#include <infiniband/verbs.h>

#include <memory>
#include <utility>
#include <vector>

namespace rdma_asio::detail {

class qp_error_watch {
public:
    /// From now on, the error events `events` reads for `qp` or its CQs reach
    /// `target->error_event(type)` on `ex`, while `target` lives.
    template <class Target>
    void add(const async_event_stream_ref& events, const ibv_qp* qp, std::weak_ptr<Target> target,
             const asio::any_io_executor& ex) {
        auto observer = [target = std::move(target), ex](event_type type) {
            asio::post(ex, [target, type] {
                if (auto self = target.lock())
                    self->error_event(type);
            });
        };
        subscriptions_.push_back(events.observe(qp, observer));
        subscriptions_.push_back(events.observe(qp->send_cq, observer));
        if (qp->recv_cq != qp->send_cq)
            subscriptions_.push_back(events.observe(qp->recv_cq, observer));
    }

    /// The watch ends: its subscriptions, to be destroyed by the caller outside
    /// the queue pair's lock (each takes its stream's lock as it ends).
    std::vector<event_subscription> take() noexcept { return std::exchange(subscriptions_, {}); }

private:
    std::vector<event_subscription> subscriptions_;
};

} // namespace rdma_asio::detail
