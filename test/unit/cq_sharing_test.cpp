// cq_sharing: how many connections one shared CQ takes and how deep it is.
#include "rdma_asio/detail/cq/cq_sharing.hpp"

#include <catch2/catch.hpp>

using rdma_asio::detail::cq_sharing;

TEST_CASE("a shared CQ takes connections while their needs fill half of it", "[cq_sharing]") {
    // rxe's largest CQ, 64 + 64 entries per connection (the default options)
    const cq_sharing s = cq_sharing::for_need(128, 32768);
    CHECK(s.connections == 128);
    CHECK(s.depth == 2 * 128 * 128);
    CHECK(s.depth <= 32768);
    // a CQ one entry short of that takes one connection fewer
    const cq_sharing t = cq_sharing::for_need(128, 32767);
    CHECK(t.connections == 127);
    CHECK(t.depth == 2 * 127 * 128);
    CHECK(t.depth <= 32767);
}

TEST_CASE("a shared CQ takes at most most_per_cq connections, however deep the device's are",
          "[cq_sharing]") {
    const cq_sharing s = cq_sharing::for_need(128, 4194303); // mlx5's largest
    CHECK(s.connections == cq_sharing::most_per_cq);
    CHECK(s.depth == 2 * cq_sharing::most_per_cq * 128);
}

TEST_CASE("connections whose need does not fit twice in the device's largest CQ share none",
          "[cq_sharing]") {
    CHECK(cq_sharing::for_need(128, 255).connections == 0);
    CHECK(cq_sharing::for_need(128, 256).connections == 1);
    CHECK(cq_sharing::for_need(128, 256).depth == 256);
    CHECK(cq_sharing::for_need(0, 32768).connections == 0);
    // no overflow of the depth's arithmetic at the largest need a CQ can take
    const cq_sharing huge = cq_sharing::for_need(1u << 30, 1u << 31);
    CHECK(huge.connections == 1);
    CHECK(huge.depth == 1u << 31);
}
