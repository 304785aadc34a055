// The rdma_cm steps that the samples' servers and clients take alike: a server's
// loop over connection requests, and a client's connect whose answer carries the
// server's private data.
#pragma once

#include <rdma_asio/cm_event.hpp>
#include <rdma_asio/cm_id.hpp>

#include "asio_alias.hpp"

#include <rdma/rdma_cma.h>

#include <functional>

namespace sample {

/// Takes connection requests on `listener` until it is closed, and hands each to
/// `start` (which spawns the request's session). A request that fails is printed
/// and skipped.
asio::awaitable<void> take_requests(rdma_asio::cm_id& listener,
                                    std::function<void(rdma_asio::cm_id)> start);

/// rdma_connect with `param`, then the id's next event, which must be
/// ESTABLISHED: it carries the server's private data (the accept's), which
/// cm_id::async_connect would not hand over. Throws system_error naming
/// rdma_connect otherwise.
asio::awaitable<rdma_asio::cm_event> connect_for_private_data(rdma_asio::cm_id& id,
                                                              const rdma_conn_param& param);

} // namespace sample
