// The decisions of a completion queue's async_poll, with no I/O: when to poll,
// spin, arm, poll again after arming, wait, and what an event or a wake-up means.
// It touches no fd and calls no verb: the operation (cq_poll_op) asks it what to
// do next, does it, and feeds the outcome back. It also keeps the CQ's arm state
// between operations and the counters of its decisions.
//
// Why the steps are what they are (ibv_req_notify_cq(3), ibv_get_cq_event(3)):
// - an arm raises an event only for completions that arrive after it, so after
//   arming the CQ is polled once more before waiting (completions that came
//   between the empty poll and the arm would otherwise wait for the next one);
// - one arm raises at most one event, so the CQ is armed again after each event;
// - that re-poll, or a poll on a wake-up, may take the completion whose event is
//   already on its way: that event then finds the CQ empty (empty_wakeups) and is
//   handled quietly by arming and waiting again;
// - a reader whose consumer's handlers are about to post (the queue pairs' reader:
//   the handlers of the completions it just handed on resume coroutines that post
//   the next work request) may ask to yield once before arming: the handlers run,
//   post, and on loopback and fast links the completion is in the CQ when it is
//   polled again. An arm costs a system call, its event three more (the reactor's
//   wait, the event's read, the next arm); a completion found this way costs none
//   (yield_hits). One empty poll and one posted handler more when nothing came;
// - so the yield is adaptive: a yield that finds a completion earns the next
//   few, one that finds nothing spends one, and once they are spent the reader
//   arms at once, trying one yield in yield_probe_every to see whether the
//   traffic changed. A hit is worth yield_hit_score misses because a miss costs
//   a posted handler and a poll (some hundreds of instructions), a hit saves an
//   arm, its event and the wake-up (three or four system calls and a few
//   thousand instructions): yields go on while more than about one in five
//   finds something. A byte stream's reader, whose peer answers only after a
//   wake-up of its own, finds nothing after most yields; a queue pair's
//   operation at one in flight on loopback finds its completion after most.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace rdma_asio::detail {

class cq_poll_machine {
public:
    using clock = std::chrono::steady_clock;

    /// How long one round of spinning polls before it lets other handlers run: a
    /// slice keeps busy-poll latency without starving them.
    static constexpr std::chrono::microseconds spin_slice{20};

    enum class action {
        poll,     ///< poll the CQ into the span, then call polled()
        arm,      ///< ibv_req_notify_cq, then call armed()
        wait,     ///< wait for the CQ's event or a wake-up peek, then call event()
        yield,    ///< let other handlers run (post the operation), then call resumed()
        complete, ///< the operation ends with `ec` and `n` (see finish())
    };

    struct step {
        action what = action::poll;
        error_code ec{};
        std::size_t n = 0;
        /// For action::complete: post the completion rather than complete at
        /// once, because the operation is still inside its initiating call or has
        /// just armed the CQ.
        bool post = false;
    };

    // One async_poll at a time (the caller enforces it).

    /// Starts an operation that fills up to `span_size` entries and may spin for
    /// `spin_budget` (zero: not at all) before arming; the budget runs from the
    /// first poll that finds the CQ empty. `yield_first`: without a budget, a
    /// first poll that finds nothing lets the ready handlers run once and polls
    /// again before arming (see the top of this file).
    step start(std::size_t span_size, clock::duration spin_budget,
               bool yield_first = false) noexcept;
    /// The outcome of action::poll: `n` completions (0 when the CQ was empty), or
    /// an error `ec`. `now` measures the spin budget; it is read only when
    /// reads_clock() said so before the poll (any value will do otherwise).
    step polled(std::size_t n, error_code ec, clock::time_point now) noexcept;
    /// Whether the next polled() looks at `now`: only while a spin budget runs.
    /// Reading the clock is a system call where the clock source has no vDSO (as
    /// in the emulated guest: 2.5 per message at one in flight before this), so
    /// the poll loop reads it only then.
    bool reads_clock() const noexcept {
        return phase_ == phase::spinning ||
               (phase_ == phase::first_poll && spin_budget_.count() > 0);
    }
    /// The outcome of action::arm.
    step armed(error_code ec) noexcept;
    /// The wait of action::wait completed: with an error `ec`, after the CQ was
    /// closed (`closed`), with `peeked` completions that a wake-up's poll took
    /// (on_wake()), or with the CQ's event (none of these).
    step event(error_code ec, bool closed, std::size_t peeked) noexcept;
    /// Back from action::yield; `stop`: the CQ was closed or the operation
    /// cancelled meanwhile. `now` is read only when reads_clock() said so.
    step resumed(bool stop, clock::time_point now) noexcept;

    /// What the handler of an operation that ends with `ec`, `n` gets. Completions
    /// it holds when cancellation has been requested go back to the CQ
    /// (`give_back` of them, for the next poll to deliver first) and the handler
    /// gets operation_aborted, so a race such as `poll || timer` loses none.
    struct result {
        error_code ec;
        std::size_t n = 0;
        std::size_t give_back = 0;
    };
    static result finish(error_code ec, std::size_t n, bool cancelled) noexcept;

    // The CQ's arm, shared by every operation and request_notify.

    /// A wake-up of the channel while an operation waits, before any event is read:
    /// `n` is what a poll of the CQ returned (negative: an error, which the next
    /// poll reports). True when the wait completes with these completions; the
    /// arm they used up still owes its event, which a later wait reads.
    bool on_wake(int n) noexcept;
    /// ibv_req_notify_cq succeeded outside an operation (request_notify).
    void armed_by_caller() noexcept { record_arm(); }
    /// The CQ's event was read by async_wait: its arm is used up.
    void event_read() noexcept { armed_ = false; }

    bool is_armed() const noexcept { return armed_; }
    /// Completions were taken on a wake-up and the arm's event is still due.
    bool event_owed() const noexcept { return peeked_; }

    // Counters of the decisions, readable from any thread.
    std::uint64_t arms() const noexcept { return load(arms_); }
    std::uint64_t repoll_hits() const noexcept { return load(repoll_hits_); }
    std::uint64_t spin_hits() const noexcept { return load(spin_hits_); }
    std::uint64_t yield_hits() const noexcept { return load(yield_hits_); }
    std::uint64_t wake_hits() const noexcept { return load(wake_hits_); }
    std::uint64_t empty_wakeups() const noexcept { return load(empty_wakeups_); }
    /// Yields before arming left out because the recent ones found nothing.
    std::uint64_t yields_skipped() const noexcept { return load(yields_skipped_total_); }

    /// The adaptive yield (top of this file): what a hit earns, the most that
    /// can be saved up, and how often a reader that stopped yielding tries again.
    static constexpr int yield_hit_score = 4;
    static constexpr int yield_score_max = 8;
    static constexpr int yield_probe_every = 16;

private:
    enum class phase {
        idle,        // no operation, or one that completes
        first_poll,  // the poll an operation starts with
        spinning,    // polling until the spin budget ends
        yielding,    // yield_first: letting the ready handlers run once
        after_yield, // the poll after that
        arming,      // ibv_req_notify_cq
        repoll,      // the poll right after arming
        waiting,     // for the event or a wake-up
        event_poll,  // the poll after the CQ's event
    };

    static std::uint64_t load(const std::atomic<std::uint64_t>& a) noexcept {
        return a.load(std::memory_order_relaxed);
    }
    static void bump(std::atomic<std::uint64_t>& a) noexcept {
        a.fetch_add(1, std::memory_order_relaxed);
    }

    bool yield_pays() noexcept;
    step arm_or_wait() noexcept;
    step complete(error_code ec, std::size_t n, bool post) noexcept;
    void record_arm() noexcept;

    // Of the operation in progress (touched only by it).
    phase phase_ = phase::idle;
    bool in_start_ = false; // still inside the initiating call
    bool yield_first_ = false;
    bool owed_after_peek_ = false;
    clock::duration spin_budget_{};
    clock::time_point spin_until_{};
    clock::time_point slice_end_{};

    // Of the CQ. Touched by the one operation at a time, or by on_wake under the
    // dispatcher's lock while that operation waits.
    bool armed_ = false;  // req_notify called, its event not read yet
    bool peeked_ = false; // completions taken on a wake-up; the arm's event is still due
    int yield_score_ = yield_score_max; // yields left before the reader stops yielding
    int yields_skipped_ = 0;            // since the last yield, while it does not yield

    std::atomic<std::uint64_t> arms_{0};
    std::atomic<std::uint64_t> repoll_hits_{0};
    std::atomic<std::uint64_t> spin_hits_{0};
    std::atomic<std::uint64_t> yield_hits_{0};
    std::atomic<std::uint64_t> wake_hits_{0};
    std::atomic<std::uint64_t> empty_wakeups_{0};
    std::atomic<std::uint64_t> yields_skipped_total_{0};
};

} // namespace rdma_asio::detail
