// The outstanding work an operation holds on its handler's executor until the
// handler has run, and where the handler may run.
#pragma once

#include "rdma_asio/detail/asio_flavour.hpp"
#include "rdma_asio/detail/io_context_executor.hpp"

#include <optional>
#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

/// Keeps the handler's executor busy (outstanding_work.tracked) from the
/// operation's start until its handler runs, so that io_context::run() does not
/// return in between; posts the handler there, or says it may run here.
template <class Executor>
class handler_work {
public:
    explicit handler_work(const Executor& ex) : guard_(ex) {}

    /// Whether the handler may run on this thread now, as asio::dispatch would
    /// run it: its executor is an io_context's, running here.
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
class handler_work<asio::any_io_executor> {
public:
    explicit handler_work(const asio::any_io_executor& ex) {
        if (const auto* io_ex = io_context_executor_of(ex))
            io_.emplace(asio::prefer(*io_ex, asio::execution::outstanding_work.tracked));
        else
            other_.emplace(ex);
    }

    bool running_here() const noexcept { return io_ && io_->running_in_this_thread(); }

    template <class Function>
    void post(Function&& f) const {
        if (io_)
            asio::post(*io_, std::forward<Function>(f));
        else
            asio::post(other_->get_executor(), std::forward<Function>(f));
    }

private:
    using tracked_io_executor =
        std::decay_t<decltype(asio::prefer(std::declval<asio::io_context::executor_type>(),
                                           asio::execution::outstanding_work.tracked))>;

    std::optional<tracked_io_executor> io_;
    std::optional<asio::executor_work_guard<asio::any_io_executor>> other_;
};

} // namespace rdma_asio::detail
