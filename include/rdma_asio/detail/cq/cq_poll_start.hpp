// The start of async_poll: the direct way or the composed operation.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"
#include "rdma_asio/detail/cq/completion_queue_impl.hpp"
#include "rdma_asio/detail/cq/cq_direct_poll.hpp"
#include "rdma_asio/detail/cq/cq_poll_op.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

/// Starts a poll of `impl` (claimed for its owner by the caller): a poll that may
/// complete at once takes the direct path
/// (cq_direct_poll.hpp), any other waits for the CQ's event (cq_poll_op).
template <class Executor, class Handler>
void start_cq_poll(const std::shared_ptr<completion_queue_impl>& impl, const Executor& io_ex,
                   Handler&& handler, std::span<ibv_wc> wcs) {
    if (begin_direct_poll(*impl))
        return start_direct_poll(impl, io_ex, std::forward<Handler>(handler), wcs);
    start_composed<void(error_code, std::size_t)>(cq_poll_op{impl, wcs},
                                                  std::forward<Handler>(handler), io_ex);
}

} // namespace rdma_asio::detail
