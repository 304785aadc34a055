// The receives a stream keeps posted on its queue pair: the one for the peer's
// hello, then one for each notification the peer may send (stream_machine.hpp:
// each of the peer's RDMA writes with immediate data takes one). A reaped one is
// kept here until the stream posts it again, with the others kept, in one call
// (queue_pair_impl::start of a list: one ibv_post_recv for them all).
//
// Why a room of its own: which receive is which, and which wait to be posted
// again, is bookkeeping the stream's flow control only asks about (how many went
// back: stream_reader_machine::reposted), never a decision of its own.
#pragma once

#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/detail/stream/stream_work_request.hpp"
#include "rdma_asio/memory_region.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace rdma_asio::detail {

template <class Core>
class stream_receives {
public:
    using request = stream_work_request<Core>;

    explicit stream_receives(std::size_t notices)
        : notices_(std::make_unique<request[]>(notices)), count_(notices) {
        reaped_.reserve(notices); // reaped() then never allocates
    }

    /// The notification receives (stream_options::notices).
    std::size_t count() const noexcept { return count_; }

    /// Posts the receive of the peer's hello, into `hello`, then every
    /// notification's; their completions go to `core`.
    void post_all(queue_pair_impl& qp, const std::shared_ptr<Core>& core,
                  registered_buffer hello) noexcept {
        hello_.role = stream_request_role::hello;
        hello_.start_receive(qp, core, hello);
        for (std::size_t i = 0; i < count_; ++i) {
            notices_[i].index = i;
            notices_[i].start_receive(qp, core);
        }
    }

    /// Notification receive `i` completed: kept to be posted again.
    void reaped(std::size_t i) noexcept { reaped_.push_back(&notices_[i]); }
    /// The receives reaped and not posted again yet.
    std::size_t kept() const noexcept { return reaped_.size(); }

    /// Posts every kept receive again, in one call: how many.
    std::size_t repost(queue_pair_impl& qp, const std::shared_ptr<Core>& core) noexcept {
        for (qp_operation* r : reaped_)
            static_cast<request*>(r)->prepare_receive(core);
        qp.start(std::span<qp_operation* const>(reaped_));
        const std::size_t n = reaped_.size();
        reaped_.clear();
        return n;
    }

    /// The connection has gone: the kept receives are never posted again.
    void drop() noexcept { reaped_.clear(); }

private:
    request hello_;
    std::unique_ptr<request[]> notices_;
    std::size_t count_;
    std::vector<qp_operation*> reaped_;
};

} // namespace rdma_asio::detail
