// Where a datagram goes to, or came from: the address of a UD queue pair (or of a
// multicast group) as a plain value, as an ip::udp::endpoint is for a socket.
#pragma once

#include <array>
#include <cstdint>

namespace rdma_asio {

/// The queue pair number a datagram to a multicast group is sent to
/// (ibv_post_send(3): 0xFFFFFF on UD).
inline constexpr std::uint32_t multicast_qp_num = 0xFFFFFF;

/// The Q_Key rdma_cm gives the UD queue pairs and multicast groups of its UDP
/// port space (RDMA_UDP_QKEY in <rdma/rdma_cma.h>); the datagram queue pairs'
/// default.
inline constexpr std::uint32_t default_qkey = 0x01234567;

/// A UD destination or source: a port's address (its GID, and on InfiniBand its
/// LID), the queue pair number on it, and the Q_Key the datagram carries, which the
/// receiving queue pair accepts only when it equals its own.
///
/// A datagram_queue_pair turns it into an address handle (ibv_create_ah(3)) of
/// its own, once per address, as it first sends there: the endpoint is a value to
/// copy, keep and compare, and owns nothing.
struct datagram_endpoint {
    /// The port's GID (on RoCE, the IPv4-mapped or IPv6 address); all zero for
    /// an InfiniBand destination reached by LID alone.
    std::array<std::uint8_t, 16> gid{};
    /// The port's LID on InfiniBand (a multicast group's MLID); 0 on RoCE.
    std::uint16_t lid = 0;
    /// The service level (InfiniBand).
    std::uint8_t sl = 0;
    /// The queue pair number, or multicast_qp_num for a multicast group.
    std::uint32_t qp_num = 0;
    std::uint32_t qkey = default_qkey;

    /// Whether the GID is set: a datagram to it then carries a global route
    /// header (always on RoCE).
    bool is_global() const noexcept {
        for (std::uint8_t b : gid)
            if (b != 0)
                return true;
        return false;
    }

    friend bool operator==(const datagram_endpoint&, const datagram_endpoint&) = default;
};

} // namespace rdma_asio
