// An executor that runs every function at once, on the calling thread, whether
// it is asked to dispatch or to post.
//
// Only for the library's own intermediate handlers that must not wait for the
// user's executor: the rdma_cm operations park the event the dispatcher hands
// them where closing an id can reach (and ack) it, before anything is queued on
// an executor that may never run again. Such a handler does no more than that
// and then posts the operation to the user's executor itself.
#pragma once

#include <asio/execution_context.hpp>

#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

class inline_executor {
public:
    explicit inline_executor(asio::execution_context& ctx) noexcept : ctx_(&ctx) {}

    // The Networking TS executor requirements, which Asio's post, dispatch and
    // executor_work_guard accept.
    asio::execution_context& context() const noexcept { return *ctx_; }
    void on_work_started() const noexcept {}
    void on_work_finished() const noexcept {}
    template <class F, class Alloc>
    void dispatch(F&& f, const Alloc&) const {
        std::decay_t<F>(std::forward<F>(f))();
    }
    template <class F, class Alloc>
    void post(F&& f, const Alloc&) const {
        std::decay_t<F>(std::forward<F>(f))();
    }
    template <class F, class Alloc>
    void defer(F&& f, const Alloc&) const {
        std::decay_t<F>(std::forward<F>(f))();
    }

    friend bool operator==(const inline_executor& a, const inline_executor& b) noexcept {
        return a.ctx_ == b.ctx_;
    }
    friend bool operator!=(const inline_executor& a, const inline_executor& b) noexcept {
        return !(a == b);
    }

private:
    asio::execution_context* ctx_;
};

} // namespace rdma_asio::detail
