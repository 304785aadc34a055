// echo_client: opens N rdma_cm connections to echo_server, sends M messages on
// each (one in flight per connection), checks every echo, and prints latency
// percentiles and messages per second. Exit status 1 when a connection failed
// or an echo was wrong (then without the latency line: its figures would not
// describe the run asked for).
//
//   echo_client -a|--server ADDR [-p|--port PORT] [-c|--connections N]
//               [-n|--messages M] [-s|--size BYTES] [--abort-after K]
//
// The message size goes to the server in the connection request's private data;
// a server that uses another size rejects the connection and says which in its
// log.
// --abort-after K: the process ends abruptly (no disconnect) after K messages on
// connection 0, as a client that crashes mid-stream.
#include "echo.hpp"

#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include <rdma_asio/connect.hpp>
#include <rdma_asio/error.hpp>

#include "asio_alias.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
    std::string server;
    unsigned short port = 18700;
    int connections = 1;
    int messages = 1000;
    std::uint32_t size = 64;
    int abort_after = -1;
};

struct results {
    std::vector<double> latencies_us;
    int failed = 0;
    int wrong = 0;
};

void fill(void* data, std::size_t n, int conn, int seq) {
    auto* p = static_cast<std::uint8_t*>(data);
    for (std::size_t i = 0; i < n; ++i)
        p[i] = static_cast<std::uint8_t>(conn * 31 + seq * 7 + static_cast<int>(i));
}

// snippet-begin: echo-client
asio::awaitable<void> run_connection(const options& opt, int index, results& out) {
    try {
        // The message size goes in the connection request's private data.
        rdma_asio::connect_options how;
        how.connection = echo::queues();
        const echo::size_data size = echo::encode_size(opt.size);
        how.private_data.assign(size.begin(), size.end());
        rdma_asio::connect_diagnostics diagnostics; // the address and step of a failure
        how.diagnostics = &diagnostics;
        const asio::ip::tcp::endpoint server(asio::ip::make_address_v4(opt.server), opt.port);
        auto [ec, conn] =
            co_await rdma_asio::async_connect(co_await asio::this_coro::executor, server, how,
                                              asio::experimental::as_tuple(asio::use_awaitable));
        if (ec == rdma_asio::errc::connection_rejected)
            throw std::runtime_error(
                "the server rejected the connection: it uses another message size than " +
                std::to_string(opt.size) + " bytes (its log says which), or nobody listens");
        if (ec) // "10.0.0.99 port 18700: resolving the address timed out ..."
            throw std::runtime_error("rdma_asio::async_connect: " + diagnostics.message());
        echo::endpoint ep(std::move(conn), opt.size);

        for (int m = 0; m < opt.messages; ++m) {
            if (index == 0 && m == opt.abort_after)
                ::_exit(3); // vanish without a disconnect
            fill(ep.send_buffer().data, ep.size(), index, m);
            const auto start = clock_type::now();
            // The receive for the echo is posted before the message goes out.
            const std::size_t echoed = co_await ep.receive_and_send(ep.size());
            out.latencies_us.push_back(
                std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
            if (echoed != ep.size() ||
                std::memcmp(ep.recv_buffer().data, ep.send_buffer().data, ep.size()) != 0)
                ++out.wrong;
        }
        co_await ep.conn().async_disconnect(asio::use_awaitable);
    } catch (const std::exception& e) {
        std::printf("connection %d: %s\n", index, e.what());
        ++out.failed;
    }
}
// snippet-end: echo-client

double percentile(std::vector<double>& v, double p) {
    if (v.empty())
        return 0;
    const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
}

} // namespace

int main(int argc, char** argv) {
    options opt;
    sample::command_line cli("echo_client",
                             "Send messages to echo_server over N rdma_cm connections, check "
                             "every echo and print the latencies.");
    cli.option('a', "server", "ADDR", "the server's IPv4 address (required)", [&](const char* v) {
        echo::check_ipv4(v);
        opt.server = v;
    });
    cli.number('p', "port", "PORT", "the server's port (default 18700)", opt.port,
               static_cast<unsigned short>(1));
    cli.number('c', "connections", "N", "open N connections (default 1)", opt.connections, 1,
               100000);
    cli.number('n', "messages", "M", "send M messages on each (default 1000)", opt.messages, 0,
               std::numeric_limits<int>::max());
    cli.number('s', "size", "BYTES", "message size, as the server's (default 64)", opt.size,
               std::uint32_t{1}, std::uint32_t{1} << 30);
    cli.number(0, "abort-after", "K",
               "exit abruptly (no disconnect) after K messages on connection 0", opt.abort_after, 0,
               std::numeric_limits<int>::max());
    cli.parse(argc, argv);
    if (opt.server.empty())
        cli.usage_error("--server ADDR is required");
    if (!sample::require_rdma("echo_client"))
        return 1;
    try {
        asio::io_context ioc;
        results out;
        // Room for the usual runs up front; a long run grows the vector as it goes
        // (reserving connections x messages of a huge run would fail at once).
        out.latencies_us.reserve(std::min<std::size_t>(static_cast<std::size_t>(opt.connections) *
                                                           static_cast<std::size_t>(opt.messages),
                                                       std::size_t{1} << 20));
        const auto start = clock_type::now();
        for (int i = 0; i < opt.connections; ++i)
            asio::co_spawn(ioc, run_connection(opt, i, out), asio::detached);
        ioc.run();
        const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
        const auto echoed = out.latencies_us.size();
        std::printf("%d connections x %d messages of %u bytes: %zu echoed, %d wrong, %d "
                    "connections failed\n",
                    opt.connections, opt.messages, opt.size, echoed, out.wrong, out.failed);
        if (out.failed != 0 || out.wrong != 0)
            return 1;
        std::printf("%.0f messages/s; latency us: p50 %.1f p90 %.1f p99 %.1f max %.1f\n",
                    static_cast<double>(echoed) / seconds, percentile(out.latencies_us, 0.5),
                    percentile(out.latencies_us, 0.9), percentile(out.latencies_us, 0.99),
                    percentile(out.latencies_us, 1.0));
        return 0;
    } catch (const std::exception& e) { // rdma_asio::system_error names the call
        std::fprintf(stderr, "echo_client: %s\n", e.what());
        return 1;
    }
}
