#include "rdma_asio/detail/cq_impl.hpp"
#include "rdma_asio/detail/asio_flavour.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <algorithm>
#include <cerrno>

namespace rdma_asio::detail {

int cq_impl::poll(std::span<ibv_wc> wcs, error_code& ec) noexcept {
    if (!returned.empty()) {
        // Already counted when first polled.
        const std::size_t n = std::min(wcs.size(), returned.size());
        std::copy_n(returned.begin(), n, wcs.begin());
        returned.erase(returned.begin(), returned.begin() + static_cast<std::ptrdiff_t>(n));
        ec.clear();
        return static_cast<int>(n);
    }
    errno = 0;
    int n = ibv_poll_cq(shared.cq, static_cast<int>(wcs.size()), wcs.data());
    if (n < 0) {
        ec = errno_code(errno != 0 ? errno : EIO);
        return n;
    }
    ec.clear();
    if (n > 0) {
        completions.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
        if (spin.settings().mode == spin_budget::kind::adaptive)
            spin.on_completion(spin_policy::clock::now());
    }
    return n;
}

void cq_impl::give_back(std::span<const ibv_wc> wcs) {
    returned.insert(returned.begin(), wcs.begin(), wcs.end());
    given_back.fetch_add(wcs.size(), std::memory_order_relaxed);
}

error_code cq_impl::req_notify() noexcept {
    errno = 0;
    int rc = ibv_req_notify_cq(shared.cq, solicited_only ? 1 : 0);
    if (rc != 0)
        return errno_code(rc > 0 ? rc : (errno != 0 ? errno : EIO));
    return {};
}

cq_poll_machine::step cq_impl::advance(std::span<ibv_wc> wcs, cq_poll_machine::step s) noexcept {
    for (;;) {
        switch (s.what) {
        case cq_poll_machine::action::poll: {
            error_code ec;
            const int n = poll(wcs, ec);
            s = machine.polled(n > 0 ? static_cast<std::size_t>(n) : 0, ec,
                               cq_poll_machine::clock::now());
            break;
        }
        case cq_poll_machine::action::arm:
            s = machine.armed(req_notify());
            break;
        case cq_poll_machine::action::wait:
        case cq_poll_machine::action::yield:
        case cq_poll_machine::action::complete:
            return s;
        }
    }
}

error_code cq_impl::arm() noexcept {
    error_code ec = req_notify();
    if (!ec)
        machine.armed_by_caller();
    return ec;
}

} // namespace rdma_asio::detail
