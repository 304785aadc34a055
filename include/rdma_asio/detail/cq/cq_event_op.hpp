// async_wait as a composed operation: the next completion event of one CQ.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/cq/cq_operation_start.hpp"
#include "rdma_asio/detail/cq/cq_shared_state.hpp"
#include "rdma_asio/detail/cq/cq_wait_match.hpp"

#include <memory>
#include <utility>

namespace rdma_asio::detail {

struct cq_event_op {
    std::shared_ptr<cq_shared_state> cq;
    bool started = false;
    error_code refused{};

    template <class Self>
    void operator()(Self& self) {
        if (!started) {
            started = true;
            if (begin_cq_operation(*this, self))
                cq->dispatcher().async_next(cq_match{cq->native_handle()}, std::move(self));
            return;
        }
        self.complete(refused); // refused at the start, reported via post
    }

    // A cancelled wait that had taken the event gives it back through the
    // dispatcher, so the next wait of this CQ sees it.
    template <class Self>
    void operator()(Self& self, error_code ec, cq_event) {
        if (!ec)
            cq->machine().event_read();
        cq->end_operation();
        self.complete(ec);
    }
};

} // namespace rdma_asio::detail
