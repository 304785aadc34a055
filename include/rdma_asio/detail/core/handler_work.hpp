// The outstanding work an operation holds until its handler has run, and where
// the handler may run.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_context_executor.hpp"

#include <optional>
#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

/// Whether an executor can run anything (a default any_io_executor cannot).
template <class Executor>
bool has_target(const Executor& ex) noexcept {
    if constexpr (std::is_constructible_v<bool, const Executor&>)
        return static_cast<bool>(ex);
    else
        return true;
}

/// Work counted on one executor (outstanding_work.tracked), which the handler is
/// posted or dispatched through.
template <class Executor>
class executor_work {
public:
    explicit executor_work(const Executor& ex) : guard_(ex) {}

    /// Whether the handler may run on this thread now, as asio::dispatch would run
    /// it there: its executor is an io_context's, running here.
    bool running_here() const noexcept {
        if constexpr (std::is_same_v<Executor, asio::io_context::executor_type>)
            return guard_.get_executor().running_in_this_thread();
        else
            return false;
    }

    template <class Function>
    void post(Function&& f) const {
        asio::post(guard_.get_executor(), std::forward<Function>(f));
    }
    /// asio::dispatch's rule: here, when the executor allows it (a strand this
    /// thread is running, ...), else queued there. `f` may destroy this object
    /// when it runs here: the executor is a copy.
    template <class Function>
    void dispatch(Function&& f) const {
        const Executor ex = guard_.get_executor();
        asio::dispatch(ex, std::forward<Function>(f));
    }

private:
    asio::executor_work_guard<Executor> guard_;
};

/// The common case of a handler behind any_io_executor (use_awaitable, a
/// co_spawned coroutine, a handler with no executor of its own on an I/O object
/// of the default type): when it holds an io_context's executor, the work is
/// counted on that executor directly, an atomic increment, instead of through a
/// type-erased copy of it (any_executor::prefer allocates nothing but costs a
/// virtual construction per operation). Any other executor behind it (a strand,
/// a thread pool's) is kept as it is, and the handler always goes through it.
template <>
class executor_work<asio::any_io_executor> {
public:
    explicit executor_work(const asio::any_io_executor& ex) {
        if (const auto* io_ex = io_context_executor_of(ex))
            io_.emplace(asio::prefer(*io_ex, asio::execution::outstanding_work.tracked));
        else
            other_.emplace(ex);
    }

    bool running_here() const noexcept { return io_ && io_->running_in_this_thread(); }

    // Posted and dispatched through an untracked copy: this object counts the
    // work already, and each copy of a tracked executor (Asio makes a few per
    // post) would count it again, an atomic increment and decrement each.
    template <class Function>
    void post(Function&& f) const {
        if (io_)
            asio::post(untracked(), std::forward<Function>(f));
        else
            asio::post(other_->get_executor(), std::forward<Function>(f));
    }
    template <class Function>
    void dispatch(Function&& f) const {
        if (io_) {
            const auto ex = untracked(); // f may destroy this object
            asio::dispatch(ex, std::forward<Function>(f));
        } else {
            const asio::any_io_executor ex = other_->get_executor();
            asio::dispatch(ex, std::forward<Function>(f));
        }
    }

private:
    using tracked_io_executor =
        std::decay_t<decltype(asio::prefer(std::declval<asio::io_context::executor_type>(),
                                           asio::execution::outstanding_work.tracked))>;

    asio::io_context::executor_type untracked() const noexcept {
        return asio::require(*io_, asio::execution::outstanding_work.untracked);
    }

    std::optional<tracked_io_executor> io_;
    std::optional<asio::executor_work_guard<asio::any_io_executor>> other_;
};

/// Whether two executors are known to be the same one (false when that cannot be
/// told cheaply: then both count work, which costs an increment and holds nothing
/// longer than the operation).
template <class A, class B>
bool same_executor(const A& a, const B& b) noexcept {
    if constexpr (std::is_same_v<A, B>) {
        return a == b;
    } else if constexpr (std::is_same_v<A, asio::any_io_executor> &&
                         std::is_same_v<B, asio::io_context::executor_type>) {
        const auto* io_ex = io_context_executor_of(a);
        return io_ex != nullptr && *io_ex == b;
    } else if constexpr (std::is_same_v<A, asio::io_context::executor_type> &&
                         std::is_same_v<B, asio::any_io_executor>) {
        return same_executor(b, a);
    } else {
        return false;
    }
}

/// The work an operation holds from its start until its handler has run, counted
/// as Asio's own operations count it: on the handler's associated executor and,
/// when that is another one, on the I/O object's executor as well, so that neither
/// io_context::run() returns while the operation is pending. Also where the
/// handler may run (see executor_work).
template <class Executor, class IoExecutor = Executor>
class handler_work {
public:
    handler_work(const Executor& ex, const IoExecutor& io_ex) : handler_(ex) {
        if (has_target(io_ex) && !same_executor(ex, io_ex))
            io_.emplace(io_ex);
    }
    explicit handler_work(const Executor& ex) : handler_(ex) {}

    bool running_here() const noexcept { return handler_.running_here(); }
    /// Whether work is counted on the I/O executor too (it is another one).
    bool counts_io_executor() const noexcept { return io_.has_value(); }

    template <class Function>
    void post(Function&& f) const {
        handler_.post(std::forward<Function>(f));
    }
    template <class Function>
    void dispatch(Function&& f) const {
        handler_.dispatch(std::forward<Function>(f));
    }

private:
    executor_work<Executor> handler_;
    std::optional<asio::executor_work_guard<IoExecutor>> io_;
};

} // namespace rdma_asio::detail
