#include "rdma_asio/error.hpp"
#include "rdma_asio/subnet_event_client.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"

#include "asio_alias.hpp"

#include <string>

namespace subnet_event_client_rxe_test {

using rdma_asio::errc;
using rdma_asio::test::test_device_name;

TEST_CASE("a subnet event client on a RoCE port fails with no_subnet_manager",
          "[subnet_event_client]") {
    asio::io_context ioc;
    rdma_asio::context ctx(test_device_name());
    rdma_asio::async_event_stream stream(ioc, ctx);
    try {
        rdma_asio::subnet_event_client::options port1;
        port1.ca_name = ctx.device_name();
        rdma_asio::subnet_event_client client(stream, port1);
        FAIL("a client opened on soft-RoCE, which has no subnet manager");
    } catch (const rdma_asio::system_error& e) {
        CAPTURE(e.what());
        CHECK(e.code() == errc::no_subnet_manager);
        CHECK(std::string(e.what()).find("RoCE") != std::string::npos);
    }
    // The stream is untouched and still works.
    CHECK(stream.is_open());
    CHECK(stream.queued() == 0);
}

} // namespace subnet_event_client_rxe_test
