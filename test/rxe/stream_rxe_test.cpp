// rdma_asio::stream over rxe0 loopback (10.0.0.1 in the test VM): Asio's own
// composed operations over it (a line protocol with async_read_until; 1 MiB
// each way with async_write and async_read, every byte checked), the end of
// the stream (eof after shutdown), and no RNR on the way (rxe0's send_rnr_err).
#include <rdma_asio/context.hpp>
#include <rdma_asio/detail/cq/cq_sharing.hpp>
#include <rdma_asio/detail/stream/stream_memory.hpp>
#include <rdma_asio/stream.hpp>
#include <rdma_asio/testing/run.hpp>
#include <rdma_asio/wc_error.hpp>

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include "kernel_resources.hpp"
#include "run_until.hpp"
#include "rxe_counters.hpp"
#include "rxe_loopback.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace std::chrono_literals;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

namespace {

using rdma_asio::test::byte_pattern;
using rdma_asio::test::run_pair;
using rdma_asio::test::with_error;

tcp::endpoint stream_at(std::uint16_t port) {
    return rdma_asio::test::rxe0_endpoint(port);
}

// A stream accepted on `acceptor`: the accept that completes with a new stream.
asio::awaitable<rdma_asio::stream> accept_stream(rdma_asio::acceptor& acceptor,
                                                 rdma_asio::stream_options options = {}) {
    co_return co_await rdma_asio::async_accept(acceptor, options, use_awaitable);
}

// A server and a client stream connected through `acceptor` (listening on
// `port`); either is left empty when its side failed (the caller checks).
void connect_streams(asio::io_context& ioc, rdma_asio::acceptor& acceptor, std::uint16_t port,
                     std::optional<rdma_asio::stream>& server,
                     std::optional<rdma_asio::stream>& client) {
    run_pair(
        ioc, [&]() -> asio::awaitable<void> { server.emplace(co_await accept_stream(acceptor)); }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc);
            co_await rdma_asio::async_connect(s, stream_at(port), use_awaitable);
            client.emplace(std::move(s));
        }());
}

// Options with a receive ring of `bytes`, from the start (it does not grow).
rdma_asio::stream_options ring_of(std::size_t bytes) {
    rdma_asio::stream_options options;
    options.receive_ring = bytes;
    options.initial_receive_ring = bytes;
    return options;
}

// Writes `first` (one byte) and waits until `arrived()`: once the reader has it,
// both sides have registered all they keep (the reader its copy of this side's
// ring). The process's pinned memory then, in KiB.
asio::awaitable<std::size_t> pinned_once_settled(rdma_asio::stream& s, const std::uint8_t* first,
                                                 std::function<bool()> arrived) {
    co_await asio::async_write(s, asio::buffer(first, 1), use_awaitable);
    co_await rdma_asio::test::until(arrived);
    co_return rdma_asio::test::pinned_kib();
}

} // namespace

TEST_CASE("a stream carries a line protocol with asio::async_read_until, and ends with eof "
          "after shutdown",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18870));
    std::vector<std::string> server_lines;
    std::string client_reply;
    rdma_asio::error_code server_end;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor);
            std::string data;
            for (;;) {
                auto [ec, n] = co_await asio::async_read_until(s, asio::dynamic_buffer(data), '\n',
                                                               with_error);
                if (ec) {
                    server_end = ec;
                    break;
                }
                server_lines.push_back(data.substr(0, n - 1));
                data.erase(0, n);
                const std::string reply = "got " + server_lines.back() + "\n";
                co_await asio::async_write(s, asio::buffer(reply), use_awaitable);
            }
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc);
            co_await rdma_asio::async_connect(s, stream_at(18870), use_awaitable);
            // Three lines in one write, one in two pieces.
            co_await asio::async_write(s, asio::buffer(std::string("one\ntwo\nthr")),
                                       use_awaitable);
            co_await asio::async_write(s, asio::buffer(std::string("ee\n")), use_awaitable);
            std::string data;
            for (int i = 0; i < 3; ++i) {
                const std::size_t n = co_await asio::async_read_until(s, asio::dynamic_buffer(data),
                                                                      '\n', use_awaitable);
                client_reply += data.substr(0, n);
                data.erase(0, n);
            }
            s.shutdown();
            // The server sees eof and ends; the connection then closes.
            std::array<char, 8> more{};
            auto [ec, n] = co_await s.async_read_some(asio::buffer(more), with_error);
            CHECK(n == 0);
        }());
    CHECK(server_lines == std::vector<std::string>{"one", "two", "three"});
    CHECK(client_reply == "got one\ngot two\ngot three\n");
    CHECK(server_end == asio::error::eof);
}

TEST_CASE("a stream carries 1 MiB each way at once through rings of 64 KiB, every byte in "
          "order, and no write meets RNR",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18871));
    const std::size_t size = 1 << 20;
    const auto to_client = byte_pattern(size, 1), to_server = byte_pattern(size, 2);
    std::vector<std::uint8_t> at_client(size), at_server(size);
    auto small = ring_of(64 * 1024);
    const std::uint64_t rnr_before = rdma_asio::test::rxe0_counter("send_rnr_err");
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor, small);
            using namespace asio::experimental::awaitable_operators;
            co_await (asio::async_write(s, asio::buffer(to_client), use_awaitable) &&
                      asio::async_read(s, asio::buffer(at_server), use_awaitable));
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, small);
            co_await rdma_asio::async_connect(s, stream_at(18871), use_awaitable);
            using namespace asio::experimental::awaitable_operators;
            co_await (asio::async_write(s, asio::buffer(to_server), use_awaitable) &&
                      asio::async_read(s, asio::buffer(at_client), use_awaitable));
        }());
    CHECK(rdma_asio::test::byte_difference(at_client, to_client) == "");
    CHECK(rdma_asio::test::byte_difference(at_server, to_server) == "");
    CHECK(rdma_asio::test::rxe0_counter("send_rnr_err") == rnr_before);
}

TEST_CASE("a stream read whose handler throws lets the exception out of run(), and the stream "
          "reads what follows",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18867));
    rdma_asio::stream server(ioc), client(ioc);
    int opened = 0;
    rdma_asio::async_accept(acceptor, server, [&](rdma_asio::error_code ec) {
        CHECK_FALSE(ec);
        ++opened;
    });
    rdma_asio::async_connect(client, stream_at(18867), [&](rdma_asio::error_code ec) {
        CHECK_FALSE(ec);
        ++opened;
    });
    REQUIRE(rdma_asio::test::run_until(
        ioc, [&] { return opened == 2; }, 30s));
    struct thrown {};
    std::array<char, 8> buffer{};
    std::string got;
    server.async_read_some(asio::buffer(buffer), [&](rdma_asio::error_code, std::size_t n) {
        got.assign(buffer.data(), n);
        throw thrown{};
    });
    const std::string a = "a", b = "b";
    asio::async_write(client, asio::buffer(a), [](rdma_asio::error_code, std::size_t) {});
    const int caught = rdma_asio::test::run_catching<thrown>(
        ioc, [&] { return !got.empty(); }, 30s);
    CHECK(got == "a");
    CHECK(caught == 1);
    std::optional<std::string> next;
    server.async_read_some(asio::buffer(buffer), [&](rdma_asio::error_code ec, std::size_t n) {
        next = ec ? ec.message() : std::string(buffer.data(), n);
    });
    asio::async_write(client, asio::buffer(b), [](rdma_asio::error_code, std::size_t) {});
    REQUIRE(rdma_asio::test::run_until(
        ioc, [&] { return next.has_value(); }, 30s));
    CHECK(*next == "b");
}

TEST_CASE("a stream whose peer vanishes ends a waiting read with disconnected, and a write "
          "after it with an error",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18872));
    // The client lives on an io_context of its own, run by a thread of its own, and
    // goes with it, never closed: as the stream of a process that dies.
    auto client_ioc = std::make_unique<asio::io_context>();
    std::atomic<bool> client_wrote{false};
    asio::co_spawn(
        *client_ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(co_await asio::this_coro::executor);
            co_await rdma_asio::async_connect(s, stream_at(18872), use_awaitable);
            co_await asio::async_write(s, asio::buffer(std::string("bye")), use_awaitable);
            client_wrote = true;
            asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
            co_await forever.async_wait(use_awaitable);
        },
        asio::detached);
    std::thread client([&] { client_ioc->run_for(60s); });

    rdma_asio::stream s(ioc);
    std::optional<rdma_asio::error_code> accepted;
    rdma_asio::async_accept(acceptor, s, [&](rdma_asio::error_code ec) { accepted = ec; });
    std::array<char, 16> buffer{};
    std::optional<std::string> got;
    auto read_first = [&] {
        s.async_read_some(asio::buffer(buffer), [&](rdma_asio::error_code ec, std::size_t n) {
            got = ec ? ec.message() : std::string(buffer.data(), n);
        });
    };
    REQUIRE(rdma_asio::testing::run_until(ioc, [&] { return accepted.has_value(); }));
    REQUIRE_FALSE(*accepted);
    read_first();
    REQUIRE(rdma_asio::testing::run_until(ioc, [&] { return got.has_value(); }));
    CHECK(*got == "bye");
    // The client's write completes on the client's thread, which may run its
    // handler after the bytes arrived here (sooner since they go inline).
    const auto wrote_by = std::chrono::steady_clock::now() + 10s;
    while (!client_wrote.load() && std::chrono::steady_clock::now() < wrote_by)
        std::this_thread::sleep_for(1ms);
    CHECK(client_wrote.load());

    // The next read waits; then the client's process is gone.
    std::optional<rdma_asio::error_code> read_end;
    std::size_t read_n = 1;
    s.async_read_some(asio::buffer(buffer), [&](rdma_asio::error_code ec, std::size_t n) {
        read_end = ec;
        read_n = n;
    });
    ioc.poll();
    CHECK_FALSE(read_end.has_value());
    client_ioc->stop();
    client.join();
    client_ioc.reset();
    REQUIRE(rdma_asio::testing::run_until(ioc, [&] { return read_end.has_value(); }));
    CHECK(*read_end == rdma_asio::errc::disconnected);
    CHECK(read_n == 0);
    std::optional<rdma_asio::error_code> write_end;
    asio::async_write(s, asio::buffer(std::string("late")),
                      [&](rdma_asio::error_code ec, std::size_t) { write_end = ec; });
    REQUIRE(rdma_asio::testing::run_until(ioc, [&] { return write_end.has_value(); }));
    CHECK(*write_end);
}

TEST_CASE("a stream closed right after its writes completed delivers them and then its end, "
          "so the peer reads every byte, then eof",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18888));
    const std::string first(100, 'a'), second(200, 'b');
    std::string got;
    rdma_asio::error_code end;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor);
            co_await asio::async_write(s, asio::buffer(std::string("go")), use_awaitable);
            std::array<char, 64> buffer{};
            for (;;) {
                auto [ec, n] = co_await s.async_read_some(asio::buffer(buffer), with_error);
                got.append(buffer.data(), n);
                if (ec) {
                    end = ec;
                    break;
                }
            }
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc);
            co_await rdma_asio::async_connect(s, stream_at(18888), use_awaitable);
            // The server's first bytes: its hello came before them, so writes go.
            std::array<char, 2> go{};
            co_await asio::async_read(s, asio::buffer(go), use_awaitable);
            // In one go, with no turn of the event loop in between: the first write
            // goes at once, the second is gathered behind it (the first's RDMA write
            // cannot have been reported done yet), and close() comes while it is.
            // Both completed for this program, so both must arrive, as with a TCP
            // socket closed after its writes.
            s.async_write_some(asio::buffer(first), [](rdma_asio::error_code, std::size_t) {});
            s.async_write_some(asio::buffer(second), [](rdma_asio::error_code, std::size_t) {});
            s.close();
            co_return;
        }());
    CHECK(got == first + second);
    CHECK(end == asio::error::eof);
}

// (No ": " late in a test's name: Catch 2.13's console reporter indents a failure's
// header to just after it, and past the line's width it loops for ever.)
TEST_CASE("a stream whose writer is faster than its reader stays within the reader's ring, "
          "with registered memory bounded, no RNR and no byte lost",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18877));
    const std::size_t size = 1 << 20;
    const auto sent = byte_pattern(size, 5);
    std::vector<std::uint8_t> received;
    const std::uint64_t rnr_before = rdma_asio::test::rxe0_counter("send_rnr_err");
    std::size_t written = 0, writes = 0, short_writes = 0, most_ahead = 0;
    std::size_t pinned_connected = 0, most_pinned = 0;
    const auto small = ring_of(16 * 1024); // the reader's ring, and the writer's
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor, small);
            // As fast as the reader's ring lets it: each write asks for all that is left.
            while (written < size) {
                const std::size_t n = co_await s.async_write_some(
                    asio::buffer(sent.data() + written, size - written), use_awaitable);
                written += n;
                ++writes;
                short_writes += n < size - (written - n);
                most_ahead = std::max(most_ahead, written - received.size());
                most_pinned = std::max(most_pinned, rdma_asio::test::pinned_kib());
            }
            s.shutdown();
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, small);
            co_await rdma_asio::async_connect(s, stream_at(18877), use_awaitable);
            // 1 KiB at a time, a millisecond apart: far slower than the writer.
            std::array<std::uint8_t, 1024> buffer{};
            for (;;) {
                auto [ec, n] = co_await s.async_read_some(asio::buffer(buffer), with_error);
                received.insert(received.end(), buffer.begin(), buffer.begin() + n);
                if (ec)
                    break;
                // Both sides' rings and copies are registered by the first bytes: the
                // writer registers its copy on the reader's hello, before it writes.
                if (pinned_connected == 0)
                    pinned_connected = rdma_asio::test::pinned_kib();
                asio::steady_timer pause(ioc, 1ms);
                co_await pause.async_wait(use_awaitable);
            }
        }(),
        120s);
    CHECK(rdma_asio::test::byte_difference(received, sent) == "");
    // The writer was held back: most writes went short of what it asked ...
    CHECK(short_writes + 1 >= writes);
    CHECK(writes > size / small.receive_ring);
    // ... and was never further ahead of the reader than the reader's ring.
    CHECK(most_ahead <= small.receive_ring);
    // The registered memory stayed what the two streams had registered by the first bytes.
    CHECK(pinned_connected > 0);
    CHECK(most_pinned == pinned_connected);
    CHECK(rdma_asio::test::rxe0_counter("send_rnr_err") == rnr_before);
}

// Reads cancelled at random points, between reads that succeed: the bytes the
// reads returned are the bytes written, none lost or doubled.
TEST_CASE("a stream's reader cancelled at random points loses no byte and doubles none",
          "[stream]") {
    const unsigned seed = GENERATE(1u, 2u, 3u);
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(static_cast<std::uint16_t>(18873 + seed)));
    const std::size_t size = 20000;
    const auto sent = byte_pattern(size, seed);
    std::vector<std::uint8_t> received;
    std::size_t aborted = 0;
    auto small = ring_of(4096);
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor, small);
            // Small writes, so that reads find a few bytes at a time.
            for (std::size_t at = 0; at < size; at += 97)
                co_await asio::async_write(
                    s, asio::buffer(sent.data() + at, std::min<std::size_t>(97, size - at)),
                    use_awaitable);
            s.shutdown();
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, small);
            co_await rdma_asio::async_connect(
                s, stream_at(static_cast<std::uint16_t>(18873 + seed)), use_awaitable);
            std::minstd_rand rng(seed);
            std::array<std::uint8_t, 300> buffer{};
            for (;;) {
                asio::cancellation_signal signal;
                const std::size_t want = 1 + rng() % buffer.size();
                bool done = false;
                rdma_asio::error_code ec;
                std::size_t n = 0;
                s.async_read_some(asio::buffer(buffer.data(), want),
                                  asio::bind_cancellation_slot(
                                      signal.slot(), [&](rdma_asio::error_code e, std::size_t got) {
                                          ec = e, n = got, done = true;
                                      }));
                // Cancel at once, after a turn of the event loop, or not at all.
                switch (rng() % 3) {
                case 0:
                    signal.emit(asio::cancellation_type::terminal);
                    break;
                case 1:
                    co_await asio::post(ioc, use_awaitable);
                    signal.emit(asio::cancellation_type::terminal);
                    break;
                default:
                    break;
                }
                while (!done)
                    co_await asio::post(ioc, use_awaitable);
                if (ec == asio::error::operation_aborted) {
                    CHECK(n == 0);
                    ++aborted;
                    continue;
                }
                if (ec == asio::error::eof)
                    break;
                REQUIRE_FALSE(ec);
                received.insert(received.end(), buffer.begin(), buffer.begin() + n);
            }
        }());
    CHECK(rdma_asio::test::byte_difference(received, sent) == "");
    CHECK(aborted > 0);
}

// A large write registers the caller's memory for the write (VmPin grows by its
// size while it is in flight) instead of copying it (VmPin unchanged), completes
// with its bytes even when cancelled at once, and the reader gets every byte,
// the ring's wrap included.
TEST_CASE("a large write goes from the caller's memory, without a copy, and completes once the "
          "peer's device has its bytes",
          "[stream]") {
    const bool copied = GENERATE(false, true);
    CAPTURE(copied);
    asio::io_context ioc;
    const auto port = static_cast<std::uint16_t>(copied ? 18878 : 18879);
    rdma_asio::acceptor acceptor(ioc, stream_at(port));
    // A ring of 256 KiB from the start: the first write may take that much.
    rdma_asio::stream_options options = ring_of(256 * 1024);
    options.zero_copy_from = copied ? SIZE_MAX : 64 * 1024;
    const std::size_t size = 4 << 20;
    const auto sent = byte_pattern(size, 6);
    std::vector<std::uint8_t> received;
    std::size_t pinned_before = 0, pinned_in_flight = 0, pinned_after = 0, first_write = 0;
    rdma_asio::error_code first_write_ec = asio::error::would_block;
    rdma_asio::error_code read_end;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor, options);
            // A small write (copied) first. (The lambda is named first: g++ 12
            // destroys one written inside a co_await expression twice.)
            const auto reader_has_it = [&] { return !received.empty(); };
            pinned_before = co_await pinned_once_settled(s, sent.data(), reader_has_it);
            asio::cancellation_signal signal;
            s.async_write_some(asio::buffer(sent.data() + 1, size - 1),
                               asio::bind_cancellation_slot(
                                   signal.slot(), [&](rdma_asio::error_code ec, std::size_t n) {
                                       first_write_ec = ec, first_write = n;
                                   }));
            pinned_in_flight = rdma_asio::test::pinned_kib();
            signal.emit(asio::cancellation_type::terminal);
            co_await rdma_asio::test::until(
                [&] { return first_write_ec != asio::error::would_block; });
            pinned_after = rdma_asio::test::pinned_kib();
            // The rest in writes of 100 003 bytes, the ring wrapping inside some, each
            // gathered from two buffers as a protocol writes a header and a body: the
            // first 7 bytes from a copy elsewhere, the rest from `sent`.
            for (std::size_t at = 1 + first_write; at < size; at += 100003) {
                const std::size_t n = std::min<std::size_t>(100003, size - at), head = 7;
                const std::vector<std::uint8_t> header(sent.data() + at, sent.data() + at + head);
                co_await asio::async_write(
                    s,
                    std::array<asio::const_buffer, 2>{
                        asio::buffer(header), asio::buffer(sent.data() + at + head, n - head)},
                    use_awaitable);
            }
            s.shutdown();
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, options);
            co_await rdma_asio::async_connect(s, stream_at(port), use_awaitable);
            std::vector<std::uint8_t> buffer(70000);
            for (;;) {
                auto [ec, n] = co_await s.async_read_some(asio::buffer(buffer), with_error);
                received.insert(received.end(), buffer.begin(), buffer.begin() + n);
                if (ec) {
                    read_end = ec;
                    break;
                }
            }
        }(),
        120s);
    CHECK(read_end == asio::error::eof);
    CHECK(rdma_asio::test::byte_difference(received, sent) == "");
    // Cancelled at once, the write still completes with what went.
    CHECK_FALSE(first_write_ec);
    CHECK(first_write >= 64 * 1024);
    CHECK(first_write <= options.receive_ring);
    if (copied)
        CHECK(pinned_in_flight == pinned_before);
    else
        CHECK(pinned_in_flight >= pinned_before + first_write / 1024);
    CHECK(pinned_after == pinned_before);
}

// close() while a write from the caller's memory is in flight: its handler runs
// once, after the device let go of the memory (the queue pair destroyed or
// flushed), with operation_aborted or with the bytes that went.
TEST_CASE("a stream closed while a large write is in flight ends that write once, and its "
          "memory is no longer registered",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18883));
    auto memory = std::make_unique<std::vector<std::uint8_t>>(byte_pattern(1 << 20, 7));
    int handler_runs = 0;
    rdma_asio::error_code write_ec, read_end;
    std::size_t written = 0, pinned_before = 0, pinned_in_flight = 0, pinned_after = 0;
    bool got_first = false;
    rdma_asio::stream_options zero_copy = ring_of(256 * 1024); // room for 64 KiB at once
    zero_copy.zero_copy_from = 64 * 1024;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor, zero_copy);
            const auto reader_has_it = [&] { return got_first; };
            pinned_before = co_await pinned_once_settled(s, memory->data(), reader_has_it);
            s.async_write_some(asio::buffer(*memory), [&](rdma_asio::error_code ec, std::size_t n) {
                ++handler_runs, write_ec = ec, written = n;
                memory.reset(); // the caller's memory goes with the handler
            });
            pinned_in_flight = rdma_asio::test::pinned_kib();
            s.close();
            co_await rdma_asio::test::until([&] { return handler_runs > 0; });
            asio::steady_timer settle(ioc, 50ms);
            co_await settle.async_wait(use_awaitable);
            pinned_after = rdma_asio::test::pinned_kib();
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, zero_copy);
            co_await rdma_asio::async_connect(s, stream_at(18883), use_awaitable);
            std::vector<std::uint8_t> buffer(1 << 20);
            for (;;) {
                auto [ec, n] = co_await s.async_read_some(asio::buffer(buffer), with_error);
                got_first = true;
                if (ec) {
                    read_end = ec;
                    break;
                }
            }
        }());
    CHECK(handler_runs == 1);
    CHECK(pinned_in_flight > pinned_before);
    if (write_ec)
        CHECK(write_ec == asio::error::operation_aborted);
    else
        CHECK(written > 0);
    // The stream's own memory and the write's registration are gone.
    CHECK(pinned_after < pinned_before);
    CHECK(read_end == rdma_asio::errc::disconnected);
}

TEST_CASE("64 streams at once on one device, each carrying 4 KiB both ways", "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18880));
    constexpr int count = 64;
    auto small = ring_of(8192);
    small.notices = 8;
    int server_ok = 0, client_ok = 0;
    auto serve_all = [&]() -> asio::awaitable<void> {
        std::vector<std::unique_ptr<rdma_asio::stream>> streams;
        for (int i = 0; i < count; ++i) {
            streams.push_back(std::make_unique<rdma_asio::stream>(ioc, small));
            co_await rdma_asio::async_accept(acceptor, *streams.back(), use_awaitable);
            asio::co_spawn(
                ioc,
                [&, s = streams.back().get()]() -> asio::awaitable<void> {
                    std::vector<std::uint8_t> in(4096);
                    co_await asio::async_read(*s, asio::buffer(in), use_awaitable);
                    co_await asio::async_write(*s, asio::buffer(in), use_awaitable);
                    ++server_ok;
                },
                asio::detached);
        }
        while (server_ok < count)
            co_await asio::post(ioc, use_awaitable);
    };
    auto use_all = [&]() -> asio::awaitable<void> {
        std::vector<std::unique_ptr<rdma_asio::stream>> streams;
        for (int i = 0; i < count; ++i) {
            streams.push_back(std::make_unique<rdma_asio::stream>(ioc, small));
            co_await rdma_asio::async_connect(*streams.back(), stream_at(18880), use_awaitable);
        }
        for (int i = 0; i < count; ++i)
            asio::co_spawn(
                ioc,
                [&, i, s = streams[i].get()]() -> asio::awaitable<void> {
                    const auto out = byte_pattern(4096, static_cast<unsigned>(i));
                    std::vector<std::uint8_t> back(4096);
                    co_await asio::async_write(*s, asio::buffer(out), use_awaitable);
                    co_await asio::async_read(*s, asio::buffer(back), use_awaitable);
                    if (back == out)
                        ++client_ok;
                },
                asio::detached);
        while (client_ok < count)
            co_await asio::post(ioc, use_awaitable);
    };
    run_pair(ioc, serve_all(), use_all());
    CHECK(server_ok == count);
    CHECK(client_ok == count);
}

// The streams of one io_context share CQs on a device (cq_sharing.hpp): each stream
// end costs its share of a CQ, not two CQs of its own. Counted by the kernel
// (`rdma resource show cq`); the bytes of every stream still arrive, and the CQs
// go with the last stream on them.
TEST_CASE("64 stream pairs share the CQs cq_sharing gives them instead of four each, carry "
          "their bytes, and leave no CQ once gone",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18937));
    constexpr std::size_t pairs = 64;
    const int cqs_before = rdma_asio::test::kernel_resources_of_this_process("cq", "cqn");
    std::vector<std::optional<rdma_asio::stream>> servers(pairs), clients(pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
        connect_streams(ioc, acceptor, 18937, servers[i], clients[i]);
        REQUIRE(servers[i]);
        REQUIRE(clients[i]);
    }
    const int cqs_open = rdma_asio::test::kernel_resources_of_this_process("cq", "cqn");
    rdma_asio::context device("rxe0");
    ibv_device_attr attr{};
    REQUIRE(ibv_query_device(device.native_handle(), &attr) == 0);
    const rdma_asio::connection_options defaults;
    const auto sharing = rdma_asio::detail::cq_sharing::for_need(
        defaults.send_depth + defaults.receive_depth, static_cast<std::uint32_t>(attr.max_cqe));
    REQUIRE(sharing.connections > 0);
    const int ends = 2 * static_cast<int>(pairs);
    const int per_cq = static_cast<int>(sharing.connections);
    INFO("max_cqe " << attr.max_cqe << ": " << per_cq << " connections per CQ");
    CHECK(cqs_open - cqs_before == (ends + per_cq - 1) / per_cq);

    std::size_t intact = 0;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (std::size_t i = 0; i < pairs; ++i) {
                std::vector<std::uint8_t> in(1024);
                co_await asio::async_read(*servers[i], asio::buffer(in), use_awaitable);
                intact += in == byte_pattern(1024, static_cast<unsigned>(i));
            }
        }(),
        [&]() -> asio::awaitable<void> {
            for (std::size_t i = 0; i < pairs; ++i)
                co_await asio::async_write(
                    *clients[i], asio::buffer(byte_pattern(1024, static_cast<unsigned>(i))),
                    use_awaitable);
        }());
    CHECK(intact == pairs);
    servers.clear();
    clients.clear();
    // A closed stream sends its end and goes with that write's completion: the
    // CQs go once every stream has (the count, a run of the rdma tool, is taken
    // every 200 ms, not after each handler).
    int cqs_after = -1;
    rdma_asio::test::run_until_every(
        ioc, 200ms,
        [&] {
            cqs_after = rdma_asio::test::kernel_resources_of_this_process("cq", "cqn");
            return cqs_after == cqs_before;
        },
        10s);
    INFO("queue pairs left: " << rdma_asio::test::kernel_qps_of_this_process());
    CHECK(cqs_after == cqs_before);
}

// A read that waits holds work on its handler's executor, as Asio's own
// operations do: a second io_context that only the handler runs on does not run
// out of work (poll() would stop it) while the read waits, and does once the
// handler ran. The read's bytes come from a write made after it parked.
TEST_CASE("a stream read that waits counts as work on its handler's executor until its handler "
          "ran",
          "[stream]") {
    asio::io_context ioc, handlers;
    rdma_asio::acceptor acceptor(ioc, stream_at(18885));
    std::optional<rdma_asio::stream> server, client;
    connect_streams(ioc, acceptor, 18885, server, client);
    REQUIRE(server);
    REQUIRE(client);
    std::array<char, 8> buffer{};
    rdma_asio::error_code read_ec = asio::error::would_block;
    std::size_t got = 0;
    server->async_read_some(
        asio::buffer(buffer),
        asio::bind_executor(
            handlers, [&](rdma_asio::error_code ec, std::size_t n) { read_ec = ec, got = n; }));
    CHECK(handlers.poll() == 0);
    CHECK_FALSE(handlers.stopped()); // the waiting read is work
    const std::string text = "work";
    client->async_write_some(asio::buffer(text), [](rdma_asio::error_code, std::size_t) {});
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (read_ec == asio::error::would_block && std::chrono::steady_clock::now() < deadline) {
        ioc.run_one_for(10ms);
        handlers.poll();
    }
    CHECK_FALSE(read_ec);
    CHECK(std::string(buffer.data(), got) == text);
    CHECK(handlers.poll() == 0);
    CHECK(handlers.stopped()); // no work left once the handler ran
    server->close();
    client->close();
    ioc.run_for(100ms);
}

// A read's canceller stays in its slot until the read's handler runs, where the
// program emits the slot's signal (clearing it where the read ends would race
// with that emit when the wake-up runs on another thread). A signal emitted after
// the read ended, before its handler ran, as when the other branch of `||` won
// meanwhile, must then leave alone a read started since. Here the first read's
// handler waits on a second io_context that nothing runs yet.
TEST_CASE("a read's cancellation signal emitted after the read ended, before its handler ran, "
          "leaves the next read alone",
          "[stream]") {
    asio::io_context ioc, handlers;
    rdma_asio::acceptor acceptor(ioc, stream_at(18897));
    std::optional<rdma_asio::stream> server, client;
    connect_streams(ioc, acceptor, 18897, server, client);
    REQUIRE(server);
    REQUIRE(client);
    std::array<char, 8> first{}, second{};
    asio::cancellation_signal signal;
    rdma_asio::error_code first_ec = asio::error::would_block;
    std::size_t first_n = 0;
    server->async_read_some(
        asio::buffer(first),
        asio::bind_cancellation_slot(
            signal.slot(),
            asio::bind_executor(handlers, [&](rdma_asio::error_code ec, std::size_t n) {
                first_ec = ec, first_n = n;
            })));
    const std::string one = "one", two = "two";
    client->async_write_some(asio::buffer(one), [](rdma_asio::error_code, std::size_t) {});
    // The first read has ended once a read of nothing completes instead of
    // finding it waiting (already_started).
    const auto first_ended = [&] {
        rdma_asio::error_code probe = asio::error::would_block;
        server->async_read_some(asio::mutable_buffer(),
                                [&](rdma_asio::error_code ec, std::size_t) { probe = ec; });
        rdma_asio::test::run_until(
            ioc, [&] { return probe != asio::error::would_block; }, 10s);
        return probe != asio::error::already_started && probe != asio::error::would_block;
    };
    REQUIRE(rdma_asio::test::run_until(ioc, first_ended, 30s));
    REQUIRE(first_ec == asio::error::would_block); // its handler has not run
    rdma_asio::error_code second_ec = asio::error::would_block;
    std::size_t second_n = 0;
    server->async_read_some(asio::buffer(second), [&](rdma_asio::error_code ec, std::size_t n) {
        second_ec = ec, second_n = n;
    });
    signal.emit(asio::cancellation_type::terminal); // the first read's, late
    client->async_write_some(asio::buffer(two), [](rdma_asio::error_code, std::size_t) {});
    rdma_asio::test::run_until(
        ioc, [&] { return second_ec != asio::error::would_block; }, 30s);
    CHECK_FALSE(second_ec);
    CHECK(std::string(second.data(), second_n) == two);
    handlers.poll();
    CHECK_FALSE(first_ec);
    CHECK(std::string(first.data(), first_n) == one);
    server->close();
    client->close();
    ioc.run_for(100ms);
}

// A stream whose executor type is a strand's, which has no default
// constructor: accepted and connected into, it carries bytes, and a handler
// with no executor of its own runs on the stream's strand. Moved into streams of
// other executor types, open, it carries the rest.
TEST_CASE("a stream on a strand's executor type is accepted, connected and carries bytes, its "
          "handlers on its strand, and goes on carrying them converted to other executor types",
          "[stream]") {
    using strand_type = asio::strand<asio::io_context::executor_type>;
    asio::io_context ioc;
    rdma_asio::basic_acceptor<strand_type> acceptor(asio::make_strand(ioc), stream_at(18886));
    rdma_asio::basic_stream<strand_type> server(asio::make_strand(ioc));
    rdma_asio::basic_stream<strand_type> client(asio::make_strand(ioc));
    const std::string text = "on a strand";
    std::string received(text.size(), '\0');
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            co_await rdma_asio::async_accept(acceptor, server, use_awaitable);
            co_await asio::async_read(server, asio::buffer(received), use_awaitable);
        }(),
        [&]() -> asio::awaitable<void> {
            co_await rdma_asio::async_connect(client, stream_at(18886), use_awaitable);
            co_await asio::async_write(client, asio::buffer(text), use_awaitable);
        }());
    CHECK(received == text);
    // A handler of its own (no associated executor): the stream's strand runs it.
    bool ran = false, on_strand = false;
    client.async_write_some(asio::buffer(text), [&](rdma_asio::error_code ec, std::size_t) {
        ran = !ec;
        on_strand = client.get_executor().running_in_this_thread();
    });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!ran && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(10ms);
    CHECK(ran);
    CHECK(on_strand);
    // Converted to other executor types while open, as Asio's sockets convert
    // (use_awaitable.as_default_on): the bytes go on through the new objects, the
    // write above's first.
    rdma_asio::stream any_client(std::move(client));
    auto awaited_server = use_awaitable.as_default_on(std::move(server));
    CHECK_FALSE(client.is_open());
    CHECK_FALSE(server.is_open());
    REQUIRE(any_client.is_open());
    REQUIRE(awaited_server.is_open());
    const std::string more = " and converted";
    std::string both(text.size() + more.size(), '\0');
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            co_await asio::async_read(awaited_server, asio::buffer(both));
        }(),
        [&]() -> asio::awaitable<void> {
            co_await asio::async_write(any_client, asio::buffer(more), use_awaitable);
        }());
    CHECK(both == text + more);
    awaited_server.close();
    any_client.close();
    ioc.run_for(100ms);
}

// An accept that completes with a new stream on another executor, as a TCP
// acceptor's async_accept(ex, token): the stream has that executor and the options
// asked, and carries bytes.
TEST_CASE("an accept that completes with a new stream on a given executor gives it that executor "
          "and the options asked, and the stream carries bytes",
          "[stream]") {
    using strand_type = asio::strand<asio::io_context::executor_type>;
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18891));
    const strand_type strand = asio::make_strand(ioc);
    std::optional<rdma_asio::basic_stream<strand_type>> server;
    rdma_asio::stream client(ioc);
    const std::string text = "accepted as a new stream";
    std::string received(text.size(), '\0');
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            server.emplace(
                co_await rdma_asio::async_accept(acceptor, strand, ring_of(8192), use_awaitable));
            co_await asio::async_read(*server, asio::buffer(received), use_awaitable);
        }(),
        [&]() -> asio::awaitable<void> {
            co_await rdma_asio::async_connect(client, stream_at(18891), use_awaitable);
            co_await asio::async_write(client, asio::buffer(text), use_awaitable);
        }());
    REQUIRE(server);
    CHECK(server->is_open());
    CHECK(server->get_executor() == strand);
    CHECK(server->options().receive_ring == 8192);
    CHECK(received == text);
    server->close();
    client.close();
    ioc.run_for(100ms);
}

// The connects a TCP program makes: by host and service, and over a list of
// endpoints, the first that accepts, which the operation reports.
TEST_CASE("a stream connects by host and service, and over endpoints to the first that accepts, "
          "which it reports",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18892));
    rdma_asio::stream by_name(ioc), over_list(ioc);
    std::string first(5, '\0'), second(5, '\0');
    // Nobody listens on 18893: that endpoint is refused, and the next one tried.
    const std::vector<tcp::endpoint> endpoints{stream_at(18893), stream_at(18892)};
    tcp::endpoint connected;
    rdma_asio::error_code named_ec = asio::error::would_block, listed_ec = asio::error::would_block;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream a = co_await accept_stream(acceptor);
            co_await asio::async_read(a, asio::buffer(first), use_awaitable);
            rdma_asio::stream b = co_await accept_stream(acceptor);
            co_await asio::async_read(b, asio::buffer(second), use_awaitable);
        }(),
        [&]() -> asio::awaitable<void> {
            std::tie(named_ec) = co_await rdma_asio::async_connect(
                by_name, stream_at(18892).address().to_string(), "18892", with_error);
            if (named_ec)
                co_return;
            co_await asio::async_write(by_name, asio::buffer("name!", 5), use_awaitable);
            std::tie(listed_ec, connected) =
                co_await rdma_asio::async_connect(over_list, endpoints, with_error);
            if (listed_ec)
                co_return;
            co_await asio::async_write(over_list, asio::buffer("list!", 5), use_awaitable);
        }());
    CHECK(named_ec.message() == rdma_asio::error_code().message());
    CHECK(listed_ec.message() == rdma_asio::error_code().message());
    CHECK(first == "name!");
    CHECK(second == "list!");
    CHECK(connected == stream_at(18892));
    CHECK(over_list.remote_endpoint() == stream_at(18892));
    by_name.close();
    over_list.close();
    ioc.run_for(100ms);
}

// async_connect(stream, endpoint, options, token) connects with those options:
// the acceptor's screen reads the private data the client sent.
TEST_CASE("async_connect into a stream sends connect_options' private data to the acceptor",
          "[stream]") {
    asio::io_context ioc;
    std::vector<std::uint8_t> seen;
    rdma_asio::acceptor_options screened;
    screened.screen = [&](std::span<const std::uint8_t> request, std::vector<std::uint8_t>&) {
        seen.assign(request.begin(), request.begin() + 5);
        return true;
    };
    rdma_asio::acceptor acceptor(ioc, stream_at(18887), screened);
    rdma_asio::connect_options options;
    options.private_data = {'h', 'e', 'l', 'l', 'o'};
    rdma_asio::error_code connected = asio::error::would_block;
    run_pair(
        ioc, [&]() -> asio::awaitable<void> { (void)co_await accept_stream(acceptor); }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc);
            auto [ec] = co_await rdma_asio::async_connect(s, stream_at(18887), options, with_error);
            connected = ec;
        }());
    CHECK_FALSE(connected);
    CHECK(seen == options.private_data);
}

TEST_CASE("a stream that asks more receives than its connection's queue holds is refused with "
          "invalid_argument",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18881));
    rdma_asio::stream_options many;
    many.notices = 300; // the connections ask 64 receives (rxe makes room for more)
    rdma_asio::error_code accepted, connected;
    bool server_open = true, client_open = true;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, many);
            auto [ec] = co_await rdma_asio::async_accept(acceptor, s, with_error);
            accepted = ec;
            server_open = s.is_open();
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, many);
            auto [ec] = co_await rdma_asio::async_connect(s, stream_at(18881), with_error);
            connected = ec;
            client_open = s.is_open();
        }());
    CHECK(accepted == asio::error::invalid_argument);
    CHECK(connected == asio::error::invalid_argument);
    CHECK_FALSE(server_open);
    CHECK_FALSE(client_open);
}

TEST_CASE("a stream names both ends, says what a read would take, and after shutdown_receive "
          "ends reads with eof while the peer's writes go on",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18890));
    const std::size_t ring = 64 * 1024;
    const auto written = byte_pattern(4 * ring, 9); // four rings' worth: needs credit to go
    tcp::endpoint server_local, server_remote, client_local, client_remote;
    std::size_t available_at_first = 0, available_after_read = 0, available_after_shut = 1;
    rdma_asio::error_code server_read_end, after_close;
    bool client_wrote_all = false, server_ready = false, client_shut = false;
    std::string server_said;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(acceptor.get_executor(), ring_of(ring));
            co_await acceptor.async_accept(s, use_awaitable); // a TCP acceptor's shape
            server_local = s.local_endpoint();
            server_remote = s.remote_endpoint();
            co_await rdma_asio::test::until([&] { return s.available() == 100; });
            available_at_first = s.available();
            std::array<std::uint8_t, 40> some{};
            co_await asio::async_read(s, asio::buffer(some), use_awaitable);
            available_after_read = s.available();
            s.shutdown(rdma_asio::stream::shutdown_receive);
            available_after_shut = s.available();
            server_ready = true;
            std::array<std::uint8_t, 16> more{};
            auto [ec, n] = co_await s.async_read_some(asio::buffer(more), with_error);
            server_read_end = ec;
            CHECK(n == 0);
            // This side still writes: only its receiving was shut.
            co_await rdma_asio::test::until([&] { return client_wrote_all; });
            co_await asio::async_write(s, asio::buffer(std::string("bye")), use_awaitable);
            co_await rdma_asio::test::until([&] { return client_shut; });
            s.close();
            s.local_endpoint(after_close);
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc);
            co_await rdma_asio::async_connect(s, stream_at(18890), use_awaitable);
            client_local = s.local_endpoint();
            client_remote = s.remote_endpoint();
            co_await asio::async_write(s, asio::buffer(written.data(), 100), use_awaitable);
            co_await rdma_asio::test::until([&] { return server_ready; });
            // Dropped by the server as they come, and credited: all of it goes.
            co_await asio::async_write(s, asio::buffer(written), use_awaitable);
            client_wrote_all = true;
            std::string bye(3, '\0');
            co_await asio::async_read(s, asio::buffer(bye), use_awaitable);
            server_said = bye;
            s.shutdown(rdma_asio::stream::shutdown_both);
            client_shut = true;
        }());
    CHECK(server_local == stream_at(18890));
    CHECK(client_remote == stream_at(18890));
    CHECK(client_local == server_remote);
    CHECK(client_local.address() == stream_at(18890).address());
    CHECK(client_local.port() != 0);
    CHECK(available_at_first == 100);
    CHECK(available_after_read == 60);
    CHECK(available_after_shut == 0);
    CHECK(server_read_end == asio::error::eof);
    CHECK(client_wrote_all);
    CHECK(server_said == "bye");
    CHECK(after_close == asio::error::bad_descriptor);
}

namespace {

// Accepts a connection and registers a stream's memory (a 4 KiB ring) in its
// protection domain, as a stream's preparation does, for a test to play its peer.
asio::awaitable<rdma_asio::connection>
accept_with_memory(rdma_asio::acceptor& acceptor,
                   std::optional<rdma_asio::detail::stream_memory>& memory) {
    rdma_asio::connection conn = co_await acceptor.async_accept(use_awaitable);
    memory.emplace(4096);
    memory->register_own(conn.pd());
    co_return conn;
}

} // namespace

TEST_CASE("a stream's memory lends the peer its ring and its control block for RDMA writes "
          "alone, by the keys its hello tells",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18894));
    std::optional<rdma_asio::detail::stream_memory> memory;
    rdma_asio::detail::stream_hello told;
    bool told_yet = false, client_done = false;
    rdma_asio::error_code wrote_ring, wrote_control, read_ring;
    const auto pattern = byte_pattern(64, 3);
    const rdma_asio::detail::stream_credit_record record{12345, 67};
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::connection conn = co_await accept_with_memory(acceptor, memory);
            const rdma_asio::registered_buffer hello = memory->own_hello(8);
            REQUIRE(hello.size == sizeof told);
            std::memcpy(&told, hello.data, sizeof told);
            told_yet = true;
            co_await rdma_asio::test::until([&] { return client_done; });
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::connection conn = co_await rdma_asio::async_connect(
                ioc.get_executor(), stream_at(18894), use_awaitable);
            std::vector<std::uint8_t> local(pattern);
            local.resize(128);
            std::memcpy(local.data() + 64, &record, sizeof record);
            rdma_asio::memory_region mr(conn.pd(), asio::buffer(local), IBV_ACCESS_LOCAL_WRITE);
            co_await rdma_asio::test::until([&] { return told_yet; });
            auto& qp = conn.queue_pair();
            std::tie(wrote_ring, std::ignore) = co_await qp.async_write(
                mr.at(0, 64), rdma_asio::remote_buffer{told.ring_address, 64, told.ring_rkey},
                with_error);
            std::tie(wrote_control, std::ignore) = co_await qp.async_write(
                mr.at(64, sizeof record),
                rdma_asio::remote_buffer{told.control_address, sizeof record, told.control_rkey},
                with_error);
            // The same key does not let the peer read what it may write.
            std::tie(read_ring, std::ignore) = co_await qp.async_read(
                mr.at(0, 64), rdma_asio::remote_buffer{told.ring_address, 64, told.ring_rkey},
                with_error);
            client_done = true;
        }());
    REQUIRE(memory);
    CHECK(told.ring_bytes == 4096);
    CHECK(told.notices == 8);
    CHECK_FALSE(wrote_ring);
    const auto* ring = reinterpret_cast<const std::uint8_t*>(memory->ring_at(0, 0));
    CHECK(std::vector<std::uint8_t>(ring, ring + 64) == pattern);
    CHECK_FALSE(wrote_control);
    const rdma_asio::detail::stream_credit_record landed = memory->landed_record(0);
    CHECK(landed.bytes_read == record.bytes_read);
    CHECK(landed.notices_reaped == record.notices_reaped);
    CHECK(read_ring == rdma_asio::wc_errc::remote_access_error);
}

namespace {

// A stream's memory with a next ring registered, then that ring read from now on
// (`withdrawn` false: the first ring goes) or refused by the peer (true: the
// next ring goes). The peer writes into the ring that stays, by its key, then
// into the one that went, by the key it was told: the first lands, the second
// is refused by the responder (remote access error), as no key to memory the
// stream let go reaches anything.
void check_let_go_ring_unreachable(std::uint16_t port, bool withdrawn) {
    asio::io_context ioc;
    const auto at = stream_at(port);
    rdma_asio::acceptor acceptor(ioc, at);
    std::optional<rdma_asio::detail::stream_memory> memory;
    rdma_asio::remote_buffer stays{}, went{};
    std::uint32_t stays_generation = 0;
    bool told_yet = false, client_done = false;
    rdma_asio::error_code wrote_stays, wrote_went;
    const auto pattern = byte_pattern(64, 4);
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::connection conn = co_await accept_with_memory(acceptor, memory);
            rdma_asio::detail::stream_hello hello;
            std::memcpy(&hello, memory->own_hello(8).data, sizeof hello);
            const rdma_asio::remote_buffer first{hello.ring_address, 64, hello.ring_rkey};
            const auto next = memory->try_register_next_ring(8192);
            REQUIRE(next);
            const rdma_asio::remote_buffer second{next->address, 64, next->rkey};
            if (withdrawn) {
                memory->drop_next_ring();
                stays = first, went = second;
            } else {
                memory->ring_moved_to(1);
                stays = second, went = first, stays_generation = 1;
            }
            told_yet = true;
            co_await rdma_asio::test::until([&] { return client_done; });
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::connection conn =
                co_await rdma_asio::async_connect(ioc.get_executor(), at, use_awaitable);
            std::vector<std::uint8_t> local(pattern);
            rdma_asio::memory_region mr(conn.pd(), asio::buffer(local), IBV_ACCESS_LOCAL_WRITE);
            co_await rdma_asio::test::until([&] { return told_yet; });
            auto& qp = conn.queue_pair();
            std::tie(wrote_stays, std::ignore) =
                co_await qp.async_write(mr.at(0, 64), stays, with_error);
            // Last: a refused write leaves the queue pair in the error state.
            std::tie(wrote_went, std::ignore) =
                co_await qp.async_write(mr.at(0, 64), went, with_error);
            client_done = true;
        }());
    REQUIRE(memory);
    CHECK_FALSE(wrote_stays);
    const auto* ring = reinterpret_cast<const std::uint8_t*>(memory->ring_at(stays_generation, 0));
    CHECK(std::vector<std::uint8_t>(ring, ring + 64) == pattern);
    CHECK(wrote_went == rdma_asio::wc_errc::remote_access_error);
}

} // namespace

TEST_CASE("a stream's ring that was replaced is out of the peer's reach: its key reaches "
          "nothing",
          "[stream]") {
    check_let_go_ring_unreachable(18931, false);
}

TEST_CASE("a stream's next ring that the peer refused is out of its reach: its key reaches "
          "nothing",
          "[stream]") {
    check_let_go_ring_unreachable(18932, true);
}

// Two peers of one acceptor's streams, played by the test over real connections:
// each learns its own stream's ring from its hello, and A learns B's as well (as
// a peer that guessed or was told it would). A's write into its own ring lands;
// its write by B's key, over A's connection, is refused by the responder. So
// each accepted stream's memory is in a protection domain of its own: were the
// streams of one acceptor in one, the key of one would reach it from any.
TEST_CASE("the streams of one acceptor are out of each other's peers' reach: one stream's ring "
          "key reaches nothing over another's connection",
          "[stream]") {
    asio::io_context ioc;
    const auto at = stream_at(18933);
    rdma_asio::acceptor acceptor(ioc, at);
    std::optional<rdma_asio::stream> server_a, server_b;
    bool client_done = false;
    rdma_asio::error_code own_ring, other_ring;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            server_a.emplace(co_await accept_stream(acceptor));
            server_b.emplace(co_await accept_stream(acceptor));
            co_await rdma_asio::test::until([&] { return client_done; });
        }(),
        [&]() -> asio::awaitable<void> {
            // Each connection's hello, received as a stream's peer receives it.
            using hello_type = rdma_asio::detail::stream_hello;
            auto hello_of = [](rdma_asio::connection& conn, rdma_asio::memory_region& mr,
                               const std::vector<std::uint8_t>& local,
                               std::size_t at_byte) -> asio::awaitable<hello_type> {
                hello_type hello;
                const std::size_t n =
                    co_await conn.queue_pair().async_receive(mr.at(at_byte, 64), use_awaitable);
                if (n == sizeof hello)
                    std::memcpy(&hello, local.data() + at_byte, sizeof hello);
                co_return hello;
            };
            rdma_asio::connection a =
                co_await rdma_asio::async_connect(ioc.get_executor(), at, use_awaitable);
            std::vector<std::uint8_t> local_a(192, 0x5a);
            rdma_asio::memory_region mr_a(a.pd(), asio::buffer(local_a), IBV_ACCESS_LOCAL_WRITE);
            const auto hello_a = co_await hello_of(a, mr_a, local_a, 64);
            rdma_asio::connection b =
                co_await rdma_asio::async_connect(ioc.get_executor(), at, use_awaitable);
            std::vector<std::uint8_t> local_b(64);
            rdma_asio::memory_region mr_b(b.pd(), asio::buffer(local_b), IBV_ACCESS_LOCAL_WRITE);
            const auto hello_b = co_await hello_of(b, mr_b, local_b, 0);
            auto& qp = a.queue_pair();
            std::tie(own_ring, std::ignore) = co_await qp.async_write(
                mr_a.at(0, 64),
                rdma_asio::remote_buffer{hello_a.ring_address, 64, hello_a.ring_rkey}, with_error);
            // Last: a refused write leaves A's queue pair in the error state.
            std::tie(other_ring, std::ignore) = co_await qp.async_write(
                mr_a.at(0, 64),
                rdma_asio::remote_buffer{hello_b.ring_address, 64, hello_b.ring_rkey}, with_error);
            client_done = true;
        }());
    REQUIRE(server_a);
    REQUIRE(server_b);
    CHECK_FALSE(own_ring);
    CHECK(other_ring == rdma_asio::wc_errc::remote_access_error);
}

// The kernel pins every page a registration touches (ibv_reg_mr(3)) and counts
// it in VmPin: a ring that starts inside a page pins one page more, and each
// small region a page of its own.
TEST_CASE("a stream holds pinned its two rings' pages and two pages more, and nothing once "
          "closed",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18898));
    const std::size_t ring = 8 * 1024;
    const std::size_t page_kib = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) / 1024;
    // Its ring, its copy of the peer's ring (as large), the control block's page
    // (the peer writes records there) and one page for the hellos and the record
    // sources.
    const std::size_t per_end_kib = 2 * (ring / 1024) + 2 * page_kib;
    const std::size_t before = rdma_asio::test::pinned_kib();
    std::size_t open = 0;
    bool measured = false;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor, ring_of(ring));
            std::array<char, 1> byte{};
            co_await asio::async_read(s, asio::buffer(byte), use_awaitable);
            co_await asio::async_write(s, asio::buffer(byte), use_awaitable);
            co_await rdma_asio::test::until([&] { return measured; });
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, ring_of(ring));
            co_await rdma_asio::async_connect(s, stream_at(18898), use_awaitable);
            std::array<char, 1> byte{'x'};
            co_await asio::async_write(s, asio::buffer(byte), use_awaitable);
            co_await asio::async_read(s, asio::buffer(byte), use_awaitable);
            // Both hellos have arrived: each end has registered its copy too.
            open = rdma_asio::test::pinned_kib();
            measured = true;
        }());
    CHECK(open - before == 2 * per_end_kib);
    // Closed: every registration goes once the connections have (bounded).
    std::size_t left = open;
    const auto closing = std::chrono::steady_clock::now();
    const bool released = rdma_asio::test::run_until(
        ioc, [&] { return (left = rdma_asio::test::pinned_kib()) == before; }, 30s);
    INFO("pinned before the streams "
         << before << " KiB, open " << open << " KiB, left " << left << " KiB after "
         << (std::chrono::steady_clock::now() - closing) / 1ms << " ms");
    REQUIRE(released);
}

// With the default options a stream starts with a 4 KiB ring; a writer that
// keeps it full makes the reader replace it with one twice as large, up to
// receive_ring (256 KiB), and each old ring, and the writer's copy of it, goes.
TEST_CASE("a stream's ring grows while its writer fills it, up to receive_ring, and the old "
          "rings go: every byte intact",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18899));
    const std::size_t page_kib = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) / 1024;
    const rdma_asio::stream_options defaults;
    REQUIRE(defaults.initial_receive_ring == 4096);
    REQUIRE(defaults.receive_ring == 256 * 1024);
    const std::size_t size = 4 << 20;
    const auto sent = byte_pattern(size, 11);
    std::vector<std::uint8_t> received;
    const std::size_t before = rdma_asio::test::pinned_kib();
    std::size_t small = 0, grown = 0;
    bool measured = false;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor, defaults);
            std::array<char, 1> byte{};
            co_await asio::async_read(s, asio::buffer(byte), use_awaitable);
            small = rdma_asio::test::pinned_kib(); // both ends open, nothing sent yet
            co_await asio::async_write(s, asio::buffer(sent), use_awaitable);
            co_await asio::async_read(s, asio::buffer(byte), use_awaitable);
            co_await rdma_asio::test::until([&] { return measured; });
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, defaults);
            co_await rdma_asio::async_connect(s, stream_at(18899), use_awaitable);
            std::array<char, 1> byte{'x'};
            co_await asio::async_write(s, asio::buffer(byte), use_awaitable);
            received.resize(size);
            co_await asio::async_read(s, asio::buffer(received), use_awaitable);
            co_await asio::async_write(s, asio::buffer(byte), use_awaitable);
            grown = rdma_asio::test::pinned_kib();
            measured = true;
        }(),
        120s);
    CHECK(rdma_asio::test::byte_difference(received, sent) == "");
    INFO("pinned before " << before << " KiB, open " << small << " KiB, after 4 MiB one way "
                          << grown << " KiB");
    // Each end: its ring, its copy of the peer's, and two pages.
    CHECK(small - before == 2 * (4 + 4 + 2 * page_kib));
    // The reader's ring and the writer's copy of it grew to 256 KiB; the other
    // direction's stayed at 4 KiB; nothing of the rings before is left.
    CHECK(grown - before == 2 * 256 + 2 * 4 + 4 * page_kib);
}

TEST_CASE("a grown ring goes back to the first size once idle and grows again: every byte "
          "intact",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18930));
    const std::size_t page_kib = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) / 1024;
    rdma_asio::stream_options options;
    options.shrink_after_idle = 100ms;
    const std::size_t size = 1 << 20;
    const auto first = byte_pattern(size, 12);
    const auto second = byte_pattern(size, 13);
    std::vector<std::uint8_t> got_first(size), got_second(size);
    // Each end: its ring, its copy of the peer's, and two pages.
    const std::size_t small = 2 * (4 + 4 + 2 * page_kib);
    const std::size_t before = rdma_asio::test::pinned_kib();
    std::size_t grown = 0, shrunk = 0, regrown = 0;
    std::chrono::steady_clock::duration quiet{};
    bool measured = false;
    run_pair(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor, options);
            std::array<char, 1> go{};
            co_await asio::async_write(s, asio::buffer(first), use_awaitable);
            co_await asio::async_read(s, asio::buffer(go), use_awaitable);
            co_await asio::async_write(s, asio::buffer(second), use_awaitable);
            co_await rdma_asio::test::until([&] { return measured; });
        }(),
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, options);
            co_await rdma_asio::async_connect(s, stream_at(18930), use_awaitable);
            co_await asio::async_read(s, asio::buffer(got_first), use_awaitable);
            grown = rdma_asio::test::pinned_kib() - before;
            // Quiet now: within two looks the reader announces a ring of the
            // first size, the writer moves to it with its next record, and each
            // lets its large one go (bounded by run_pair's deadline).
            const auto quiet_from = std::chrono::steady_clock::now();
            co_await rdma_asio::test::until(
                [&] { return rdma_asio::test::pinned_kib() - before <= small; });
            quiet = std::chrono::steady_clock::now() - quiet_from;
            shrunk = rdma_asio::test::pinned_kib() - before;
            std::array<char, 1> go{'g'};
            co_await asio::async_write(s, asio::buffer(go), use_awaitable);
            co_await asio::async_read(s, asio::buffer(got_second), use_awaitable);
            regrown = rdma_asio::test::pinned_kib() - before;
            measured = true;
        }(),
        60s);
    INFO("pinned for the pair: "
         << grown << " KiB after 1 MiB, " << shrunk << " KiB after "
         << std::chrono::duration_cast<std::chrono::milliseconds>(quiet).count() << " ms of quiet, "
         << regrown << " KiB after 1 MiB more");
    CHECK(rdma_asio::test::byte_difference(got_first, first) == "");
    CHECK(rdma_asio::test::byte_difference(got_second, second) == "");
    CHECK(grown > small);
    CHECK(shrunk == small);
    CHECK(regrown > small);
}

namespace {

// What one side of the multi-threaded test saw; written by its coroutines only,
// read by the test's thread once the io_context's threads have joined.
struct mt_side {
    std::vector<std::uint8_t> received;
    rdma_asio::error_code write_error, read_error;
    std::size_t aborted = 0;
    bool wrote_all = false;
};

// Writes `bytes` in writes of 1 to 9 000 bytes, sizes from `seed`.
asio::awaitable<void> write_varied(rdma_asio::stream& s, const std::vector<std::uint8_t>& bytes,
                                   unsigned seed, mt_side& side) {
    std::minstd_rand rng(seed);
    for (std::size_t at = 0; at < bytes.size();) {
        const std::size_t n = std::min<std::size_t>(1 + rng() % 9000, bytes.size() - at);
        auto [ec, written] =
            co_await asio::async_write(s, asio::buffer(bytes.data() + at, n), with_error);
        if (ec) {
            side.write_error = ec;
            co_return;
        }
        at += written;
    }
    side.wrote_all = true;
}

// Reads until `total` bytes came, each read cancelled at once, after a turn of
// the event loop, or not at all (as the single-threaded test above), so that the
// cancellation meets completions that the CQ's reader delivers on other threads.
asio::awaitable<void> read_cancelled_now_and_then(rdma_asio::stream& s, std::size_t total,
                                                  unsigned seed, mt_side& side) {
    std::minstd_rand rng(seed);
    std::array<std::uint8_t, 3000> buffer{};
    const auto ex = co_await asio::this_coro::executor;
    while (side.received.size() < total) {
        asio::cancellation_signal signal;
        bool done = false;
        rdma_asio::error_code ec;
        std::size_t n = 0;
        s.async_read_some(asio::buffer(buffer.data(), 1 + rng() % buffer.size()),
                          asio::bind_cancellation_slot(
                              signal.slot(), [&](rdma_asio::error_code e, std::size_t got) {
                                  ec = e, n = got, done = true;
                              }));
        switch (rng() % 3) {
        case 0:
            signal.emit(asio::cancellation_type::terminal);
            break;
        case 1:
            co_await asio::post(ex, use_awaitable);
            signal.emit(asio::cancellation_type::terminal);
            break;
        default:
            break;
        }
        while (!done)
            co_await asio::post(ex, use_awaitable);
        if (ec == asio::error::operation_aborted && n == 0) {
            ++side.aborted;
            continue;
        }
        if (ec) {
            side.read_error = ec;
            co_return;
        }
        side.received.insert(side.received.end(), buffer.begin(), buffer.begin() + n);
    }
}

// Runs `ioc` on this thread and three more, until it stops or for at most 120 s.
void run_on_four_threads(asio::io_context& ioc) {
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i)
        threads.emplace_back([&] { ioc.run_for(120s); });
    ioc.run_for(120s);
    for (std::thread& t : threads)
        t.join();
}

} // namespace

// Both sides' streams on strands of an io_context run by four threads, each
// stream written and read at once by two coroutines on its strand: the program's
// calls, its cancellations and the completions the CQs' reader delivers (on any
// of the threads, through the channel the connections share) meet in the
// stream's state. Under ThreadSanitizer (build-tsan) this is the test of its lock.
TEST_CASE("streams on an io_context run by four threads carry 256 KiB each way at once, with "
          "reads cancelled now and then, every byte in order",
          "[stream][mt]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18895));
    const std::size_t size = 256 * 1024;
    const auto to_client = byte_pattern(size, 21), to_server = byte_pattern(size, 22);
    auto small = ring_of(16 * 1024); // credit waits: the writers wait on the readers
    auto server_strand = asio::make_strand(ioc), client_strand = asio::make_strand(ioc);
    rdma_asio::stream server(server_strand, small), client(client_strand, small);
    mt_side server_side, client_side;
    std::atomic<int> finished{0};
    const auto count_done = [&](std::exception_ptr e) {
        if (e || ++finished == 4)
            ioc.stop();
    };
    asio::co_spawn(
        server_strand,
        [&]() -> asio::awaitable<void> {
            co_await rdma_asio::async_accept(acceptor, server, use_awaitable);
            asio::co_spawn(server_strand, write_varied(server, to_client, 1, server_side),
                           count_done);
            co_await read_cancelled_now_and_then(server, size, 2, server_side);
        },
        count_done);
    asio::co_spawn(
        client_strand,
        [&]() -> asio::awaitable<void> {
            co_await rdma_asio::async_connect(client, stream_at(18895), use_awaitable);
            asio::co_spawn(client_strand, write_varied(client, to_server, 3, client_side),
                           count_done);
            co_await read_cancelled_now_and_then(client, size, 4, client_side);
        },
        count_done);
    run_on_four_threads(ioc);
    REQUIRE(finished == 4); // else a coroutine threw, or the bound passed
    for (const mt_side* side : {&server_side, &client_side}) {
        CHECK_FALSE(side->write_error);
        CHECK_FALSE(side->read_error);
        CHECK(side->wrote_all);
    }
    CHECK(rdma_asio::test::byte_difference(server_side.received, to_server) == "");
    CHECK(rdma_asio::test::byte_difference(client_side.received, to_client) == "");
    CHECK(server_side.aborted + client_side.aborted > 0);
    server.close();
    client.close();
}

// Without a strand: each stream used by one coroutine only (one thread at a time,
// as a socket may be), on an io_context run by four threads. What the CQs'
// reader takes in for a stream (the peer's bytes, its records, a write done)
// then runs on any thread, also while the coroutine calls the stream on another.
TEST_CASE("streams on an io_context run by four threads without a strand carry 1 000 echoed "
          "messages of 1 to 4 000 bytes, every byte in order",
          "[stream][mt]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc, stream_at(18896));
    const std::size_t messages = 1000;
    std::size_t echoed = 0, mismatched = 0;
    std::atomic<int> finished{0};
    std::exception_ptr failure;
    const auto count_done = [&](std::exception_ptr e) {
        if (e)
            failure = e; // the io_context stops now: nothing else writes it
        if (e || ++finished == 2)
            ioc.stop();
    };
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s = co_await accept_stream(acceptor, ring_of(8 * 1024));
            std::vector<std::uint8_t> buffer(4000);
            for (;;) {
                auto [ec, n] = co_await s.async_read_some(asio::buffer(buffer), with_error);
                if (ec == asio::error::eof)
                    break;
                if (ec)
                    throw rdma_asio::system_error(ec);
                co_await asio::async_write(s, asio::buffer(buffer.data(), n), use_awaitable);
            }
        },
        count_done);
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::stream s(ioc, ring_of(8 * 1024));
            co_await rdma_asio::async_connect(s, stream_at(18896), use_awaitable);
            std::minstd_rand rng(5);
            std::vector<std::uint8_t> back(4000);
            for (std::size_t i = 0; i < messages; ++i) {
                const auto message = byte_pattern(1 + rng() % 4000, static_cast<unsigned>(i));
                co_await asio::async_write(s, asio::buffer(message), use_awaitable);
                co_await asio::async_read(s, asio::buffer(back.data(), message.size()),
                                          use_awaitable);
                if (!std::equal(message.begin(), message.end(), back.begin()))
                    ++mismatched;
                ++echoed;
            }
            s.shutdown();
        },
        count_done);
    run_on_four_threads(ioc);
    if (failure)
        std::rethrow_exception(failure);
    REQUIRE(finished == 2); // else the bound passed
    CHECK(echoed == messages);
    CHECK(mismatched == 0);
}
