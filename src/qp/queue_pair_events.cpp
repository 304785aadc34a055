// What a queue pair's state (queue_pair_impl.hpp) does on events from outside its
// work requests: the rdma_cm peer's disconnect, and the device's error events for
// the QP or its CQs, read by an async_event_stream.
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/qp/qp_error_event.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/error.hpp"

namespace rdma_asio::detail {

void queue_pair_impl::disconnected(bool call_rdma_disconnect) noexcept {
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        if (closed_)
            return;
        // librdmacm moves an RC QP to the error state in rdma_disconnect; the
        // machine asks for that too, which is harmless twice.
        if (call_rdma_disconnect && cm_id_ != nullptr)
            rdma_disconnect(cm_id_);
        machine_.set_error(errc::disconnected, a);
        now = act(a);
    }
    finish(a, now);
}

void queue_pair_impl::watch_errors(const async_event_stream_ref& events,
                                   const asio::any_io_executor& ex, error_code& ec) {
    std::lock_guard lock(mutex_);
    if (closed_) {
        ec = asio::error::bad_descriptor;
        return;
    }
    error_watch_.add(events, qp_, weak_from_this(), ex);
    ec.clear();
}

void queue_pair_impl::error_event(event_type type) noexcept {
    const qp_error_effect effect = qp_error_of(type);
    if (!effect.reason)
        return;
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        if (closed_)
            return;
        if (effect.completions_lost) {
            ibv_qp_attr attr{};
            attr.qp_state = IBV_QPS_ERR;
            ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
            machine_.fail_all(effect.reason, a);
        } else {
            machine_.set_error(effect.reason, a);
        }
        now = act(a);
    }
    finish(a, now);
}

} // namespace rdma_asio::detail
