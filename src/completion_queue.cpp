#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <asio/error.hpp>

#include <algorithm>
#include <new>

namespace rdma_asio {
namespace detail {

int cq_impl::poll(std::span<ibv_wc> wcs, std::error_code& ec) noexcept {
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
        bump(completions, static_cast<std::uint64_t>(n));
        if (spin.settings().mode == spin_budget::kind::adaptive)
            spin.on_completion(spin_policy::clock::now());
    }
    return n;
}

void cq_impl::give_back(std::span<const ibv_wc> wcs) {
    returned.insert(returned.begin(), wcs.begin(), wcs.end());
    bump(given_back, wcs.size());
}

std::error_code cq_impl::arm() noexcept {
    errno = 0;
    int rc = ibv_req_notify_cq(shared.cq, solicited_only ? 1 : 0);
    if (rc != 0)
        return errno_code(rc > 0 ? rc : (errno != 0 ? errno : EIO));
    armed = true;
    bump(arms);
    return {};
}

std::shared_ptr<completion_queue_impl>
completion_queue_impl::open(std::shared_ptr<channel_impl> channel, int entries, unsigned ack_batch,
                            bool solicited_only, const spin_budget& spin, std::error_code& ec) {
    if (!channel) {
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    auto impl = std::make_shared<completion_queue_impl>();
    impl->executor = channel->dispatcher->get_executor();
    impl->shared.ack_batch = std::max(1u, ack_batch);
    impl->solicited_only = solicited_only;
    impl->spin = spin_policy(spin);
    ibv_comp_channel* comp_channel = channel->channel;
    impl->channel = std::move(channel);
    errno = 0;
    ibv_cq* cq = ibv_create_cq(comp_channel->context, entries, &impl->shared, comp_channel, 0);
    if (cq == nullptr) {
        ec = last_errno_code();
        return nullptr;
    }
    impl->shared.cq = cq;
    ec.clear();
    return impl;
}

std::error_code completion_queue_impl::try_close() noexcept {
    closed = true;
    ibv_cq* cq = shared.cq;
    // Flush and destroy under the channel's lock: no read may count another event
    // of this CQ in between.
    int rc = 0;
    auto& d = dispatcher();
    d.retire(cq, [&] {
        shared.flush_acks();
        rc = ibv_destroy_cq(cq);
        return rc == 0;
    });
    d.end_retirement(cq); // destroyed, or open and usable again
    if (rc != 0) {
        // EBUSY: a QP still uses the CQ. It stays open and usable; only its
        // pending wait was cancelled.
        closed = false;
        return errno_code(rc > 0 ? rc : EBUSY);
    }
    return {};
}

void completion_queue_impl::close() noexcept {
    if (!try_close())
        return;
    // The CQ could not be destroyed (a QP still uses it) and may still raise
    // events that point at this state: the channel keeps the state, without its
    // link back to the channel, until the channel itself goes. Nothing may use
    // the CQ from here on: a step of an operation still in flight sees `closed`.
    closed = true;
    auto kept_by = std::move(channel);
    try {
        kept_by->keep_until_destroyed(shared_from_this(), &shared);
    } catch (...) {
        // Out of memory: leaking the state is the only safe choice left.
        new (std::nothrow) std::shared_ptr<completion_queue_impl>(shared_from_this());
    }
}

std::shared_ptr<completion_queue_impl> open_completion_queue(std::shared_ptr<channel_impl> channel,
                                                             int entries, const cq_options& options,
                                                             std::error_code& ec) {
    return completion_queue_impl::open(std::move(channel), entries, options.ack_batch,
                                       options.solicited_only, options.spin, ec);
}

cq_counters read_cq_counters(const cq_impl& i) noexcept {
    auto load = [](const std::atomic<std::uint64_t>& a) {
        return a.load(std::memory_order_relaxed);
    };
    return {load(i.shared.events), load(i.shared.ack_calls), load(i.completions),
            load(i.empty_wakeups), load(i.repoll_hits),      load(i.spin_hits),
            load(i.arms),          load(i.wake_hits),        load(i.given_back)};
}

} // namespace detail
} // namespace rdma_asio
