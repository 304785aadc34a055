#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <algorithm>

namespace rdma_asio {
namespace detail {

int cq_impl::poll(std::span<ibv_wc> wcs, std::error_code& ec) noexcept {
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

std::error_code cq_impl::arm() noexcept {
    errno = 0;
    int rc = ibv_req_notify_cq(shared.cq, solicited_only ? 1 : 0);
    if (rc != 0)
        return errno_code(rc > 0 ? rc : (errno != 0 ? errno : EIO));
    armed = true;
    bump(arms);
    return {};
}

} // namespace detail

completion_queue::completion_queue(completion_channel& channel, int entries, cq_options options)
    : executor_(channel.ex_) {
    if (!channel.impl_)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::completion_queue");
    impl_ = std::make_shared<detail::cq_impl>();
    impl_->executor = channel.ex_;
    impl_->channel = channel.impl_;
    impl_->shared.ack_batch = std::max(1u, options.ack_batch);
    impl_->solicited_only = options.solicited_only;
    impl_->spin = detail::spin_policy(options.spin);
    errno = 0;
    ibv_cq* cq = ibv_create_cq(channel.ctx_, entries, &impl_->shared, channel.impl_->channel, 0);
    if (cq == nullptr)
        detail::throw_error(detail::last_errno_code(), "ibv_create_cq");
    impl_->shared.cq = cq;
}

completion_queue& completion_queue::operator=(completion_queue&& other) noexcept {
    if (this != &other) {
        std::error_code ignored;
        close(ignored);
        executor_ = other.executor_;
        impl_ = std::move(other.impl_);
    }
    return *this;
}

completion_queue::~completion_queue() {
    std::error_code ignored;
    close(ignored);
}

void completion_queue::close(std::error_code& ec) noexcept {
    ec.clear();
    if (!impl_)
        return;
    impl_->closed = true;
    ibv_cq* cq = impl_->shared.cq;
    auto& dispatcher = impl_->dispatcher();
    dispatcher.cancel_accepting(detail::cq_event{cq});
    // Under the channel's lock no drain can read (and count) another event of
    // this CQ between the flush and the destroy.
    int rc = dispatcher.with_source_and_queue([&](auto&, auto& queue) {
        std::erase_if(queue, [&](const detail::cq_event& e) { return e.cq == cq; });
        impl_->shared.flush_acks();
        return ibv_destroy_cq(cq);
    });
    if (rc != 0)
        ec = detail::errno_code(rc > 0 ? rc : EBUSY);
    impl_.reset();
}

const std::shared_ptr<detail::cq_impl>& completion_queue::checked_impl() const {
    if (!impl_)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::completion_queue: closed");
    return impl_;
}

void completion_queue::request_notify(std::error_code& ec) noexcept {
    ec = impl_ ? impl_->arm() : detail::errno_code(EBADF);
}

void completion_queue::request_notify() {
    std::error_code ec;
    request_notify(ec);
    detail::throw_if_error(ec, "ibv_req_notify_cq");
}

void completion_queue::cancel() {
    if (impl_)
        impl_->dispatcher().cancel_accepting(detail::cq_event{impl_->shared.cq});
}

cq_counters completion_queue::counters() const noexcept {
    if (!impl_)
        return {};
    const auto& i = *impl_;
    auto load = [](const std::atomic<std::uint64_t>& a) {
        return a.load(std::memory_order_relaxed);
    };
    return {load(i.shared.events), load(i.shared.ack_calls), load(i.completions),
            load(i.empty_wakeups), load(i.repoll_hits),      load(i.spin_hits),
            load(i.arms),          load(i.wake_hits)};
}

} // namespace rdma_asio
