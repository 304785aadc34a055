// How long a completion queue polls before it arms and sleeps on its channel.
#pragma once

#include <algorithm>
#include <chrono>

namespace rdma_asio {

/// Spin-then-block policy of a completion_queue. Spinning trades CPU for latency:
/// while it spins, a wait polls the CQ as posted work on the io_context (it first
/// lets the ready handlers run, then polls in slices with them run in between), and
/// completions found need no interrupt, no channel event and no ack. Off by default.
struct spin_budget {
    enum class kind { off, fixed, adaptive };
    kind mode = kind::off;
    std::chrono::microseconds limit{0};

    static constexpr spin_budget off() noexcept { return {}; }
    /// The longest budget: a wait given it (or more, up to
    /// microseconds::max(), which counts as this) polls for a century.
    static constexpr std::chrono::microseconds longest{std::chrono::hours(24 * 365 * 100)};

    /// Poll for up to `limit` before arming.
    static constexpr spin_budget fixed(std::chrono::microseconds limit) noexcept {
        return {kind::fixed, limit};
    }
    /// Busy polling: every wait polls until it finds completions and never arms
    /// the CQ (a fixed budget of `longest`). The io_context still runs other
    /// handlers between rounds of polling, and cancellation ends the wait.
    static constexpr spin_budget busy() noexcept { return fixed(longest); }
    /// Poll for about twice the recent gap between completions, at most `limit`;
    /// not at all while completions come further apart than `limit`.
    static constexpr spin_budget adaptive(std::chrono::microseconds limit) noexcept {
        return {kind::adaptive, limit};
    }
};

namespace detail {

/// The spin decision, kept apart from any CQ so it can be tested on its own.
class spin_policy {
public:
    using clock = std::chrono::steady_clock;

    explicit spin_policy(spin_budget b = {}) noexcept : budget_(b) {}

    /// How long the next wait should spin before arming.
    std::chrono::nanoseconds budget() const noexcept {
        switch (budget_.mode) {
        case spin_budget::kind::off:
            return {};
        case spin_budget::kind::fixed:
            return limit();
        case spin_budget::kind::adaptive:
            if (!have_gap_ || gap_ > limit())
                return {};
            return std::min<std::chrono::nanoseconds>(2 * gap_, limit());
        }
        return {};
    }

    /// Learns from a completion found at `now`.
    void on_completion(clock::time_point now) noexcept {
        if (have_last_) {
            auto gap = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_);
            // Exponentially weighted, 1/4 new: follows a change within a few gaps.
            gap_ = have_gap_ ? (3 * gap_ + gap) / 4 : gap;
            have_gap_ = true;
        }
        last_ = now;
        have_last_ = true;
    }

    std::chrono::nanoseconds average_gap() const noexcept { return gap_; }
    const spin_budget& settings() const noexcept { return budget_; }

private:
    // The limit in nanoseconds: at most spin_budget::longest, so that no budget
    // overflows (microseconds::max() in nanoseconds would), none negative.
    std::chrono::nanoseconds limit() const noexcept {
        return std::clamp(budget_.limit, std::chrono::microseconds::zero(), spin_budget::longest);
    }

    spin_budget budget_;
    clock::time_point last_{};
    std::chrono::nanoseconds gap_{0};
    bool have_last_ = false;
    bool have_gap_ = false;
};

} // namespace detail
} // namespace rdma_asio
