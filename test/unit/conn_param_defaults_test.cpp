// The connection parameters rdma_asio chooses (conn_param_defaults.hpp): the
// device's limits, clamped to 8 bits, and on accept the request's as well. What a
// connection made with them can do on rxe is in connection_rxe_test.cpp.
#include "rdma_asio/detail/cm/conn_param_defaults.hpp"

#include <catch2/catch.hpp>

namespace conn_param_defaults_test {

using rdma_asio::detail::accept_defaults;
using rdma_asio::detail::connect_defaults;
using rdma_asio::detail::limits_of;
using rdma_asio::detail::rd_atomic_limits;

TEST_CASE("a connect asks for what the device allows, and retries", "[conn_param]") {
    const rdma_conn_param p = connect_defaults({16, 8});
    CHECK(p.responder_resources == 16);
    CHECK(p.initiator_depth == 8);
    CHECK(p.retry_count == 7);
    CHECK(p.rnr_retry_count == 7);
    CHECK(p.private_data == nullptr);
    CHECK(p.private_data_len == 0);
}

TEST_CASE("an accept stays within both the device's limits and the request's", "[conn_param]") {
    const rdma_conn_param fewer_asked = accept_defaults({16, 16}, {4, 2});
    CHECK(fewer_asked.responder_resources == 4);
    CHECK(fewer_asked.initiator_depth == 2);
    const rdma_conn_param more_asked = accept_defaults({16, 8}, {128, 128});
    CHECK(more_asked.responder_resources == 16);
    CHECK(more_asked.initiator_depth == 8);
    CHECK(more_asked.retry_count == 7);
    CHECK(more_asked.rnr_retry_count == 7);
}

TEST_CASE("a device's limits beyond 8 bits or below 0 are clamped", "[conn_param]") {
    ibv_device_attr device{};
    device.max_qp_rd_atom = 1000;
    device.max_qp_init_rd_atom = -1;
    const rd_atomic_limits l = limits_of(device);
    CHECK(l.responder_resources == 255);
    CHECK(l.initiator_depth == 0);
    device.max_qp_rd_atom = 128;
    device.max_qp_init_rd_atom = 128;
    CHECK(limits_of(device).responder_resources == 128);
    CHECK(limits_of(device).initiator_depth == 128);
}

} // namespace conn_param_defaults_test
