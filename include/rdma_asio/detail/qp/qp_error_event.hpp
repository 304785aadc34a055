// What a device's error event (ibv_get_async_event(3)) means for a queue pair's
// operations: a decision with no I/O, unit-tested (qp_error_event_test).
//
// - IBV_EVENT_QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR: the device has moved the QP to
//   the error state. Its posted work requests still end by their flush
//   completions (IBV_WC_WR_FLUSH_ERR), which the event's reason then names; the
//   ones waiting for room, and later ones, end at once with it.
// - IBV_EVENT_CQ_ERR on one of its CQs: the CQ overran, completions were lost and
//   flush completions may be too, so nothing more is waited for. The QP is moved
//   to the error state first (the device takes no further work request of it),
//   and every operation ends now.
// - Anything else (COMM_EST, SQ_DRAINED, path migration, QP_LAST_WQE_REACHED):
//   not an error of the operations.
#pragma once

#include "rdma_asio/error.hpp"
#include "rdma_asio/event_type.hpp"

namespace rdma_asio::detail {

struct qp_error_effect {
    error_code reason;             ///< empty: not an error of the operations
    bool completions_lost = false; ///< CQ_ERR: stop the QP, end every operation now
};

inline qp_error_effect qp_error_of(event_type type) noexcept {
    switch (type) {
    case event_type::qp_fatal:
        return {errc::queue_pair_fatal};
    case event_type::qp_req_err:
        return {errc::queue_pair_request_error};
    case event_type::qp_access_err:
        return {errc::queue_pair_access_error};
    case event_type::cq_err:
        return {errc::completion_queue_overrun, true};
    default:
        return {};
    }
}

} // namespace rdma_asio::detail
