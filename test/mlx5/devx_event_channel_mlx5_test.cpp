// DEVX event channels on a real ConnectX device. The event is PORT_CHANGE (0x09),
// an unaffiliated event every DEVX device may subscribe to; it needs no DEVX object
// built from PRM layouts that this project cannot test. The link flap that raises
// it is done only with consent: RDMA_ASIO_MLX5_FLAP_NETDEV names the netdev of the
// device's port (the test sets the link of NAME down, then up; root).
#include "rdma_asio/devx_event_channel.hpp"

#include <catch2/catch.hpp>

#include "mlx5_device.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/testing/netdev.hpp"
#include "rdma_asio/testing/run.hpp"
#include "test_device.hpp"

#include "asio_alias.hpp"

#include <array>
#include <chrono>
#include <cstdlib>
#include <string>

using namespace std::chrono_literals;
using rdma_asio::devx_event_channel;
using rdma_asio::devx_event_data;
using rdma_asio::devx_event_info;

namespace {

constexpr std::uint16_t port_change = 0x09;
constexpr std::uint8_t eqe_type_port_change = 0x09;

struct hardware {
    asio::io_context ioc;
    rdma_asio::test::devx_context ctx =
        rdma_asio::test::open_devx(rdma_asio::test::first_mlx5_device());
};

} // namespace

TEST_CASE_METHOD(hardware, "a real DEVX channel opens, subscribes, reads and closes in both modes",
                 "[mlx5]") {
    const auto mode = GENERATE(devx_event_data::with_data, devx_event_data::omit_data);
    // Typed on io_context's executor and opened by the error-code form, as a
    // program that names its executor and avoids exceptions would.
    rdma_asio::basic_devx_event_channel<asio::io_context::executor_type> channel(
        ioc.get_executor());
    rdma_asio::error_code open_ec;
    channel.open(ctx.get(), mode, open_ec);
    REQUIRE_FALSE(open_ec);
    CHECK(channel.mode() == mode);
    REQUIRE(channel.native_handle() != nullptr);
    REQUIRE(channel.native_handle()->fd >= 0);
    const std::uint16_t events[] = {port_change};
    channel.subscribe(nullptr, events, 5);
    rdma_asio::devx_eventfd efd(ioc);
    channel.subscribe_fd(efd, nullptr, port_change);

    std::array<std::byte, 64> eqe{};
    rdma_asio::error_code ec;
    int calls = 0;
    channel.async_next(asio::buffer(eqe), [&](rdma_asio::error_code e, devx_event_info) {
        ec = e;
        ++calls;
    });
    ioc.run_for(200ms); // no port change expected meanwhile
    channel.cancel();
    ioc.run_for(5s);
    REQUIRE(calls == 1);
    // A real port change in those 200 ms would also be a pass.
    CHECK((ec == asio::error::operation_aborted || !ec));
    channel.close();
    CHECK_FALSE(channel.is_open());
}

TEST_CASE_METHOD(hardware, "a port change arrives on both channels and the eventfd", "[mlx5]") {
    const char* netdev = std::getenv("RDMA_ASIO_MLX5_FLAP_NETDEV");
    if (netdev == nullptr || *netdev == '\0')
        rdma_asio::test::skip_process(
            "set RDMA_ASIO_MLX5_FLAP_NETDEV to the netdev of the mlx5 port to let this test "
            "flap its link (root; it interrupts traffic on that port)");
    devx_event_channel with_data(ioc, ctx.get(), devx_event_data::with_data);
    devx_event_channel omit(ioc, ctx.get(), devx_event_data::omit_data);
    rdma_asio::devx_eventfd efd(ioc);
    const std::uint16_t events[] = {port_change};
    with_data.subscribe(nullptr, events, 1);
    omit.subscribe(nullptr, events, 2);
    with_data.subscribe_fd(efd, nullptr, port_change);

    std::array<std::byte, 64> eqe{};
    rdma_asio::error_code data_ec, omit_ec, efd_ec;
    devx_event_info data_info, omit_info;
    std::uint64_t count = 0;
    int done = 0;
    with_data.async_next(asio::buffer(eqe), [&](rdma_asio::error_code e, devx_event_info i) {
        data_ec = e;
        data_info = i;
        ++done;
    });
    omit.async_next(asio::mutable_buffer(), [&](rdma_asio::error_code e, devx_event_info i) {
        omit_ec = e;
        omit_info = i;
        ++done;
    });
    efd.async_wait([&](rdma_asio::error_code e, std::uint64_t c) {
        efd_ec = e;
        count = c;
        ++done;
    });
    ioc.poll();
    const std::string dev(netdev);
    rdma_asio::testing::set_link(dev, false);
    rdma_asio::testing::run_until(
        ioc, [&] { return done == 3; }, 30s);
    rdma_asio::testing::set_link(dev, true);
    with_data.cancel();
    omit.cancel();
    efd.cancel();
    ioc.run_for(5s);

    CHECK_FALSE(data_ec);
    CHECK(data_info.cookie == 1);
    CHECK(data_info.size == eqe.size());
    CHECK(static_cast<std::uint8_t>(eqe[1]) == eqe_type_port_change);
    CHECK_FALSE(omit_ec);
    CHECK(omit_info.cookie == 2);
    CHECK(omit_info.size == 0);
    CHECK_FALSE(efd_ec);
    CHECK(count >= 1);
}
