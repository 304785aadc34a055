// async_poll without a composed operation, for a CQ that does not spin (the
// default): the handler itself waits in the channel's dispatcher. An event then
// reaches the handler with no operation in between to move, resume and complete,
// and the handler's own executor type is kept all the way (no type erasure where
// the caller names an executor). A CQ that spins needs an operation that resumes
// itself between rounds of polling: cq_poll_op.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/cq/cq_shared_state.hpp"
#include "rdma_asio/detail/cq/cq_wait_match.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>
#include <span>
#include <system_error>
#include <utility>

namespace rdma_asio::detail {

/// Whether an async_poll of `cq` can go the direct way; if so, the CQ is marked
/// busy for it. Otherwise cq_poll_op handles it (and its refusals: closed, busy).
inline bool begin_direct_poll(cq_shared_state& cq) noexcept {
    return !cq.closed() && cq.spin_budget_now().count() <= 0 && cq.begin_operation();
}

/// The handler of a direct async_poll, as it waits in the dispatcher: what the
/// wait ends with (completions a wake-up or an event brought, an error, or those
/// the first poll found) becomes the operation's (error_code, count).
template <class Handler, class IoExecutor>
struct cq_poll_completion {
    Handler handler;
    std::shared_ptr<cq_shared_state> cq;
    std::span<ibv_wc> wcs;
    IoExecutor io_ex;
    bool waited = false; // false: completes what the first poll found

    // Its executor, allocator and cancellation slot are the handler's (the
    // associator below), with the caller's default where the handler names none.
    // (Nested typedefs would fix the default: std::allocator, and every wait of a
    // plain callback or use_awaitable would come from operator new instead of the
    // operation cache.)

    void operator()(error_code ec, cq_event ev) {
        cq_poll_machine::step s{cq_poll_machine::action::complete, ec, ev.polled};
        if (waited) {
            s = cq->advance(wcs, cq->machine().event(ec, cq->closed(), ev.polled));
            if (s.what == cq_poll_machine::action::wait) // an event, and the CQ empty
                return wait(std::move(*this));
        }
        cq->end_operation(); // before the handler, which may start the next poll
        std::move(handler)(s.ec, s.n);
    }

    /// Polls (and arms) now; completes what it finds, posted, or waits.
    static void start(cq_poll_completion self) {
        const auto s = self.cq->advance(self.wcs, self.cq->machine().start(self.wcs.size(), {}));
        if (s.what == cq_poll_machine::action::wait)
            return wait(std::move(self));
        // Found completions or an error: posted, never inside the initiating call;
        // cancelled before it runs, the completions go back to the CQ.
        auto& d = self.cq->dispatcher();
        const IoExecutor io_ex = self.io_ex;
        cq_poll_match match{self.cq.get(), self.wcs};
        const error_code ec = s.ec;
        d.complete_at_once(io_ex, match, std::move(self), ec,
                           cq_event{self.cq->native_handle(), s.n});
    }

private:
    static void wait(cq_poll_completion self) {
        self.waited = true;
        auto& d = self.cq->dispatcher();
        const IoExecutor io_ex = self.io_ex;
        cq_poll_match match{self.cq.get(), self.wcs};
        d.async_next(io_ex, match, std::move(self));
    }
};

/// Starts a direct async_poll (after begin_direct_poll said yes).
template <class IoExecutor, class Handler>
void start_direct_poll(std::shared_ptr<cq_shared_state> cq, const IoExecutor& io_ex,
                       Handler&& handler, std::span<ibv_wc> wcs) {
    using completion = cq_poll_completion<std::decay_t<Handler>, IoExecutor>;
    completion::start(completion{std::decay_t<Handler>(std::forward<Handler>(handler)),
                                 std::move(cq), wcs, io_ex});
}

} // namespace rdma_asio::detail

// The wait's handler carries the caller's executor, allocator and cancellation slot,
// as Asio's own intermediate handlers do.
template <template <class, class> class Associator, class Handler, class IoExecutor, class Default>
struct rdma_asio::asio::associator<
    Associator, rdma_asio::detail::cq_poll_completion<Handler, IoExecutor>, Default>
    : Associator<Handler, Default> {
    static typename Associator<Handler, Default>::type
    get(const rdma_asio::detail::cq_poll_completion<Handler, IoExecutor>& h,
        const Default& d = Default()) noexcept {
        return Associator<Handler, Default>::get(h.handler, d);
    }
};
