// A first work-request program (docs/work-requests.md): two RC queue pairs of one
// device, connected to each other by rdma_asio's test helpers, carry one message.
// Queue pair b posts a receive, queue pair a sends into it, a coroutine awaits
// both, and the program prints what arrived.
//
//   first_work_request [DEVICE]     (default: the first RDMA device)
//
// Exit status 0 when the message arrived whole, 1 otherwise, 2 for a usage error.

// snippet-begin: first-work-request
#include <rdma_asio/asio.hpp> // the Asio rdma_asio was built for, standalone or Boost
#include <rdma_asio/completion_channel.hpp>
#include <rdma_asio/context.hpp>
#include <rdma_asio/memory_region.hpp>
#include <rdma_asio/queue_pair.hpp>
#include <rdma_asio/testing.hpp> // loopback_pair, run_coroutine

#if RDMA_ASIO_USE_BOOST_ASIO
namespace asio = boost::asio;
#endif

#include <infiniband/verbs.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

// Posts a receive on b, then sends `outgoing` from a, and awaits both work
// completions. Returns how many bytes b received into `incoming`.
asio::awaitable<std::size_t> send_one(rdma_asio::testing::loopback_pair& pair,
                                      rdma_asio::registered_buffer outgoing,
                                      rdma_asio::registered_buffer incoming) {
    auto [order, receive_ec, received, send_ec, sent] =
        co_await asio::experimental::make_parallel_group(
            pair.b().async_receive(incoming, asio::experimental::deferred), // posted first
            pair.a().async_send(outgoing, asio::experimental::deferred))
            .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    if (receive_ec)
        throw rdma_asio::system_error(receive_ec, "async_receive");
    if (send_ec)
        throw rdma_asio::system_error(send_ec, "async_send");
    co_return received;
}

const char* const usage = "Usage: first_work_request [DEVICE]\n"
                          "Send one message between two queue pairs of one RDMA device.\n"
                          "  DEVICE      the device to use (default: the first one)\n"
                          "  -h, --help  print this and exit\n";

int main(int argc, char* argv[]) {
    const std::string device = argc > 1 ? argv[1] : ""; // "": the first device
    if (device == "-h" || device == "--help") {
        std::fputs(usage, stdout);
        return 0;
    }
    if (argc > 2 || device.starts_with('-')) {
        std::fprintf(stderr, "first_work_request: %s\n%s",
                     argc > 2 ? "one DEVICE at most" : ("unknown option " + device).c_str(), usage);
        return 2;
    }
    try {
        asio::io_context ioc;
        rdma_asio::context ctx(device);                  // ibv_open_device
        rdma_asio::completion_channel channel(ioc, ctx); // ibv_create_comp_channel
        // A protection domain, a CQ per queue pair, and two RC queue pairs, a and b,
        // connected to each other (ibv_modify_qp to INIT, RTR, RTS).
        rdma_asio::testing::loopback_pair pair(ctx, channel);

        // One registered region (ibv_reg_mr): a's message at 0, b's receive at 64.
        std::array<char, 128> memory{};
        rdma_asio::memory_region mr(pair.pd(), asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
        const std::string message =
            "hello from QP " + std::to_string(pair.a().native_handle()->qp_num);
        std::memcpy(memory.data(), message.data(), message.size());

        // Runs the coroutine on ioc until it returns; gives up after 10 s.
        const std::size_t received = rdma_asio::testing::run_coroutine(
            ioc, send_one(pair, mr.at(0, message.size()), mr.at(64, 64)), std::chrono::seconds(10));
        std::printf("%s: QP %u received %zu bytes: %.*s\n", ctx.device_name().c_str(),
                    pair.b().native_handle()->qp_num, received, static_cast<int>(received),
                    memory.data() + 64);
        const bool whole = received == message.size() &&
                           std::memcmp(memory.data() + 64, message.data(), received) == 0;
        return whole ? 0 : 1;
    } catch (const std::exception& e) { // rdma_asio::system_error names the failed call
        std::fprintf(stderr, "first_work_request: %s\n", e.what());
        return 1;
    }
}
// snippet-end
