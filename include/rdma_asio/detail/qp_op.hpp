// A queue_pair operation with its handler: how it is started, cancelled and
// completed on the handler's executor.
#pragma once

#include "rdma_asio/detail/asio_flavour.hpp"
#include "rdma_asio/detail/handler_work.hpp"
#include "rdma_asio/detail/op_block_cache.hpp"
#include "rdma_asio/detail/queue_pair_impl.hpp"

#include <cstddef>
#include <memory>
#include <system_error>
#include <utility>

namespace rdma_asio {
struct receive_info;
} // namespace rdma_asio

namespace rdma_asio::detail {

/// Fills a receive_info from the completion of a receive (queue_pair.hpp).
void fill_receive_info(receive_info& info, const ibv_wc& wc) noexcept;

template <class Handler, class IoExecutor>
class qp_op final : public qp_operation {
public:
    using handler_executor = asio::associated_executor_t<Handler, IoExecutor>;
    /// The operation's memory comes from the handler's associated allocator; by
    /// default a per-thread cache of blocks (op_block_cache), which a steady
    /// stream of operations, batch after batch, keeps reusing.
    using default_allocator = op_allocator<void>;
    using allocator_type = typename std::allocator_traits<
        asio::associated_allocator_t<Handler, default_allocator>>::template rebind_alloc<qp_op>;

    /// Destroys an operation and gives its memory back to its allocator.
    struct deleter {
        void operator()(qp_op* op) const noexcept {
            allocator_type alloc(op->alloc_);
            std::allocator_traits<allocator_type>::destroy(alloc, op);
            std::allocator_traits<allocator_type>::deallocate(alloc, op, 1);
        }
    };
    using ptr = std::unique_ptr<qp_op, deleter>;

    /// A new operation for `handler`, in memory from its allocator.
    template <class H>
    static ptr create(work_queue q, H&& handler, const IoExecutor& io_ex) {
        allocator_type alloc(asio::get_associated_allocator(handler, default_allocator()));
        qp_op* mem = std::allocator_traits<allocator_type>::allocate(alloc, 1);
        try {
            std::allocator_traits<allocator_type>::construct(
                alloc, mem, q, std::forward<H>(handler), io_ex, alloc);
        } catch (...) {
            std::allocator_traits<allocator_type>::deallocate(alloc, mem, 1);
            throw;
        }
        return ptr(mem);
    }

    template <class H>
    qp_op(work_queue q, H&& handler, const IoExecutor& io_ex, const allocator_type& alloc)
        : qp_operation(q), handler_(std::forward<H>(handler)),
          slot_(asio::get_associated_cancellation_slot(handler_)),
          work_(asio::get_associated_executor(handler_, io_ex)), alloc_(alloc) {}

    /// Where receive_info goes on success (receives that asked for it).
    receive_info* info = nullptr;

    /// Starts `op` on `qp`, with per-operation cancellation when the handler has a
    /// connected slot. Takes ownership of `op`.
    static void start(ptr op, const std::shared_ptr<queue_pair_impl>& qp) {
        if (op->slot_.is_connected())
            op->slot_.template emplace<canceller>(qp, op.get());
        qp->start(*op.release());
    }

    qp_op(const qp_op&) = delete;
    qp_op& operator=(const qp_op&) = delete;
    /// The canceller points at this operation: it goes with it (the invoker has
    /// normally cleared it already, where the handler runs).
    ~qp_op() {
        if (slot_.is_connected())
            slot_.clear();
    }

    void complete(bool may_run_here) override {
        ptr self(this);
        if (may_run_here && work_.running_here())
            return invoker{std::move(self)}();
        auto alloc = asio::get_associated_allocator(handler_);
        try {
            work_.post(asio::bind_allocator(alloc, invoker{std::move(self)}));
        } catch (...) {
            // Nowhere to run the handler (its executor refused the post): it is
            // destroyed with the operation.
        }
    }

    void destroy() noexcept override { ptr self(this); }

private:
    // Per-operation cancellation; it runs where the handler's completion runs, so
    // it never races with the slot's clear() in invoker.
    struct canceller {
        std::weak_ptr<queue_pair_impl> qp;
        qp_operation* op;
        canceller(const std::shared_ptr<queue_pair_impl>& q, qp_operation* o) : qp(q), op(o) {}
        void operator()(asio::cancellation_type type) const {
            if (auto state = qp.lock())
                state->cancel_operation(*op, type);
        }
    };

    struct invoker {
        ptr op;
        void operator()() {
            if (op->slot_.is_connected()) {
                op->slot_.clear();
                op->slot_ = {}; // the destructor leaves the slot alone now
            }
            const error_code ec = op->result;
            std::size_t bytes = 0;
            if (!ec) {
                bytes = op->queue == work_queue::receive ? op->wc.byte_len : op->sge.length;
                if (op->info != nullptr)
                    fill_receive_info(*op->info, op->wc);
            }
            Handler handler(std::move(op->handler_));
            op.reset(); // the operation's memory is free before the handler runs
            std::move(handler)(ec, bytes);
        }
    };

    Handler handler_;
    asio::associated_cancellation_slot_t<Handler> slot_;
    handler_work<handler_executor> work_;
    allocator_type alloc_;
};

} // namespace rdma_asio::detail
