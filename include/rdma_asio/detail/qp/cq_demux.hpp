// The one reader of a completion queue whose completions go to queue_pair
// operations: it reads the CQ (with the cq family's cq_reader, which drives the
// CQ's cq_poll_machine from the channel's wake-up, so arming, acks, cancellation
// and device loss behave as for async_poll, without an async_poll in between) only
// while one of its queue pairs has a work request outstanding on it, and hands each
// work completion to the queue pair its qp_num names.
//
// Ownership runs one way: a queue pair holds the demultiplexers of its CQs (it wakes
// them when it posts); a demultiplexer knows its queue pairs only as cq_consumers,
// by weak reference, and holds one only while it routes a batch to it.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/atomic_mutex.hpp"
#include "rdma_asio/detail/cq/cq_reader.hpp"
#include "rdma_asio/detail/qp/cq_poll_handshake.hpp"
#include "rdma_asio/detail/qp/work_request_machine.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace rdma_asio::detail {

class completion_queue_impl;
class cq_demux;

/// What a demultiplexer needs of a queue pair, and all it knows of it.
class cq_consumer {
public:
    /// Completions of this consumer, in the CQ's order, from the poll's handler
    /// (no lock held). The operations they end are appended to `ended`, which the
    /// demultiplexer completes once it has routed the whole batch.
    virtual void completed(std::span<const ibv_wc> wcs, op_list& ended) noexcept = 0;
    /// The CQ failed (device gone, CQ closed): every operation ends now with `ec`.
    virtual void failed(error_code ec) noexcept = 0;
    /// Whether work requests of this consumer are outstanding on `demux`'s CQ.
    /// Called under the demultiplexer's lock: it must not call back into it.
    virtual bool outstanding_on(const cq_demux* demux) const noexcept = 0;
    /// After request_drain(): every completion that was in the CQ then has been
    /// routed (no lock held).
    virtual void drained() noexcept {}

protected:
    ~cq_consumer() = default;
};

class cq_demux final : public std::enable_shared_from_this<cq_demux>, public cq_read_target {
public:
    /// The demultiplexer of `cq`, made on first use. errc::completion_queue_in_use
    /// when the CQ's owner polls it (async_poll or async_wait was used on it).
    static std::shared_ptr<cq_demux> of(const std::shared_ptr<completion_queue_impl>& cq,
                                        error_code& ec);

    explicit cq_demux(std::shared_ptr<completion_queue_impl> cq) noexcept
        : cq_(std::move(cq)), reader_(cq_) {}

    /// Routes completions with this qp_num to `consumer` (held by weak reference)
    /// until detach, which the consumer calls at the latest in its destructor.
    void attach(std::uint32_t qp_num, const std::shared_ptr<cq_consumer>& consumer);
    void detach(std::uint32_t qp_num) noexcept;
    /// The QP `qp_num` was destroyed, but completions of it may still be in the
    /// CQ (rxe leaves them there): those of receives it took from a shared
    /// receive queue go to `heir`, that SRQ, from now on. The route ends once a
    /// poll started after this call has emptied the CQ, once `heir` has nothing
    /// outstanding here, or when a new QP with the same number attaches. The heir
    /// calls forget() before its members go.
    void retire(std::uint32_t qp_num, const std::shared_ptr<cq_consumer>& heir) noexcept;
    /// Ends every route to `heir` (retire).
    void forget(const cq_consumer* heir) noexcept;

    /// A queue pair has posted a work request whose completion comes to this CQ
    /// (and counts it in outstanding_on()): polls unless a poll is in progress.
    void wake() noexcept;
    /// A queue pair has no work request outstanding here any more: if none of
    /// them has, a poll in progress is cancelled, so that nothing waits (and holds
    /// the io_context's work) for completions that will never come.
    void settle() noexcept;

    /// `consumer` will hear drained() once the completions now in the CQ have
    /// been routed: a poll waiting for the CQ's event is cancelled, and the CQ is
    /// read (ibv_poll_cq(3)) until it is found empty, on the CQ's executor. Also
    /// when the CQ is closed meanwhile. (A QP destroyed after the device's last
    /// completion for it, e.g. IBV_EVENT_QP_LAST_WQE_REACHED, loses none.)
    void request_drain(const std::shared_ptr<cq_consumer>& consumer) noexcept;

    /// Completions this demultiplexer read for a QP it does not serve (a QP
    /// destroyed while its completions were still in the CQ).
    std::uint64_t unrouted() const noexcept;

    static constexpr std::size_t batch = cq_reader::batch; // completions per poll

private:
    /// The end of a poll (the reader's read): routes its completions and runs
    /// their handlers, or fails every queue pair when the CQ failed; then polls
    /// again if anything is still outstanding. A handler's exception comes out of
    /// here.
    void read(error_code ec, std::size_t n) override;
    /// Hands the poll's `n` completions to their queue pairs, collecting the
    /// operations they end in `ended`.
    void route(std::size_t n, op_list& ended) noexcept;
    /// Completes `ended`, in order, here when their handlers' executors allow.
    void deliver(op_list& ended);
    void fail_all(error_code reason) noexcept;
    /// The end of a poll or of a drain (the handshake in progress): drains if a
    /// consumer asked, else polls again if anything is outstanding.
    void next_poll() noexcept;
    /// Under mutex_: no poll in progress any more; the next one starts if
    /// anything is outstanding.
    void end_poll_locked() noexcept;
    /// Under mutex_, the handshake in progress: drain() in a handler of its own.
    void post_drain() noexcept;
    /// Reads the CQ until it is found empty, routing and delivering what it read,
    /// then tells the consumers that asked (request_drain), then next_poll().
    void drain();
    bool anything_outstanding() const noexcept; // under mutex_
    void poll() noexcept;                       // under mutex_, after handshake_.start_locked()

    struct route_entry {
        std::uint32_t qp_num;
        // Called under mutex_ only, while `weak` has not expired: a consumer
        // detaches (under mutex_) before its members go.
        cq_consumer* consumer;
        std::weak_ptr<cq_consumer> weak; // locked for calls outside mutex_
        // A retired route (retire): the polls started before it was retired;
        // 0 for a live QP's.
        std::uint64_t retired_after = 0;
    };
    /// Under mutex_, as a poll of `n` completions is routed: ends the retired
    /// routes that can have nothing more to route.
    void expire_retired(std::size_t n) noexcept;

    mutable atomic_mutex mutex_;
    std::shared_ptr<completion_queue_impl> cq_;
    std::vector<route_entry> qps_;
    // A poll is pending, or its end (read) runs. Written under mutex_;
    // read without it by wake().
    cq_poll_handshake handshake_;
    bool routing_ = false; // read() runs: no poll is pending
    std::uint64_t polls_started_ = 0;
    std::size_t retired_ = 0;                               // retired routes among qps_
    std::vector<std::weak_ptr<cq_consumer>> drain_waiters_; // request_drain
    std::uint64_t unrouted_ = 0;
    // The CQ's reader; its buffer holds the completions being routed. Only the
    // one poll (or drain) in progress uses it.
    cq_reader reader_;
};

} // namespace rdma_asio::detail
