// Two integration tests of the kind an RDMA service needs, on the soft-RoCE device
// rxe0 (or the device $SERVICE_TEST_DEVICE names): a message between two queue
// pairs, and the port events the service must react to when its link goes down
// and comes back.
// snippet-begin: rxe-ci-head
#include <rdma_asio/asio.hpp> // the Asio rdma_asio was built for, standalone or Boost
#include <rdma_asio/async_event_stream.hpp>
#include <rdma_asio/memory_region.hpp>
#include <rdma_asio/testing.hpp>

#if RDMA_ASIO_USE_BOOST_ASIO
namespace asio = boost::asio;
#endif

#include <catch2/catch.hpp>

#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace std::chrono_literals;
namespace testing = rdma_asio::testing;

namespace {

std::string device_name() {
    const char* name = std::getenv("SERVICE_TEST_DEVICE");
    return name != nullptr ? name : "rxe0";
}

} // namespace
// snippet-end

// snippet-begin: rxe-ci-send
TEST_CASE("a message goes from one queue pair to the other") {
    asio::io_context ioc;
    rdma_asio::context ctx(device_name());
    rdma_asio::completion_channel channel(ioc, ctx);
    testing::loopback_pair pair(ctx, channel);
    std::array<char, 64> memory{};
    rdma_asio::memory_region mr(pair.pd(), asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
    std::strcpy(memory.data(), "ping");

    auto [order, received_ec, received, sent_ec, sent] = testing::run_coroutine(
        ioc,
        asio::experimental::make_parallel_group(
            pair.b().async_receive(mr.at(32, 32), asio::experimental::deferred),
            pair.a().async_send(mr.at(0, 5), asio::experimental::deferred))
            .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable),
        30s);
    REQUIRE_FALSE(received_ec);
    REQUIRE_FALSE(sent_ec);
    CHECK(received == 5);
    CHECK(std::strcmp(memory.data() + 32, "ping") == 0);
}
// snippet-end

// snippet-begin: rxe-ci-port
TEST_CASE("the port goes down with its link and comes back") {
    asio::io_context ioc;
    rdma_asio::context ctx(device_name());
    rdma_asio::async_event_stream events(ioc, ctx);
    const std::string netdev = testing::netdev_of(ctx.native_handle());
    // Taking a link down is for the test VM, or a device named on purpose.
    REQUIRE((std::getenv("RDMA_ASIO_IN_GUEST") || std::getenv("SERVICE_TEST_DEVICE")));

    testing::set_link(netdev, false);
    auto down = testing::collect_events(ioc, events, 2s, [](const testing::event_list& v) {
        return testing::count_of(v, rdma_asio::event_type::port_err) > 0;
    });
    testing::set_link(netdev, true);
    auto up = testing::collect_events(ioc, events, 5s, [](const testing::event_list& v) {
        return testing::count_of(v, rdma_asio::event_type::port_active) > 0;
    });
    CHECK(testing::count_of(down, rdma_asio::event_type::port_err) == 1);
    CHECK(testing::count_of(up, rdma_asio::event_type::port_active) >= 1);
}
// snippet-end
