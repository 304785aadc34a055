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
    std::atomic<bool> closed{false};

    std::atomic<std::uint64_t> completions{0};
    std::atomic<std::uint64_t> empty_wakeups{0};
    std::atomic<std::uint64_t> repoll_hits{0};
    std::atomic<std::uint64_t> spin_hits{0};
    std::atomic<std::uint64_t> wake_hits{0};
    std::atomic<std::uint64_t> arms{0};

    event_dispatcher<completion_channel_source>& dispatcher() const { return *channel->dispatcher; }

    /// ibv_poll_cq into wcs: the count (0 when empty) or an error.
    int poll(std::span<ibv_wc> wcs, std::error_code& ec) noexcept;
    /// ibv_req_notify_cq, once per event.
    std::error_code arm() noexcept;
};

/// Accepts the events of one CQ.
struct cq_match {
    const ibv_cq* cq;
    bool operator()(const cq_event& e) const noexcept { return e.cq == cq; }
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

struct cq_poll_op {
    std::shared_ptr<cq_impl> cq;
    std::span<ibv_wc> wcs;

    enum class state { start, spinning, waiting, deliver };
    state st = state::start;
    std::error_code result_ec{};
    std::size_t result_n = 0;
    spin_policy::clock::time_point spin_until{};

    // Start, a spin round, or the posted delivery.
    template <class Self>
    void operator()(Self& self) {
        switch (st) {
        case state::start:
            self.reset_cancellation_state(asio::enable_total_cancellation());
            if (cq->closed)
                return post_result(self, asio::error::operation_aborted, 0);
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
                return self.complete(asio::error::operation_aborted, 0);
            switch (spin_slice()) {
            case spin_step::found:
                return self.complete(result_ec, result_n);
            case spin_step::yield:
                return asio::post(std::move(self)); // let other handlers run
            case spin_step::expired:
                break;
            }
            return arm_and_wait(self);
        case state::deliver:
            return self.complete(result_ec, result_n);
        case state::waiting:
            break; // resumed by the event overload below
        }
    }

    // The channel's event for this CQ (or the wait's error).
    template <class Self>
    void operator()(Self& self, std::error_code ec, cq_event ev) {
        if (ec)
            return self.complete(ec, 0);
        if (cq->closed)
            return self.complete(asio::error::operation_aborted, 0);
        if (ev.polled > 0)
            return self.complete(std::error_code{}, ev.polled);
        cq->armed = false; // one event per arm
        const bool owed_after_peek = std::exchange(cq->peeked, false);
        if (poll_into_result())
            return self.complete(result_ec, result_n);
        if (!owed_after_peek)
            bump(cq->empty_wakeups); // the seed's extra event: a CQE taken by an earlier poll
        arm_and_wait(self);
    }

private:
    enum class spin_step { found, yield, expired };

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

    template <class Self>
    void operator()(Self& self) {
        if (!started) {
            started = true;
            self.reset_cancellation_state(asio::enable_total_cancellation());
            if (!cq->closed)
                return cq->dispatcher().async_next(cq_match{cq->shared.cq}, std::move(self));
            return asio::post(std::move(self)); // closed: report it, not inline
        }
        self.complete(asio::error::operation_aborted);
    }

    template <class Self>
    void operator()(Self& self, std::error_code ec, cq_event) {
        if (!ec)
            cq->armed = false;
        self.complete(ec);
    }
};

} // namespace rdma_asio::detail
