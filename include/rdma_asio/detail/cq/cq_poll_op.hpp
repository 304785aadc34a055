// async_poll as a composed operation: it carries out what the CQ's
// cq_poll_machine decides (poll, spin, arm, wait) and feeds it the outcomes.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"
#include "rdma_asio/detail/cq/cq_operation_start.hpp"
#include "rdma_asio/detail/cq/cq_poll_machine.hpp"
#include "rdma_asio/detail/cq/cq_shared_state.hpp"
#include "rdma_asio/detail/cq/cq_wait_match.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <system_error>
#include <utility>

namespace rdma_asio::detail {

struct cq_poll_op {
    std::shared_ptr<cq_shared_state> cq;
    std::span<ibv_wc> wcs;

    bool started = false;
    std::uint64_t cancellations_at_start = 0; // cq->cancellations() then
    error_code refused{};
    // A result to complete with once the posted operation runs again.
    bool delivering = false;
    error_code result_ec{};
    std::size_t result_n = 0;

    // The start, a posted result, or the next round of spinning.
    template <class Self>
    void operator()(Self& self) {
        if (!started) {
            started = true;
            if (begin_cq_operation(*this, self)) {
                cancellations_at_start = cq->cancellations();
                run(self, cq->machine().start(wcs.size(), cq->spin_budget_now()));
            }
            return;
        }
        if (refused)
            return self.complete(refused, 0);
        if (delivering)
            return finish(self, result_ec, result_n);
        // Between rounds of spinning: closed, cancelled by the operation's slot, or
        // by the CQ's cancel() since the start.
        run(self, cq->machine().resumed(cq->stopped_since(cancellations_at_start) ||
                                            composed_cancelled(self),
                                        cq_poll_machine::clock::now()));
    }

    // The channel's event for this CQ, completions a wake-up polled, or the wait's error.
    template <class Self>
    void operator()(Self& self, error_code ec, cq_event ev) {
        run(self, cq->machine().event(ec, cq->closed(), ev.polled));
    }

private:
    template <class Self>
    void run(Self& self, cq_poll_machine::step s) {
        s = cq->advance(wcs, s); // the polls and the arm, at once
        switch (s.what) {
        case cq_poll_machine::action::wait:
            cq->dispatcher().async_next(cq_poll_match{cq.get(), wcs}, std::move(self));
            return;
        case cq_poll_machine::action::yield:
            asio::post(std::move(self)); // let other handlers run
            return;
        case cq_poll_machine::action::complete:
            if (!s.post)
                return finish(self, s.ec, s.n);
            // Never complete inside the initiating call.
            delivering = true;
            result_ec = s.ec;
            result_n = s.n;
            asio::post(std::move(self));
            return;
        case cq_poll_machine::action::poll:
        case cq_poll_machine::action::arm:
            break; // advance() carries these out
        }
    }

    // Completes the operation; completions held when cancellation has been
    // requested go back to the CQ (see cq_poll_machine::finish).
    template <class Self>
    void finish(Self& self, error_code ec, std::size_t n) {
        const auto r = cq_poll_machine::finish(ec, n, composed_cancelled(self));
        if (r.give_back > 0)
            cq->give_back(wcs.first(r.give_back));
        cq->end_operation(); // before the handler, which may start the next poll
        self.complete(r.ec, r.n);
    }
};

} // namespace rdma_asio::detail
