// The state of an open queue_pair as its I/O object and its operations share it
// (non-template): the ibv_qp, the bookkeeping of its work requests
// (work_request_machine), and the demultiplexers of its CQs. Its definitions are
// one file per job: starting, posting and completing operations
// (src/qp/queue_pair_impl.cpp), the object's lifetime (queue_pair_lifetime.cpp),
// the disconnect and the device's error events (queue_pair_events.cpp), and what a
// UD QP adds (queue_pair_datagram.cpp). The decisions it takes without I/O are
// classes of their own, each unit-tested: work_request_machine (the queues' room,
// order and signaling), work_request_encoder (the verbs' requests),
// inline_send_check (which sends may skip the device's lkey check),
// qp_error_event (what a device's event means for the operations) and
// srq_close_handoff (where async_close of a QP on an SRQ is). The watch of the
// device's error events is qp_error_watch; a UD QP's address handles are
// datagram_support.
//
// Its operations are held here (by the machine) from their start until they end,
// not by Asio: so it takes part in its execution context's shutdown
// (shutdown_registry), where it stops the QP and destroys every operation with its
// handler, not invoked, as Asio does with the operations it holds itself.
#pragma once

#include "rdma_asio/async_event_stream_ref.hpp"
#include "rdma_asio/datagram_endpoint.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/atomic_mutex.hpp"
#include "rdma_asio/detail/core/operation.hpp"
#include "rdma_asio/detail/core/shutdown_registry.hpp"
#include "rdma_asio/detail/qp/cq_demux.hpp"
#include "rdma_asio/detail/qp/inline_send_check.hpp"
#include "rdma_asio/detail/qp/qp_error_watch.hpp"
#include "rdma_asio/detail/qp/qp_operation.hpp"
#include "rdma_asio/detail/qp/srq_close_handoff.hpp"
#include "rdma_asio/detail/qp/work_request_machine.hpp"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <system_error>
#include <vector>

namespace rdma_asio::detail {

class completion_queue_impl;
class datagram_support;
class shared_receive_queue_impl;

/// Who destroys a queue pair's ibv_qp when it closes.
enum class qp_owner : std::uint8_t {
    borrowed, ///< nobody: close() moves it to the error state
    verbs,    ///< close() destroys it with ibv_destroy_qp
    rdma_cm,  ///< close() destroys it with rdma_destroy_qp on its id
};

// final: destroyed as itself (shared_ptr), never through its interfaces.
class queue_pair_impl final : public std::enable_shared_from_this<queue_pair_impl>,
                              public cq_consumer,
                              public shutdown_participant {
public:
    using native_handle_type = ibv_qp*;
    static constexpr native_handle_type no_handle = nullptr;

    /// Serves `qp`, a QP of transport `type` (invalid_argument for another), whose
    /// send and receive completions go to `send_cq` and
    /// `recv_cq` (both of rdma_asio, claimed here for queue pairs); `owner` says
    /// how close() lets go of it (`cm_id`: the rdma_cm id whose QP it is, for
    /// qp_owner::rdma_cm and for disconnected()); `pd` (may be empty) is the
    /// protection domain it was made in, kept allocated until the QP is destroyed.
    /// `srq`: the shared receive queue the QP was made on (its receives complete
    /// through this object), or null. Takes part in the shutdown of `context` (the
    /// I/O object's). Null with `ec` set on failure (errc::completion_queue_in_use,
    /// the errno of ibv_query_qp; invalid_argument for an `srq` that is not the
    /// QP's; bad_descriptor for a closed one).
    static std::shared_ptr<queue_pair_impl>
    open(asio::execution_context& context, ibv_qp* qp, ibv_qp_type type, qp_owner owner,
         rdma_cm_id* cm_id, std::shared_ptr<ibv_pd> pd,
         const std::shared_ptr<completion_queue_impl>& send_cq,
         const std::shared_ptr<completion_queue_impl>& recv_cq, error_code& ec,
         const std::shared_ptr<shared_receive_queue_impl>& srq = nullptr);

    queue_pair_impl(ibv_qp* qp, qp_owner owner, rdma_cm_id* cm_id, std::shared_ptr<ibv_pd> pd,
                    std::uint32_t send_depth, std::uint32_t recv_depth,
                    std::uint32_t max_inline = 0);
    queue_pair_impl(const queue_pair_impl&) = delete;
    queue_pair_impl& operator=(const queue_pair_impl&) = delete;
    ~queue_pair_impl();

    ibv_qp* native_handle() const noexcept { return qp_; }

    /// Makes a UD QP's work requests what UD needs (datagram_support): right
    /// after open(), before any operation. `port` and `gid_index` are those its
    /// address handles use. On failure `ec` is set and nothing changed.
    void enable_datagrams(std::uint8_t port, std::uint8_t gid_index, error_code& ec);
    /// A UD QP's own address (enable_datagrams); empty otherwise.
    datagram_endpoint local_endpoint() const noexcept;
    /// ibv_attach_mcast or ibv_detach_mcast of `group` (a UD QP): an errno,
    /// bad_descriptor once closed.
    error_code multicast(const datagram_endpoint& group, bool attach) noexcept;
    /// Whether a send to `to` may be posted now: true unless this is a UD QP
    /// whose address handle for `to` has not been made yet.
    bool has_address_handle(const datagram_endpoint& to) const noexcept;
    /// Whether the address handle for `to` has been made (sends that waited for
    /// it may not have started yet). For tests of the close's race with it.
    bool address_handle_made(const datagram_endpoint& to) const noexcept;
    /// For a send to `to` that may not be posted yet (has_address_handle): has
    /// the handle made on a blocking-call thread of `ex` (ibv_create_ah may block
    /// for a second) unless a send before it already did, and calls `then` once,
    /// from that thread, with the outcome (the errno of ibv_create_ah, no_memory),
    /// after the sends to `to` that waited before it; or from close() or cancel()
    /// with operation_aborted. Dropped uncalled at shutdown. False, and `then`
    /// dropped, when the send may go now after all (the handle was made
    /// meanwhile, or the QP was closed, which refuses it).
    bool wait_for_address_handle(const datagram_endpoint& to, const asio::any_io_executor& ex,
                                 std::function<void(error_code)> then);
    /// A send that waited (wait_for_address_handle returned true) has started
    /// or ended: later sends to `to` need not wait behind it any more.
    void address_wait_done(const datagram_endpoint& to) noexcept;

    /// Starts `op`; it ends (complete()) once, later, never inside this call.
    void start(qp_operation& op) noexcept;
    /// Starts each of `ops`, in order, as start() does, under one lock and with
    /// one wake-up of the demultiplexer (a stream's receives posted again).
    void start(std::span<qp_operation* const> ops) noexcept;
    /// Starts `op` only if it is posted in this call (ibv_post_send, or its
    /// refusal, has happened when this returns: the memory of a copy_at_post
    /// request is no longer needed); false, `op` untouched, when it would wait
    /// for room or end at once (closed, in error).
    bool start_at_once(qp_operation& op) noexcept;
    /// When the last send posted went unsignaled (signal_optional) and nothing
    /// signaled followed it, posts a fence, so that the unsignaled sends end
    /// with its completion (a stream that closes waits for its writes).
    void end_unsignaled() noexcept;
    /// Per-operation cancellation of `op` (a no-op once it has ended): one waiting
    /// for room ends now; a posted one only on terminal cancellation, by moving
    /// the QP to the error state and ending with its flush.
    void cancel_operation(qp_operation& op, asio::cancellation_type type) noexcept;
    /// Terminal cancellation of every operation.
    void cancel() noexcept;
    /// The first half of async_close, for a QP this object destroys on a shared
    /// receive queue: new operations are refused (bad_descriptor), waiting ones
    /// end with operation_aborted, and the QP is moved to the error state (its
    /// posted operations end by their flush completions) but not destroyed, so
    /// that the device may report IBV_EVENT_QP_LAST_WQE_REACHED and the receives
    /// the QP took from the SRQ still end by their completions; close() then
    /// destroys it. True then; for any other QP, close() and false.
    bool stop() noexcept;
    /// Whether the QP has been let go of (new operations are refused): after
    /// stop() or close(). From any thread; an object that still holds this state
    /// (its async_close is in progress, or has ended) reports itself not open
    /// then (io_object::is_open).
    bool released() const noexcept { return closed_.load(std::memory_order_acquire); }
    /// After stop() and the device's IBV_EVENT_QP_LAST_WQE_REACHED: completes
    /// `waiter` (posted) once the completions now in the receive CQ have been
    /// read and handed on, so that close() then loses none (a provider may drop
    /// a destroyed QP's completions from its CQ: mlx5's ibv_destroy_qp does).
    /// At once when there is nothing to read. Destroyed, not completed, at
    /// shutdown.
    void drain(operation& waiter) noexcept;
    /// async_close's wait for IBV_EVENT_QP_LAST_WQE_REACHED runs on `events`,
    /// keyed by this object. A close() before the event destroys the QP another
    /// way (its connection's close does, through the id), and the kernel drops
    /// the event with the QP: so close() then ends that wait (operation_aborted).
    /// Called once the wait is started; false when close() came first, and the
    /// caller ends the wait itself.
    bool end_last_wqe_wait_on_close(std::weak_ptr<async_event_stream_impl> events) noexcept;
    /// Ends every operation: an owned QP is destroyed and its operations end at
    /// once with operation_aborted; a borrowed one is moved to the error state
    /// and its posted operations end with their flush completions. After stop(),
    /// destroys the QP.
    void close() noexcept;
    /// The execution context shuts down: the QP is destroyed (owned) or moved to
    /// the error state (borrowed), as by close(), and every operation, posted ones
    /// too, is destroyed with its handler, not invoked; completions that still
    /// arrive are ignored.
    void shutdown() noexcept override;

    // cq_consumer: from the demultiplexers of its CQs.
    void completed(std::span<const ibv_wc> wcs, op_list& ended) noexcept override;
    void failed(error_code ec) noexcept override;
    bool outstanding_on(const cq_demux* demux) const noexcept override;
    void drained() noexcept override;
    /// The peer disconnected (RDMA_CM_EVENT_DISCONNECTED), or this side is
    /// disconnecting: rdma_disconnect (which moves the QP to the error state) when
    /// `call_rdma_disconnect`, and every operation ends with errc::disconnected,
    /// posted ones with their flush completions. Nothing once closed.
    void disconnected(bool call_rdma_disconnect) noexcept;
    /// From then on, the error events `events` reads for this QP or its CQs
    /// reach error_event() on `ex`. bad_descriptor once closed.
    void watch_errors(const async_event_stream_ref& events, const asio::any_io_executor& ex,
                      error_code& ec);
    /// A device's error event for this QP or one of its CQs (others are
    /// ignored): a QP's (qp_fatal, qp_req_err, qp_access_err) ends waiting and
    /// later operations at once and posted ones with their flush completions, all
    /// with its errc; a CQ's overrun (cq_err), which loses completions, moves the
    /// QP to the error state and ends every operation now with
    /// errc::completion_queue_overrun.
    void error_event(event_type type) noexcept;

    /// For tests and counters: the bookkeeping, read under the lock.
    std::size_t waiting(work_queue q) const;
    std::uint32_t posted(work_queue q) const;

private:
    void attach(std::shared_ptr<cq_demux> send, std::shared_ptr<cq_demux> recv, error_code& ec);
    /// After the QP was destroyed, outside the lock: its SRQ takes the
    /// completions of its receives still in the CQ, and may go now.
    void leave_srq() noexcept;
    /// Carries out `a`'s verbs under the lock (move to error, post), feeding post
    /// failures back; leaves the operations to complete in a.to_complete.
    struct posted_now {
        bool send = false;         ///< a send-queue work request was posted
        bool receive = false;      ///< a receive was posted
        bool send_idle = false;    ///< the last outstanding send-queue request ended
        bool receive_idle = false; ///< the last outstanding receive ended
    };
    posted_now act(wr_actions& a) noexcept;
    /// After the lock is released: wakes the demultiplexers of the queues posted
    /// to, then completes the ended operations (posted), then settles the
    /// demultiplexers of the queues that became idle.
    void finish(wr_actions& a, posted_now posted) noexcept;
    void wake(posted_now now) noexcept;
    void settle(posted_now now) noexcept;
    int post(qp_operation& op, bool unsignaled) noexcept;
    /// Posts `first` and the receives after it in a.to_post as one list (true when
    /// any was posted); one refused fails alone.
    bool post_receives(qp_operation& first, wr_actions& a) noexcept;
    /// Ends `op`, which the QP refused: `rc` as the verb returned it.
    void fail_post(qp_operation& op, int rc, wr_actions& a) noexcept;
    /// What a post refused with `err` completes with (post_refusal.hpp).
    error_code refusal(work_queue queue, int err) const noexcept;
    /// Whether `op` or one after it in its list is a send-queue operation.
    static bool another_send(const work_request_op* op) noexcept;
    /// Posts a fence (work_request_machine) after an unsignaled send whose
    /// follower could not be posted.
    void post_fence() noexcept;
    /// Under the lock: the counts the demultiplexers read, stored after posts;
    /// which queues became idle.
    void store_counts(posted_now& now) noexcept;
    /// Under the lock: closed_ set, new operations refused, the error watches
    /// moved to `watches` (ended after the lock).
    void refuse_new_locked(std::vector<event_subscription>& watches) noexcept;
    /// Under the lock, once: refuse_new_locked(), and the QP destroyed when this
    /// object owns it.
    /// True when it was destroyed: the device touches no buffer of it any more.
    bool release_locked(std::vector<event_subscription>& watches) noexcept;
    /// Stops the demultiplexers' routing to this QP.
    void detach_all() noexcept;
    /// On a blocking-call thread: makes `to`'s address handle, keeps it, and
    /// calls the sends waiting for it.
    void make_address_handle(const datagram_endpoint& to) noexcept;
    /// Ends every send waiting for an address handle with operation_aborted.
    void end_address_waits() noexcept;

    mutable atomic_mutex mutex_;
    ibv_qp* qp_;
    std::uint32_t qp_num_; // still known after an owned QP is destroyed
    // Whether a send or write goes inline (used under mutex_).
    inline_send_check inline_check_;
    qp_owner owner_;
    rdma_cm_id* cm_id_;
    // The protection domain the QP was made in (empty when not known): released
    // once the QP is destroyed, so that ibv_dealloc_pd never finds it in use.
    std::shared_ptr<ibv_pd> pd_;
    // Written under mutex_; atomic so that released() may read it without.
    std::atomic<bool> closed_{false};
    // Between stop() and close() (async_close of a QP on an SRQ).
    srq_close_handoff srq_close_;
    work_request_machine machine_;
    // RC: a send followed by another in one batch is posted unsignaled (a UD QP
    // has no zero-length RDMA write to fence with).
    bool unsignaled_sends_;
    // The last send posted went unsignaled with no signaled one after it yet
    // (under mutex_): end_unsignaled() has something to do.
    bool last_send_unsignaled_ = false;
    std::shared_ptr<cq_demux> send_demux_;
    std::shared_ptr<cq_demux> recv_demux_;
    // UD only: address handles and the GRH's room (written once, before any
    // operation; used under mutex_).
    std::unique_ptr<datagram_support> datagram_;
    // The shared receive queue the QP is on (or null): its receives' completions
    // come here, with this QP's number, and are handed to it.
    std::shared_ptr<shared_receive_queue_impl> srq_;
    std::atomic<std::uint32_t> posted_send_{0};
    std::atomic<std::uint32_t> posted_recv_{0};
    qp_error_watch error_watch_; // watch_errors()
    // Set by close() while work requests are still posted: nobody else holds this
    // object then, and their completions (flushes) must still end their
    // operations. Taken (under mutex_) by whoever ends the last of them; its caller
    // holds this object too, so the object outlives that call.
    std::shared_ptr<queue_pair_impl> draining_self_;
};

} // namespace rdma_asio::detail
