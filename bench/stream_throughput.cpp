// A byte stream's throughput and round trip: rdma_asio::stream over an RDMA device
// (rxe0 loopback at 10.0.0.1 in the test VM), or with --tcp the same program over
// asio::ip::tcp::socket on the same address (rxe0's veth, TCP_NODELAY on both ends).
// The yardstick beside it is rsocket's rstream (bench/measure-stream.sh).
//
//   stream_throughput [--tcp] [--round-trip] [-s SIZE] [-n MESSAGES] [-r ROUNDS]
//                     [-a ADDRESS] [-p PORT] [--role both|server|client] [--verify]
//                     [--zero-copy] [--notices N] [--ring BYTES] [--initial-ring BYTES]
//                     [--spin US [--adaptive] | --busy]
//                     [--one-thread] [--idle PAIRS]
//
// Throughput (the default): the client writes MESSAGES messages of SIZE bytes with
// asio::async_write, the server reads each with asio::async_read into a buffer of
// SIZE bytes, one direction; at the end of a round the server writes one byte back
// and the round's time is the client's, from its first write to that byte.
// Round trip (--round-trip): the client writes SIZE bytes and reads SIZE bytes back,
// MESSAGES times; the server reads SIZE bytes and writes them back.
//
// One connection per run; a warm-up round of a tenth of the messages (not printed),
// then ROUNDS rounds, each printing one line of key=value figures. With --role both
// (the default) the server and the client are coroutines on one io_context thread
// of one process; --role server and --role client split them into two processes.
// rdma_asio's stream uses the default stream_options (a ring each way that starts
// at 4 KiB and grows with the traffic up to 256 KiB; the warm-up grows it) unless
// --notices, --ring or --initial-ring say otherwise (--initial-ring BYTES equal to
// --ring: a ring of one size from the start).
// Every message starts with its number; --verify checks every byte the server reads.
// --idle PAIRS (with --role both) opens that many pairs first, on the same
// acceptor and io_context, and leaves them open and idle beside the measured pair
// (one busy stream among many idle ones); it prints how long they took to open.
#include "asio_alias.hpp"
#include "command_line.hpp"
#include "descriptor_limit.hpp"

#include <rdma_asio/stream.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

struct options {
    bool tcp = false;
    bool round_trip = false;
    bool verify = false;
    bool zero_copy = false; // stream_options::zero_copy_from = 64 KiB on both ends
    std::uint32_t notices = rdma_asio::stream_options{}.notices;
    std::size_t ring = rdma_asio::stream_options{}.receive_ring;
    std::size_t initial_ring = rdma_asio::stream_options{}.initial_receive_ring;
    long spin_us = 0;        // the connections' CQs poll this long before they sleep
    bool adaptive = false;   // spin_us is the limit of an adaptive budget, not a fixed one
    bool busy = false;       // the connections' CQs never sleep
    bool one_thread = false; // io_context(1), as Asio's and Beast's examples make theirs
    std::size_t size = 65536;
    long messages = 1000;
    int rounds = 5;
    std::string address = "10.0.0.1";
    std::uint16_t port = 18990;
    std::string role = "both";
    int idle = 0; // pairs opened first and left idle beside the measured one
};

const char* transport(const options& o) {
    return o.tcp ? "tcp" : "rdma_asio";
}

// Message `index`'s bytes: its number first, then bytes that depend on it.
void fill(std::vector<std::uint8_t>& m, std::uint64_t index) {
    std::memcpy(m.data(), &index, std::min(sizeof index, m.size()));
}
std::vector<std::uint8_t> pattern(std::size_t size) {
    std::vector<std::uint8_t> m(size);
    for (std::size_t i = 0; i < size; ++i)
        m[i] = static_cast<std::uint8_t>(i * 31 + i / 977);
    return m;
}
void check(const std::vector<std::uint8_t>& got, std::vector<std::uint8_t>& expected,
           std::uint64_t index) {
    fill(expected, index);
    if (got != expected)
        throw std::runtime_error("message " + std::to_string(index) + " arrived with wrong bytes");
}

// The number of messages of round `round` (0: the warm-up).
long messages_of(const options& o, int round) {
    return round == 0 ? std::max(1L, o.messages / 10) : o.messages;
}

template <class Stream>
asio::awaitable<void> serve(Stream& s, const options& o) {
    std::vector<std::uint8_t> buffer(o.size);
    auto expected = pattern(o.size);
    std::uint64_t index = 0;
    std::uint8_t done = 1;
    for (int round = 0; round <= o.rounds; ++round) {
        for (long i = 0; i < messages_of(o, round); ++i, ++index) {
            co_await asio::async_read(s, asio::buffer(buffer), use_awaitable);
            if (o.verify)
                check(buffer, expected, index);
            if (o.round_trip)
                co_await asio::async_write(s, asio::buffer(buffer), use_awaitable);
        }
        if (!o.round_trip)
            co_await asio::async_write(s, asio::buffer(&done, 1), use_awaitable);
    }
}

template <class Stream>
asio::awaitable<void> drive(Stream& s, const options& o) {
    auto message = pattern(o.size);
    std::vector<std::uint8_t> back(o.size);
    std::uint64_t index = 0;
    std::uint8_t done = 0;
    for (int round = 0; round <= o.rounds; ++round) {
        const long n = messages_of(o, round);
        // The round is timed as a whole, as rstream times its runs: a clock read
        // per round trip is a system call in the test VM (its clocksource is
        // the HPET, which the vDSO cannot read).
        const auto start = clock_type::now();
        for (long i = 0; i < n; ++i, ++index) {
            fill(message, index);
            co_await asio::async_write(s, asio::buffer(message), use_awaitable);
            if (o.round_trip)
                co_await asio::async_read(s, asio::buffer(back), use_awaitable);
        }
        if (!o.round_trip)
            co_await asio::async_read(s, asio::buffer(&done, 1), use_awaitable);
        const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
        if (round == 0)
            continue;
        const double bytes = static_cast<double>(n) * static_cast<double>(o.size);
        if (o.round_trip) {
            std::printf("stream_throughput transport=%s mode=round_trip size=%zu round_trips=%ld "
                        "round=%d seconds=%.6f us_per_round_trip=%.3f\n",
                        transport(o), o.size, n, round, seconds, seconds * 1e6 / n);
        } else {
            std::printf("stream_throughput transport=%s mode=throughput size=%zu messages=%ld "
                        "round=%d seconds=%.6f bytes=%.0f MB_per_s=%.3f\n",
                        transport(o), o.size, n, round, seconds, bytes, bytes / seconds / 1e6);
        }
        std::fflush(stdout);
    }
}

void rethrow(std::exception_ptr e) {
    if (e)
        std::rethrow_exception(e);
}

// Runs the server's side and the client's (or the one --role names) on one
// io_context: `accept(acceptor)` and `connect(executor, endpoint)` make each
// side's stream. The acceptor listens before the client connects.
template <class Acceptor, class Accept, class Connect, class... AcceptorOptions>
void run(const options& o, Accept accept, Connect connect,
         const AcceptorOptions&... acceptor_options) {
    // With a concurrency hint of 1, Asio queues what a handler posts on the thread
    // that runs the io_context in that thread's own queue (146 instructions fewer per
    // 64 B round trip, the same system calls: docs/performance.md).
    const auto context =
        o.one_thread ? std::make_unique<asio::io_context>(1) : std::make_unique<asio::io_context>();
    asio::io_context& ioc = *context;
    const tcp::endpoint at(asio::ip::make_address(o.address), o.port);
    std::unique_ptr<Acceptor> acceptor;
    using stream_type = typename decltype(connect(ioc.get_executor(), at))::value_type;
    // --idle: the idle pairs, each side's opened one after another before its
    // measured stream, so the measured stream is the last accepted.
    std::vector<stream_type> idle_servers, idle_clients;
    const auto opening = std::chrono::steady_clock::now();
    if (o.role != "client") {
        acceptor = std::make_unique<Acceptor>(ioc, at, acceptor_options...);
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                for (int i = 0; i < o.idle; ++i)
                    idle_servers.push_back(co_await accept(*acceptor));
                auto s = co_await accept(*acceptor);
                co_await serve(s, o);
            },
            rethrow);
    }
    if (o.role != "server") {
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                for (int i = 0; i < o.idle; ++i)
                    idle_clients.push_back(co_await connect(ioc.get_executor(), at));
                if (o.idle > 0)
                    std::printf(
                        "stream_throughput transport=%s idle_pairs=%d opened_seconds=%.1f\n",
                        transport(o), o.idle,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - opening)
                            .count());
                auto s = co_await connect(ioc.get_executor(), at);
                co_await drive(s, o);
                // The idle pairs go too, so that run() returns: an open stream
                // keeps its receives posted, and its CQ's read counts as work.
                idle_clients.clear();
                idle_servers.clear();
            },
            rethrow);
    }
    ioc.run();
}

void run_rdma_asio(const options& o) {
    rdma_asio::stream_options so; // the defaults: rings that grow to 256 KiB, every write copied
    if (o.zero_copy)
        so.zero_copy_from = 64 * 1024;
    so.notices = o.notices;
    so.receive_ring = o.ring;
    so.initial_receive_ring = o.initial_ring;
    rdma_asio::connect_options co;
    if (o.busy)
        co.connection.cq.spin = rdma_asio::spin_budget::busy();
    else if (o.spin_us != 0 && o.adaptive)
        co.connection.cq.spin =
            rdma_asio::spin_budget::adaptive(std::chrono::microseconds(o.spin_us));
    else if (o.spin_us != 0)
        co.connection.cq.spin = rdma_asio::spin_budget::fixed(std::chrono::microseconds(o.spin_us));
    rdma_asio::acceptor_options ao;
    ao.connection = co.connection;
    run<rdma_asio::acceptor>(
        o,
        [&so](rdma_asio::acceptor& acceptor) -> asio::awaitable<rdma_asio::stream> {
            rdma_asio::stream s(acceptor.get_executor(), so);
            co_await rdma_asio::async_accept(acceptor, s, use_awaitable);
            co_return s;
        },
        [&so, &co](asio::any_io_executor ex,
                   const tcp::endpoint& at) -> asio::awaitable<rdma_asio::stream> {
            rdma_asio::stream s(ex, so);
            co_await rdma_asio::async_connect(s, at, co, use_awaitable);
            co_return s;
        },
        ao);
}

// TCP_NODELAY on both ends, as the stream sends each write at once.
void run_tcp(const options& o) {
    run<tcp::acceptor>(
        o,
        [](tcp::acceptor& acceptor) -> asio::awaitable<tcp::socket> {
            tcp::socket s = co_await acceptor.async_accept(use_awaitable);
            s.set_option(tcp::no_delay(true));
            co_return s;
        },
        [](asio::any_io_executor ex, const tcp::endpoint& at) -> asio::awaitable<tcp::socket> {
            tcp::socket s(ex);
            co_await s.async_connect(at, use_awaitable);
            s.set_option(tcp::no_delay(true));
            co_return s;
        });
}

} // namespace

int main(int argc, char** argv) {
    bench::raise_descriptor_limit();
    options o;
    sample::command_line cli("stream_throughput",
                             "a byte stream's throughput or round trip: rdma_asio::stream, or TCP");
    cli.flag('t', "tcp", "asio::ip::tcp::socket (TCP_NODELAY) instead of rdma_asio::stream", o.tcp)
        .flag('R', "round-trip", "ping-pong of SIZE bytes instead of one-way throughput",
              o.round_trip)
        .number('s', "size", "SIZE", "bytes per message (default 65536)", o.size, std::size_t{8},
                std::size_t{1} << 30)
        .number('n', "messages", "N", "messages (round trips) per round (default 1000)", o.messages,
                1L)
        .number('r', "rounds", "N", "rounds after the warm-up (default 5)", o.rounds, 1)
        .option('a', "address", "ADDRESS", "the server's address (default 10.0.0.1)", o.address)
        .number('p', "port", "PORT", "the server's port (default 18990)", o.port, std::uint16_t{1})
        .option(0, "role", "ROLE",
                "both (one process, the default), server or client (two processes)",
                [&](const char* v) {
                    o.role = v;
                    if (o.role != "both" && o.role != "server" && o.role != "client")
                        throw sample::bad_value("both, server or client");
                })
        .flag('v', "verify", "check every byte the server reads", o.verify)
        .flag('z', "zero-copy",
              "writes of 64 KiB and more from the writer's memory, without a copy "
              "(stream_options::zero_copy_from)",
              o.zero_copy)
        .number(0, "notices", "N",
                "stream_options::notices on both ends (default: the library's), at most the "
                "connection's receive depth less one",
                o.notices, std::uint32_t{4}, std::uint32_t{63})
        .number(0, "ring", "BYTES",
                "stream_options::receive_ring on both ends (default: the library's, 256 KiB)",
                o.ring, std::size_t{4096}, (std::size_t{1} << 30) - 1)
        .number(0, "initial-ring", "BYTES",
                "stream_options::initial_receive_ring on both ends (default: the library's, 4 "
                "KiB; --ring's value for a ring of one size)",
                o.initial_ring, std::size_t{1}, (std::size_t{1} << 30) - 1)
        .number(0, "spin", "US",
                "the connections' CQs poll US microseconds before they sleep on their channel "
                "(cq_options::spin, spin_budget::fixed; default 0, off)",
                o.spin_us, 0L)
        .flag(0, "adaptive", "--spin US is the limit of an adaptive budget (spin_budget::adaptive)",
              o.adaptive)
        .flag(0, "busy", "the connections' CQs poll and never sleep (spin_budget::busy)", o.busy)
        .flag(0, "one-thread",
              "the io_context made with a concurrency hint of 1 (io_context(1)), as Asio's and "
              "Beast's examples make theirs",
              o.one_thread)
        .number(0, "idle", "PAIRS",
                "open PAIRS pairs first and leave them idle beside the measured one (--role both)",
                o.idle, 0, 20000);
    cli.parse(argc, argv);
    try {
        if (o.tcp)
            run_tcp(o);
        else
            run_rdma_asio(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "stream_throughput: %s\n", e.what());
        return 1;
    }
    return 0;
}
