#include "rdma_asio/cm_id.hpp"

#include <catch2/catch.hpp>

#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/connection.hpp"

#include <asio/io_context.hpp>

#include <fstream>
#include <string>

TEST_CASE("cm_id, cm_event_channel and connection are move-only I/O objects", "[cm_id]") {
    static_assert(!std::is_copy_constructible_v<rdma_asio::cm_id>);
    static_assert(std::is_nothrow_move_constructible_v<rdma_asio::cm_id>);
    static_assert(std::is_nothrow_move_assignable_v<rdma_asio::cm_id>);
    static_assert(!std::is_copy_constructible_v<rdma_asio::cm_event_channel>);
    static_assert(std::is_nothrow_move_constructible_v<rdma_asio::cm_event_channel>);
    static_assert(!std::is_copy_constructible_v<rdma_asio::connection>);
    static_assert(std::is_nothrow_move_constructible_v<rdma_asio::connection>);
    rdma_asio::cm_id id;
    CHECK_FALSE(id.is_open());
    CHECK(id.native_handle() == nullptr);
    CHECK_THROWS_AS(id.async_next([](std::error_code, rdma_asio::cm_event) {}), std::system_error);
    id.close(); // not open: nothing to do
}

TEST_CASE("the channel opens where rdma_cm exists, else fails naming rdma_create_event_channel",
          "[cm_id]") {
    asio::io_context ioc;
    if (std::ifstream("/dev/infiniband/rdma_cm").good()) {
        rdma_asio::cm_event_channel channel(ioc);
        CHECK(channel.native_handle() != nullptr);
        return;
    }
    try {
        rdma_asio::cm_event_channel channel(ioc);
        FAIL("an event channel opened without /dev/infiniband/rdma_cm");
    } catch (const std::system_error& e) {
        CHECK(std::string(e.what()).find("rdma_create_event_channel") != std::string::npos);
    }
}
