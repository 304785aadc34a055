// The connection parameters rdma_asio chooses when the program gives none.
//
// rdma_connect(3) and rdma_accept(3) take an rdma_conn_param whose fields a
// program must otherwise choose itself, and an all-zero one asks for no RDMA
// read or atomic in flight either way:
// - responder_resources: the RDMA reads and atomics the peer may have
//   outstanding against this side. At most this device's max_qp_rd_atom; when
//   accepting, at most what the request asks (the CONNECT_REQUEST event reports
//   the peer's values from this side's view, and rdma_accept(3) says to use
//   them), since the peer's device bounds it too.
// - initiator_depth: the RDMA reads and atomics this side may have
//   outstanding. At most this device's max_qp_init_rd_atom; when accepting, at
//   most the request's.
// - retry_count 7: the most the 3-bit transport retry counter holds, so a lost
//   packet on a busy link is resent rather than failing the connection.
// - rnr_retry_count 7: retry for ever while the peer has no receive posted, as a
//   stream socket's write waits for the reader; a program that wants
//   wc_errc::rnr_retry_exceeded instead passes parameters of its own.
// Both limits are 8-bit fields: a device reporting more is clamped to 255.
// No I/O here: the device's limits are the caller's query (ibv_query_device).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstdint>

namespace rdma_asio::detail {

/// RDMA reads and atomics outstanding: served (responder) and issued (initiator).
struct rd_atomic_limits {
    std::uint8_t responder_resources = 0;
    std::uint8_t initiator_depth = 0;
};

/// A device's limits as rdma_conn_param's 8-bit fields hold them.
inline rd_atomic_limits limits_of(const ibv_device_attr& device) noexcept {
    const auto clamp = [](int v) { return static_cast<std::uint8_t>(std::clamp(v, 0, 255)); };
    return {clamp(device.max_qp_rd_atom), clamp(device.max_qp_init_rd_atom)};
}

/// The parameters of rdma_connect on a device with `device`'s limits.
inline rdma_conn_param connect_defaults(rd_atomic_limits device) noexcept {
    rdma_conn_param param{};
    param.responder_resources = device.responder_resources;
    param.initiator_depth = device.initiator_depth;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    return param;
}

/// The parameters of rdma_accept of a request that asked for `request`.
inline rdma_conn_param accept_defaults(rd_atomic_limits device, rd_atomic_limits request) noexcept {
    rdma_conn_param param = connect_defaults(device);
    param.responder_resources = std::min(device.responder_resources, request.responder_resources);
    param.initiator_depth = std::min(device.initiator_depth, request.initiator_depth);
    return param;
}

} // namespace rdma_asio::detail
