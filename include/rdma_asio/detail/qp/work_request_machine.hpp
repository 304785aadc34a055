// The bookkeeping of work requests on one queue pair, with no I/O: which
// operation may be posted now and which must wait for room in its queue, the
// wr_id that names each posted one, which operation a work completion belongs to,
// and how each one ends when the queue pair fails, is cancelled or goes away.
// It calls no verb: the queue pair object asks it what to do (wr_actions), posts
// and completes accordingly, and feeds the outcomes back.
//
// Why the rules are what they are:
// - ibv_post_send(3)/ibv_post_recv(3) fail (ENOMEM) when a queue is full, and a
//   send queue entry is free again only once its completion has been polled:
//   one credit per entry, returned by its completion (or, for an unsignaled
//   one, by the next completion of its queue: below); operations beyond the
//   depth wait in FIFO order, so they are posted (and, on an RC QP, complete) in
//   the order they were started.
// - A posted work request cannot be withdrawn, and the device may touch its buffer
//   until its completion (a flush included) is polled. So a posted operation ends
//   only by its completion, or when the device is gone (fail_all), never earlier.
// - On an RC QP every error completion moves the QP to the error state, and the
//   device then flushes every other posted work request (IBV_WC_WR_FLUSH_ERR).
//   Operations still waiting for room need not be posted to learn that: they end
//   at once, as do operations started later.
// - A shared receive queue (ibv_create_srq(3)) has no error state: a receive it
//   gave to a queue pair that failed completes with an error (a flush), and the
//   others stay posted for the queue's other queue pairs. Nor can it be moved to
//   an error state to flush a posted receive, so a posted one cannot be cancelled.
//   Its completions arrive in the CQs of its queue pairs, among theirs: its wr_ids
//   carry a tag bit of their own, so that neither takes the other's.
// - Unsignaled sends (ibv_post_send(3) without IBV_SEND_SIGNALED, on a QP made
//   with sq_sig_all 0) save the device a completion and the poller a read. A
//   send queue completes in the order posted, and a work request that fails, or
//   is flushed, always makes a completion, signaled or not. So when a completion
//   of the send queue arrives (whatever its status), every unsignaled request
//   posted before it that has had no completion of its own has succeeded; it
//   ends then, and its room returns. The caller posts a send unsignaled only
//   when another send follows it in the same batch (so the last of every batch
//   is signaled), and when a post fails after an unsignaled one, it posts a
//   fence: a signaled request of its own (a zero-length RDMA write on RC), with
//   room the machine reserves for it, whose completion ends what came before.
// - A send whose owner needs no completion of it (signal_optional: its bytes
//   were copied at the post, inline, or its memory is not reused before the
//   peer has answered it) may also go unsignaled as the last of its batch: it
//   then ends with a later send's completion, or with a fence its owner asks
//   for. So that a completion still comes often enough to give the room back,
//   at most a quarter of the send queue's depth (less one) is unsignaled at a
//   time; the next such send is signaled.
// - The error state flushes only the requests the device has not completed: an
//   unsignaled send that succeeded before has no completion of its own then, and
//   when it was the last send posted, none after it would ever end it. So a
//   queue pair in the error state whose last send went unsignaled posts a fence
//   (as soon as it has room): posting to a QP in the error state is allowed, the
//   request is flushed (the kernel's ib_drain_sq waits on such a marker), and
//   the flush, after those of the requests before it, ends the ones that had
//   succeeded.
// - A queue pair leaves service when it enters the error state, whatever the
//   reason (a disconnect, the device's error event, a failed work request, its
//   removal, its close). An operation that waits for that (Asio's
//   socket.async_wait(wait_error)) has no work request: it waits in a list of
//   its own, never posted, never holding room, and ends as the operations
//   waiting for room end when the QP enters the error state, or at once when it
//   is in it already.
#pragma once

#include <infiniband/verbs.h>

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/intrusive_list.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace rdma_asio::detail {

/// The queue an operation uses: the QP's send or receive queue, or none
/// (error_watch: an operation that waits for the QP to enter the error state).
enum class work_queue : std::uint8_t { send, receive, error_watch };

/// Whose work requests a machine keeps, which decides what an error completion
/// and a cancellation can do (see the top of this file) and tags the wr_ids.
enum class wr_owner : std::uint8_t {
    queue_pair,           ///< an RC queue pair's send and receive queues
    shared_receive_queue, ///< the receive queue of an SRQ (send depth 0)
};

/// One operation as the machine sees it; the queue pair's operation type derives
/// from it and carries the work request and the handler.
struct work_request_op {
    enum class state : std::uint8_t {
        idle,    ///< not started
        waiting, ///< waiting for room in its queue
        posted,  ///< has a wr_id; ends by its completion (or fail_all)
        done,    ///< ended: result (and wc, when a completion ended it) are final
    };

    explicit work_request_op(work_queue q) noexcept : queue(q) {}

    work_queue queue;
    state st = state::idle;
    /// Terminal cancellation asked for while posted: its flush completion ends it
    /// with operation_aborted.
    bool cancel_requested = false;
    /// Send queue: its place in the order of posting, for unsignaled sends.
    std::uint64_t send_seq = 0;
    std::uint64_t wr_id = 0;
    error_code result;
    /// The work completion that ended it (status IBV_WC_SUCCESS on success);
    /// zeroed when it ended without one.
    ibv_wc wc{};
    // Links of the one list it is in (waiting, to post, to complete), if any.
    work_request_op* prev = nullptr;
    work_request_op* next = nullptr;
};

/// Operations in order (FIFO), linked through their own links.
using op_list = intrusive_list<work_request_op, &work_request_op::prev, &work_request_op::next>;

/// What the caller does after a step, in this order: move the QP to the error
/// state (ibv_modify_qp to IBV_QPS_ERR) when asked, post `to_post` in order
/// (each with its wr_id; signaled unless the caller
/// posts it unsignaled, see the top of this file), then complete `to_complete` in order, each
/// with its result.
struct wr_actions {
    op_list to_post;
    op_list to_complete;
    bool move_qp_to_error = false;
};

class work_request_machine {
public:
    /// A QP whose send and receive queues hold `send_depth` and `receive_depth`
    /// work requests (its ibv_qp_cap). A depth of 0 (a QP on an SRQ has no
    /// receive queue of its own) refuses that queue's operations.
    work_request_machine(std::uint32_t send_depth, std::uint32_t receive_depth,
                         wr_owner owner = wr_owner::queue_pair);

    /// The bit that marks the wr_ids of a shared receive queue's machine.
    static constexpr std::uint64_t shared_receive_tag = std::uint64_t{1} << 63;
    /// Whether `wr_id` was made by a shared receive queue's machine.
    static constexpr bool is_shared_receive(std::uint64_t wr_id) noexcept {
        return (wr_id & shared_receive_tag) != 0;
    }
    /// The bit that marks a fence's wr_id (its send_seq in the bits below).
    static constexpr std::uint64_t fence_tag = std::uint64_t{1} << 62;

    /// The caller posted `op` (a send-queue operation from to_post) unsignaled,
    /// successfully: it ends when a later completion of the send queue arrives.
    void posted_unsignaled(work_request_op& op);
    /// Room for a fence in the send queue, taken now, or nothing (0) when the
    /// queue is full: the wr_id to post it with. Its completion, given to
    /// completed(), ends the unsignaled sends posted before it; in the error
    /// state, its flush does. (The caller posts none to a QP it destroyed.)
    std::uint64_t reserve_fence() noexcept;
    /// The fence reserve_fence() made room for could not be posted: its room
    /// goes back.
    void release_fence() noexcept;
    /// Unsignaled sends posted and not ended yet.
    std::size_t unsignaled() const noexcept { return unsignaled_.size() - unsignaled_head_; }
    /// Whether a send that needs no completion of its own may go unsignaled
    /// now, as the last of its batch (see the top of this file): fewer than a
    /// quarter of the send queue's depth, less one, are unsignaled already.
    bool may_leave_unsignaled() const noexcept {
        return unsignaled() + 1 < std::max<std::uint32_t>(send_.depth / 4, 1);
    }

    /// What an operation on a queue of depth 0 ends with: operation_not_supported
    /// unless set (a QP on a shared receive queue says so).
    void set_no_queue_error(error_code ec) noexcept { no_queue_error_ = ec; }
    /// Starts `op`: posts it when its queue has room and nothing waits before it,
    /// else queues it; ends it at once (set_no_queue_error's error for a queue of
    /// depth 0; the QP's error once it is in the error state).
    void start(work_request_op& op, wr_actions& out);
    /// Whether start() of an operation on `q` would post it now (room in the
    /// queue, none waiting, no refusal, no error), rather than queue it or end it.
    bool posts_at_once(work_queue q) const noexcept;
    /// From now on every operation started ends at once with `ec`, before any
    /// other rule (the queue pair or shared receive queue was closed:
    /// bad_descriptor). Operations already started are not touched.
    void refuse_new(error_code ec) noexcept { refusal_ = ec; }
    /// The caller could not post `op` (ibv_post_send/ibv_post_recv failed with
    /// `ec`): it ends with `ec` and its room goes to the next one waiting.
    void post_failed(work_request_op& op, error_code ec, wr_actions& out);
    /// A work completion of this QP. False when its wr_id names no posted
    /// operation (one that fail_all already ended, or a work request the machine
    /// did not post): the completion is then ignored. An error completion of a
    /// shared receive queue's receive ends that receive only. A completion of the
    /// send queue (a fence's too) first ends, successfully, the unsignaled sends
    /// posted before it.
    bool completed(const ibv_wc& wc, wr_actions& out);
    /// A completion of a shared receive queue's receive that this queue pair took:
    /// the SRQ ends the receive itself; here only its status counts. A failed one
    /// (any status but success: a receive shorter than the message, a protection
    /// error, a flush) means the device has moved this QP to the error state
    /// (ibv_poll_cq(3)), so it enters it as after a failed work request of its
    /// own: waiting operations and error watches end, posted ones by their
    /// flushes.
    void shared_receive_completed(const ibv_wc& wc, wr_actions& out);
    /// The posted operation `wr_id` names, or null (see completed()): to read
    /// what a completion left in its memory before completed() ends it.
    work_request_op* posted_op(std::uint64_t wr_id) const noexcept;

    /// Partial or total cancellation: ends `op` with operation_aborted if it is
    /// still waiting for room (it was never posted); otherwise does nothing.
    /// True when it ended it.
    bool cancel_waiting(work_request_op& op, wr_actions& out);
    /// Terminal cancellation: as cancel_waiting for a waiting operation; a posted
    /// one is ended by its flush completion with operation_aborted (or by its
    /// success, if it completed first), after the QP is moved to the error state.
    /// Every other operation of the QP then ends as after any QP error. A shared
    /// receive queue's posted receive is left alone (nothing can flush it).
    void cancel(work_request_op& op, wr_actions& out);
    /// Terminal cancellation of every operation (the queue pair's cancel()); of a
    /// shared receive queue's, only those waiting for room.
    void cancel_all(wr_actions& out);

    /// The QP is known to be in (or is being moved to) the error state for
    /// `reason` (a QP_FATAL event, a disconnect, ...): waiting operations and
    /// later ones end at once with `reason`; posted ones end with `reason` when
    /// their flush completion arrives. The first reason given is kept.
    void set_error(error_code reason, wr_actions& out);
    /// Every operation ends now with `reason`, posted ones included (waiting ones
    /// first, in order, then posted ones in no particular order), and their
    /// completions, should any still arrive, are ignored. Only for when the device
    /// can no longer touch the buffers: the device is gone, or the QP is destroyed.
    /// Later operations end at once with the QP's error (`reason` unless an
    /// earlier one was given).
    void fail_all(error_code reason, wr_actions& out);

    bool in_error() const noexcept { return in_error_; }
    /// What operations end with now that the QP is in error: the reason given to
    /// set_error or fail_all, else wc_errc::flushed.
    error_code error() const noexcept;
    /// Posted operations whose completion has not arrived.
    std::size_t outstanding() const noexcept { return outstanding_; }
    /// Posted operations of one queue whose completion has not arrived.
    std::uint32_t posted(work_queue q) const noexcept {
        return queue_of(q).depth - queue_of(q).credits;
    }
    std::size_t waiting(work_queue q) const noexcept { return queue_of(q).waiting.size(); }
    /// Room left in a queue.
    std::uint32_t credits(work_queue q) const noexcept { return queue_of(q).credits; }
    /// Completions ignored by completed() (unknown or stale wr_id).
    std::uint64_t ignored_completions() const noexcept { return ignored_; }

private:
    struct queue_state {
        std::uint32_t depth = 0;
        std::uint32_t credits = 0;
        op_list waiting;
    };
    struct slot {
        work_request_op* op = nullptr;
        std::uint32_t generation = 0;
    };

    error_code no_queue_error_ = asio::error::operation_not_supported;
    queue_state& queue_of(work_queue q) noexcept {
        return const_cast<queue_state&>(std::as_const(*this).queue_of(q));
    }
    const queue_state& queue_of(work_queue q) const noexcept {
        switch (q) {
        case work_queue::send:
            return send_;
        case work_queue::receive:
            return receive_;
        case work_queue::error_watch:
            break;
        }
        return error_watch_;
    }
    void post(work_request_op& op, wr_actions& out);
    void finish(work_request_op& op, error_code ec, wr_actions& out);
    void release_slot(work_request_op& op) noexcept;
    /// Gives the room of a finished posted operation to the next one waiting.
    void admit_waiting(work_queue q, wr_actions& out);
    /// Enters the error state: ends every waiting operation with error().
    void enter_error(wr_actions& out);
    void end_waiting(queue_state& q, wr_actions& out);
    /// Ends the unsignaled sends posted before `seq` (and drops `seq` itself
    /// from them, when it is one).
    void end_unsignaled_before(std::uint64_t seq, wr_actions& out);

    queue_state send_;
    queue_state receive_;
    queue_state error_watch_; // depth 0: its operations wait, never post
    std::vector<slot> slots_;
    std::vector<std::uint32_t> free_slots_;
    std::uint64_t next_send_seq_ = 1;
    // Unsignaled sends in the order posted, from unsignaled_head_; room for the
    // send depth is reserved, so recording one never allocates.
    std::vector<work_request_op*> unsignaled_;
    std::size_t unsignaled_head_ = 0;
    std::uint32_t fences_ = 0; // posted fences whose completion has not arrived
    wr_owner owner_;
    std::size_t outstanding_ = 0;
    bool in_error_ = false;
    error_code reason_;
    error_code refusal_;
    std::uint64_t ignored_ = 0;
};

} // namespace rdma_asio::detail
