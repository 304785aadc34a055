#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/detail/async_event/async_event_stream_impl.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/blocking_call_thread.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/cq/completion_queue_impl.hpp"
#include "rdma_asio/detail/device/region_registry.hpp"
#include "rdma_asio/detail/qp/cq_demux.hpp"
#include "rdma_asio/detail/qp/datagram_support.hpp"
#include "rdma_asio/detail/qp/shared_receive_queue_impl.hpp"
#include "rdma_asio/detail/qp/work_request_encoder.hpp"
#include "rdma_asio/error.hpp"

#include <cerrno>
#include <new>
#include <utility>

namespace rdma_asio::detail {

std::shared_ptr<queue_pair_impl>
queue_pair_impl::open(asio::execution_context& context, ibv_qp* qp, ibv_qp_type type,
                      qp_owner owner, rdma_cm_id* cm_id, std::shared_ptr<ibv_pd> pd,
                      const std::shared_ptr<completion_queue_impl>& send_cq,
                      const std::shared_ptr<completion_queue_impl>& recv_cq, error_code& ec,
                      const std::shared_ptr<shared_receive_queue_impl>& srq) {
    // The object's verbs are those of one transport: a UD QP taken for an RC one
    // would have a send posted with RDMA fields and no address handle (the
    // provider reads a null one), an RC QP taken for a UD one the reverse.
    if (qp == nullptr || qp->qp_type != type) {
        ec = asio::error::invalid_argument;
        return nullptr;
    }
    // The CQs must be the QP's own: a completion that goes elsewhere would leave
    // its operation waiting for ever.
    if (!send_cq || !recv_cq || send_cq->native_handle() != qp->send_cq ||
        recv_cq->native_handle() != qp->recv_cq) {
        ec = asio::error::invalid_argument;
        return nullptr;
    }
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (int rc = ibv_query_qp(qp, &attr, IBV_QP_CAP, &init); rc != 0) {
        ec = errno_code(rc > 0 ? rc : errno);
        return nullptr;
    }
    if (srq && srq->native_handle() != init.srq) {
        ec = asio::error::invalid_argument;
        return nullptr;
    }
    std::shared_ptr<cq_demux> send = cq_demux::of(send_cq, ec);
    if (ec)
        return nullptr;
    std::shared_ptr<cq_demux> recv = send_cq == recv_cq ? send : cq_demux::of(recv_cq, ec);
    if (ec)
        return nullptr;
    // A QP on a shared receive queue has no receive queue of its own.
    const std::uint32_t recv_depth = init.srq != nullptr ? 0 : init.cap.max_recv_wr;
    try {
        auto& registry = asio::use_service<shutdown_registry>(context);
        auto impl =
            std::make_shared<queue_pair_impl>(qp, owner, cm_id, std::move(pd), init.cap.max_send_wr,
                                              recv_depth, init.cap.max_inline_data);
        impl->srq_ = srq;
        impl->attach(std::move(send), std::move(recv), ec);
        if (ec)
            return nullptr;
        registry.add(impl);
        ec.clear();
        return impl;
    } catch (const std::bad_alloc&) {
        ec = asio::error::no_memory;
        return nullptr;
    }
}

queue_pair_impl::queue_pair_impl(ibv_qp* qp, qp_owner owner, rdma_cm_id* cm_id,
                                 std::shared_ptr<ibv_pd> pd, std::uint32_t send_depth,
                                 std::uint32_t recv_depth, std::uint32_t max_inline)
    : qp_(qp), qp_num_(qp->qp_num), max_inline_(max_inline), owner_(owner), cm_id_(cm_id),
      pd_(std::move(pd)), machine_(send_depth, recv_depth),
      unsignaled_sends_(qp->qp_type == IBV_QPT_RC) {
    // Only the domain the QP was made in vouches for its buffers.
    if (pd_ && pd_.get() == qp->pd)
        regions_ = regions_of(pd_);
}

queue_pair_impl::~queue_pair_impl() {
    if (send_demux_)
        detach_all();
}

void queue_pair_impl::attach(std::shared_ptr<cq_demux> send, std::shared_ptr<cq_demux> recv,
                             error_code& ec) {
    if (srq_) {
        // First: the SRQ counts this QP, and refuses when it is closed.
        srq_->attach_queue_pair(recv, ec);
        if (ec) {
            srq_.reset();
            return;
        }
    }
    try {
        send->attach(qp_num_, shared_from_this());
        if (recv != send) {
            try {
                recv->attach(qp_num_, shared_from_this());
            } catch (...) {
                send->detach(qp_num_);
                throw;
            }
        }
    } catch (...) {
        if (srq_)
            srq_->detach_queue_pair();
        srq_.reset();
        throw;
    }
    send_demux_ = std::move(send);
    recv_demux_ = std::move(recv);
}

void queue_pair_impl::enable_datagrams(std::uint8_t port, std::uint8_t gid_index, error_code& ec) {
    try {
        datagram_ = datagram_support::create(qp_, port, gid_index,
                                             machine_.credits(work_queue::receive), ec);
    } catch (const std::bad_alloc&) {
        ec = asio::error::no_memory;
    }
}

datagram_endpoint queue_pair_impl::local_endpoint() const noexcept {
    return datagram_ ? datagram_->local() : datagram_endpoint{};
}

error_code queue_pair_impl::multicast(const datagram_endpoint& group, bool attach) noexcept {
    std::lock_guard lock(mutex_);
    if (closed_)
        return asio::error::bad_descriptor;
    if (!datagram_)
        return asio::error::operation_not_supported;
    return datagram_->multicast(qp_, group, attach);
}

bool queue_pair_impl::has_address_handle(const datagram_endpoint& to) const noexcept {
    if (!datagram_)
        return true;
    std::lock_guard lock(mutex_);
    return closed_ || datagram_->find(to) != nullptr; // a closed QP refuses the send itself
}

bool queue_pair_impl::wait_for_address_handle(const datagram_endpoint& to,
                                              const asio::any_io_executor& ex,
                                              std::function<void(error_code)> then) {
    {
        std::lock_guard lock(mutex_);
        if (!datagram_ || closed_ || datagram_->find(to) != nullptr)
            return false;
        if (!datagram_->add_waiter(to, std::move(then)))
            return true; // a send before it has the handle made
    }
    try {
        run_blocking_call(ex, [self = shared_from_this(), to] { self->make_address_handle(to); });
    } catch (...) {
        std::vector<datagram_support::address_waiter> dropped;
        {
            std::lock_guard lock(mutex_);
            dropped = datagram_->take_waiters(to);
        }
        throw;
    }
    return true;
}

void queue_pair_impl::make_address_handle(const datagram_endpoint& to) noexcept {
    error_code ec;
    ibv_ah_attr attr{};
    ibv_pd* pd = nullptr;
    std::shared_ptr<ibv_pd> keep; // the domain stays allocated while the handle is made
    {
        std::lock_guard lock(mutex_);
        if (!closed_) {
            attr = datagram_->attributes_for(to);
            pd = datagram_->pd();
            keep = pd_;
        }
    }
    ibv_ah* ah = nullptr;
    if (pd != nullptr) {
        // Outside the lock: the QP's other operations go on while the kernel
        // resolves the neighbour.
        errno = 0;
        ah = ibv_create_ah(pd, &attr);
        if (ah == nullptr)
            ec = last_errno_code();
    }
    std::vector<datagram_support::address_waiter> waiting;
    {
        std::lock_guard lock(mutex_);
        if (ah != nullptr) {
            if (closed_) // its handles went with the QP, or will not be needed
                ibv_destroy_ah(ah);
            else
                ec = datagram_->adopt(to, ah);
        }
        // Empty when close() or cancel() ended the waits already.
        waiting = datagram_->take_waiters(to);
    }
    for (auto& then : waiting)
        then(ec);
}

void queue_pair_impl::end_address_waits() noexcept {
    if (!datagram_)
        return;
    datagram_support::waiting_sends waiting;
    {
        std::lock_guard lock(mutex_);
        waiting = datagram_->take_all_waiters();
    }
    for (auto& [to, sends] : waiting)
        for (auto& then : sends)
            then(asio::error::operation_aborted);
}

void queue_pair_impl::leave_srq() noexcept {
    if (!srq_)
        return;
    // The receives the QP took may still have completions in its CQ, unread
    // (rxe leaves a destroyed QP's completions there): the SRQ takes them.
    if (recv_demux_)
        recv_demux_->retire(qp_num_, srq_);
    // The QP was destroyed (only then does ibv_destroy_srq accept): this object
    // keeps the SRQ's state, whose receives other QPs may still complete.
    srq_->detach_queue_pair();
}

bool queue_pair_impl::outstanding_on(const cq_demux* demux) const noexcept {
    // Sequentially consistent, as the stores in act(): see cq_demux::wake.
    return (demux == send_demux_.get() && posted_send_.load() > 0) ||
           (demux == recv_demux_.get() &&
            (posted_recv_.load() > 0 || (srq_ && srq_->outstanding())));
}

std::size_t queue_pair_impl::waiting(work_queue q) const {
    std::lock_guard lock(mutex_);
    return machine_.waiting(q);
}

std::uint32_t queue_pair_impl::posted(work_queue q) const {
    std::lock_guard lock(mutex_);
    return machine_.posted(q);
}

int queue_pair_impl::post(qp_operation& op, bool unsignaled) noexcept {
    if (op.queue == work_queue::receive) {
        std::span<ibv_sge> list(op.sges.data(), op.sge_count);
        std::array<ibv_sge, qp_operation::max_sges + 1> with_grh;
        if (datagram_) // UD: the GRH's 40 bytes first
            list = std::span(with_grh.data(),
                             datagram_->receive_list(list, with_grh.data(), op.grh_slot));
        ibv_recv_wr wr = receive_request(op, list);
        ibv_recv_wr* bad = nullptr;
        int rc = ibv_post_recv(qp_, &wr, &bad);
        if (rc == 0 && datagram_)
            datagram_->receive_posted();
        return rc;
    }
    send_posting how;
    // A signaled work request's completion returns its room in the send queue
    // and ends its operation; an unsignaled one's room and operation come back
    // with the next completion of the queue (work_request_machine).
    how.signaled = !unsignaled;
    how.inline_data = may_post_inline(op);
    if (datagram_) {
        // Made before the send started (address_wait.hpp) and kept until the QP
        // is destroyed, which refuses new sends first.
        how.address_handle = datagram_->find(op.peer);
        if (how.address_handle == nullptr) {
            errno = EHOSTUNREACH;
            return -1;
        }
    }
    ibv_send_wr wr = send_request(op, how);
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp_, &wr, &bad);
}

bool queue_pair_impl::may_post_inline(const qp_operation& op) noexcept {
    // Inline, the bytes are copied into the work request now (ibv_post_send(3)):
    // the device reads no memory for it and checks no lkey. So only buffers the
    // QP's own domain holds go that way (region_registry.hpp); the rest keep the
    // device's check of protection domain, bounds and key. Only sends and writes
    // carry data this way; an RDMA read or an atomic writes into its buffer.
    return op.length != 0 && op.length <= max_inline_ &&
           (op.opcode == IBV_WR_SEND || op.opcode == IBV_WR_SEND_WITH_IMM ||
            op.opcode == IBV_WR_RDMA_WRITE || op.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) &&
           regions_ && regions_->covers(std::span(op.sges.data(), op.sge_count), last_region_);
}

queue_pair_impl::posted_now queue_pair_impl::act(wr_actions& a) noexcept {
    posted_now now;
    if (a.move_qp_to_error) {
        a.move_qp_to_error = false;
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_ERR;
        // A failure leaves the posted work requests to complete as they will; the
        // operations still end by their completions.
        ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
    }
    // Posted in the order admitted; a failed post gives its room to the next
    // one, which joins the end of to_post. A send followed by another in this
    // batch goes unsignaled (work_request_machine): the later one's completion
    // ends it.
    bool last_send_unsignaled = false;
    while (work_request_op* next = a.to_post.pop_front()) {
        auto& op = static_cast<qp_operation&>(*next);
        const bool unsignaled =
            unsignaled_sends_ && op.queue == work_queue::send && another_send(a.to_post.front());
        if (int rc = post(op, unsignaled); rc != 0) {
            machine_.post_failed(op, errno_code(rc > 0 ? rc : errno), a);
            continue;
        }
        if (op.queue == work_queue::send) {
            now.send = true;
            last_send_unsignaled = unsignaled;
            if (unsignaled)
                machine_.posted_unsignaled(op);
        } else {
            now.receive = true;
        }
    }
    // The send that was to follow the last unsignaled one failed to post: a
    // fence takes its place, so that a completion still comes after it.
    if (last_send_unsignaled)
        post_fence();
    // Only this lock's holder writes the counts: the previous value is its own.
    const std::uint32_t sends = machine_.posted(work_queue::send);
    const std::uint32_t receives = machine_.posted(work_queue::receive);
    now.send_idle = sends == 0 && posted_send_.load(std::memory_order_relaxed) != 0;
    now.receive_idle = receives == 0 && posted_recv_.load(std::memory_order_relaxed) != 0;
    posted_send_.store(sends);
    posted_recv_.store(receives);
    return now;
}

bool queue_pair_impl::another_send(const work_request_op* op) noexcept {
    for (; op != nullptr; op = op_list::next(*op))
        if (op->queue == work_queue::send)
            return true;
    return false;
}

void queue_pair_impl::post_fence() noexcept {
    const std::uint64_t wr_id = machine_.reserve_fence();
    if (wr_id == 0)
        return; // in error: the unsignaled sends end by their flushes
    ibv_send_wr wr = fence_request(wr_id); // touches no memory
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp_, &wr, &bad) != 0) {
        // The QP took a work request a moment ago and refuses one now: it was
        // changed behind this object's back. The unsignaled sends then end with a
        // later completion of the queue, or at close().
        machine_.release_fence();
    }
}

void queue_pair_impl::wake(posted_now now) noexcept {
    // The counts are stored before waking, so a demultiplexer deciding whether to
    // poll again sees them (see cq_demux::read).
    if (now.send)
        send_demux_->wake();
    if (now.receive && (recv_demux_ != send_demux_ || !now.send))
        recv_demux_->wake();
}

void queue_pair_impl::settle(posted_now now) noexcept {
    // Only a queue whose last request just ended can leave a poll with nothing
    // to wait for; the demultiplexer checks its other queue pairs.
    if (now.send_idle)
        send_demux_->settle();
    if (now.receive_idle && (recv_demux_ != send_demux_ || !now.send_idle))
        recv_demux_->settle();
}

void queue_pair_impl::finish(wr_actions& a, posted_now now) noexcept {
    wake(now);
    while (work_request_op* done = a.to_complete.pop_front())
        static_cast<qp_operation&>(*done).complete(delivery::post);
    settle(now);
}

void queue_pair_impl::start(qp_operation& op) noexcept {
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        machine_.start(op, a); // refused once closed (release_locked)
        now = act(a);
    }
    finish(a, now);
}

void queue_pair_impl::cancel_operation(qp_operation& op, asio::cancellation_type type) noexcept {
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        if (op.st == work_request_op::state::waiting)
            machine_.cancel_waiting(op, a);
        else if (op.st == work_request_op::state::posted &&
                 (type & asio::cancellation_type::terminal) != asio::cancellation_type::none)
            machine_.cancel(op, a);
        now = act(a);
    }
    finish(a, now);
}

void queue_pair_impl::cancel() noexcept {
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        machine_.cancel_all(a);
        now = act(a);
    }
    finish(a, now);
    end_address_waits();
}

void queue_pair_impl::refuse_new_locked(std::vector<event_subscription>& watches) noexcept {
    closed_.store(true, std::memory_order_release);
    machine_.refuse_new(asio::error::bad_descriptor);
    watches.swap(error_watches_);
}

bool queue_pair_impl::release_locked(std::vector<event_subscription>& watches) noexcept {
    refuse_new_locked(watches);
    if (owner_ == qp_owner::verbs) {
        if (datagram_) // ibv_destroy_qp refuses a QP still attached to a group
            datagram_->detach_all(qp_);
        if (ibv_destroy_qp(qp_) != 0)
            return false;
        if (datagram_) // its address handles and ring go before the protection domain
            datagram_->release();
        return true;
    }
    if (owner_ == qp_owner::rdma_cm && cm_id_->qp == qp_) {
        rdma_destroy_qp(cm_id_); // sets cm_id_->qp to null: the id's close skips it
        return true;
    }
    return false;
}

bool queue_pair_impl::stop() noexcept {
    wr_actions a;
    posted_now now;
    std::vector<event_subscription> watches; // ended outside the lock
    bool stopped = false;
    {
        std::lock_guard lock(mutex_);
        if (closed_)
            return false;
        // Only a QP this object destroys, on a shared receive queue, has receives
        // the device may still be taking for it.
        if (srq_ && owner_ != qp_owner::borrowed) {
            refuse_new_locked(watches);
            awaiting_last_wqe_ = stopped = true;
            // Posted operations end by their flush completions; the QP stays
            // attached, so that the SRQ's receives it took still reach the SRQ.
            machine_.set_error(asio::error::operation_aborted, a);
            // Also when already in the error state (a device error, a disconnect):
            // moved again, which is harmless.
            a.move_qp_to_error = true;
            now = act(a);
        }
    }
    if (!stopped) {
        close();
        return false;
    }
    finish(a, now);
    end_address_waits();
    return true;
}

void queue_pair_impl::drain(operation& waiter) noexcept {
    bool ask = false;
    {
        std::lock_guard lock(mutex_);
        // Only a stopped QP still routed to (close() and shutdown() come later).
        ask = awaiting_last_wqe_ && recv_demux_ && drain_waiter_ == nullptr;
        if (ask)
            drain_waiter_ = &waiter;
    }
    if (ask)
        recv_demux_->request_drain(shared_from_this());
    else
        waiter.complete(delivery::post);
}

bool queue_pair_impl::end_last_wqe_wait_on_close(
    std::weak_ptr<async_event_stream_impl> events) noexcept {
    std::lock_guard lock(mutex_);
    if (!awaiting_last_wqe_)
        return false;
    last_wqe_events_ = std::move(events);
    return true;
}

void queue_pair_impl::drained() noexcept {
    operation* waiter = nullptr;
    {
        std::lock_guard lock(mutex_);
        waiter = std::exchange(drain_waiter_, nullptr);
    }
    if (waiter != nullptr)
        waiter->complete(delivery::post);
}

void queue_pair_impl::close() noexcept {
    wr_actions a;
    posted_now now;
    bool detach = false;
    std::vector<event_subscription> watches;                  // ended outside the lock
    std::shared_ptr<ibv_pd> pd;                               // released outside the lock
    std::shared_ptr<async_event_stream_impl> last_wqe_events; // its wait ended outside the lock
    bool destroyed = false;
    {
        std::lock_guard lock(mutex_);
        if (closed_ && !awaiting_last_wqe_)
            return;
        awaiting_last_wqe_ = false;
        last_wqe_events = std::exchange(last_wqe_events_, {}).lock();
        destroyed = release_locked(watches);
        if (destroyed) {
            // Destroyed: the device no longer touches any buffer, and the posted
            // work requests will have no completions. Its protection domain may go.
            pd = std::move(pd_);
            machine_.fail_all(asio::error::operation_aborted, a);
        } else {
            // Borrowed (or not destroyable): flushed, and each posted operation
            // ends by its flush completion, as the buffers require.
            machine_.set_error(asio::error::operation_aborted, a);
        }
        now = act(a);
        detach = machine_.outstanding() == 0;
        if (!detach)
            draining_self_ = shared_from_this();
    }
    finish(a, now);
    if (destroyed)
        leave_srq();
    if (detach)
        detach_all();
    if (last_wqe_events) // async_close's wait, if it is still pending (after the event, nothing)
        last_wqe_events->dispatcher().cancel(this);
    end_address_waits();
}

void queue_pair_impl::shutdown() noexcept {
    std::shared_ptr<queue_pair_impl> drained; // released last; the registry holds this too
    operation* drain_waiter = nullptr;
    datagram_support::waiting_sends address_waits;
    wr_actions a;
    std::vector<event_subscription> watches;
    std::shared_ptr<ibv_pd> pd;
    bool destroyed = false;
    {
        std::lock_guard lock(mutex_);
        if (!closed_ || awaiting_last_wqe_) {
            awaiting_last_wqe_ = false;
            destroyed = release_locked(watches);
            if (destroyed) {
                pd = std::move(pd_);
            } else {
                // Borrowed: stopped, so that the device takes no further work
                // request of it; what it still completes is ignored (fail_all).
                ibv_qp_attr attr{};
                attr.qp_state = IBV_QPS_ERR;
                ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
            }
        }
        // Every operation, the posted ones too (a closed borrowed QP's that were
        // waiting for their flush completions): no handler runs any more.
        machine_.fail_all(asio::error::operation_aborted, a);
        posted_send_.store(0);
        posted_recv_.store(0);
        drained = std::move(draining_self_);
        drain_waiter = std::exchange(drain_waiter_, nullptr);
        if (datagram_) // destroyed outside the lock, their handlers not invoked
            address_waits = datagram_->take_all_waiters();
    }
    if (drain_waiter != nullptr)
        drain_waiter->destroy();
    // Outside the lock: a handler may own the queue_pair (a coroutine frame), whose
    // close() then finds it closed.
    while (work_request_op* op = a.to_complete.pop_front())
        static_cast<qp_operation&>(*op).destroy();
    if (destroyed)
        leave_srq();
    detach_all();
}

void queue_pair_impl::disconnected(bool call_rdma_disconnect) noexcept {
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        if (closed_)
            return;
        // librdmacm moves an RC QP to the error state in rdma_disconnect; the
        // machine asks for that too, which is harmless twice.
        if (call_rdma_disconnect && cm_id_ != nullptr)
            rdma_disconnect(cm_id_);
        machine_.set_error(errc::disconnected, a);
        now = act(a);
    }
    finish(a, now);
}

void queue_pair_impl::completed(std::span<const ibv_wc> wcs, op_list& ended) noexcept {
    std::shared_ptr<queue_pair_impl> drained; // released last; the demultiplexer holds this too
    wr_actions a;
    posted_now now;
    bool detach = false;
    bool srq_completions = false; // receives of the SRQ among them
    {
        // One lock round trip for the batch: the work requests admitted by these
        // completions are posted together, after all of them.
        std::lock_guard lock(mutex_);
        for (const ibv_wc& wc : wcs) {
            if (work_request_machine::is_shared_receive(wc.wr_id)) {
                // The SRQ ends the receive (below); a failed one broke this QP.
                srq_completions = true;
                machine_.shared_receive_completed(wc, a);
                continue;
            }
            auto* op = static_cast<qp_operation*>(machine_.posted_op(wc.wr_id));
            if (!machine_.completed(wc, a))
                continue;
            // UD: the sender, from the GRH, before the next receive may take its
            // slot; the length without the GRH's room.
            if (datagram_ && op != nullptr && op->queue == work_queue::receive &&
                wc.status == IBV_WC_SUCCESS)
                datagram_->received(wc, op->grh_slot, op->peer, op->wc.byte_len);
        }
        now = act(a);
        detach = closed_ && !awaiting_last_wqe_ && machine_.outstanding() == 0;
        if (detach)
            drained = std::move(draining_self_);
    }
    // No settle(): a completion can only end requests of its own CQ, whose
    // demultiplexer, the caller, decides at the end of its poll whether to poll
    // again. (A completion never ends a request of another CQ: an error moves the
    // QP to the error state, and those requests end by their own flushes.)
    wake(now);
    ended.splice_back(a.to_complete);
    if (srq_ && srq_completions) // its receives this QP took; the SRQ's lock only then
        srq_->completed(wcs, ended);
    if (detach)
        detach_all();
}

void queue_pair_impl::failed(error_code ec) noexcept {
    std::shared_ptr<queue_pair_impl> drained; // released last; the demultiplexer holds this too
    wr_actions a;
    posted_now now;
    bool detach = false;
    {
        std::lock_guard lock(mutex_);
        machine_.fail_all(ec, a);
        now = act(a);
        // A closed queue pair waited for these completions to let go of its
        // demultiplexers and of itself; none will come now. (One stopped for
        // async_close is let go of by its close().)
        detach = closed_ && !awaiting_last_wqe_;
        if (detach)
            drained = std::move(draining_self_);
    }
    finish(a, now);
    if (srq_)
        srq_->failed(ec);
    if (detach)
        detach_all();
}

void queue_pair_impl::watch_errors(const async_event_stream_ref& events,
                                   const asio::any_io_executor& ex, error_code& ec) {
    // The observers run under the stream's lock: they only post. (The stream's
    // lock is taken under this one, never the other way round.)
    auto observer = [weak = weak_from_this(), ex](event_type type) {
        asio::post(ex, [weak, type] {
            if (auto self = weak.lock())
                self->error_event(type);
        });
    };
    std::lock_guard lock(mutex_);
    if (closed_) {
        ec = asio::error::bad_descriptor;
        return;
    }
    error_watches_.push_back(events.observe(qp_, observer));
    error_watches_.push_back(events.observe(qp_->send_cq, observer));
    if (qp_->recv_cq != qp_->send_cq)
        error_watches_.push_back(events.observe(qp_->recv_cq, observer));
    ec.clear();
}

void queue_pair_impl::error_event(event_type type) noexcept {
    error_code reason;
    switch (type) {
    case event_type::qp_fatal:
        reason = errc::queue_pair_fatal;
        break;
    case event_type::qp_req_err:
        reason = errc::queue_pair_request_error;
        break;
    case event_type::qp_access_err:
        reason = errc::queue_pair_access_error;
        break;
    case event_type::cq_err:
        reason = errc::completion_queue_overrun;
        break;
    default:
        return; // comm_est, last_wqe_reached, path migration: not errors
    }
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        if (closed_)
            return;
        if (type == event_type::cq_err) {
            // Completions were lost, flush completions may be too: nothing more is
            // waited for. The QP is stopped first, so the device takes no further
            // work request of it.
            ibv_qp_attr attr{};
            attr.qp_state = IBV_QPS_ERR;
            ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
            machine_.fail_all(reason, a);
        } else {
            // The QP is in the error state already: its posted work requests end
            // with their flush completions, which this reason then names.
            machine_.set_error(reason, a);
        }
        now = act(a);
    }
    finish(a, now);
}

void queue_pair_impl::detach_all() noexcept {
    send_demux_->detach(qp_num_);
    if (recv_demux_ != send_demux_)
        recv_demux_->detach(qp_num_);
}

} // namespace rdma_asio::detail
