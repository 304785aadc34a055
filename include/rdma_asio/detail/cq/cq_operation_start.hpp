// The start shared by a CQ's operations (async_poll, async_wait).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/cq/cq_shared_state.hpp"

#include <utility>

namespace rdma_asio::detail {

// Starts an operation of one CQ: refuses a closed CQ (bad_descriptor) and a second
// operation while one is in progress (already_started), both posted, never inline:
// `op.refused` is set and the operation is posted, to complete with it. True when
// the operation may go on.
template <class Op, class Self>
bool begin_cq_operation(Op& op, Self& self) {
    self.reset_cancellation_state(asio::enable_total_cancellation());
    if (!op.cq || op.cq->closed()) {
        op.refused = asio::error::bad_descriptor;
    } else if (!op.cq->begin_operation()) {
        op.refused = asio::error::already_started;
    } else {
        return true;
    }
    asio::post(std::move(self));
    return false;
}

} // namespace rdma_asio::detail
