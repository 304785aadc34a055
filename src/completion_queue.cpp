#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/throw_error.hpp"

#include <new>

namespace rdma_asio {

completion_queue::completion_queue(completion_channel& channel, int entries, cq_options options)
    : executor_(channel.ex_) {
    if (!channel.impl_)
        detail::throw_error(detail::errno_code(EBADF), "rdma_asio::completion_queue");
    impl_ =
        std::make_shared<detail::cq_impl>(options.ack_batch, options.solicited_only, options.spin);
    impl_->executor = channel.ex_;
    impl_->channel = channel.impl_;
    errno = 0;
    ibv_cq* cq = ibv_create_cq(channel.ctx_, entries, &impl_->shared, channel.impl_->channel, 0);
    if (cq == nullptr)
        detail::throw_error(detail::last_errno_code(), "ibv_create_cq");
    impl_->shared.cq = cq;
}

completion_queue::completion_queue(completion_queue&& other) noexcept
    : executor_(other.executor_), impl_(std::move(other.impl_)) {}

completion_queue& completion_queue::operator=(completion_queue&& other) noexcept {
    if (this != &other) {
        close_or_keep();
        executor_ = other.executor_;
        impl_ = std::move(other.impl_);
    }
    return *this;
}

completion_queue::~completion_queue() {
    close_or_keep();
}

void completion_queue::close_or_keep() noexcept {
    std::error_code ec;
    close(ec);
    if (!impl_)
        return;
    // The CQ could not be destroyed (a QP still uses it) and may still raise
    // events that point at its state: the channel keeps the state, without its
    // link back to the channel, until the channel itself goes.
    auto channel = std::move(impl_->channel);
    detail::cq_ack_counter* state = &impl_->shared;
    try {
        channel->keep_until_destroyed(std::move(impl_), state);
    } catch (...) {
        // Out of memory: leaking the state is the only safe choice left.
        new (std::nothrow) std::shared_ptr<detail::cq_impl>(std::move(impl_));
    }
    impl_.reset();
}

void completion_queue::close(std::error_code& ec) noexcept {
    ec.clear();
    if (!impl_)
        return;
    impl_->closed = true;
    ibv_cq* cq = impl_->shared.cq;
    // Flush and destroy under the channel's lock: no read may count another event
    // of this CQ in between.
    int rc = 0;
    auto& dispatcher = impl_->dispatcher();
    dispatcher.retire(cq, [&] {
        impl_->shared.flush();
        rc = ibv_destroy_cq(cq);
        return rc == 0;
    });
    dispatcher.end_retirement(cq); // destroyed, or open and usable again
    if (rc != 0) {
        // EBUSY: a QP still uses the CQ. It stays open and usable; only its
        // pending waits were cancelled.
        ec = detail::errno_code(rc > 0 ? rc : EBUSY);
        impl_->closed = false;
        return;
    }
    impl_.reset();
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
        impl_->dispatcher().cancel(impl_->shared.cq);
}

cq_counters completion_queue::counters() const noexcept {
    if (!impl_)
        return {};
    const auto& i = *impl_;
    auto load = [](const std::atomic<std::uint64_t>& a) {
        return a.load(std::memory_order_relaxed);
    };
    const auto& m = i.machine;
    return {i.shared.events(), i.shared.ack_calls(), load(i.completions),
            m.empty_wakeups(), m.repoll_hits(),      m.spin_hits(),
            m.arms(),          m.wake_hits(),        load(i.given_back)};
}

} // namespace rdma_asio
