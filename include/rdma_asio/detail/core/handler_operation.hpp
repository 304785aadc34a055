// The one implementation of an operation's handler: where it lives, the work it
// holds, and how it is delivered or destroyed. Every operation of the library is a
// handler_operation (event_dispatcher's waits, on which the CQ's polls and waits are
// built, and queue_pair's work requests), so these rules hold for all of them:
//
// - Memory: the operation is allocated through the handler's associated
//   allocator; by default a per-thread cache of blocks (op_block_cache), which a
//   loop of operations, or a batch of completions whose handlers start as many
//   operations, keeps reusing. It is freed before the handler runs.
// - Work: counted from the start until the handler has run, as Asio counts it for
//   its own operations: on the handler's associated executor, and on the I/O
//   object's executor when that is another one (handler_work).
// - Delivery: complete(delivery::post) never runs the handler inside the call;
//   complete(delivery::may_run_here) runs it there when its executor allows it on
//   this thread (asio::dispatch's rule), else posts it. The handler runs on its
//   associated executor, with its associated allocator used for what Asio
//   allocates to queue it.
// - Shutdown: destroy() frees the operation and the handler, never invoked; so
//   does the destruction of a queued delivery that never ran (Asio destroys what
//   is queued on a context that shuts down).
//
// Derived (the concrete operation) provides, publicly:
//   Derived(Handler&& or const Handler&, const IoExecutor&, BaseArgs...);
//   static void invoke(ptr self);
//       // takes the handler and the result out of *self, frees it (self.reset()),
//       // then calls the handler
#pragma once

#include "rdma_asio/detail/core/allocated.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/handler_work.hpp"
#include "rdma_asio/detail/core/op_block_cache.hpp"
#include "rdma_asio/detail/core/operation.hpp"

#include <memory>
#include <utility>

namespace rdma_asio::detail {

template <class Derived, class Base, class Handler, class IoExecutor>
class handler_operation : public Base {
public:
    using handler_executor = asio::associated_executor_t<Handler, IoExecutor>;
    /// Where an operation's memory comes from when its handler names no allocator.
    using default_allocator = op_allocator<void>;
    using handler_allocator = asio::associated_allocator_t<Handler, default_allocator>;

    /// Destroys an operation and gives its memory back to its handler's allocator.
    struct deleter {
        void operator()(Derived* op) const noexcept {
            // The copy taken at the start: the handler may be moved from by now.
            const handler_allocator alloc(static_cast<handler_operation*>(op)->alloc_);
            destroy_deallocated(alloc, op);
        }
    };
    using ptr = std::unique_ptr<Derived, deleter>;

    /// A new operation for `handler`, in memory from its allocator.
    template <class H, class... Args>
    static ptr create(H&& handler, const IoExecutor& io_ex, Args&&... args) {
        const handler_allocator alloc(allocator_of(handler));
        return ptr(allocate_constructed<Derived>(alloc, std::forward<H>(handler), io_ex,
                                                 std::forward<Args>(args)...));
    }

    void complete(delivery how) final {
        ptr self(static_cast<Derived*>(this));
        if (how == delivery::may_run_here && work_.running_here())
            return Derived::invoke(std::move(self));
        const handler_allocator alloc = allocator_of(handler_);
        try {
            if (how == delivery::may_run_here)
                work_.dispatch(invoker{std::move(self), alloc});
            else
                work_.post(invoker{std::move(self), alloc});
        } catch (...) {
            // The executor could not queue the handler (no memory): it is
            // destroyed with the operation, never invoked.
        }
    }

    void destroy() noexcept final { ptr self(static_cast<Derived*>(this)); }

    /// The handler's cancellation slot, where the operation installs its own
    /// handler of cancellation requests.
    asio::associated_cancellation_slot_t<Handler> cancellation_slot() const noexcept {
        return asio::get_associated_cancellation_slot(handler_);
    }

protected:
    template <class H, class... BaseArgs>
    handler_operation(H&& handler, const IoExecutor& io_ex, BaseArgs&&... base_args)
        : Base(std::forward<BaseArgs>(base_args)...), handler_(std::forward<H>(handler)),
          alloc_(allocator_of(handler_)),
          work_(asio::get_associated_executor(handler_, io_ex), io_ex) {}
    ~handler_operation() = default;

    Handler handler_;

private:
    template <class H>
    static auto allocator_of(const H& handler) noexcept {
        return asio::get_associated_allocator(handler, default_allocator());
    }

    // What is queued on the handler's executor: it owns the operation, so that a
    // delivery destroyed unrun (its context shut down) destroys the operation too.
    // Its allocator (the handler's, for what the executor allocates to queue it) is
    // a nested type, not asio::bind_allocator: a binder specialises
    // associated_executor, and Asio then wraps every post in a work_dispatcher (a
    // second count of work and two executor copies) that the operation, which
    // counts its own work, does not need.
    struct invoker {
        ptr op;
        [[no_unique_address]] handler_allocator alloc;
        using allocator_type = handler_allocator;
        allocator_type get_allocator() const noexcept { return alloc; }
        void operator()() { Derived::invoke(std::move(op)); }
    };

    [[no_unique_address]] handler_allocator alloc_;
    handler_work<handler_executor, IoExecutor> work_;
};

} // namespace rdma_asio::detail
