#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/cq/completion_queue_impl.hpp"
#include "rdma_asio/detail/device/region_registry.hpp"
#include "rdma_asio/detail/qp/cq_demux.hpp"
#include "rdma_asio/detail/qp/datagram_support.hpp"
#include "rdma_asio/detail/qp/post_refusal.hpp"
#include "rdma_asio/detail/qp/shared_receive_queue_impl.hpp"
#include "rdma_asio/detail/qp/work_request_encoder.hpp"
#include "rdma_asio/error.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <new>
#include <span>
#include <utility>

namespace rdma_asio::detail {

namespace {

// Receives admitted together (a stream re-posts its notification receives a
// quarter at a time; completions read in one batch let in the receives that
// waited for their room) are posted as one list: one ibv_post_recv, one lock of
// the provider's receive queue, instead of one per receive.
constexpr std::size_t receive_list_max = 16;

struct receive_list_result {
    std::size_t posted; // the receives posted, from the first: all, or those before the refused one
    int rc;             // ibv_post_recv's result, as it returned it (errno still set)
};

receive_list_result post_receive_list(ibv_qp* qp, std::span<qp_operation* const> ops) noexcept {
    std::array<ibv_recv_wr, receive_list_max> wrs;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        wrs[i] = receive_request(*ops[i], std::span(ops[i]->sges.data(), ops[i]->sge_count));
        wrs[i].next = i + 1 < ops.size() ? &wrs[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    const int rc = ibv_post_recv(qp, wrs.data(), &bad);
    if (rc == 0)
        return {ops.size(), 0};
    // ibv_post_recv(3): bad_wr is the first one not posted, and none after it is.
    // A refusal of the whole list before any is looked at may leave it null (rxe's,
    // when the QP is still in the reset state): none was posted.
    std::size_t posted = 0;
    while (posted < ops.size() && &wrs[posted] != bad)
        ++posted;
    return {posted < ops.size() ? posted : 0, rc};
}

} // namespace

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
        if (srq != nullptr)
            impl->machine_.set_no_queue_error(errc::receive_on_shared_queue);
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
    : qp_(qp), qp_num_(qp->qp_num),
      // Only the domain the QP was made in vouches for its buffers.
      inline_check_(max_inline, pd && pd.get() == qp->pd ? regions_of(pd) : nullptr), owner_(owner),
      cm_id_(cm_id), pd_(std::move(pd)), machine_(send_depth, recv_depth),
      unsignaled_sends_(qp->qp_type == IBV_QPT_RC) {}

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
    if (op.copy_at_post) {
        if (!inline_check_.allows_copy(op.opcode, op.length)) {
            errno = EINVAL; // no region holds its bytes: inline or not at all
            return -1;
        }
        how.inline_data = true;
    } else {
        how.inline_data =
            inline_check_.allows(op.opcode, std::span(op.sges.data(), op.sge_count), op.length);
    }
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

error_code queue_pair_impl::refusal(work_queue queue, int err) const noexcept {
    std::optional<ibv_qp_state> state;
    if (state_may_explain(err)) {
        ibv_qp_attr attr{};
        ibv_qp_init_attr init{};
        if (ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init) == 0)
            state = attr.qp_state;
    }
    return post_refusal(err, queue, state);
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
    // ends it. So may the last one, when it needs no completion of its own.
    bool owes_signal = false; // an unsignaled send waits for a follower
    while (work_request_op* next = a.to_post.pop_front()) {
        auto& op = static_cast<qp_operation&>(*next);
        if (op.queue == work_queue::receive && !datagram_ && a.to_post.front() != nullptr &&
            a.to_post.front()->queue == work_queue::receive) {
            // Receives in a row. A receive alone takes the path below: as a list of
            // one it cost 10-20 instructions more. (A datagram receive's list starts
            // with the GRH's room: posted alone.)
            now.receive = post_receives(op, a) || now.receive;
            continue;
        }
        const bool send = unsignaled_sends_ && op.queue == work_queue::send;
        const bool followed = send && another_send(a.to_post.front());
        const bool unsignaled =
            followed || (send && op.signal_optional && machine_.may_leave_unsignaled());
        if (int rc = post(op, unsignaled); rc != 0) {
            fail_post(op, rc, a);
            continue;
        }
        if (op.queue == work_queue::send) {
            // A send left unsignaled is read for only when a signaled one follows.
            now.send = now.send || !unsignaled;
            last_send_unsignaled_ = unsignaled;
            if (unsignaled)
                machine_.posted_unsignaled(op);
            if (!unsignaled)
                owes_signal = false;
            else if (!op.signal_optional)
                owes_signal = true;
        } else {
            now.receive = true;
        }
    }
    // The send that was to follow an unsignaled one failed to post: a fence
    // takes its place, so that a completion still comes after it.
    if (owes_signal)
        post_fence();
    // In the error state the last send, unsignaled, may have succeeded: then no
    // completion ends it but a fence's flush (work_request_machine.hpp). Until
    // one is posted, every action tries again (a full queue has room after a
    // flush).
    if (last_send_unsignaled_ && machine_.in_error() && machine_.unsignaled() > 0)
        post_fence();
    store_counts(now);
    return now;
}

// Posts `first` and the receives that follow it in a.to_post (one at least) as
// one list; one the QP refuses fails alone (post_failed), and those after it,
// which ibv_post_recv did not post, are posted one by one, in order. True when
// any was posted.
bool queue_pair_impl::post_receives(qp_operation& first, wr_actions& a) noexcept {
    std::array<qp_operation*, receive_list_max> list; // as many as are set below
    list[0] = &first;
    std::size_t count = 1;
    for (const work_request_op* f = a.to_post.front();
         count < list.size() && f != nullptr && f->queue == work_queue::receive;
         f = a.to_post.front())
        list[count++] = static_cast<qp_operation*>(a.to_post.pop_front());
    const auto [posted, rc] = post_receive_list(qp_, std::span(list.data(), count));
    bool any = posted > 0;
    for (std::size_t i = posted; i < count; ++i) {
        const int result = i == posted ? rc : post(*list[i], false);
        if (result == 0)
            any = true;
        else
            fail_post(*list[i], result, a);
    }
    return any;
}

// A post the QP refused: `rc` as the verb returned it, straight after the call
// (a provider returns the error, or -1 with errno set).
void queue_pair_impl::fail_post(qp_operation& op, int rc, wr_actions& a) noexcept {
    machine_.post_failed(op, refusal(op.queue, rc > 0 ? rc : errno), a);
}

void queue_pair_impl::store_counts(posted_now& now) noexcept {
    // The sends whose completions the demultiplexer reads for: the signaled ones
    // (an unsignaled one before a signaled one ends with it). Unsignaled sends
    // that nothing signaled follows need no reading until the QP is in error or
    // closes: then their flushes come, and they count.
    const std::uint32_t posted = machine_.posted(work_queue::send);
    const bool flushing = machine_.in_error() || closed_.load(std::memory_order_relaxed);
    const std::uint32_t sends =
        flushing ? posted
                 : posted - std::min(posted, static_cast<std::uint32_t>(machine_.unsignaled()));
    const std::uint32_t receives = machine_.posted(work_queue::receive);
    // Only this lock's holder writes the counts: the previous value is its own.
    const std::uint32_t sends_before = posted_send_.load(std::memory_order_relaxed);
    if (sends != 0 && sends_before == 0)
        now.send = true; // the demultiplexer reads from now on (an error's flushes too)
    now.send_idle = sends == 0 && sends_before != 0;
    now.receive_idle = receives == 0 && posted_recv_.load(std::memory_order_relaxed) != 0;
    posted_send_.store(sends);
    posted_recv_.store(receives);
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
        return; // full: a completion makes room (and act() tries again in error)
    ibv_send_wr wr = fence_request(wr_id); // touches no memory
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp_, &wr, &bad) != 0) {
        // The QP took a work request a moment ago and refuses one now: it was
        // changed behind this object's back. The unsignaled sends then end with a
        // later completion of the queue, or at close().
        machine_.release_fence();
        return;
    }
    last_send_unsignaled_ = false;
}

void queue_pair_impl::end_unsignaled() noexcept {
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        if (!last_send_unsignaled_ || closed_.load(std::memory_order_relaxed))
            return;
        post_fence();
        now.send = !last_send_unsignaled_;
        store_counts(now);
    }
    wake(now);
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
    qp_operation* const one[] = {&op};
    start(std::span<qp_operation* const>(one));
}

void queue_pair_impl::start(std::span<qp_operation* const> ops) noexcept {
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        for (qp_operation* op : ops)
            machine_.start(*op, a); // refused once closed (release_locked)
        now = act(a);
    }
    finish(a, now);
}

bool queue_pair_impl::start_at_once(qp_operation& op) noexcept {
    wr_actions a;
    posted_now now;
    {
        std::lock_guard lock(mutex_);
        if (!machine_.posts_at_once(op.queue))
            return false;
        machine_.start(op, a);
        now = act(a);
    }
    finish(a, now);
    return true;
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
            // UD: the operation is looked up before the machine ends it (its slot
            // may then go to the next receive); RC needs no second lookup.
            auto* op =
                datagram_ ? static_cast<qp_operation*>(machine_.posted_op(wc.wr_id)) : nullptr;
            if (!machine_.completed(wc, a))
                continue;
            // UD: the sender, from the GRH, before the next receive may take its
            // slot; the length without the GRH's room.
            if (op != nullptr && op->queue == work_queue::receive && wc.status == IBV_WC_SUCCESS)
                datagram_->received(wc, op->grh_slot, op->peer, op->wc.byte_len);
        }
        now = act(a);
        detach = closed_ && !srq_close_.stopped() && machine_.outstanding() == 0;
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
        detach = closed_ && !srq_close_.stopped();
        if (detach)
            drained = std::move(draining_self_);
    }
    finish(a, now);
    if (srq_)
        srq_->failed(ec);
    if (detach)
        detach_all();
}

} // namespace rdma_asio::detail
