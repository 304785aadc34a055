// What a queue pair's state (queue_pair_impl.hpp) does on events from outside its
// work requests: the rdma_cm peer's disconnect, and the device's error events for
// the QP or its CQs, read by an async_event_stream.
#include "rdma_asio/detail/core/asio_flavour.hpp"
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
    // The observers run under the stream's lock: they only post. (The stream's
    // lock is taken under this one, never the other way round.)
    auto observer = [weak = weak_from_this(), ex](event_type type) {
        asio::post(ex, [weak, type] {
            if (auto self = weak.lock())
                self->error_event(type);
        });
    };
    std::lock_guard lock(mutex_);
    if (closed_) {
        ec = asio::error::bad_descriptor;
        return;
    }
    error_watches_.push_back(events.observe(qp_, observer));
    error_watches_.push_back(events.observe(qp_->send_cq, observer));
    if (qp_->recv_cq != qp_->send_cq)
        error_watches_.push_back(events.observe(qp_->recv_cq, observer));
    ec.clear();
}

void queue_pair_impl::error_event(event_type type) noexcept {
    error_code reason;
    switch (type) {
    case event_type::qp_fatal:
        reason = errc::queue_pair_fatal;
        break;
    case event_type::qp_req_err:
        reason = errc::queue_pair_request_error;
        break;
    case event_type::qp_access_err:
        reason = errc::queue_pair_access_error;
        break;
    case event_type::cq_err:
        reason = errc::completion_queue_overrun;
        break;
    default:
        return; // comm_est, last_wqe_reached, path migration: not errors
    }
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        if (closed_)
            return;
        if (type == event_type::cq_err) {
            // Completions were lost, flush completions may be too: nothing more is
            // waited for. The QP is stopped first, so the device takes no further
            // work request of it.
            ibv_qp_attr attr{};
            attr.qp_state = IBV_QPS_ERR;
            ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
            machine_.fail_all(reason, a);
        } else {
            // The QP is in the error state already: its posted work requests end
            // with their flush completions, which this reason then names.
            machine_.set_error(reason, a);
        }
        now = act(a);
    }
    finish(a, now);
}

} // namespace rdma_asio::detail
