// The state of an open shared_receive_queue as its I/O object, its operations
// and its queue pairs share it (non-template, see
// src/qp/shared_receive_queue_impl.cpp).
//
// Why it is shaped this way:
// - Its receives complete in the receive CQs of its queue pairs, among their own
//   completions, each naming the queue pair that took it (ibv_wc::qp_num). The
//   CQs' demultiplexers route by QP number, so each queue pair on the SRQ hands
//   the completions whose wr_id carries the SRQ's tag (work_request_machine) to
//   the SRQ. Ownership runs one way: a queue pair holds its SRQ; the SRQ knows
//   only the demultiplexers to wake when it posts (by weak reference).
// - A receive is posted once, to the SRQ; any of its queue pairs may take it. So
//   the demultiplexer of every such queue pair polls while the SRQ has one posted.
// - ibv_destroy_srq(3) refuses (EBUSY) while a QP is still on it: close() stops
//   new operations at once, and the SRQ is destroyed, and its posted receives end
//   with operation_aborted, when the last of its queue pairs has been destroyed.
// - An SRQ has no error state that could flush a posted receive: a posted
//   receive ends by its message, by its queue pair's failure (a flush), or when
//   the SRQ is destroyed or the device is gone.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/atomic_mutex.hpp"
#include "rdma_asio/detail/core/shutdown_registry.hpp"
#include "rdma_asio/detail/qp/cq_demux.hpp"
#include "rdma_asio/detail/qp/qp_operation.hpp"
#include "rdma_asio/detail/qp/work_request_machine.hpp"

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>
#include <vector>

namespace rdma_asio::detail {

class cq_demux;

// final: destroyed as itself (shared_ptr), never through its interfaces.
class shared_receive_queue_impl final
    : public std::enable_shared_from_this<shared_receive_queue_impl>,
      public cq_consumer,
      public shutdown_participant {
public:
    using native_handle_type = ibv_srq*;
    static constexpr native_handle_type no_handle = nullptr;

    /// Serves `srq` (made in `pd`, kept allocated until the SRQ is destroyed),
    /// which this object destroys. Takes part in the shutdown of `context`. Null
    /// with `ec` set on failure (the errno of ibv_query_srq).
    static std::shared_ptr<shared_receive_queue_impl> open(asio::execution_context& context,
                                                           ibv_srq* srq, std::shared_ptr<ibv_pd> pd,
                                                           error_code& ec);
    /// ibv_create_srq on `pd` (bad_descriptor when empty: a closed protection
    /// domain), then open(). Null with `ec` set on failure.
    static std::shared_ptr<shared_receive_queue_impl> create(asio::execution_context& context,
                                                             std::shared_ptr<ibv_pd> pd,
                                                             std::uint32_t depth,
                                                             std::uint32_t max_sge, error_code& ec);

    shared_receive_queue_impl(ibv_srq* srq, std::shared_ptr<ibv_pd> pd, std::uint32_t depth);
    shared_receive_queue_impl(const shared_receive_queue_impl&) = delete;
    shared_receive_queue_impl& operator=(const shared_receive_queue_impl&) = delete;
    ~shared_receive_queue_impl();

    ibv_srq* native_handle() const noexcept { return srq_; }

    /// Starts a receive; it ends (complete()) once, later, never inside this call.
    void start(qp_operation& op) noexcept;
    /// Per-operation cancellation: ends `op` if it is still waiting for room; a
    /// posted receive stays (nothing can flush it).
    void cancel_operation(qp_operation& op, asio::cancellation_type type) noexcept;
    /// Ends every receive still waiting for room with operation_aborted.
    void cancel() noexcept;
    /// New receives end with bad_descriptor; waiting ones with operation_aborted;
    /// the SRQ is destroyed (and its posted receives end with operation_aborted)
    /// now, or, while queue pairs are still on it, when the last of them is.
    void close() noexcept;
    /// The execution context shuts down: every receive is destroyed with its
    /// handler, not invoked; the SRQ is destroyed if no queue pair is on it.
    void shutdown() noexcept override;

    /// ibv_modify_srq(3) with IBV_SRQ_LIMIT: the device raises
    /// IBV_EVENT_SRQ_LIMIT_REACHED once fewer than `limit` receives are posted.
    void arm_limit(std::uint32_t limit, error_code& ec) noexcept;

    // From its queue pairs.
    /// A queue pair on this SRQ was made; its receive completions are read by
    /// `recv`, which is woken from now on whenever a receive is posted.
    /// bad_descriptor once closed.
    void attach_queue_pair(const std::shared_ptr<cq_demux>& recv, error_code& ec);
    /// A queue pair on it was destroyed.
    void detach_queue_pair() noexcept;
    // cq_consumer: from a queue pair on it, or from a demultiplexer routing a
    // destroyed queue pair's completions here (cq_demux::retire: rxe leaves a
    // destroyed QP's completions in its CQ).
    /// Ends the receives of this SRQ among `wcs` (one queue pair's batch; the
    /// others are left to it), appending them to `ended`.
    void completed(std::span<const ibv_wc> wcs, op_list& ended) noexcept override;
    /// A CQ of one of its queue pairs failed with `ec`: when the device is gone,
    /// every receive ends now with it; otherwise the receives stay posted for the
    /// other queue pairs.
    void failed(error_code ec) noexcept override;
    bool outstanding_on(const cq_demux*) const noexcept override { return outstanding(); }
    /// Whether receives are posted (read by demultiplexers, without a lock).
    bool outstanding() const noexcept { return posted_.load() > 0; }

    /// For tests and counters, read under the lock.
    std::size_t waiting() const;
    std::uint32_t posted() const;

private:
    /// Under the lock: posts `a.to_post` (feeding failures back), then wakes the
    /// demultiplexers when a receive was posted, or settles them when the last
    /// posted one ended.
    void act(wr_actions& a) noexcept;
    /// After the lock is released: completes the ended operations (posted).
    void finish(wr_actions& a) noexcept;
    /// Under the lock: destroys the SRQ if it is closed and no queue pair is on
    /// it, ending its posted receives. Returns the protection domain once the SRQ
    /// is destroyed, for the caller to release after the lock; else null.
    std::shared_ptr<ibv_pd> destroy_if_unused_locked(wr_actions& a) noexcept;
    template <class Fn>
    void for_each_demux(Fn fn) noexcept;

    mutable atomic_mutex mutex_;
    ibv_srq* srq_;
    std::shared_ptr<ibv_pd> pd_; // released once the SRQ is destroyed
    bool closed_ = false;
    bool destroyed_ = false;
    std::uint32_t queue_pairs_ = 0;
    work_request_machine machine_;
    std::atomic<std::uint32_t> posted_{0};
    std::vector<std::weak_ptr<cq_demux>> demuxes_;
};

} // namespace rdma_asio::detail
