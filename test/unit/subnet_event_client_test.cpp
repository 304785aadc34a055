// subnet_event_client without a fabric: what can be checked on any host. The
// client against a real SA is tested in test/subnet (label subnet).
#include "rdma_asio/subnet_event_client.hpp"

#include <catch2/catch.hpp>

#include "rdma_asio/error.hpp"

#include <asio/io_context.hpp>

#include <string>

using rdma_asio::subnet_event_client;

TEST_CASE("a client for a CA that does not exist fails naming umad_get_port and the CA",
          "[subnet_event_client]") {
    asio::io_context ioc;
    try {
        subnet_event_client client(ioc, "no_such_ca_here", 1);
        FAIL("constructed a client for a CA that does not exist");
    } catch (const std::system_error& e) {
        CHECK(std::string(e.what()).find("umad_get_port") != std::string::npos);
        CHECK(std::string(e.what()).find("no_such_ca_here") != std::string::npos);
        // libibumad says EIO; the client says what is wrong.
        CHECK(e.code() == rdma_asio::errc::device_not_found);
    }
    CHECK(ioc.poll() == 0); // nothing was started
}

TEST_CASE("subnet_event_client is a move-only I/O object", "[subnet_event_client]") {
    static_assert(!std::is_copy_constructible_v<subnet_event_client>);
    static_assert(std::is_nothrow_move_constructible_v<subnet_event_client>);
    static_assert(std::is_nothrow_move_assignable_v<subnet_event_client>);
    static_assert(std::is_same_v<subnet_event_client::executor_type, asio::any_io_executor>);
}
