#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"

#include "asio_alias.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

namespace context_rxe_test {

using rdma_asio::errc;
using rdma_asio::test::test_device_name;

TEST_CASE("context opens the rxe device and its port 1 is an active Ethernet port", "[context]") {
    rdma_asio::context ctx(test_device_name());
    REQUIRE(ctx.is_open());
    CHECK(ctx.device_name() == test_device_name());
    REQUIRE(ctx.port_count() == 1);

    ibv_port_attr port = ctx.query_port(1);
    CHECK(port.state == IBV_PORT_ACTIVE);
    CHECK(rdma_asio::port_state_name(port.state) == "ACTIVE");
    CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
    CHECK(port.gid_tbl_len > 1);
}

TEST_CASE("GID index 1 of rxe0 is the IPv4-mapped address of veth0", "[context]") {
    rdma_asio::context ctx(test_device_name());
    ibv_gid gid = ctx.query_gid(1, 1);
    // The test VM gives veth0 the address 10.0.0.1 (test/vm/guest-setup.sh).
    unsigned char expected[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
    CAPTURE(rdma_asio::to_string(gid));
    CHECK(std::memcmp(gid.raw, expected, sizeof expected) == 0);
}

TEST_CASE("port numbers outside the device are refused", "[context]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::error_code ec;
    ctx.query_port(0, ec);
    CHECK(ec == errc::invalid_port);
    ctx.query_port(2, ec);
    CHECK(ec == errc::invalid_port);
    ctx.query_gid(0, 0, ec);
    CHECK(ec == errc::invalid_port);
    try {
        ctx.query_port(7);
        FAIL("query_port(7) did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == errc::invalid_port);
        CHECK(std::string(e.what()).find("ibv_query_port") != std::string::npos);
    }
}

TEST_CASE("a GID index past the table is the verbs call's error", "[context]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::error_code ec;
    ctx.query_gid(1, 100000, ec);
    CHECK(ec);
    CHECK(ec.category() != rdma_asio::get_error_category());
}

TEST_CASE("query_gid_entry: the device's GIDs are RoCE v2 GIDs of veth0, unused entries ENODATA",
          "[context]") {
    rdma_asio::context ctx(test_device_name());
    const ibv_port_attr port = ctx.query_port(1);
    // The test VM gives veth0 the address 10.0.0.1 (test/vm/guest-setup.sh); rxe
    // speaks RoCE v2 only, so every address of its netdev (and the link-local
    // GID) is one RoCE v2 entry.
    const unsigned char veth0[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
    const std::uint32_t ifindex = ::if_nametoindex("veth0");
    REQUIRE(ifindex != 0);
    const rdma_asio::error_code no_data(ENODATA, asio::error::get_system_category());
    int used = 0, unused = 0, address = 0;
    for (int index = 0; index < port.gid_tbl_len; ++index) {
        rdma_asio::error_code ec;
        const rdma_asio::gid_entry entry =
            ctx.query_gid_entry(1, static_cast<std::uint32_t>(index), ec);
        if (ec == no_data) { // an unused entry
            ++unused;
            continue;
        }
        REQUIRE_FALSE(ec);
        ++used;
        CAPTURE(index, rdma_asio::to_string(entry.gid), rdma_asio::gid_type_name(entry.type));
        CHECK(entry.index == static_cast<std::uint32_t>(index));
        // The same GID as ibv_query_gid reports.
        const ibv_gid plain = ctx.query_gid(1, index);
        CHECK(std::memcmp(plain.raw, entry.gid.raw, sizeof plain.raw) == 0);
        CHECK(entry.type == IBV_GID_TYPE_ROCE_V2);
        CHECK(entry.ifindex == ifindex);
        CHECK(entry.netdev == "veth0");
        address += std::memcmp(entry.gid.raw, veth0, sizeof veth0) == 0;
    }
    CHECK(used >= 2); // the link-local GID and 10.0.0.1
    CHECK(address == 1);
    CHECK(unused > 0); // the table is longer than what veth0 fills

    // Bad input: the port and an index past the table.
    rdma_asio::error_code ec;
    ctx.query_gid_entry(2, 0, ec);
    CHECK(ec == errc::invalid_port);
    ctx.query_gid_entry(1, 100000, ec);
    CHECK(ec);
    CHECK(ec.category() != rdma_asio::get_error_category());
    try {
        ctx.query_gid_entry(1, 100000);
        FAIL("query_gid_entry(1, 100000) did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(std::string(e.what()).find("ibv_query_gid_ex") != std::string::npos);
    }
}

TEST_CASE("an unknown device name is device_not_found", "[context]") {
    rdma_asio::context ctx;
    rdma_asio::error_code ec;
    ctx.open("no_such_device0", ec);
    CHECK(ec == errc::device_not_found);
    CHECK_FALSE(ctx.is_open());
    CHECK_THROWS_AS(rdma_asio::context("no_such_device0"), rdma_asio::system_error);
    // docs/errors.md's table: the name asked for, the devices there are, and
    // where to list them.
    try {
        rdma_asio::context named("no_such_device0");
        FAIL("opened a device that does not exist");
    } catch (const rdma_asio::system_error& e) {
        const std::string what = e.what();
        CAPTURE(what);
        const auto listed = what.find("'no_such_device0' (devices present: ");
        CHECK(listed != std::string::npos);
        CHECK(what.find(test_device_name(), listed) != std::string::npos);
        CHECK(what.find("ibv_devices lists the names") != std::string::npos);
    }
}

TEST_CASE("an empty name opens the first device", "[context]") {
    rdma_asio::context ctx("");
    CHECK(ctx.is_open());
    CHECK_FALSE(ctx.device_name().empty());
    CHECK(ctx.port_count() >= 1);
}

TEST_CASE("a context moves, closes and releases", "[context]") {
    rdma_asio::context a(test_device_name());
    ibv_context* raw = a.native_handle();
    rdma_asio::context b(std::move(a));
    CHECK_FALSE(a.is_open());
    CHECK(b.native_handle() == raw);
    CHECK(b.device_name() == test_device_name());

    a = std::move(b);
    CHECK(a.native_handle() == raw);
    CHECK_FALSE(b.is_open());

    ibv_context* released = a.release();
    CHECK(released == raw);
    CHECK_FALSE(a.is_open());
    CHECK(ibv_close_device(released) == 0);

    rdma_asio::error_code ec;
    a.open(test_device_name(), ec);
    CHECK_FALSE(ec);
    CHECK(a.is_open());
    a.close();
    CHECK_FALSE(a.is_open());
}

TEST_CASE("closing the context before its objects: they keep the device open",
          "[context][misuse]") {
    asio::io_context ioc;
    rdma_asio::context ctx(test_device_name());
    ibv_context* raw = ctx.native_handle();
    const int async_fd = raw->async_fd;
    auto stream = std::make_unique<rdma_asio::async_event_stream>(ioc, ctx);
    auto channel = std::make_unique<rdma_asio::completion_channel>(ioc, ctx);

    // Something else holds the device: release() refuses, the context stays open.
    CHECK(ctx.release() == nullptr);
    CHECK(ctx.is_open());

    ctx.close();
    CHECK_FALSE(ctx.is_open());
    // The device is still open: its async_fd is still libibverbs', so a new fd
    // cannot take its number, and the channel still makes CQs on it.
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) == 0);
    CHECK(pipe_fds[0] != async_fd);
    CHECK(pipe_fds[1] != async_fd);
    rdma_asio::completion_queue cq(*channel, 4);
    CHECK(cq.native_handle() != nullptr);
    rdma_asio::error_code ec;
    cq.request_notify(ec);
    CHECK_FALSE(ec);
    CHECK(stream->port(1).has_value());

    // Closing the stream restores the async_fd's flags: never those of another fd.
    stream.reset();
    CHECK((::fcntl(pipe_fds[0], F_GETFL) & O_NONBLOCK) != 0);
    CHECK((::fcntl(pipe_fds[1], F_GETFL) & O_NONBLOCK) != 0);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    cq.close(ec);
    CHECK_FALSE(ec);
    channel.reset(); // the last owner: the device closes here
}

} // namespace context_rxe_test
