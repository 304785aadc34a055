#include "rdma_asio/context.hpp"
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include "test_device.hpp"

namespace context_test {

using rdma_asio::errc;

TEST_CASE("a default context is closed and refuses queries", "[context]") {
    rdma_asio::context ctx;
    CHECK_FALSE(ctx.is_open());
    CHECK(ctx.native_handle() == nullptr);
    CHECK(ctx.device_name().empty());
    CHECK(ctx.port_count() == 0);

    rdma_asio::error_code ec;
    ctx.query_port(1, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_THROWS_AS(ctx.query_port(1), rdma_asio::system_error);
    ctx.query_gid_entry(1, 0, ec);
    CHECK(ec == asio::error::bad_descriptor);
    try {
        ctx.query_gid_entry(1, 0);
        FAIL("query_gid_entry on a closed context did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("ibv_query_gid_ex") != std::string::npos);
    }
    ctx.close(); // closing a closed context is harmless
    CHECK(ctx.release() == nullptr);
}

TEST_CASE("opening without kernel support fails cleanly", "[.sysfs_absent]") {
    REQUIRE(rdma_asio::test::fake_sysfs_kind() == "absent"); // via ctest: unit.no_device.*
    rdma_asio::context ctx;
    rdma_asio::error_code ec;
    ctx.open("", ec);
    CHECK(ec == errc::no_kernel_support);
    CHECK_FALSE(ctx.is_open());
    ctx.open("rxe0", ec);
    CHECK(ec == errc::no_kernel_support);

    try {
        rdma_asio::context throwing("rxe0");
        FAIL("context(\"rxe0\") did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == errc::no_kernel_support);
    }
}

TEST_CASE("opening with no device reports no_device", "[.sysfs_empty]") {
    REQUIRE(rdma_asio::test::fake_sysfs_kind() == "empty"); // via ctest: unit.no_device.*
    rdma_asio::context ctx;
    rdma_asio::error_code ec;
    ctx.open("", ec);
    CHECK(ec == errc::no_device);
    CHECK_FALSE(ctx.is_open());
    ctx.open(static_cast<ibv_device*>(nullptr), ec);
    CHECK(ec == errc::no_device);
    CHECK_THROWS_AS(rdma_asio::context(""), rdma_asio::system_error);
}

TEST_CASE("port and link layer names", "[context]") {
    CHECK(rdma_asio::port_state_name(IBV_PORT_ACTIVE) == "ACTIVE");
    CHECK(rdma_asio::port_state_name(IBV_PORT_DOWN) == "DOWN");
    CHECK(rdma_asio::port_state_name(IBV_PORT_INIT) == "INIT");
    CHECK(rdma_asio::port_state_name(IBV_PORT_ARMED) == "ARMED");
    // A state without a name (one a newer kernel may add). Only values the enum can
    // hold (0 to 7 here) may be formed: static_cast to 99 is undefined behaviour,
    // which clang's -fsanitize=enum reports.
    CHECK(rdma_asio::port_state_name(static_cast<ibv_port_state>(7)) == "unknown");
    CHECK(rdma_asio::link_layer_name(IBV_LINK_LAYER_ETHERNET) == "Ethernet");
    CHECK(rdma_asio::link_layer_name(IBV_LINK_LAYER_INFINIBAND) == "InfiniBand");
    CHECK(rdma_asio::link_layer_name(IBV_LINK_LAYER_UNSPECIFIED) == "unspecified");
}

TEST_CASE("GID type names are ibv_devinfo's", "[context]") {
    CHECK(rdma_asio::gid_type_name(IBV_GID_TYPE_IB) == "IB");
    CHECK(rdma_asio::gid_type_name(IBV_GID_TYPE_ROCE_V1) == "RoCE v1");
    CHECK(rdma_asio::gid_type_name(IBV_GID_TYPE_ROCE_V2) == "RoCE v2");
    // As for port states: 3 is a value ibv_gid_type holds (0 to 3) without a name.
    CHECK(rdma_asio::gid_type_name(static_cast<ibv_gid_type>(3)) == "unknown");
}

TEST_CASE("GIDs print as eight groups of hex digits", "[context]") {
    ibv_gid gid{};
    gid.raw[10] = 0xff;
    gid.raw[11] = 0xff;
    gid.raw[12] = 10;
    gid.raw[15] = 1;
    CHECK(rdma_asio::to_string(gid) == "0000:0000:0000:0000:0000:ffff:0a00:0001");
}

TEST_CASE("GIDs read back from their text, short forms too", "[context]") {
    rdma_asio::error_code ec;
    ibv_gid gid = rdma_asio::gid_from_string("ff12:401b:ffff:0000:0000:0000:0000:0001", ec);
    REQUIRE_FALSE(ec);
    CHECK(gid.raw[0] == 0xff);
    CHECK(gid.raw[1] == 0x12);
    CHECK(gid.raw[15] == 0x01);
    CHECK(rdma_asio::to_string(rdma_asio::gid_from_string("ff12:401b:ffff::1", ec)) ==
          "ff12:401b:ffff:0000:0000:0000:0000:0001");
    CHECK_FALSE(ec);
    gid = rdma_asio::gid_from_string("fe80::1:2:3:4:5:6:7:8", ec); // too many groups
    CHECK(ec == asio::error::invalid_argument);
    rdma_asio::gid_from_string("", ec);
    CHECK(ec == asio::error::invalid_argument);
}

} // namespace context_test
