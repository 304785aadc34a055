#include "rdma_asio/detail/qp/cq_demux.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/qp/qp_operation.hpp"
#include "rdma_asio/error.hpp"

#include <algorithm>
#include <new>

namespace rdma_asio::detail {

std::shared_ptr<cq_demux> cq_demux::of(const std::shared_ptr<completion_queue_impl>& cq,
                                       error_code& ec) {
    if (!cq || cq->closed()) {
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    if (!cq->claim(cq_shared_state::user::reader)) {
        ec = errc::completion_queue_in_use;
        return nullptr;
    }
    std::shared_ptr<cq_demux> demux =
        cq->read_target<cq_demux>([&] { return std::make_shared<cq_demux>(cq); });
    ec.clear();
    return demux;
}

void cq_demux::attach(std::uint32_t qp_num, const std::shared_ptr<cq_consumer>& consumer) {
    std::lock_guard lock(mutex_);
    // A number is reused only once its QP is destroyed: a route left for it is a
    // retired one, whose completions, if any were left, came before this QP's.
    if (retired_ > 0)
        retired_ -= std::erase_if(
            qps_, [qp_num](const route_entry& entry) { return entry.qp_num == qp_num; });
    qps_.push_back(route_entry{qp_num, consumer.get(), consumer});
}

void cq_demux::retire(std::uint32_t qp_num, const std::shared_ptr<cq_consumer>& heir) noexcept {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(qps_.begin(), qps_.end(),
                           [qp_num](const route_entry& entry) { return entry.qp_num == qp_num; });
    if (it == qps_.end())
        return;
    if (!heir->outstanding_on(this)) {
        qps_.erase(it); // nothing of the heir's can be left in the CQ
        return;
    }
    it->consumer = heir.get();
    it->weak = heir;
    it->retired_after = polls_started_ + 1; // never 0: polls are counted from 1
    ++retired_;
}

void cq_demux::forget(const cq_consumer* heir) noexcept {
    std::lock_guard lock(mutex_);
    retired_ -= std::erase_if(qps_, [heir](const route_entry& entry) {
        return entry.retired_after != 0 && entry.consumer == heir;
    });
}

void cq_demux::expire_retired(std::size_t n) noexcept {
    // A poll that read fewer completions than it asked for found the CQ empty; if
    // it started after the retirement (after ibv_destroy_qp, after which the QP
    // adds nothing to the CQ), nothing of the destroyed QP is left there. (Most
    // polls have no retired route: no walk over every QP then.)
    if (retired_ == 0)
        return;
    retired_ -= std::erase_if(qps_, [&](const route_entry& entry) {
        return entry.retired_after != 0 &&
               (entry.weak.expired() || (n < batch && entry.retired_after <= polls_started_) ||
                !entry.consumer->outstanding_on(this));
    });
}

void cq_demux::detach(std::uint32_t qp_num) noexcept {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(qps_.begin(), qps_.end(), [qp_num](const route_entry& entry) {
        return entry.qp_num == qp_num && entry.retired_after == 0; // not the heir's
    });
    if (it != qps_.end())
        qps_.erase(it);
}

std::uint64_t cq_demux::unrouted() const noexcept {
    std::lock_guard lock(mutex_);
    return unrouted_;
}

void cq_demux::wake() noexcept {
    // Without the lock while a poll is in progress (cq_poll_handshake.hpp).
    if (!handshake_.must_poll())
        return;
    std::lock_guard lock(mutex_);
    if (handshake_.start_locked())
        poll();
}

void cq_demux::settle() noexcept {
    std::lock_guard lock(mutex_);
    // While read() routes, no poll is pending (its own end decides whether to
    // poll again): nothing to cancel, and no need to look at every queue pair.
    if (!handshake_.in_progress() || routing_ || anything_outstanding())
        return;
    // A closed CQ has no wait left to cancel (its close ended it) and no channel.
    // The CQ is this demultiplexer's alone: nobody else waits on it.
    cq_->excluding_close([this] {
        if (!cq_->closed())
            cq_->cancel();
    });
}

bool cq_demux::anything_outstanding() const noexcept {
    return std::any_of(qps_.begin(), qps_.end(), [this](const route_entry& entry) {
        return !entry.weak.expired() && entry.consumer->outstanding_on(this);
    });
}

void cq_demux::poll() noexcept {
    // Not while the CQ closes: its poll then starts on an open CQ, or is refused
    // (bad_descriptor, posted) on a closed one and fails the queue pairs.
    try {
        cq_->excluding_close([this] {
            ++polls_started_;
            reader_.start(shared_from_this());
        });
    } catch (...) {
        // Only an allocation can fail here; the next wake() tries again.
        handshake_.end_locked();
    }
}

void cq_demux::read(error_code ec, std::size_t n) {
    // However this ends (a handler may throw), the demultiplexer drains or polls
    // again if anything is still outstanding. An aborted poll (the CQ's cancel(),
    // by settle() or request_drain()) polls again only then too.
    struct poll_again {
        cq_demux& self;
        ~poll_again() { self.next_poll(); }
    } restart{*this};
    if (!ec) {
        op_list ended;
        route(n, ended);
        deliver(ended);
    } else if (ec != asio::error::operation_aborted || cq_->closed()) {
        fail_all(ec == asio::error::operation_aborted ? asio::error::bad_descriptor : ec);
    }
}

namespace {

// The queue pairs one batch routes to, each held once while it is routed to (its
// last owner may let it go on another thread meanwhile). Only the entries used are
// constructed: most batches name one or two queue pairs.
class batch_refs {
public:
    batch_refs() noexcept {}
    ~batch_refs() {
        for (std::size_t i = 0; i < n_; ++i)
            refs_[i].~shared_ptr();
    }
    batch_refs(const batch_refs&) = delete;
    batch_refs& operator=(const batch_refs&) = delete;

    /// Holds the consumer `weak` names; null when it is gone.
    cq_consumer* hold(const std::weak_ptr<cq_consumer>& weak) noexcept {
        new (&refs_[n_]) std::shared_ptr<cq_consumer>(weak.lock());
        if (!refs_[n_]) {
            refs_[n_].~shared_ptr();
            return nullptr;
        }
        return refs_[n_++].get();
    }

private:
    union {
        std::shared_ptr<cq_consumer> refs_[cq_demux::batch];
    };
    std::size_t n_ = 0;
};

} // namespace

void cq_demux::route(std::size_t n, op_list& ended) noexcept {
    // Each run of completions of one QP is one call, and one lock of that QP.
    const std::span<const ibv_wc> wcs = reader_.buffer();
    batch_refs held;
    std::array<cq_consumer*, batch> target; // null: a QP not served here
    {
        std::lock_guard lock(mutex_);
        routing_ = true;
        for (std::size_t i = 0; i < n; ++i) {
            if (i > 0 && wcs[i].qp_num == wcs[i - 1].qp_num) {
                target[i] = target[i - 1];
                continue;
            }
            auto it = std::find_if(qps_.begin(), qps_.end(), [&](const route_entry& entry) {
                return entry.qp_num == wcs[i].qp_num;
            });
            // Runs of one QP are held once each; a QP that comes back after another
            // one's run is held again (a batch has at most `batch` runs).
            target[i] = it == qps_.end() ? nullptr : held.hold(it->weak);
        }
        expire_retired(n); // after its completions found their route
    }
    std::uint64_t lost = 0;
    for (std::size_t i = 0; i < n;) {
        std::size_t end = i + 1;
        while (end < n && target[end] == target[i])
            ++end;
        if (target[i] != nullptr)
            target[i]->completed(std::span<const ibv_wc>(wcs.data() + i, end - i), ended);
        else
            lost += end - i;
        i = end;
    }
    if (lost > 0) {
        std::lock_guard lock(mutex_);
        unrouted_ += lost;
    }
}

void cq_demux::next_poll() noexcept {
    std::lock_guard lock(mutex_);
    if (!drain_waiters_.empty()) {
        // The CQ stays the drain's (the handshake in progress, no poll pending):
        // it runs as a handler of its own, since its handlers may throw.
        routing_ = true;
        post_drain();
        return;
    }
    end_poll_locked();
}

void cq_demux::end_poll_locked() noexcept {
    routing_ = false;
    handshake_.end_locked(); // before the counts are read
    if (anything_outstanding() && handshake_.start_locked())
        poll();
}

void cq_demux::post_drain() noexcept {
    try {
        asio::post(cq_->executor(), [self = shared_from_this()] { self->drain(); });
    } catch (...) {
        // No memory for the handler: the drain does not run, and the consumers
        // hear drained() from the next poll's end instead (routing_ false: its
        // completions were all routed when this one ended).
        end_poll_locked();
    }
}

void cq_demux::request_drain(const std::shared_ptr<cq_consumer>& consumer) noexcept {
    std::lock_guard lock(mutex_);
    try {
        drain_waiters_.push_back(consumer);
    } catch (...) {
        return; // no memory: not told; the consumer's own bound applies
    }
    if (!handshake_.in_progress()) {
        handshake_.start_locked(); // the CQ is the drain's until it ends
        routing_ = true;
        post_drain();
    } else if (!routing_) {
        // A poll waits for the CQ's event: cancelled, its end drains (read(),
        // next_poll). A closed CQ's wait has ended already.
        cq_->excluding_close([this] {
            if (!cq_->closed())
                cq_->cancel();
        });
    } // else: a poll's end or a drain is on its way, and drains
}

void cq_demux::drain() {
    for (;;) {
        // Only this handler reads the CQ now (the handshake is in progress and no
        // poll is pending), into the reader's buffer.
        const int n = cq_->excluding_close([this] {
            return cq_->closed() ? -1
                                 : ibv_poll_cq(cq_->native_handle(), static_cast<int>(batch),
                                               reader_.buffer().data());
        });
        if (n <= 0)
            break; // empty, closed, or failed (the CQ's own poll reports that)
        op_list ended;
        route(static_cast<std::size_t>(n), ended);
        try {
            deliver(ended);
        } catch (...) {
            // A handler threw: the rest were posted (deliver); the drain goes on
            // in a handler of its own, as the exception leaves this one.
            std::lock_guard lock(mutex_);
            post_drain();
            throw;
        }
        if (static_cast<std::size_t>(n) < batch)
            break;
    }
    std::vector<std::weak_ptr<cq_consumer>> waiters;
    {
        std::lock_guard lock(mutex_);
        waiters.swap(drain_waiters_);
    }
    for (const auto& weak : waiters)
        if (std::shared_ptr<cq_consumer> consumer = weak.lock())
            consumer->drained();
    next_poll();
}

void cq_demux::deliver(op_list& ended) {
    // The handlers run last, with no lock held and the whole batch routed: they
    // may start operations, close queue pairs and CQs, or throw. After a throw
    // the rest are posted, so that none is lost, and the exception goes on out
    // of io_context::run(), as from any handler.
    try {
        while (work_request_op* done = ended.pop_front())
            static_cast<qp_operation&>(*done).complete(delivery::may_run_here);
    } catch (...) {
        while (work_request_op* done = ended.pop_front())
            static_cast<qp_operation&>(*done).complete(delivery::post);
        throw;
    }
}

void cq_demux::fail_all(error_code reason) noexcept {
    std::vector<std::shared_ptr<cq_consumer>> targets;
    {
        std::lock_guard lock(mutex_);
        routing_ = true;
        try {
            targets.reserve(qps_.size());
            for (auto& entry : qps_)
                if (auto consumer = entry.weak.lock())
                    targets.push_back(std::move(consumer));
        } catch (...) {
            return; // no memory: the next poll fails them
        }
    }
    for (auto& qp : targets)
        qp->failed(reason);
}

} // namespace rdma_asio::detail
