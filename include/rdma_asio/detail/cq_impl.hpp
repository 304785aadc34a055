// The state of a completion_queue and its two operations: async_poll
// (poll, spin, arm, poll again, wait) and async_wait_event (the raw event).
#pragma once

#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/detail/completion_channel_source.hpp"
#include "rdma_asio/spin_budget.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/cancellation_state.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/error.hpp>
#include <asio/post.hpp>

#include <atomic>
#include <memory>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

namespace rdma_asio::detail {

struct cq_impl {
    asio::any_io_executor executor;
    std::shared_ptr<channel_impl> channel;
    cq_shared_state shared; // ibv_cq::cq_context points here
    bool solicited_only = false;
    spin_policy spin;
    // Touched only by the CQ's one operation at a time, or under the dispatcher's
    // lock while that operation waits.
    bool armed = false;  // req_notify called, its event not read yet
    bool peeked = false; // completions taken on a wake-up; the arm's event is still due
    // Completions a cancelled async_poll had taken: the next poll delivers them
    // first, in their order.
    std::vector<ibv_wc> returned;
    std::atomic<bool> closed{false};
    // Set while an async_poll or async_wait_event is in progress (one at a time).
    std::atomic<bool> busy{false};

    std::atomic<std::uint64_t> completions{0};
    std::atomic<std::uint64_t> empty_wakeups{0};
    std::atomic<std::uint64_t> repoll_hits{0};
    std::atomic<std::uint64_t> spin_hits{0};
    std::atomic<std::uint64_t> wake_hits{0};
    std::atomic<std::uint64_t> given_back{0};
    std::atomic<std::uint64_t> arms{0};

    event_dispatcher<completion_channel_source>& dispatcher() const { return *channel->dispatcher; }

    /// Completions given back by a cancelled wait first, else ibv_poll_cq into
    /// wcs: the count (0 when empty) or an error.
    int poll(std::span<ibv_wc> wcs, std::error_code& ec) noexcept;
    /// Keeps wcs for the next poll, ahead of what is still in the CQ.
    void give_back(std::span<const ibv_wc> wcs);
    /// ibv_req_notify_cq, once per event.
    std::error_code arm() noexcept;
};

/// Accepts the events of one CQ.
struct cq_match {
    const ibv_cq* cq;
    bool operator()(const cq_event& e) const noexcept { return e.cq == cq; }
    const void* key() const noexcept { return cq; }
};

inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) noexcept {
    counter.fetch_add(by, std::memory_order_relaxed);
}

/// The wait of async_poll: the events of one CQ, and on each wake-up of the
/// channel a poll of that CQ before any event is read, so that completions reach
/// the handler without the read on their path.
struct cq_poll_match {
    cq_impl* impl;
    std::span<ibv_wc> wcs;

    bool operator()(const cq_event& e) const noexcept { return e.cq == impl->shared.cq; }
    const void* key() const noexcept { return impl->shared.cq; }
    // A wait cancelled after on_wake polled: its completions go back to the CQ's
    // object; a real event goes back to the channel's queue.
    bool give_back(cq_event& e) const {
        if (e.polled == 0)
            return false;
        impl->give_back(wcs.first(e.polled));
        return true;
    }
    bool on_wake(cq_event& out) const noexcept {
        std::error_code ec;
        const int n = impl->poll(wcs, ec);
        if (n <= 0)
            return false; // nothing, or an error the next poll reports
        // The CQ's arm is used up by these completions (or was by earlier ones);
        // its event stays owed and is read by a later wait.
        impl->peeked = true;
        bump(impl->wake_hits);
        out = cq_event{impl->shared.cq, static_cast<std::size_t>(n)};
        return true;
    }
};

// Starts an operation of one CQ: refuses a closed CQ (bad_descriptor) and a second
// operation while one is in progress (already_started), both posted, never inline.
template <class Op, class Self>
bool begin_cq_operation(Op& op, Self& self) {
    self.reset_cancellation_state(asio::enable_total_cancellation());
    if (!op.cq || op.cq->closed) {
        op.refused = asio::error::bad_descriptor;
    } else if (op.cq->busy.exchange(true)) {
        op.refused = asio::error::already_started;
    } else {
        return true;
    }
    asio::post(std::move(self));
    return false;
}

struct cq_poll_op {
    std::shared_ptr<cq_impl> cq;
    std::span<ibv_wc> wcs;

    enum class state { start, spinning, waiting, deliver };
    state st = state::start;
    std::error_code result_ec{};
    std::size_t result_n = 0;
    std::error_code refused{};
    spin_policy::clock::time_point spin_until{};

    // Start, a spin round, or the posted delivery.
    template <class Self>
    void operator()(Self& self) {
        switch (st) {
        case state::start:
            st = state::deliver;
            if (!begin_cq_operation(*this, self))
                return;
            if (wcs.empty())
                return post_result(self, asio::error::invalid_argument, 0);
            if (poll_into_result())
                return post_result(self, result_ec, result_n);
            if (auto budget = cq->spin.budget(); budget.count() > 0) {
                spin_until = spin_policy::clock::now() + budget;
                st = state::spinning;
                switch (spin_slice()) {
                case spin_step::found:
                    return post_result(self, result_ec, result_n);
                case spin_step::yield:
                    return asio::post(std::move(self));
                case spin_step::expired:
                    break;
                }
            }
            return arm_and_wait(self);
        case state::spinning:
            if (cq->closed || cancelled(self))
                return finish(self, asio::error::operation_aborted, 0);
            switch (spin_slice()) {
            case spin_step::found:
                return finish(self, result_ec, result_n);
            case spin_step::yield:
                return asio::post(std::move(self)); // let other handlers run
            case spin_step::expired:
                break;
            }
            return arm_and_wait(self);
        case state::deliver:
            if (refused)
                return self.complete(refused, 0);
            return finish(self, result_ec, result_n);
        case state::waiting:
            break; // resumed by the event overload below
        }
    }

    // The channel's event for this CQ (or the wait's error).
    template <class Self>
    void operator()(Self& self, std::error_code ec, cq_event ev) {
        if (ec)
            return finish(self, ec, 0);
        if (cq->closed)
            return finish(self, asio::error::operation_aborted, 0);
        if (ev.polled > 0)
            return finish(self, std::error_code{}, ev.polled);
        cq->armed = false; // one event per arm
        const bool owed_after_peek = std::exchange(cq->peeked, false);
        if (poll_into_result())
            return finish(self, result_ec, result_n);
        if (!owed_after_peek)
            bump(cq->empty_wakeups); // the seed's extra event: a CQE taken by an earlier poll
        arm_and_wait(self);
    }

private:
    enum class spin_step { found, yield, expired };

    // Completes the operation. Completions it holds when cancellation has been
    // requested go back to the CQ (the next poll delivers them first): the
    // handler gets operation_aborted, so a race such as `poll || timer` loses none.
    template <class Self>
    void finish(Self& self, std::error_code ec, std::size_t n) {
        if (!ec && n > 0 && cancelled(self)) {
            cq->give_back(wcs.first(n));
            ec = asio::error::operation_aborted;
            n = 0;
        }
        cq->busy = false; // before the handler, which may start the next poll
        self.complete(ec, n);
    }

    // Polls in a tight loop for one slice of the budget, then lets the io_context
    // run other handlers; a slice keeps busy-poll latency without starving them.
    spin_step spin_slice() {
        constexpr auto slice = std::chrono::microseconds(20);
        const auto slice_end = spin_policy::clock::now() + slice;
        for (;;) {
            if (poll_into_result()) {
                if (!result_ec)
                    bump(cq->spin_hits);
                return spin_step::found;
            }
            const auto now = spin_policy::clock::now();
            if (now >= spin_until)
                return spin_step::expired;
            if (now >= slice_end)
                return spin_step::yield;
        }
    }

    template <class Self>
    static bool cancelled(Self& self) {
        return self.get_cancellation_state().cancelled() != asio::cancellation_type::none;
    }

    // True when there is something to complete with: completions or an error.
    bool poll_into_result() {
        int n = cq->poll(wcs, result_ec);
        result_n = n > 0 ? static_cast<std::size_t>(n) : 0;
        return n != 0 || result_ec;
    }

    template <class Self>
    void post_result(Self& self, std::error_code ec, std::size_t n) {
        result_ec = ec;
        result_n = n;
        st = state::deliver;
        asio::post(std::move(self)); // never complete inside the initiating call
    }

    template <class Self>
    void arm_and_wait(Self& self) {
        if (!cq->armed) {
            if (std::error_code ec = cq->arm())
                return post_result(self, ec, 0);
            // Arming does not report CQEs already there: poll once more.
            if (poll_into_result()) {
                if (!result_ec)
                    bump(cq->repoll_hits);
                return post_result(self, result_ec, result_n);
            }
        }
        st = state::waiting;
        cq->dispatcher().async_next(cq_poll_match{cq.get(), wcs}, std::move(self));
    }
};

struct cq_event_op {
    std::shared_ptr<cq_impl> cq;
    bool started = false;
    std::error_code refused{};

    template <class Self>
    void operator()(Self& self) {
        if (!started) {
            started = true;
            if (begin_cq_operation(*this, self))
                cq->dispatcher().async_next(cq_match{cq->shared.cq}, std::move(self));
            return;
        }
        self.complete(refused); // refused at the start, reported via post
    }

    // A cancelled wait that had taken the event gives it back through the
    // dispatcher, so the next wait of this CQ sees it.
    template <class Self>
    void operator()(Self& self, std::error_code ec, cq_event) {
        if (!ec)
            cq->armed = false;
        cq->busy = false;
        self.complete(ec);
    }
};

} // namespace rdma_asio::detail
