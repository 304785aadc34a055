#include "rdma_asio/detail/cq_demux.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/queue_pair_impl.hpp"
#include "rdma_asio/error.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/error.hpp>

#include <algorithm>

namespace rdma_asio::detail {

std::shared_ptr<cq_demux> cq_demux::of(const std::shared_ptr<completion_queue_impl>& cq,
                                       std::error_code& ec) {
    if (!cq || cq->closed) {
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    if (!cq->claim(cq_impl::user::queue_pairs)) {
        ec = errc::completion_queue_in_use;
        return nullptr;
    }
    std::lock_guard lock(cq->demux_mutex);
    std::shared_ptr<cq_demux> demux = cq->demux.lock();
    if (!demux) {
        demux = std::make_shared<cq_demux>(cq);
        cq->demux = demux;
    }
    ec.clear();
    return demux;
}

void cq_demux::attach(std::uint32_t qp_num, std::shared_ptr<queue_pair_impl> qp) {
    std::lock_guard lock(mutex_);
    qps_.emplace_back(qp_num, std::move(qp));
}

void cq_demux::detach(std::uint32_t qp_num) noexcept {
    std::shared_ptr<queue_pair_impl> gone; // released outside the lock
    std::lock_guard lock(mutex_);
    auto it = std::find_if(qps_.begin(), qps_.end(),
                           [qp_num](const auto& entry) { return entry.first == qp_num; });
    if (it == qps_.end())
        return;
    gone = std::move(it->second);
    qps_.erase(it);
}

std::uint64_t cq_demux::unrouted() const noexcept {
    std::lock_guard lock(mutex_);
    return unrouted_;
}

// The handler of the demultiplexer's own async_poll; it runs on the CQ's executor.
struct cq_demux::poll_handler {
    std::shared_ptr<cq_demux> self;
    void operator()(std::error_code ec, std::size_t n) { self->polled(ec, n); }
};

void cq_demux::wake() noexcept {
    std::lock_guard lock(mutex_);
    if (!polling_)
        poll();
}

void cq_demux::settle() noexcept {
    std::lock_guard lock(mutex_);
    // While polled() routes, no poll is pending (its own end decides whether to
    // poll again): nothing to cancel, and no need to look at every queue pair.
    if (!polling_ || routing_ || anything_outstanding())
        return;
    // A closed CQ has no wait left to cancel (its close ended it) and no channel.
    std::lock_guard cq_lock(cq_->demux_mutex);
    if (!cq_->closed)
        cq_->cancel(); // the CQ is this demultiplexer's alone: nobody else waits on it
}

bool cq_demux::anything_outstanding() const noexcept {
    return std::any_of(qps_.begin(), qps_.end(),
                       [this](const auto& entry) { return entry.second->outstanding_on(this); });
}

void cq_demux::poll() noexcept {
    polling_ = true;
    // Not while the CQ closes: its poll then starts on an open CQ, or is refused
    // (bad_descriptor, posted) on a closed one and fails the queue pairs.
    std::lock_guard cq_lock(cq_->demux_mutex);
    try {
        start_cq_poll(cq_, cq_->executor, poll_handler{shared_from_this()}, std::span(wcs_));
    } catch (...) {
        // Only an allocation can fail here; the next wake() tries again.
        polling_ = false;
    }
}

void cq_demux::polled(std::error_code ec, std::size_t n) noexcept {
    // Route outside the lock: a queue pair's lock is never taken under this one.
    std::vector<std::shared_ptr<queue_pair_impl>> targets;
    {
        std::lock_guard lock(mutex_);
        routing_ = true;
        try {
            if (!ec) {
                targets.reserve(n);
                for (std::size_t i = 0; i < n; ++i) {
                    auto it = std::find_if(qps_.begin(), qps_.end(), [&](const auto& entry) {
                        return entry.first == wcs_[i].qp_num;
                    });
                    targets.push_back(it == qps_.end() ? nullptr : it->second);
                }
            } else if (ec != asio::error::operation_aborted || cq_->closed) {
                for (auto& entry : qps_)
                    targets.push_back(entry.second);
            }
        } catch (...) {
            ec = asio::error::no_memory;
            targets.clear();
        }
    }
    if (!ec) {
        std::uint64_t lost = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (targets[i])
                targets[i]->completed(wcs_[i]);
            else
                ++lost;
        }
        std::lock_guard lock(mutex_);
        unrouted_ += lost;
    } else if (ec != asio::error::operation_aborted || cq_->closed) {
        // The CQ can deliver nothing more (its device is gone, it was closed):
        // every operation waiting for it ends now.
        const std::error_code reason =
            ec == asio::error::operation_aborted ? asio::error::bad_descriptor : ec;
        for (auto& qp : targets)
            qp->failed(reason);
    }
    // An aborted poll (the CQ's cancel(), or settle()) polls again only if
    // something is still outstanding.
    std::lock_guard lock(mutex_);
    routing_ = false;
    polling_ = false;
    if (anything_outstanding())
        poll();
}

} // namespace rdma_asio::detail
