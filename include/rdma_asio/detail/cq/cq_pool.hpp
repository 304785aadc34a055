// The completion queues that the connections of streams share: per execution
// context and device, one completion channel and the CQs handed out by
// cq_sharing's rule (cq_sharing.hpp says why and how many). Non-template, see
// src/cq/cq_pool.cpp.
//
// Ownership runs one way: the connections on a CQ own it together, each by a
// share; the pool only knows it (by weak reference) to hand it out. The last
// share destroys the CQ, after the QPs on it (each connection destroys its QP
// before it lets go of its share), and with it what connections that went left
// in it: a CQ whose connections all went is never handed out again. The pool keeps
// a completion channel per device until the execution context shuts down.
#pragma once

#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/cq/cq_sharing.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace rdma_asio::detail {

class cq_pool {
public:
    /// A share of a CQ on `verbs` with room for one more connection needing
    /// `need` entries (its send depth plus its receive depth), made with `options`
    /// on the pool's completion channel of the device, both on `ex`, when no CQ
    /// has room. Null when connections needing that many cannot share
    /// (cq_sharing): the caller makes CQs of its own. Throws system_error naming
    /// the call that failed.
    std::shared_ptr<completion_queue> share(ibv_context* verbs, const asio::any_io_executor& ex,
                                            std::uint32_t need, const cq_options& options);

    /// Lets go of the channels (the execution context's shutdown, context_held):
    /// the CQs on them keep what they need of them.
    void shutdown() noexcept;

private:
    struct shared_cq {
        std::weak_ptr<completion_queue> cq; // its shares: the connections on it
        std::uint32_t need = 0;
        std::uint32_t connections = 0; // cq_sharing::connections
    };
    struct device_cqs {
        completion_channel channel;
        std::uint32_t max_cqe = 0;
        std::vector<shared_cq> cqs;
    };

    std::mutex mutex_;
    std::map<ibv_context*, device_cqs> devices_;
};

/// The pool of the execution context of `ex` (context_held.hpp).
cq_pool& cq_pool_of(const asio::any_io_executor& ex);

} // namespace rdma_asio::detail
