#include "rdma_asio/detail/cq/cq_shared_state.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <algorithm>
#include <cerrno>

namespace rdma_asio::detail {

int cq_shared_state::poll(std::span<ibv_wc> wcs, error_code& ec) noexcept {
    if (!returned_.empty()) {
        // Already counted when first polled.
        const std::size_t n = std::min(wcs.size(), returned_.size());
        std::copy_n(returned_.begin(), n, wcs.begin());
        returned_.erase(returned_.begin(), returned_.begin() + static_cast<std::ptrdiff_t>(n));
        ec.clear();
        return static_cast<int>(n);
    }
    errno = 0;
    int n = ibv_poll_cq(cq_context_.cq, static_cast<int>(wcs.size()), wcs.data());
    if (n < 0) {
        ec = errno_code(errno != 0 ? errno : EIO);
        return n;
    }
    ec.clear();
    if (n > 0) {
        completions_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
        if (spin_.settings().mode == spin_budget::kind::adaptive)
            spin_.on_completion(spin_policy::clock::now());
    }
    return n;
}

void cq_shared_state::give_back(std::span<const ibv_wc> wcs) {
    returned_.insert(returned_.begin(), wcs.begin(), wcs.end());
    given_back_.fetch_add(wcs.size(), std::memory_order_relaxed);
}

error_code cq_shared_state::req_notify() noexcept {
    errno = 0;
    int rc = ibv_req_notify_cq(cq_context_.cq, solicited_only_ ? 1 : 0);
    if (rc != 0)
        return errno_code(rc > 0 ? rc : (errno != 0 ? errno : EIO));
    return {};
}

cq_poll_machine::step cq_shared_state::advance(std::span<ibv_wc> wcs,
                                               cq_poll_machine::step s) noexcept {
    for (;;) {
        switch (s.what) {
        case cq_poll_machine::action::poll: {
            error_code ec;
            const int n = poll(wcs, ec);
            const auto now = machine_.reads_clock() ? cq_poll_machine::clock::now()
                                                    : cq_poll_machine::clock::time_point{};
            s = machine_.polled(n > 0 ? static_cast<std::size_t>(n) : 0, ec, now);
            break;
        }
        case cq_poll_machine::action::arm:
            s = machine_.armed(req_notify());
            break;
        case cq_poll_machine::action::wait:
        case cq_poll_machine::action::yield:
        case cq_poll_machine::action::complete:
            return s;
        }
    }
}

error_code cq_shared_state::arm() noexcept {
    error_code ec = req_notify();
    if (!ec)
        machine_.armed_by_caller();
    return ec;
}

} // namespace rdma_asio::detail

namespace rdma_asio::detail {

cq_counters cq_shared_state::counters() const noexcept {
    auto load = [](const std::atomic<std::uint64_t>& a) {
        return a.load(std::memory_order_relaxed);
    };
    const auto& m = machine_;
    return {cq_context_.events(), cq_context_.ack_calls(), load(completions_), m.empty_wakeups(),
            m.repoll_hits(),      m.spin_hits(),           m.arms(),           m.wake_hits(),
            load(given_back_)};
}

} // namespace rdma_asio::detail
