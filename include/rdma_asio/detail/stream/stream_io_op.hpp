// A stream's read or write that waits, as the stream holds it: one operation per
// call, its handler kept as a handler_operation (memory from the handler's
// allocator, work counted until it has run) and completed once, posted, or
// destroyed unrun with the stream when its context shuts down.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/handler_operation.hpp"
#include "rdma_asio/detail/core/operation.hpp"

#include <cstddef>
#include <utility>

namespace rdma_asio::detail {

/// A read or a write that waits, as the stream holds it: its handler's
/// cancellation slot, and its result, set as it ends.
class stream_io_wait : public operation {
public:
    virtual asio::cancellation_slot slot() const noexcept = 0;
    void set_result(error_code ec, std::size_t n) noexcept {
        ec_ = ec;
        n_ = n;
    }

protected:
    stream_io_wait() = default;
    ~stream_io_wait() = default;

    error_code ec_;
    std::size_t n_ = 0;
};

/// The one kind of stream_io_wait: a handler_operation, so its memory comes from the
/// handler's allocator, and work is counted on the handler's executor (and the
/// stream's) until the handler has run, as for every operation of the library.
template <class Handler, class IoExecutor>
class stream_io_op final : public handler_operation<stream_io_op<Handler, IoExecutor>,
                                                    stream_io_wait, Handler, IoExecutor> {
    using base = handler_operation<stream_io_op, stream_io_wait, Handler, IoExecutor>;

public:
    using typename base::ptr;

    template <class H>
    stream_io_op(H&& handler, const IoExecutor& io_ex) : base(std::forward<H>(handler), io_ex) {}

    asio::cancellation_slot slot() const noexcept override { return this->cancellation_slot(); }

    static void invoke(ptr self) {
        // The slot is cleared here, where the handler runs (its executor, where
        // the program emits the slot's signal), never by the wake-up that ended
        // the operation, which may run on another thread; as qp_handler_op does.
        // Not cleared, the stream's canceller left in it would find its wait
        // gone and do nothing (stream_core::watch_cancel).
        if (auto slot = self->cancellation_slot(); slot.is_connected())
            slot.clear();
        Handler handler(std::move(self->handler_));
        const error_code ec = self->ec_;
        const std::size_t n = self->n_;
        self.reset();
        std::move(handler)(ec, n);
    }
};

/// The waiting read's or write's operation, owned: completed once (posted), or
/// destroyed unrun with the stream (its context shut down).
class stream_handler {
public:
    stream_handler() = default;
    template <class Handler, class IoExecutor>
    stream_handler(Handler handler, const IoExecutor& io_ex)
        : op_(stream_io_op<Handler, IoExecutor>::create(std::move(handler), io_ex).release()) {}
    stream_handler(stream_handler&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
    stream_handler& operator=(stream_handler&& other) noexcept {
        if (this != &other) {
            reset();
            op_ = std::exchange(other.op_, nullptr);
        }
        return *this;
    }
    ~stream_handler() { reset(); }

    explicit operator bool() const noexcept { return op_ != nullptr; }
    asio::cancellation_slot slot() const noexcept {
        return op_ ? op_->slot() : asio::cancellation_slot();
    }
    /// Completes the handler with (ec, n), posted, or with delivery::may_run_here
    /// in this call when its executor allows; empty afterwards. Its cancellation
    /// slot is left alone here (stream_io_op::invoke clears it).
    void complete(error_code ec, std::size_t n, delivery how = delivery::post) {
        if (stream_io_wait* o = std::exchange(op_, nullptr)) {
            o->set_result(ec, n);
            o->complete(how);
        }
    }

private:
    void reset() noexcept {
        if (stream_io_wait* o = std::exchange(op_, nullptr))
            o->destroy();
    }

    stream_io_wait* op_ = nullptr;
};

} // namespace rdma_asio::detail
