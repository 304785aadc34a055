// shared_receive_queue::async_wait_limit: the SRQ's limit armed (ibv_modify_srq,
// IBV_SRQ_LIMIT) as the operation is launched, then one wait on the device's
// event stream for this SRQ's IBV_EVENT_SRQ_LIMIT_REACHED. Out of the public
// header: shared_receive_queue.hpp only starts it.
//
// An arming failure is reported from a post, never inside the initiating call.
// The operation holds the SRQ's state and the stream's, never a pointer to
// either object, which may move or go meanwhile.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/detail/async_event/device_event_wait.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"
#include "rdma_asio/detail/qp/shared_receive_queue_impl.hpp"
#include "rdma_asio/event_match.hpp"
#include "rdma_asio/event_type.hpp"

#include <cstdint>
#include <memory>
#include <utility>

namespace rdma_asio::detail {

template <class Executor1>
struct srq_limit_wait_op {
    std::shared_ptr<shared_receive_queue_impl> srq;
    device_event_wait<Executor1> events;
    std::uint32_t limit;
    enum class step : std::uint8_t { arm, report, wait } next = step::arm;
    error_code failure{};

    template <class Self>
    void operator()(Self& self, error_code ec = {}, async_event = {}) {
        switch (next) {
        case step::arm:
            srq->arm_limit(limit, failure);
            if (failure) {
                next = step::report;
                return asio::post(std::move(self));
            }
            next = step::wait;
            return events.async_next(
                event_match(event_type::srq_limit_reached, srq->native_handle()), std::move(self));
        case step::report:
            return self.complete(failure);
        case step::wait:
            return self.complete(ec);
        }
    }
};

/// The Start of async_wait_limit's initiation (io_object::initiate).
struct start_srq_limit_wait {
    template <class IoExecutor, class Handler, class Executor1>
    void operator()(const std::shared_ptr<shared_receive_queue_impl>& srq, const IoExecutor& io_ex,
                    Handler&& handler, device_event_wait<Executor1> events,
                    std::uint32_t limit) const {
        start_composed<void(error_code)>(
            srq_limit_wait_op<Executor1>{srq, std::move(events), limit},
            std::forward<Handler>(handler), io_ex);
    }
};

} // namespace rdma_asio::detail
