// The steps of a connect, in the order it takes them, as
// connect_diagnostics reports where an address failed. Its own header, so that
// what names a step (the diagnostics, the errors of each step) needs this and
// not each other.
#pragma once

#include <string_view>

namespace rdma_asio {

/// The step of a connect that an address failed in, in the order a connect takes them.
enum class connect_step {
    resolve_host,    ///< the host name's lookup (asio::ip::tcp::resolver)
    resolve_address, ///< rdma_resolve_addr(3): which device reaches the address
    resolve_route,   ///< rdma_resolve_route(3)
    make_connection, ///< the connection's protection domain, CQs and QP on that device
    connect          ///< rdma_connect(3) and the peer's answer
};

/// The step as a message names it: "looking up the host", "resolving the address",
/// "resolving the route", "making the connection", "connecting".
std::string_view to_string(connect_step step) noexcept;

} // namespace rdma_asio
