#include "rdma_asio/detail/qp/shared_receive_queue_impl.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/qp/cq_demux.hpp"
#include "rdma_asio/detail/qp/work_request_encoder.hpp"
#include "rdma_asio/error.hpp"

#include <algorithm>
#include <cerrno>
#include <mutex>

namespace rdma_asio::detail {

std::shared_ptr<shared_receive_queue_impl>
shared_receive_queue_impl::open(asio::execution_context& context, ibv_srq* srq,
                                std::shared_ptr<ibv_pd> pd, error_code& ec) {
    if (srq == nullptr) {
        ec = asio::error::invalid_argument;
        return nullptr;
    }
    ibv_srq_attr attr{};
    if (int rc = ibv_query_srq(srq, &attr); rc != 0) {
        ec = errno_code(rc > 0 ? rc : errno);
        return nullptr;
    }
    try {
        auto& registry = asio::use_service<shutdown_registry>(context);
        auto impl = std::make_shared<shared_receive_queue_impl>(srq, std::move(pd), attr.max_wr);
        registry.add(impl);
        ec.clear();
        return impl;
    } catch (const std::bad_alloc&) {
        ec = asio::error::no_memory;
        return nullptr;
    }
}

std::shared_ptr<shared_receive_queue_impl>
shared_receive_queue_impl::create(asio::execution_context& context, std::shared_ptr<ibv_pd> pd,
                                  std::uint32_t depth, std::uint32_t max_sge, error_code& ec) {
    if (!pd) {
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    ibv_srq_init_attr init{};
    init.attr.max_wr = depth;
    init.attr.max_sge = max_sge;
    ibv_srq* srq = ibv_create_srq(pd.get(), &init);
    if (srq == nullptr) {
        ec = last_errno_code();
        return nullptr;
    }
    auto impl = open(context, srq, std::move(pd), ec);
    if (!impl)
        ibv_destroy_srq(srq);
    return impl;
}

shared_receive_queue_impl::shared_receive_queue_impl(ibv_srq* srq, std::shared_ptr<ibv_pd> pd,
                                                     std::uint32_t depth)
    : srq_(srq), pd_(std::move(pd)), machine_(0, depth, wr_owner::shared_receive_queue) {}

shared_receive_queue_impl::~shared_receive_queue_impl() {
    // The routes of destroyed queue pairs' completions to this object end first.
    for_each_demux([this](cq_demux& d) { d.forget(this); });
    // Every queue pair that held this object is gone, and so is the I/O object
    // (whose close() ran): the SRQ was destroyed then, unless a queue pair on it
    // was left undestroyed (one whose rdma_cm id destroyed it): once more here.
    if (!destroyed_)
        ibv_destroy_srq(srq_);
}

template <class Fn>
void shared_receive_queue_impl::for_each_demux(Fn fn) noexcept {
    for (const std::weak_ptr<cq_demux>& weak : demuxes_) {
        if (std::shared_ptr<cq_demux> demux = weak.lock())
            fn(*demux);
    }
}

std::size_t shared_receive_queue_impl::waiting() const {
    std::lock_guard lock(mutex_);
    return machine_.waiting(work_queue::receive);
}

std::uint32_t shared_receive_queue_impl::posted() const {
    std::lock_guard lock(mutex_);
    return machine_.posted(work_queue::receive);
}

void shared_receive_queue_impl::act(wr_actions& a) noexcept {
    bool posted = false;
    while (work_request_op* next = a.to_post.pop_front()) {
        auto& op = static_cast<qp_operation&>(*next);
        ibv_recv_wr wr = receive_request(op, std::span(op.sges.data(), op.sge_count));
        ibv_recv_wr* bad = nullptr;
        if (int rc = ibv_post_srq_recv(srq_, &wr, &bad); rc != 0) {
            machine_.post_failed(op, errno_code(rc > 0 ? rc : errno), a);
            continue;
        }
        posted = true;
    }
    const std::uint32_t receives = machine_.posted(work_queue::receive);
    const bool idle = receives == 0 && posted_.load(std::memory_order_relaxed) != 0;
    // Stored before waking: a demultiplexer deciding whether to poll again reads
    // it through its queue pairs' outstanding_on (see cq_demux::read).
    posted_.store(receives);
    // Under this lock: a demultiplexer never calls into this object under its
    // own lock (outstanding() is an atomic load), so the order is one way.
    if (posted)
        for_each_demux([](cq_demux& d) { d.wake(); });
    if (idle)
        for_each_demux([](cq_demux& d) { d.settle(); });
}

void shared_receive_queue_impl::finish(wr_actions& a) noexcept {
    while (work_request_op* done = a.to_complete.pop_front())
        static_cast<qp_operation&>(*done).complete(delivery::post);
}

void shared_receive_queue_impl::start(qp_operation& op) noexcept {
    wr_actions a;
    {
        std::lock_guard lock(mutex_);
        machine_.start(op, a); // refused once closed
        act(a);
    }
    finish(a);
}

void shared_receive_queue_impl::cancel_operation(qp_operation& op,
                                                 asio::cancellation_type) noexcept {
    wr_actions a;
    {
        std::lock_guard lock(mutex_);
        machine_.cancel_waiting(op, a);
    }
    finish(a);
}

void shared_receive_queue_impl::cancel() noexcept {
    wr_actions a;
    {
        std::lock_guard lock(mutex_);
        machine_.cancel_all(a);
    }
    finish(a);
}

std::shared_ptr<ibv_pd>
shared_receive_queue_impl::destroy_if_unused_locked(wr_actions& a) noexcept {
    if (!closed_ || destroyed_ || queue_pairs_ != 0)
        return nullptr;
    // No queue pair is on it: ibv_destroy_srq has nothing to refuse for. Should
    // it fail all the same, the receives still end: nothing would end them later.
    destroyed_ = ibv_destroy_srq(srq_) == 0;
    machine_.fail_all(asio::error::operation_aborted, a);
    posted_.store(0);
    return destroyed_ ? std::move(pd_) : nullptr;
}

void shared_receive_queue_impl::close() noexcept {
    wr_actions a;
    std::shared_ptr<ibv_pd> pd; // released outside the lock
    {
        std::lock_guard lock(mutex_);
        if (closed_)
            return;
        closed_ = true;
        machine_.refuse_new(asio::error::bad_descriptor);
        machine_.cancel_all(a); // the waiting ones: never posted
        pd = destroy_if_unused_locked(a);
    }
    finish(a);
}

void shared_receive_queue_impl::shutdown() noexcept {
    wr_actions a;
    std::shared_ptr<ibv_pd> pd;
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
        machine_.refuse_new(asio::error::bad_descriptor);
        pd = destroy_if_unused_locked(a);
        // Every receive, the posted ones too: no handler runs any more. (Queue
        // pairs still on it are destroyed by their own shutdown.)
        machine_.fail_all(asio::error::operation_aborted, a);
        posted_.store(0);
    }
    while (work_request_op* op = a.to_complete.pop_front())
        static_cast<qp_operation&>(*op).destroy();
}

void shared_receive_queue_impl::arm_limit(std::uint32_t limit, error_code& ec) noexcept {
    std::lock_guard lock(mutex_);
    if (closed_) {
        ec = asio::error::bad_descriptor;
        return;
    }
    ibv_srq_attr attr{};
    attr.srq_limit = limit;
    if (int rc = ibv_modify_srq(srq_, &attr, IBV_SRQ_LIMIT); rc != 0)
        ec = errno_code(rc > 0 ? rc : errno);
    else
        ec.clear();
}

void shared_receive_queue_impl::attach_queue_pair(const std::shared_ptr<cq_demux>& recv,
                                                  error_code& ec) {
    std::lock_guard lock(mutex_);
    if (closed_) {
        ec = asio::error::bad_descriptor;
        return;
    }
    std::erase_if(demuxes_, [](const std::weak_ptr<cq_demux>& w) { return w.expired(); });
    const bool known =
        std::any_of(demuxes_.begin(), demuxes_.end(),
                    [&](const std::weak_ptr<cq_demux>& w) { return w.lock() == recv; });
    if (!known)
        demuxes_.push_back(recv);
    ++queue_pairs_;
    ec.clear();
    // Receives posted before this queue pair came are its to take too.
    if (machine_.posted(work_queue::receive) > 0)
        recv->wake();
}

void shared_receive_queue_impl::detach_queue_pair() noexcept {
    wr_actions a;
    std::shared_ptr<ibv_pd> pd;
    {
        std::lock_guard lock(mutex_);
        if (queue_pairs_ > 0)
            --queue_pairs_;
        pd = destroy_if_unused_locked(a);
    }
    finish(a);
}

void shared_receive_queue_impl::completed(std::span<const ibv_wc> wcs, op_list& ended) noexcept {
    wr_actions a;
    {
        std::lock_guard lock(mutex_);
        for (const ibv_wc& wc : wcs) {
            if (work_request_machine::is_shared_receive(wc.wr_id))
                machine_.completed(wc, a);
        }
        act(a);
    }
    ended.splice_back(a.to_complete);
}

void shared_receive_queue_impl::failed(error_code ec) noexcept {
    if (ec != errc::device_removed)
        return;
    wr_actions a;
    {
        std::lock_guard lock(mutex_);
        machine_.fail_all(ec, a);
        act(a);
    }
    finish(a);
}

} // namespace rdma_asio::detail
