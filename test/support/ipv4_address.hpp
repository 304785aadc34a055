// IPv4 socket addresses for rdma_cm calls in tests (the test VM's 10.0.0.1, a
// multicast group), built from text.
#pragma once

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace rdma_asio::test {

/// `address`:`port`; fails the test for text that is not an IPv4 address.
inline sockaddr_in ipv4(const char* address, unsigned short port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    REQUIRE(::inet_pton(AF_INET, address, &addr.sin_addr) == 1);
    return addr;
}

/// The address as rdma_cm's calls take it.
inline const sockaddr* as_sockaddr(const sockaddr_in& a) {
    return reinterpret_cast<const sockaddr*>(&a);
}

} // namespace rdma_asio::test
