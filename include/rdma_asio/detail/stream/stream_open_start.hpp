// How an accept or a connect into a stream makes its connection: the accept's or
// the connect's own operation (accept_op.hpp, connect_op.hpp), given the stream's
// preparation and the stream's operation as a handler erased to one type
// (erased_handler.hpp).
//
// Why erased: the program's handler is then not a template argument of the
// accept, the connect and every layer under them, so those layers are one type per
// executor type. For the default executor type (any_io_executor, the one
// rdma_asio::stream has) they are compiled once, in the library
// (src/stream/stream_open_start.cpp), instead of in each program that opens a
// stream, each spelling the program's handler out again in every name. The cost:
// one allocation per accept or connect, not per message.
#pragma once

#include "rdma_asio/acceptor.hpp"
#include "rdma_asio/connect.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/cm/accept_op.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/erased_handler.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/stream/stream_core.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace rdma_asio::detail {

/// Prepares each connection an accept or a connect into a stream makes, before
/// rdma_accept(3) or rdma_connect(3): a stream state of its own (a connect tries
/// each address in turn, and an accept may prepare a request that then fails; the
/// state before ends with its connection), its memory registered and its receives
/// posted. The stream's operation takes the latest state from `into` when the
/// connection is made; an empty one there: it could not be allocated (ENOMEM).
class stream_prepare {
public:
    stream_prepare(std::shared_ptr<std::shared_ptr<stream_core>> into,
                   const asio::any_io_executor& ex, const stream_options& options)
        : into_(std::move(into)), ex_(ex), options_(options) {}

    /// The accept makes the connection in a protection domain of its own, and
    /// the accept and the connect on a CQ streams share (preparation_asks.hpp).
    static constexpr bool own_protection_domain = true;
    static constexpr bool share_completion_queue = true;

    template <class Connection>
    void operator()(Connection& made) noexcept {
        if (stream_core* core = renew())
            core->prepare(made);
    }

private:
    stream_core* renew() noexcept; // the new state in `into`, or null (bad_alloc)

    std::shared_ptr<std::shared_ptr<stream_core>> into_;
    asio::any_io_executor ex_;
    stream_options options_;
};

/// What an accept or a connect into a stream completes its part with.
template <class Executor>
using stream_open_handler = erased_handler<error_code, basic_connection<Executor>>;

/// The connect's part: by `host` and `service`, or over `endpoints` when given.
template <class Executor>
struct stream_connect_start {
    using handler_type = stream_open_handler<Executor>;
    Executor ex;
    std::string host;
    std::string service;
    std::vector<asio::ip::tcp::endpoint> endpoints;
    connect_options options;

    // Defined out of the class: an explicit instantiation declaration (below) then
    // keeps programs from compiling it again, as it does not for inline members.
    void operator()(stream_prepare prepare, handler_type handler) &&;
};

/// The accept's part: the acceptor's next connection, on the acceptor's state as
/// its own async_accept is (a layer under the stream's operation, not the
/// acceptor's async_accept, a user's operation, started inside it).
template <class Executor>
struct stream_accept_start {
    using handler_type = stream_open_handler<Executor>;
    basic_acceptor<Executor>* acceptor;

    void operator()(stream_prepare prepare, handler_type handler) &&;
};

template <class Executor>
void stream_connect_start<Executor>::operator()(stream_prepare prepare, handler_type handler) && {
    start_connect(ex, std::move(host), std::move(service), std::move(endpoints), options,
                  std::move(handler), std::move(prepare));
}

template <class Executor>
void stream_accept_start<Executor>::operator()(stream_prepare prepare, handler_type handler) && {
    const Executor& ex = acceptor->get_executor();
    initiate_operation<void(error_code, basic_connection<Executor>), accept_start<Executor>>(
        io_object_access::state(*acceptor), ex, "rdma_asio::async_accept", std::move(handler), ex,
        std::move(prepare));
}

// Compiled once, in the library, for the default executor type.
extern template struct stream_connect_start<asio::any_io_executor>;
extern template struct stream_accept_start<asio::any_io_executor>;

} // namespace rdma_asio::detail
