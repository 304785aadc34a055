// An rdma_cm address as Asio's TCP endpoint: rdma_cm names IP connections by
// sockaddr_in / sockaddr_in6 and a port, as TCP does, so an acceptor's, a
// connection's and a stream's endpoints are tcp::endpoint like a socket's.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace rdma_asio::detail {

/// `address` as a TCP endpoint; false (and `out` untouched) when it is not an
/// IPv4 or IPv6 address (an InfiniBand one, AF_IB, or none).
inline bool tcp_endpoint_of(const sockaddr* address, asio::ip::tcp::endpoint& out) noexcept {
    if (address == nullptr || (address->sa_family != AF_INET && address->sa_family != AF_INET6))
        return false;
    const std::size_t length =
        address->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    asio::ip::tcp::endpoint endpoint;
    std::memcpy(endpoint.data(), address, length);
    endpoint.resize(length);
    out = endpoint;
    return true;
}

/// `get(ec)`'s endpoint, or system_error naming `call`: the throwing form of an
/// endpoint call.
template <class Get>
asio::ip::tcp::endpoint endpoint_or_throw(Get&& get, const char* call) {
    error_code ec;
    asio::ip::tcp::endpoint endpoint = get(ec);
    throw_if_error(ec, call);
    return endpoint;
}

} // namespace rdma_asio::detail
