// Why the device refused a work request, in terms a user can act on.
//
// ibv_post_send(3) and ibv_post_recv(3) answer EINVAL both for a request the QP
// cannot carry and for a QP whose state cannot take it: the verbs accept sends
// only in RTS (and SQD), receives from INIT on, and soft-RoCE refuses anything
// else with EINVAL. The most common case by far is a queue pair used before it is
// connected, and the errno alone does not say so. So after a refusal, and only
// then (asking the state costs a system call), the library asks the QP's state
// and, when the state explains the refusal, reports
// errc::queue_pair_not_connected instead. Every other refusal keeps its errno.
// This decides from the errno, the queue and the state; the query is the
// caller's.
#pragma once

#include "rdma_asio/detail/qp/work_request_machine.hpp"
#include "rdma_asio/error.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <optional>

namespace rdma_asio::detail {

/// Whether a refusal of a post with `err` should be explained by the QP's state:
/// only EINVAL is.
inline bool state_may_explain(int err) noexcept {
    return err == EINVAL;
}

/// The error a post refused with `err` completes with, knowing the QP was in
/// `state` (nullopt when the state could not be read).
inline error_code post_refusal(int err, work_queue queue,
                               std::optional<ibv_qp_state> state) noexcept {
    if (state_may_explain(err) && state) {
        const bool before_receive = *state == IBV_QPS_RESET;
        const bool before_send =
            *state == IBV_QPS_RESET || *state == IBV_QPS_INIT || *state == IBV_QPS_RTR;
        if (queue == work_queue::receive ? before_receive : before_send)
            return errc::queue_pair_not_connected;
    }
    return {err, asio::error::get_system_category()};
}

} // namespace rdma_asio::detail
