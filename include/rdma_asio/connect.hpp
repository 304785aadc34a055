// Connecting in one call, shaped like asio::async_connect.
#pragma once

#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/cm/connect_op.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdma_asio {

namespace detail {

/// What async_connect takes as its first argument, as Asio's own functions do.
template <class T>
concept executor = asio::execution::is_executor<T>::value || asio::is_executor<T>::value;

template <class Executor, class Deliver, class Signature>
struct connect_initiation {
    Executor ex;
    using executor_type = Executor;
    executor_type get_executor() const noexcept { return ex; }

    template <class Handler, class Prepare = no_preparation>
    void operator()(Handler&& handler, std::string host, std::string service,
                    std::vector<asio::ip::tcp::endpoint> endpoints, const connect_options& options,
                    Deliver deliver, Prepare prepare = {}) const {
        start_composed<Signature>(connect_op<Executor, Deliver, Prepare>(
                                      ex, std::move(host), std::move(service), std::move(endpoints),
                                      options, std::move(deliver), std::move(prepare)),
                                  std::forward<Handler>(handler), ex);
    }
};

// A connect by `host` and `service`, or over `endpoints` when they are given, that
// completes with the connection; `prepare(conn)` before each rdma_connect(3).
template <class Executor, class CompletionToken, class Prepare = no_preparation>
auto start_connect(const Executor& ex, std::string host, std::string service,
                   std::vector<asio::ip::tcp::endpoint> endpoints, const connect_options& options,
                   CompletionToken&& token, Prepare prepare = {}) {
    using signature = void(error_code, basic_connection<Executor>);
    return asio::async_initiate<CompletionToken, signature>(
        connect_initiation<Executor, connection_as_result, signature>{ex}, token, std::move(host),
        std::move(service), std::move(endpoints), options, connection_as_result{},
        std::move(prepare));
}

} // namespace detail

/// Connects to `endpoint` (an IP address and port where an acceptor, or any
/// rdma_cm listener, listens) with an RC connection of its own: an event
/// channel and an id, rdma_resolve_addr(3) and rdma_resolve_route(3) (each
/// within options.resolve_timeout), a protection domain (connection::pd()) and a
/// completion channel on the device the route goes through, the QP and CQs of
/// options.connection, then rdma_connect(3) with the parameters
/// default_conn_param chooses, and ESTABLISHED.
///
/// Signature: void(error_code, basic_connection<Executor>); on error the
/// connection is not open. Errors name the step that failed: address_error (no
/// RDMA device's network reaches the address), address_timeout (no host answered
/// for it within options.resolve_timeout), route_error, connect_timeout (the
/// peer did not answer the connection request), connection_rejected (nobody
/// listens there, or the listener refused); or the call that failed as the
/// connection was made (ibv_create_cq, rdma_create_qp: the options ask more than
/// the device has). options.diagnostics, when given, receives the address and
/// step of each failure (connect_diagnostics.hpp).
///
/// Per-operation cancellation: terminal and partial. The step in progress ends,
/// the half-made connection is closed, and the operation ends with
/// operation_aborted.
template <detail::executor Executor,
          class CompletionToken = asio::default_completion_token_t<Executor>>
auto async_connect(const Executor& ex, const asio::ip::tcp::endpoint& endpoint,
                   const connect_options& options,
                   CompletionToken&& token = asio::default_completion_token_t<Executor>()) {
    return detail::start_connect(ex, {}, {}, {endpoint}, options,
                                 std::forward<CompletionToken>(token));
}
/// The same, calling `prepare(conn)` with the connection made, before it
/// connects (rdma_connect(3)): start its first receives there, for a peer that
/// sends first (a message that arrives before a receive is posted waits for the
/// RNR timer: 655 ms with the one rdma_cm sets). Called once for each address
/// tried that got that far; when that attempt then fails, the connection is
/// closed and the operations `prepare` started end with operation_aborted.
template <detail::executor Executor, detail::preparation<basic_connection<Executor>> Prepare,
          class CompletionToken = asio::default_completion_token_t<Executor>>
auto async_connect(const Executor& ex, const asio::ip::tcp::endpoint& endpoint,
                   const connect_options& options, Prepare prepare,
                   CompletionToken&& token = asio::default_completion_token_t<Executor>()) {
    return detail::start_connect(ex, {}, {}, {endpoint}, options,
                                 std::forward<CompletionToken>(token), std::move(prepare));
}
/// The same with the default options.
template <detail::executor Executor,
          class CompletionToken = asio::default_completion_token_t<Executor>>
auto async_connect(const Executor& ex, const asio::ip::tcp::endpoint& endpoint,
                   CompletionToken&& token = asio::default_completion_token_t<Executor>()) {
    return async_connect(ex, endpoint, connect_options{}, std::forward<CompletionToken>(token));
}

/// The same to `host` (a name or an address) and `service` (a port number or a
/// service name), resolved with asio::ip::tcp::resolver: each address in turn
/// until one connects, as asio::async_connect does; the error is the last
/// address's (or the resolver's: host_not_found, ...).
template <detail::executor Executor,
          class CompletionToken = asio::default_completion_token_t<Executor>>
auto async_connect(const Executor& ex, std::string_view host, std::string_view service,
                   const connect_options& options,
                   CompletionToken&& token = asio::default_completion_token_t<Executor>()) {
    return detail::start_connect(ex, std::string(host), std::string(service), {}, options,
                                 std::forward<CompletionToken>(token));
}
/// The same with the default options.
template <detail::executor Executor,
          class CompletionToken = asio::default_completion_token_t<Executor>>
auto async_connect(const Executor& ex, std::string_view host, std::string_view service,
                   CompletionToken&& token = asio::default_completion_token_t<Executor>()) {
    return async_connect(ex, host, service, connect_options{},
                         std::forward<CompletionToken>(token));
}

/// Connects to `endpoint` as async_connect(conn.get_executor(), endpoint,
/// options) does, and move-assigns the connection to `conn` as the operation
/// completes (a connection `conn` held until then is closed then). Signature:
/// void(error_code); on error `conn` is not open. `conn` must outlive the
/// operation.
template <class Executor, class CompletionToken = asio::default_completion_token_t<Executor>>
auto async_connect(basic_connection<Executor>& conn, const asio::ip::tcp::endpoint& endpoint,
                   const connect_options& options,
                   CompletionToken&& token = asio::default_completion_token_t<Executor>()) {
    using deliver = detail::connection_into<basic_connection<Executor>>;
    using signature = void(error_code);
    return asio::async_initiate<CompletionToken, signature>(
        detail::connect_initiation<Executor, deliver, signature>{conn.get_executor()}, token,
        std::string(), std::string(), std::vector<asio::ip::tcp::endpoint>{endpoint}, options,
        deliver{&conn});
}
/// The same with the default options.
template <class Executor, class CompletionToken = asio::default_completion_token_t<Executor>>
auto async_connect(basic_connection<Executor>& conn, const asio::ip::tcp::endpoint& endpoint,
                   CompletionToken&& token = asio::default_completion_token_t<Executor>()) {
    return async_connect(conn, endpoint, connect_options{}, std::forward<CompletionToken>(token));
}

} // namespace rdma_asio
