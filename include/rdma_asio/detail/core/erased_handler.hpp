// A completion handler of signature void(Args...) whose type does not name the
// handler it holds: what the layers under an operation take, so that they are one
// type for every program's handler and can be compiled once, in the library.
//
// Why: a composed operation's layers (an accept, the rdma_cm request under it, the
// dispatcher's wait under that) are each a template on the handler of the layer
// above. With a program's coroutine handler at the top, each layer's type spells it
// out again, and the program compiles every layer for its own handler. Erased once
// where such an operation starts, the layers under it are compiled for this type.
//
// What it forwards: the handler's associated executor, or the one the operation
// gives when the handler has none (as any_io_executor, which holds any executor a
// handler may have), and its cancellation slot (Asio's
// cancellation_slot, the type every composed operation gives its steps). Not its
// allocator: the layers under it allocate with their default (once per operation,
// not per message); the handler itself is held in memory from its own allocator
// (the library's per-thread block cache when it names none, as for every
// operation), given back before it is invoked, as Asio's own operations do.
//
// Asio 1.24 (Debian 12's libasio-dev) has no any_completion_handler, hence this.
#pragma once

#include "rdma_asio/detail/core/allocated.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/op_block_cache.hpp"

#include <utility>

namespace rdma_asio::detail {

template <class... Args>
class erased_handler {
public:
    using executor_type = asio::any_io_executor;
    using cancellation_slot_type = asio::cancellation_slot;

    /// Holds `handler`; its executor is its associated one, `fallback` if it has none.
    template <class Handler, class Executor>
    erased_handler(Handler&& handler, const Executor& fallback)
        : held_(holder<std::decay_t<Handler>>::make(
              std::forward<Handler>(handler), asio::get_associated_executor(handler, fallback))) {}

    erased_handler(erased_handler&& other) noexcept : held_(std::exchange(other.held_, nullptr)) {}
    erased_handler& operator=(erased_handler&& other) noexcept {
        if (this != &other) {
            reset();
            held_ = std::exchange(other.held_, nullptr);
        }
        return *this;
    }
    ~erased_handler() { reset(); }

    executor_type get_executor() const noexcept { return held_->ex; }
    cancellation_slot_type get_cancellation_slot() const noexcept { return held_->slot(); }

    /// Invokes the handler once; its memory is given back first.
    void operator()(Args... args) { std::exchange(held_, nullptr)->invoke(std::move(args)...); }

private:
    struct base {
        explicit base(executor_type e) : ex(std::move(e)) {}
        virtual void invoke(Args&&... args) = 0; // gives the memory back, then invokes
        virtual void destroy() noexcept = 0;     // gives it back without invoking
        virtual cancellation_slot_type slot() const noexcept = 0;

        executor_type ex;

    protected:
        ~base() = default;
    };

    template <class Handler>
    struct holder final : base {
        using allocator_type = asio::associated_allocator_t<Handler, op_allocator<void>>;

        template <class H>
        holder(H&& h, executor_type e) : base(std::move(e)), handler(std::forward<H>(h)) {}

        static allocator_type allocator_of(const Handler& handler) noexcept {
            return asio::get_associated_allocator(handler, op_allocator<void>());
        }

        // `handler` is moved from, or copied when the program passed an lvalue.
        template <class H>
        static holder* make(H&& handler, executor_type ex) {
            const allocator_type allocator(allocator_of(handler));
            return allocate_constructed<holder>(allocator, std::forward<H>(handler), std::move(ex));
        }

        void invoke(Args&&... args) override {
            // The allocator is copied before the handler is moved from.
            const allocator_type allocator(allocator_of(handler));
            Handler h(std::move(handler));
            destroy_deallocated(allocator, this);
            std::move(h)(std::move(args)...);
        }
        void destroy() noexcept override { destroy_deallocated(allocator_of(handler), this); }
        cancellation_slot_type slot() const noexcept override {
            return asio::get_associated_cancellation_slot(handler);
        }

        Handler handler;
    };

    void reset() noexcept {
        if (held_)
            std::exchange(held_, nullptr)->destroy();
    }

    base* held_;
};

} // namespace rdma_asio::detail
