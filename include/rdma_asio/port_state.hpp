// What rdma_asio knows about one port of a device.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

namespace rdma_asio {

/// What rdma_asio last learnt about a port: queried when the event stream opened
/// and again after each port event (GID_CHANGE refreshes the GIDs).
struct port_state {
    int port_num = 0;
    ibv_port_state state = IBV_PORT_NOP;
    std::uint8_t link_layer = IBV_LINK_LAYER_UNSPECIFIED;
    std::uint16_t lid = 0;
    std::uint16_t sm_lid = 0;
    /// The valid entries of the port's GID table (ibv_query_gid_table).
    std::vector<ibv_gid_entry> gids;
    /// Port events seen for this port since the stream opened.
    std::uint64_t events = 0;
};

} // namespace rdma_asio
