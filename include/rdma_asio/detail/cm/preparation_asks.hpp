// What a preparation (accept_op.hpp) may ask of the connection an accept or a
// connect makes for it, beyond the options: a stream's preparation asks both.
//   - A protection domain of its own, instead of the one the acceptor's
//     connections on a device share: the stream lends its peer keys to memory it
//     registers there, and a key of one connection's memory, in a domain shared
//     with others, would reach it over any of them (ibv_alloc_pd(3)).
//   - A share of a CQ that connections share (cq_pool.hpp) instead of two CQs of
//     its own: nothing but the stream reads its CQ, and a device has too few CQs
//     for thousands of connections with two each.
#pragma once

#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/cq/cq_pool.hpp"

#include <rdma/rdma_cma.h>

#include <memory>

namespace rdma_asio::detail {

template <class Prepare>
concept owns_protection_domain = requires {
    requires Prepare::own_protection_domain;
};

template <class Prepare>
concept shares_completion_queue = requires {
    requires Prepare::share_completion_queue;
};

/// For a connection on `id` (which knows its device) with `options`: a share of a
/// pooled CQ of the execution context of `ex` when `Prepare` asks one and the
/// device's CQs are deep enough to share (cq_sharing.hpp); null otherwise, and
/// the connection makes its own. Throws system_error naming the call that failed.
template <class Prepare>
std::shared_ptr<completion_queue> shared_cq_for(rdma_cm_id* id, const asio::any_io_executor& ex,
                                                const connection_options& options) {
    if constexpr (shares_completion_queue<Prepare>)
        return cq_pool_of(ex).share(id->verbs, ex, options.send_depth + options.receive_depth,
                                    options.cq);
    else
        return nullptr;
}

} // namespace rdma_asio::detail
