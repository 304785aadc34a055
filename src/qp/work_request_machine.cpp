#include "rdma_asio/detail/qp/work_request_machine.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/wc_error.hpp"

namespace rdma_asio::detail {

namespace {
// The generation takes bits 32 to 61; bit 62 marks a fence, bit 63 the owner.
constexpr std::uint32_t generation_mask = 0x3fffffffu;
} // namespace

work_request_machine::work_request_machine(std::uint32_t send_depth, std::uint32_t receive_depth,
                                           wr_owner owner)
    : owner_(owner) {
    send_.depth = send_.credits = send_depth;
    receive_.depth = receive_.credits = receive_depth;
    unsignaled_.reserve(send_depth);
}

error_code work_request_machine::error() const noexcept {
    if (reason_)
        return reason_;
    return make_error_code(wc_errc::flushed);
}

void work_request_machine::start(work_request_op& op, wr_actions& out) {
    op.cancel_requested = false;
    op.result.clear();
    op.wc = ibv_wc{};
    if (refusal_) {
        finish(op, refusal_, out);
        return;
    }
    if (op.queue == work_queue::error_watch) { // waits for the error state
        if (in_error_)
            return finish(op, error(), out);
        op.st = work_request_op::state::waiting;
        error_watch_.waiting.push_back(op);
        return;
    }
    queue_state& q = queue_of(op.queue);
    if (q.depth == 0) {
        finish(op, no_queue_error_, out);
        return;
    }
    if (in_error_) {
        finish(op, error(), out);
        return;
    }
    // FIFO: nobody overtakes an operation already waiting for room.
    if (q.credits > 0 && q.waiting.empty()) {
        post(op, out);
        return;
    }
    op.st = work_request_op::state::waiting;
    q.waiting.push_back(op);
}

bool work_request_machine::posts_at_once(work_queue q) const noexcept {
    if (refusal_ || in_error_ || q == work_queue::error_watch)
        return false;
    const queue_state& state = queue_of(q);
    return state.depth != 0 && state.credits > 0 && state.waiting.empty();
}

void work_request_machine::post(work_request_op& op, wr_actions& out) {
    queue_state& q = queue_of(op.queue);
    --q.credits;
    std::uint32_t index;
    if (!free_slots_.empty()) {
        index = free_slots_.back();
        free_slots_.pop_back();
    } else {
        index = static_cast<std::uint32_t>(slots_.size());
        slots_.push_back({});
    }
    slots_[index].op = &op;
    // The generation tells a completion of this post from one of an earlier
    // operation in the same slot that fail_all already ended.
    op.wr_id =
        (static_cast<std::uint64_t>(slots_[index].generation & generation_mask) << 32) | index;
    if (owner_ == wr_owner::shared_receive_queue)
        op.wr_id |= shared_receive_tag;
    op.st = work_request_op::state::posted;
    if (op.queue == work_queue::send)
        op.send_seq = next_send_seq_++;
    ++outstanding_;
    out.to_post.push_back(op);
}

void work_request_machine::posted_unsignaled(work_request_op& op) {
    if (unsignaled_head_ == unsignaled_.size()) {
        unsignaled_.clear(); // empty: start again at the front
        unsignaled_head_ = 0;
    } else if (unsignaled_.size() == unsignaled_.capacity()) {
        // Drop the ended ones in front: those left, and this one, each hold a
        // credit, so they fit in the room reserved for the send depth.
        unsignaled_.erase(unsignaled_.begin(),
                          unsignaled_.begin() + static_cast<std::ptrdiff_t>(unsignaled_head_));
        unsignaled_head_ = 0;
    }
    unsignaled_.push_back(&op); // within the reserved room: one per credit at most
}

std::uint64_t work_request_machine::reserve_fence() noexcept {
    // Also in the error state, and once new operations are refused (a borrowed QP
    // closed, which stays): the fence is flushed then, and its completion is the
    // only one that can end an unsignaled send that succeeded before.
    if (send_.credits == 0)
        return 0;
    --send_.credits;
    ++outstanding_;
    ++fences_;
    return fence_tag | next_send_seq_++;
}

void work_request_machine::release_fence() noexcept {
    if (fences_ == 0)
        return;
    --fences_;
    --outstanding_;
    ++send_.credits;
}

void work_request_machine::end_unsignaled_before(std::uint64_t seq, wr_actions& out) {
    while (unsignaled_head_ < unsignaled_.size() &&
           unsignaled_[unsignaled_head_]->send_seq <= seq) {
        work_request_op& op = *unsignaled_[unsignaled_head_++];
        if (op.send_seq == seq)
            continue; // the completion's own: it ends by it
        // Succeeded: a failure would have made a completion of its own, earlier.
        release_slot(op);
        op.wc = ibv_wc{};
        op.wc.wr_id = op.wr_id;
        op.wc.status = IBV_WC_SUCCESS;
        // One cancelled meanwhile (terminal) ran before the QP's error: it keeps
        // its success, as any posted operation that completed first does.
        finish(op, error_code{}, out);
    }
}

void work_request_machine::release_slot(work_request_op& op) noexcept {
    auto index = static_cast<std::uint32_t>(op.wr_id & 0xffffffffu);
    slots_[index].op = nullptr;
    ++slots_[index].generation;
    free_slots_.push_back(index);
    --outstanding_;
    ++queue_of(op.queue).credits;
}

void work_request_machine::finish(work_request_op& op, error_code ec, wr_actions& out) {
    op.st = work_request_op::state::done;
    op.result = ec;
    out.to_complete.push_back(op);
}

void work_request_machine::admit_waiting(work_queue which, wr_actions& out) {
    queue_state& q = queue_of(which);
    while (!in_error_ && q.credits > 0 && !q.waiting.empty())
        post(*q.waiting.pop_front(), out);
}

void work_request_machine::post_failed(work_request_op& op, error_code ec, wr_actions& out) {
    if (op.st != work_request_op::state::posted)
        return;
    release_slot(op);
    finish(op, ec, out);
    admit_waiting(op.queue, out);
}

work_request_op* work_request_machine::posted_op(std::uint64_t wr_id) const noexcept {
    auto index = static_cast<std::uint32_t>(wr_id & 0xffffffffu);
    auto generation = static_cast<std::uint32_t>(wr_id >> 32) & generation_mask;
    if ((wr_id & fence_tag) != 0 ||
        is_shared_receive(wr_id) != (owner_ == wr_owner::shared_receive_queue) ||
        index >= slots_.size() || (slots_[index].generation & generation_mask) != generation)
        return nullptr;
    return slots_[index].op;
}

bool work_request_machine::completed(const ibv_wc& wc, wr_actions& out) {
    if ((wc.wr_id & fence_tag) != 0 && !is_shared_receive(wc.wr_id) && fences_ > 0) {
        // A fence: it ends the unsignaled sends before it, and gives its room back.
        --fences_;
        --outstanding_;
        ++send_.credits;
        end_unsignaled_before(wc.wr_id & ~fence_tag, out);
        if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR && !in_error_)
            enter_error(out); // the device moved the QP to the error state with it
        admit_waiting(work_queue::send, out);
        return true;
    }
    work_request_op* found = posted_op(wc.wr_id);
    if (found == nullptr) {
        ++ignored_;
        return false;
    }
    work_request_op& op = *found;
    if (op.queue == work_queue::send && unsignaled() > 0)
        end_unsignaled_before(op.send_seq, out);
    release_slot(op);
    op.wc = wc;
    error_code ec;
    if (wc.status == IBV_WC_WR_FLUSH_ERR)
        ec = op.cancel_requested ? error_code(asio::error::operation_aborted) : error();
    else
        ec = wc_error(wc.status);
    finish(op, ec, out);
    if (wc.status != IBV_WC_SUCCESS && !in_error_ && owner_ == wr_owner::queue_pair) {
        // The device moved the QP to the error state with this completion.
        enter_error(out);
    }
    admit_waiting(op.queue, out);
    return true;
}

bool work_request_machine::cancel_waiting(work_request_op& op, wr_actions& out) {
    if (op.st != work_request_op::state::waiting)
        return false;
    queue_of(op.queue).waiting.erase(op); // it waits in its queue's list
    finish(op, asio::error::operation_aborted, out);
    return true;
}

void work_request_machine::cancel(work_request_op& op, wr_actions& out) {
    if (cancel_waiting(op, out) || op.st != work_request_op::state::posted ||
        owner_ == wr_owner::shared_receive_queue)
        return;
    op.cancel_requested = true;
    if (!in_error_) {
        enter_error(out);
        out.move_qp_to_error = true;
    }
}

void work_request_machine::cancel_all(wr_actions& out) {
    bool any_posted = false;
    // A shared receive queue's posted receives cannot be flushed: they stay.
    if (owner_ == wr_owner::queue_pair) {
        for (slot& s : slots_) {
            if (s.op != nullptr) {
                s.op->cancel_requested = true;
                any_posted = true;
            }
        }
    }
    for (queue_state* q : {&send_, &receive_, &error_watch_}) {
        while (work_request_op* op = q->waiting.pop_front())
            finish(*op, asio::error::operation_aborted, out);
    }
    if (any_posted && !in_error_) {
        enter_error(out);
        out.move_qp_to_error = true;
    }
}

void work_request_machine::shared_receive_completed(const ibv_wc& wc, wr_actions& out) {
    if (wc.status != IBV_WC_SUCCESS && !in_error_)
        enter_error(out);
}

void work_request_machine::set_error(error_code reason, wr_actions& out) {
    if (!reason_)
        reason_ = reason;
    if (!in_error_) {
        enter_error(out);
        out.move_qp_to_error = true;
    }
}

void work_request_machine::fail_all(error_code reason, wr_actions& out) {
    if (!reason_)
        reason_ = reason;
    if (!in_error_)
        enter_error(out);
    for (slot& s : slots_) {
        if (s.op == nullptr)
            continue;
        work_request_op& op = *s.op;
        release_slot(op);
        finish(op, reason, out);
    }
    unsignaled_.clear();
    unsignaled_head_ = 0;
    // The fences' room: their completions, should they still arrive, are ignored.
    outstanding_ -= fences_;
    send_.credits += fences_;
    fences_ = 0;
}

void work_request_machine::enter_error(wr_actions& out) {
    in_error_ = true;
    end_waiting(send_, out);
    end_waiting(receive_, out);
    end_waiting(error_watch_, out);
}

void work_request_machine::end_waiting(queue_state& q, wr_actions& out) {
    while (work_request_op* op = q.waiting.pop_front())
        finish(*op, error(), out);
}

} // namespace rdma_asio::detail
