// devx_events: subscribes to the port-change events of a ConnectX (mlx5) device
// through a DEVX event channel and prints each one as it arrives, with its EQE
// type and subtype; a second subscription of the same event signals an eventfd,
// whose count is printed too. Flap the port's link to see events. Ctrl-C (SIGINT)
// or SIGTERM ends it. Without an mlx5 device it says so, naming the devices that
// are not mlx5 (e.g. "rxe0 is not an mlx5 device"), and exits with status 1.
//
//   devx_events [-d DEV]
#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include <rdma_asio/device_list.hpp>
#include <rdma_asio/devx_event_channel.hpp>
#include <rdma_asio/error.hpp>

#include <infiniband/mlx5dv.h>

#include "asio_alias.hpp"

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace {

// The mlx5 PRM's PORT_CHANGE event: unaffiliated (no DEVX object), legal on every
// device that has DEVX.
constexpr std::uint16_t port_change_event = 0x09;
constexpr std::uint64_t port_cookie = 1;

struct close_device {
    void operator()(ibv_context* ctx) const { ibv_close_device(ctx); }
};
using devx_context = std::unique_ptr<ibv_context, close_device>;

// The first mlx5 device (or the one named), opened for DEVX. Without one, a null
// context and `why` saying so, naming the devices that are there but not mlx5.
devx_context open_mlx5(const std::string& only, std::string& name, std::string& why) {
    rdma_asio::error_code ec;
    rdma_asio::device_list devices(ec);
    if (ec) {
        why = "no mlx5 device: " + ec.message();
        return nullptr;
    }
    std::string others; // present, but not mlx5
    std::size_t count = 0;
    for (rdma_asio::device d : devices) {
        if (!only.empty() && d.name() != only)
            continue;
        if (!mlx5dv_is_supported(d.native_handle())) {
            others += (count++ ? ", " : "") + std::string(d.name());
            continue;
        }
        mlx5dv_context_attr attr{};
        attr.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
        errno = 0;
        devx_context ctx(mlx5dv_open_device(d.native_handle(), &attr));
        if (!ctx)
            throw rdma_asio::system_error(errno, asio::error::get_system_category(),
                                          "mlx5dv_open_device");
        name = d.name();
        return ctx;
    }
    if (count == 1)
        why = others + " is not an mlx5 device";
    else if (count > 1)
        why = others + " are not mlx5 devices";
    else if (!only.empty())
        why = "no RDMA device called " + only;
    else
        why = "no mlx5 device: no RDMA device found";
    return nullptr;
}

// snippet-begin: read-loop
asio::awaitable<void> print_events(rdma_asio::devx_event_channel& channel) {
    std::array<std::byte, 64> eqe; // the device's event data (struct mlx5_eqe)
    for (;;) {
        auto [ec, info] = co_await channel.async_next(
            asio::buffer(eqe), asio::experimental::as_tuple(asio::use_awaitable));
        if (ec == rdma_asio::errc::events_lost) {
            // The kernel ran out of memory and dropped events: re-read the state of
            // what we subscribed to (here: the ports), then go on reading.
            std::printf("events lost: re-read the port states\n");
            continue;
        }
        if (ec == asio::error::operation_aborted)
            co_return; // Ctrl-C
        if (ec) {
            std::printf("read failed: %s\n", ec.message().c_str());
            co_return;
        }
        std::printf("event cookie %llu, %zu bytes, EQE type 0x%02x subtype 0x%02x\n",
                    static_cast<unsigned long long>(info.cookie), info.size,
                    static_cast<unsigned>(eqe[1]), static_cast<unsigned>(eqe[3]));
        std::fflush(stdout);
    }
}
// snippet-end

asio::awaitable<void> print_counts(rdma_asio::devx_eventfd& efd) {
    for (;;) {
        auto [ec, count] =
            co_await efd.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
        if (ec)
            co_return;
        std::printf("eventfd: %llu port change(s)\n", static_cast<unsigned long long>(count));
        std::fflush(stdout);
    }
}

} // namespace

int main(int argc, char* argv[]) {
    std::string only;
    sample::command_line cli("devx_events",
                             "Print the port-change events of a ConnectX (mlx5) device, read "
                             "through a DEVX event channel; Ctrl-C ends it.");
    cli.option('d', "ib-dev", "DEV", "use device DEV (default: the first mlx5 device)", only);
    cli.parse(argc, argv);
    if (!sample::require_rdma("devx_events"))
        return 1;
    try {
        std::string name, why;
        devx_context ctx = open_mlx5(only, name, why);
        if (!ctx) {
            std::fprintf(stderr, "devx_events: %s\n", why.c_str());
            return 1;
        }
        asio::io_context ioc;
        // snippet-begin: subscribe
        rdma_asio::devx_event_channel channel(ioc, ctx.get(),
                                              rdma_asio::devx_event_data::with_data);
        const std::uint16_t events[] = {port_change_event};
        channel.subscribe(nullptr, events, port_cookie); // nullptr: unaffiliated

        rdma_asio::devx_eventfd efd(ioc);
        channel.subscribe_fd(efd, nullptr, port_change_event);
        // snippet-end
        std::printf("%s: watching port changes (DEVX event 0x%02x)\n", name.c_str(),
                    port_change_event);
        std::fflush(stdout);

        asio::signal_set signals(ioc, SIGINT, SIGTERM);
        signals.async_wait([&](rdma_asio::error_code, int) {
            channel.cancel();
            efd.cancel();
        });
        // Ends when the reader ends (Ctrl-C, or the channel failed).
        asio::co_spawn(ioc, print_events(channel), [&](std::exception_ptr) {
            signals.cancel();
            efd.cancel();
        });
        asio::co_spawn(ioc, print_counts(efd), asio::detached);
        ioc.run();
        // The channel and eventfd close before ctx: declared after it.
    } catch (const rdma_asio::system_error& e) {
        std::fprintf(stderr, "devx_events: %s\n", e.what());
        return 1;
    }
    return 0;
}
