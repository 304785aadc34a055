// quick_start: the smallest complete rdma_asio program, the one README.md and
// docs/index.md show. Opens an RDMA device (the first, or -d DEV), prints the state
// of its port 1, then prints its asynchronous events as they arrive, co_awaited in
// a coroutine, until the device goes away or Ctrl-C.
//
//   quick_start [-d DEVICE]

// snippet-begin: quick-start
#include <rdma_asio/asio.hpp> // the Asio rdma_asio was built for, standalone or Boost
#include <rdma_asio/async_event_stream.hpp>
#include <rdma_asio/context.hpp>

#if RDMA_ASIO_USE_BOOST_ASIO
namespace asio = boost::asio;
#endif

#include <cstdio>
#include <string>
#include <system_error>

// Prints each event of the device until it goes away.
asio::awaitable<void> print_events(rdma_asio::async_event_stream& events) {
    for (;;) {
        // Suspends the coroutine, not the thread; throws rdma_asio::system_error on failure.
        rdma_asio::async_event ev = co_await events.async_next(asio::use_awaitable);
        std::printf("%s\n", ev.name().data());
        std::fflush(stdout);
        if (rdma_asio::is_removal(ev.type()))
            co_return;
    } // `ev` acks the event (ibv_ack_async_event) when it goes out of scope
}

// Opens `device` ("" for the first one) and watches it.
void watch(const std::string& device) {
    asio::io_context ioc;
    rdma_asio::context ctx(device); // throws rdma_asio::system_error: no such device, ...
    rdma_asio::async_event_stream events(ioc, ctx);
    const ibv_port_attr port = ctx.query_port(1);
    std::printf("%s port 1: %s; waiting for events\n", ctx.device_name().c_str(),
                rdma_asio::port_state_name(port.state).data());
    std::fflush(stdout);
    asio::co_spawn(ioc, print_events(events), asio::detached);
    ioc.run(); // returns when print_events does
}
// snippet-end

// snippet-begin: quick-start-main
#include "common/command_line.hpp" // the samples' getopt_long parser: -h, -d
#include "common/rdma_support.hpp" // the samples' message for a kernel without RDMA

int main(int argc, char* argv[]) {
    std::string device;
    sample::command_line cli("quick_start",
                             "Print the port state and the asynchronous events of an RDMA device.");
    cli.option('d', "ib-dev", "DEV", "use device DEV (default: the first one)", device);
    cli.parse(argc, argv);
    if (!sample::require_rdma("quick_start"))
        return 1;
    try {
        watch(device);
    } catch (const rdma_asio::system_error& e) {
        std::fprintf(stderr, "quick_start: %s\n", e.what());
        return 1;
    }
}
// snippet-end
