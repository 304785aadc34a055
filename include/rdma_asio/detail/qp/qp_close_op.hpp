// queue_pair::async_close: for a queue pair on a shared receive queue, the
// spec's order (the QP in the error state, one wait for its
// IBV_EVENT_QP_LAST_WQE_REACHED on the device's event stream, the receive CQ read
// to its end, then the QP destroyed) as a composed operation; for any other, a
// close() with its result posted. Out of the public header: queue_pair.hpp only
// starts it.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/detail/async_event/device_event_wait.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/result_operation.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/event_match.hpp"
#include "rdma_asio/event_type.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

// A queue pair stopped for async_close (queue_pair_impl::stop), destroyed
// when the operation ends, however it ends: completed, cancelled, or
// destroyed with its execution context.
struct stopped_queue_pair {
    explicit stopped_queue_pair(std::shared_ptr<queue_pair_impl> stopped) noexcept
        : impl(std::move(stopped)) {}
    stopped_queue_pair(stopped_queue_pair&&) noexcept = default;
    stopped_queue_pair& operator=(stopped_queue_pair&&) = delete;
    ~stopped_queue_pair() { destroy(); }
    void destroy() noexcept {
        if (std::shared_ptr<queue_pair_impl> last = std::move(impl))
            last->close();
    }
    std::shared_ptr<queue_pair_impl> impl;
};

// The wait for a QP's IBV_EVENT_QP_LAST_WQE_REACHED, keyed by its queue
// pair's state, so that the state's close() can end it.
struct last_wqe_of {
    const void* state;
    event_match match;
    bool operator()(const async_event& ev) const noexcept { return match(ev); }
    const void* key() const noexcept { return state; }
};

// The spec's order for a QP on an SRQ: in the error state (stop()), one
// async_next for its IBV_EVENT_QP_LAST_WQE_REACHED, the receive CQ read of
// what the device completed until then (drain), and only then destroyed.
// Without a stopped QP, the result is posted.
template <class Executor1, class IoExecutor>
struct close_after_last_wqe {
    stopped_queue_pair qp;
    const ibv_qp* native;                // the QP's, while stopped_queue_pair may still destroy it
    device_event_wait<Executor1> events; // the device's event stream, as the operation began
    IoExecutor io_ex;                    // the queue pair's: the drain's I/O executor
    bool was_open;
    enum class step : std::uint8_t { start, wait, drain, report } next = step::start;
    error_code waited{}; // the event's wait

    template <class Self>
    void operator()(Self& self, error_code ec = {}, async_event event = {}) {
        switch (next) {
        case step::start:
            if (!qp.impl) {
                next = step::report;
                return asio::post(std::move(self));
            }
            next = step::wait;
            return wait_for_event(std::move(self));
        case step::wait:
            event = async_event(); // acked first: ibv_destroy_qp waits for its events' acks
            waited = ec;
            if (!waited) {
                next = step::drain;
                return start_drain(std::move(self));
            }
            [[fallthrough]]; // cancelled, or the stream failed: destroyed now
        case step::drain:
            qp.destroy();
            return self.complete(waited);
        case step::report:
            return self.complete(was_open ? error_code() : error_code(asio::error::bad_descriptor));
        }
    }

    template <class Self>
    void wait_for_event(Self&& self) {
        // Copies first: self, which holds them, moves into the wait.
        const std::shared_ptr<queue_pair_impl> impl = qp.impl;
        const device_event_wait<Executor1> stream = events;
        const auto& stream_state = stream.state;
        stream.async_next(
            last_wqe_of{impl.get(), event_match(event_type::qp_last_wqe_reached, native)},
            std::move(self));
        // A close() of the QP since stop() (its connection's close) would leave
        // this wait to an event the kernel dropped with the QP.
        if (stream_state && !impl->end_last_wqe_wait_on_close(stream_state))
            stream_state->dispatcher().cancel(impl.get());
    }

    template <class Self>
    void start_drain(Self&& self) {
        // Copies first: self, which holds them, moves into the operation.
        const IoExecutor io_ex = this->io_ex;
        std::shared_ptr<queue_pair_impl> impl = qp.impl;
        using drain_op = result_operation<std::decay_t<Self>, IoExecutor>;
        impl->drain(*drain_op::create(std::move(self), io_ex, error_code()).release());
    }
};

// The Start of async_close's initiation (io_object::initiate): the QP is
// stopped (or closed) as the operation is launched, not when it is made, so that
// one made with asio::deferred and never launched changes nothing. The operation
// holds the state by ownership: the object may have moved by the launch.
struct start_qp_close {
    template <class IoExecutor, class Handler, class Executor1>
    void operator()(const std::shared_ptr<queue_pair_impl>& impl, const IoExecutor& io_ex,
                    Handler&& handler, device_event_wait<Executor1> events) const {
        const bool was_open = !impl->released();
        const ibv_qp* qp = was_open ? impl->native_handle() : nullptr;
        const bool stopped = was_open && impl->stop(); // else closed by stop()
        start_composed<void(error_code)>(
            close_after_last_wqe<Executor1, IoExecutor>{
                stopped_queue_pair(stopped ? impl : nullptr), qp, std::move(events), io_ex,
                was_open},
            std::forward<Handler>(handler), io_ex);
    }
};

} // namespace rdma_asio::detail
