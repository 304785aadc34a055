// The installed test helpers on rxe0: a loopback pair that carries a send and an
// RDMA write, and the network device under the port (the port events that
// set_link and scoped_address cause are checked in async_event_stream_rxe_test.cpp,
// which uses them).
#include "rdma_asio/testing.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"
#include "verbs_resources.hpp"

#include <rdma_asio/async_event_stream.hpp>
#include <rdma_asio/memory_region.hpp>

#include "asio_alias.hpp"

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <string>

namespace testing_rxe_test {

using namespace std::chrono_literals;
namespace testing = rdma_asio::testing;

namespace {

// The device under test: "rxe0", or the one $RDMA_ASIO_TEST_DEVICE names.
std::string device_name() {
    return rdma_asio::test::test_device_name();
}

// snippet-begin: loopback-fixture
struct loopback_fixture {
    asio::io_context ioc;
    rdma_asio::context ctx{device_name()};
    rdma_asio::completion_channel channel{ioc, ctx};
    testing::loopback_pair pair{ctx, channel};
    std::array<std::byte, 128> memory{};
    rdma_asio::memory_region mr{pair.pd(), asio::buffer(memory),
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
};
// snippet-end

} // namespace

// snippet-begin: loopback-send
TEST_CASE_METHOD(loopback_fixture, "a loopback pair carries a send from a to b", "[testing]") {
    const auto outgoing = mr.at(0, 64);
    const auto incoming = mr.at(64, 64);
    std::memcpy(memory.data(), "hello over the loopback", 24);
    auto [order, received_ec, received, sent_ec, sent] = testing::run_coroutine(
        ioc,
        asio::experimental::make_parallel_group(
            pair.b().async_receive(incoming, asio::experimental::deferred),
            pair.a().async_send(outgoing, asio::experimental::deferred))
            .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable),
        30s);
    CHECK_FALSE(received_ec);
    CHECK_FALSE(sent_ec);
    CHECK(received == 64);
    CHECK(std::memcmp(memory.data() + 64, "hello over the loopback", 24) == 0);
}
// snippet-end

TEST_CASE_METHOD(loopback_fixture, "a loopback pair carries an RDMA write from b to a",
                 "[testing]") {
    std::memcpy(memory.data() + 64, "written", 8);
    const auto remote = mr.remote_at(0, 8);
    const std::size_t written = testing::run_coroutine(
        ioc, pair.b().async_write(mr.at(64, 8), remote, asio::use_awaitable), 30s);
    CHECK(written == 8);
    CHECK(std::memcmp(memory.data(), "written", 8) == 0);
}

TEST_CASE("netdev_of names the network device under the port's GID, as sysfs does", "[testing]") {
    rdma_asio::context ctx{rdma_asio::test::test_device_name()};
    const int index = testing::loopback_gid_index(ctx.native_handle(), 1);
    std::ifstream sysfs("/sys/class/infiniband/" + rdma_asio::test::test_device_name() +
                        "/ports/1/gid_attrs/ndevs/" + std::to_string(index));
    std::string expected;
    REQUIRE(std::getline(sysfs, expected));
    CHECK(testing::netdev_of(ctx.native_handle()) == expected);
    CHECK(testing::link_is_up(expected));
}

namespace {

// Brings the link back up however the test ends, and waits for the port.
struct link_up_again {
    std::string netdev;
    ibv_context* ctx;
    ~link_up_again() {
        try {
            testing::set_link(netdev, true);
        } catch (const rdma_asio::system_error&) {
            // The wait below tells.
        }
        rdma_asio::test::wait_port_state(ctx, IBV_PORT_ACTIVE, 10s);
    }
};

} // namespace

TEST_CASE("set_link takes the port's network device down and up, and the port follows",
          "[testing]") {
    asio::io_context ioc;
    rdma_asio::context ctx{rdma_asio::test::test_device_name()};
    rdma_asio::async_event_stream stream{ioc, ctx};
    // snippet-begin: port-down-up
    const std::string netdev = testing::netdev_of(ctx.native_handle());
    link_up_again restore{netdev, ctx.native_handle()};
    testing::set_link(netdev, false);
    auto down = testing::collect_events(ioc, stream, 1500ms);
    CHECK(testing::count_of(down, rdma_asio::event_type::port_err) == 1);
    CHECK_FALSE(testing::link_is_up(netdev));
    testing::set_link(netdev, true);
    auto up = testing::collect_events(ioc, stream, 3000ms, [](const testing::event_list& v) {
        return testing::count_of(v, rdma_asio::event_type::port_active) >= 1;
    });
    CHECK(testing::count_of(up, rdma_asio::event_type::port_active) >= 1);
    // snippet-end
}

TEST_CASE("scoped_address adds a GID to the port for its lifetime", "[testing]") {
    asio::io_context ioc;
    rdma_asio::context ctx{rdma_asio::test::test_device_name()};
    rdma_asio::async_event_stream stream{ioc, ctx};
    const std::string netdev = testing::netdev_of(ctx.native_handle());
    {
        testing::scoped_address address(netdev, "10.0.0.11/24");
        auto added = testing::collect_events(ioc, stream, 3000ms, [](const testing::event_list& v) {
            return testing::count_of(v, rdma_asio::event_type::gid_change) >= 1;
        });
        CHECK(testing::count_of(added, rdma_asio::event_type::gid_change) == 1);
        // The same address twice is the kernel's EEXIST, named.
        rdma_asio::error_code twice;
        try {
            testing::scoped_address again(netdev, "10.0.0.11/24");
        } catch (const rdma_asio::system_error& e) {
            twice = e.code();
        }
        CHECK(twice == rdma_asio::error_code(EEXIST, asio::error::get_system_category()));
    }
    auto removed = testing::collect_events(ioc, stream, 3000ms, [](const testing::event_list& v) {
        return testing::count_of(v, rdma_asio::event_type::gid_change) >= 1;
    });
    CHECK(testing::count_of(removed, rdma_asio::event_type::gid_change) == 1);
}

} // namespace testing_rxe_test
