#include "rdma_asio/detail/cq/cq_poll_machine.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <algorithm>
#include <utility>

namespace rdma_asio::detail {

cq_poll_machine::step cq_poll_machine::start(std::size_t span_size, clock::duration spin_budget,
                                             bool yield_first) noexcept {
    in_start_ = true;
    spin_budget_ = spin_budget;
    yield_first_ = yield_first;
    if (span_size == 0)
        return complete(asio::error::invalid_argument, 0, true);
    phase_ = phase::first_poll;
    return {action::poll};
}

cq_poll_machine::step cq_poll_machine::polled(std::size_t n, error_code ec,
                                              clock::time_point now) noexcept {
    const bool found = n > 0 || ec; // something to complete with: completions or an error
    switch (phase_) {
    case phase::first_poll:
        if (found)
            return complete(ec, n, true);
        if (spin_budget_.count() <= 0) {
            if (!yield_first_ || !yield_pays())
                return arm_or_wait();
            phase_ = phase::yielding;
            return {action::yield};
        }
        // Spinning starts by letting the handlers that are ready run: one of them
        // may be what the completion waits for (the other CQ's coroutine that
        // posts the next send), and in-place polling would keep it from running
        // for a whole slice. resumed() starts the first slice.
        phase_ = phase::spinning;
        spin_until_ = now + spin_budget_;
        return {action::yield};
    case phase::spinning:
        if (found) {
            if (!ec)
                bump(spin_hits_);
            return complete(ec, n, in_start_);
        }
        if (now >= spin_until_)
            return arm_or_wait();
        if (now >= slice_end_)
            return {action::yield};
        return {action::poll};
    case phase::after_yield:
        if (found) {
            if (!ec) {
                bump(yield_hits_);
                yield_score_ = std::min(yield_score_ + yield_hit_score, yield_score_max);
            }
            return complete(ec, n, false);
        }
        if (yield_score_ > 0)
            --yield_score_;
        return arm_or_wait();
    case phase::repoll:
        if (found) {
            if (!ec)
                bump(repoll_hits_);
            return complete(ec, n, true);
        }
        phase_ = phase::waiting;
        return {action::wait};
    case phase::event_poll:
        if (found)
            return complete(ec, n, false);
        // An event after which the CQ is empty: its completion was taken by an
        // earlier poll (the re-poll after arming, or a wake-up's, which owes it).
        if (!owed_after_peek_)
            bump(empty_wakeups_);
        return arm_or_wait();
    case phase::idle:
    case phase::yielding:
    case phase::arming:
    case phase::waiting:
        break;
    }
    // A poll nobody asked for: end the operation rather than guess.
    return complete(asio::error::invalid_argument, 0, true);
}

cq_poll_machine::step cq_poll_machine::armed(error_code ec) noexcept {
    if (ec)
        return complete(ec, 0, true);
    record_arm();
    // Arming reports no completion that is already there: poll once more.
    phase_ = phase::repoll;
    return {action::poll};
}

cq_poll_machine::step cq_poll_machine::event(error_code ec, bool closed,
                                             std::size_t peeked) noexcept {
    in_start_ = false;
    if (ec)
        return complete(ec, 0, false);
    if (closed)
        return complete(asio::error::operation_aborted, 0, false);
    if (peeked > 0)
        return complete({}, peeked, false);
    armed_ = false; // one event per arm
    owed_after_peek_ = std::exchange(peeked_, false);
    phase_ = phase::event_poll;
    return {action::poll};
}

cq_poll_machine::step cq_poll_machine::resumed(bool stop, clock::time_point now) noexcept {
    in_start_ = false;
    if (stop)
        return complete(asio::error::operation_aborted, 0, false);
    if (phase_ == phase::yielding) {
        phase_ = phase::after_yield;
        return {action::poll};
    }
    phase_ = phase::spinning;
    slice_end_ = now + spin_slice;
    return {action::poll};
}

cq_poll_machine::result cq_poll_machine::finish(error_code ec, std::size_t n,
                                                bool cancelled) noexcept {
    if (!ec && n > 0 && cancelled)
        return {asio::error::operation_aborted, 0, n};
    return {ec, n, 0};
}

bool cq_poll_machine::on_wake(int n) noexcept {
    if (n <= 0)
        return false; // nothing, or an error the next poll reports
    // The CQ's arm is used up by these completions (or was by earlier ones); its
    // event stays owed and is read by a later wait.
    peeked_ = true;
    bump(wake_hits_);
    return true;
}

bool cq_poll_machine::yield_pays() noexcept {
    if (yield_score_ > 0)
        return true;
    // Yields stopped finding anything: one in yield_probe_every tries again, so
    // that traffic that changes its pattern gets them back.
    if (++yields_skipped_ < yield_probe_every) {
        bump(yields_skipped_total_);
        return false;
    }
    yields_skipped_ = 0;
    return true;
}

cq_poll_machine::step cq_poll_machine::arm_or_wait() noexcept {
    if (armed_) {
        phase_ = phase::waiting;
        return {action::wait};
    }
    phase_ = phase::arming;
    return {action::arm};
}

cq_poll_machine::step cq_poll_machine::complete(error_code ec, std::size_t n, bool post) noexcept {
    phase_ = phase::idle;
    return {action::complete, ec, n, post};
}

void cq_poll_machine::record_arm() noexcept {
    armed_ = true;
    bump(arms_);
}

} // namespace rdma_asio::detail
