// Clients of a stream service, in a process of their own, for the test that kills
// them with SIGKILL in the middle of their requests (stream_fault_rxe_test.cpp).
//
//   stream_client_child PORT COUNT READY_FILE
//
// Connects COUNT streams to 10.0.0.1:PORT (rxe0 in the test VM), one after another,
// with rings of 16 KiB from the start; writes "connected=COUNT" to READY_FILE; then
// on every stream at once, for ever: writes a request of 1 KiB and reads its echo
// back, checking each byte. A client is not expected to end by itself: the test
// kills it. So that no wait is unbounded should the test not, it exits after 120 s
// with status 3. Status 2: bad usage or the file cannot be written; 4: a connect
// failed or an echo differed from its request (the file says which).
#include "asio_alias.hpp"
#include "rxe_loopback.hpp"

#include <rdma_asio/stream.hpp>
#include <rdma_asio/testing/run.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using rdma_asio::test::with_error;

constexpr std::size_t request_bytes = 1024;

// Requests and checks echoes on `s` until an error ends it; `wrong` set when an
// echo differed from its request.
asio::awaitable<void> ask_for_ever(rdma_asio::stream& s, std::size_t index, bool& wrong) {
    std::vector<std::uint8_t> request(request_bytes), echo(request_bytes);
    for (std::uint32_t n = 0;; ++n) {
        for (std::size_t i = 0; i < request.size(); ++i)
            request[i] = static_cast<std::uint8_t>(index * 31 + n * 7 + i);
        if (auto [ec, ignored] = co_await asio::async_write(s, asio::buffer(request), with_error);
            ec)
            co_return;
        if (auto [ec, ignored] = co_await asio::async_read(s, asio::buffer(echo), with_error); ec)
            co_return;
        if (echo != request) {
            wrong = true;
            co_return;
        }
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: stream_client_child PORT COUNT READY_FILE\n");
        return 2;
    }
    const auto port = static_cast<std::uint16_t>(std::strtoul(argv[1], nullptr, 10));
    const std::size_t count = std::strtoul(argv[2], nullptr, 10);
    std::ofstream out(argv[3]);
    if (!out)
        return 2;
    rdma_asio::stream_options options;
    options.receive_ring = options.initial_receive_ring = 16 * 1024;
    asio::io_context ioc(1);
    const auto at = rdma_asio::test::rxe0_endpoint(port);
    std::vector<rdma_asio::stream> streams;
    streams.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        rdma_asio::stream& s = streams.emplace_back(ioc, options);
        rdma_asio::error_code failure;
        bool done = false;
        rdma_asio::async_connect(s, at, [&](rdma_asio::error_code ec) {
            failure = ec;
            done = true;
        });
        if (!rdma_asio::testing::run_until(
                ioc, [&] { return done; }, 30s) ||
            failure) {
            out << "failed=connect " << i << ": " << (done ? failure.message() : "timed out")
                << std::endl;
            return 4;
        }
    }
    out << "connected=" << count << std::endl;
    bool wrong = false;
    for (std::size_t i = 0; i < count; ++i)
        asio::co_spawn(ioc, ask_for_ever(streams[i], i, wrong), asio::detached);
    rdma_asio::testing::run_until(
        ioc, [&] { return wrong; }, 120s);
    out << (wrong ? "failed=an echo differed from its request" : "failed=not killed in 120 s")
        << std::endl;
    return wrong ? 4 : 3;
}
