#include "rdma_asio/port_state.hpp"

#include <catch2/catch.hpp>

namespace port_state_test {

TEST_CASE("a port_state nothing was learnt about says so", "[port_state]") {
    // What async_event_stream::port() reports for a port whose query failed.
    const rdma_asio::port_state unknown;
    CHECK(unknown.port_num == 0);
    CHECK(unknown.state == IBV_PORT_NOP);
    CHECK(unknown.link_layer == IBV_LINK_LAYER_UNSPECIFIED);
    CHECK(unknown.lid == 0);
    CHECK(unknown.sm_lid == 0);
    CHECK(unknown.gids.empty());
    CHECK(unknown.events == 0);
}

TEST_CASE("a port_state is a plain value: a copy keeps its GID table", "[port_state]") {
    rdma_asio::port_state ps;
    ps.port_num = 1;
    ps.state = IBV_PORT_ACTIVE;
    ibv_gid_entry entry{};
    entry.gid_index = 3;
    entry.port_num = 1;
    ps.gids.push_back(entry);
    rdma_asio::port_state copy = ps;
    ps.gids.clear();
    REQUIRE(copy.gids.size() == 1);
    CHECK(copy.gids[0].gid_index == 3);
    CHECK(copy.state == IBV_PORT_ACTIVE);
}

} // namespace port_state_test
