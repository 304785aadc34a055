// Streams under a locked-memory limit, as a process without CAP_IPC_LOCK has them
// (a user's, or a service's under systemd's LimitMEMLOCK): the program the test
// "streams under a locked-memory limit ..." (locked_memory_rxe_test.cpp) starts.
// The test VM runs its tests as root, whose CAP_IPC_LOCK lifts the limit, so this
// program gives the capability up first, then sets RLIMIT_MEMLOCK.
//
//   locked_memory_child LIMIT_KIB PORT OUT_FILE [RING_KIB]
//
// Opens stream pairs, both ends in this process, each carrying a byte both
// ways, until one fails (at most 1 000); with the default options, or with
// rings of RING_KIB from the start (receive_ring and initial_receive_ring);
// closes that pair, then
// all; waits (bounded) for nothing to be pinned; opens one pair again. Writes what
// happened to OUT_FILE as key=value lines, which the test checks:
//   opened, pinned_kib_open, failed_step, error_category, error_value,
//   error_message, pinned_kib_closed, reopened.
// Exit status 0 when it got that far; 2 for bad usage or when the limit could not be
// set up; 3 when a wait passed its bound (the file says which).
//
//   locked_memory_child refused-copy PORT OUT_FILE
//
// Opens one pair with the default options (the looks every 50 ms), then lowers
// the limit to what is pinned and 12 KiB more: room for the reader's next ring of
// 8 KiB, none then for the writer's copy of it. Writes 256 KiB one way through
// the 4 KiB ring, then waits (bounded) until what is pinned is back where it was.
// Writes: pinned_kib_open, pinned_kib_most (seen between reads), intact,
// pinned_kib_after.
#include "asio_alias.hpp"
#include "rxe_counters.hpp"

#include <rdma_asio/stream.hpp>
#include <rdma_asio/testing/run.hpp>

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
constexpr auto with_error = asio::experimental::as_tuple(use_awaitable);

// Takes CAP_IPC_LOCK out of every set of this process (capabilities(7)).
bool give_up_ipc_lock() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (::syscall(SYS_capget, &header, data) != 0)
        return false;
    auto& set = data[CAP_TO_INDEX(CAP_IPC_LOCK)];
    set.effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
    set.permitted &= ~CAP_TO_MASK(CAP_IPC_LOCK);
    set.inheritable &= ~CAP_TO_MASK(CAP_IPC_LOCK);
    return ::syscall(SYS_capset, &header, data) == 0;
}

// How one end of a pair went: done once it ended; the first error and the step
// that had it.
struct end_result {
    bool done = false;
    rdma_asio::error_code ec;
    std::string step;
};

asio::awaitable<void> accepting_end(rdma_asio::acceptor& acceptor, rdma_asio::stream& s,
                                    end_result& r) {
    std::array<char, 1> byte{};
    if (auto [ec] = co_await rdma_asio::async_accept(acceptor, s, with_error); ec)
        r.ec = ec, r.step = "accept";
    else if (auto [ec, n] = co_await asio::async_read(s, asio::buffer(byte), with_error); ec)
        r.ec = ec, r.step = "read";
    else if (auto [ec, n] = co_await asio::async_write(s, asio::buffer(byte), with_error); ec)
        r.ec = ec, r.step = "write";
    r.done = true;
}

asio::awaitable<void> connecting_end(rdma_asio::stream& s, tcp::endpoint at, end_result& r) {
    std::array<char, 1> byte{'x'};
    if (auto [ec] = co_await rdma_asio::async_connect(s, at, with_error); ec)
        r.ec = ec, r.step = "connect";
    else if (auto [ec, n] = co_await asio::async_write(s, asio::buffer(byte), with_error); ec)
        r.ec = ec, r.step = "write";
    else if (auto [ec, n] = co_await asio::async_read(s, asio::buffer(byte), with_error); ec)
        r.ec = ec, r.step = "read";
    r.done = true;
}

struct pair_of_streams {
    rdma_asio::stream accepted, connected;
    pair_of_streams(asio::io_context& ioc, const rdma_asio::stream_options& options)
        : accepted(ioc, options), connected(ioc, options) {}
};

// Opens `p` through `acceptor` and carries a byte both ways. The first error (one
// of the limit's first, else the accepting end's) in `failure`; false when the
// ends did not end within the bound.
bool open_pair(asio::io_context& ioc, rdma_asio::acceptor& acceptor, tcp::endpoint at,
               pair_of_streams& p, end_result& failure) {
    end_result a, c;
    asio::co_spawn(ioc, accepting_end(acceptor, p.accepted, a), asio::detached);
    asio::co_spawn(ioc, connecting_end(p.connected, at, c), asio::detached);
    if (!rdma_asio::testing::run_until(
            ioc, [&] { return (a.done && c.done) || a.ec || c.ec; }, 60s))
        return false;
    if (a.ec || c.ec) {
        // One end failed: the other may wait for bytes that will not come.
        p.accepted.close();
        p.connected.close();
        if (!rdma_asio::testing::run_until(
                ioc, [&] { return a.done && c.done; }, 60s))
            return false;
        const bool c_first = c.ec == rdma_asio::errc::locked_memory_limit &&
                             a.ec != rdma_asio::errc::locked_memory_limit;
        failure = c_first || !a.ec ? c : a;
    }
    return true;
}

// The refused-copy run (above): what happened, into `out`; 3 when a wait
// passed its bound.
int refused_copy(asio::io_context& ioc, tcp::endpoint at, std::ofstream& out) {
    rdma_asio::stream_options options;
    options.shrink_after_idle = 50ms;
    rdma_asio::acceptor acceptor(ioc, at);
    pair_of_streams p(ioc, options);
    end_result failure;
    if (!open_pair(ioc, acceptor, at, p, failure) || failure.ec) {
        out << "timed_out=opening " << failure.ec.message() << "\n";
        return 3;
    }
    const std::size_t open_kib = rdma_asio::test::pinned_kib();
    const rlimit limit{(open_kib + 12) * 1024, (open_kib + 12) * 1024};
    if (::setrlimit(RLIMIT_MEMLOCK, &limit) != 0) {
        std::perror("locked_memory_child: lowering the limit");
        return 2;
    }
    std::vector<std::uint8_t> sent(256 * 1024), received;
    for (std::size_t i = 0; i < sent.size(); ++i)
        sent[i] = static_cast<std::uint8_t>(i * 31 + i / 977);
    std::size_t most = open_kib;
    bool written = false, read_all = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            co_await asio::async_write(p.connected, asio::buffer(sent), use_awaitable);
            written = true;
        },
        asio::detached);
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            std::array<std::uint8_t, 1024> chunk{};
            while (received.size() < sent.size()) {
                const std::size_t n =
                    co_await p.accepted.async_read_some(asio::buffer(chunk), use_awaitable);
                received.insert(received.end(), chunk.begin(), chunk.begin() + n);
                most = std::max(most, rdma_asio::test::pinned_kib());
            }
            read_all = true;
        },
        asio::detached);
    if (!rdma_asio::testing::run_until(
            ioc, [&] { return written && read_all; }, 120s)) {
        out << "timed_out=transfer " << received.size() << " bytes read\n";
        return 3;
    }
    out << "pinned_kib_open=" << open_kib << "\n"
        << "pinned_kib_most=" << most << "\n"
        << "intact=" << (received == sent ? "yes" : "no") << "\n";
    rdma_asio::testing::run_until(
        ioc, [&] { return rdma_asio::test::pinned_kib() == open_kib; }, 30s);
    out << "pinned_kib_after=" << rdma_asio::test::pinned_kib() << "\n";
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc == 4 && std::string(argv[1]) == "refused-copy") {
        const auto port = static_cast<std::uint16_t>(std::strtoul(argv[2], nullptr, 10));
        std::ofstream out(argv[3]);
        const rlimit generous{1 << 20, 1 << 20};
        if (!out || !give_up_ipc_lock() || ::setrlimit(RLIMIT_MEMLOCK, &generous) != 0) {
            std::perror("locked_memory_child: setting up the limit");
            return 2;
        }
        asio::io_context ioc(1);
        return refused_copy(ioc, tcp::endpoint(asio::ip::make_address("10.0.0.1"), port), out);
    }
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: locked_memory_child LIMIT_KIB PORT OUT_FILE [RING_KIB]\n");
        return 2;
    }
    rdma_asio::stream_options options;
    if (argc == 5) {
        options.receive_ring = std::strtoul(argv[4], nullptr, 10) * 1024;
        options.initial_receive_ring = options.receive_ring;
    }
    const unsigned long limit_kib = std::strtoul(argv[1], nullptr, 10);
    const auto port = static_cast<std::uint16_t>(std::strtoul(argv[2], nullptr, 10));
    std::ofstream out(argv[3]);
    const rlimit limit{limit_kib * 1024, limit_kib * 1024};
    if (!out || !give_up_ipc_lock() || ::setrlimit(RLIMIT_MEMLOCK, &limit) != 0) {
        std::perror("locked_memory_child: setting up the limit");
        return 2;
    }
    asio::io_context ioc(1);
    const tcp::endpoint at(asio::ip::make_address("10.0.0.1"), port); // rxe0 in the test VM
    rdma_asio::acceptor acceptor(ioc, at);
    std::vector<std::unique_ptr<pair_of_streams>> pairs;
    end_result failure;
    int opened = 0;
    while (opened < 1000 && !failure.ec) {
        auto& p = *pairs.emplace_back(std::make_unique<pair_of_streams>(ioc, options));
        if (!open_pair(ioc, acceptor, at, p, failure)) {
            out << "timed_out=pair " << opened + 1 << "\n";
            return 3;
        }
        opened += failure.ec ? 0 : 1;
    }
    out << "opened=" << opened << "\n"
        << "pinned_kib_open=" << rdma_asio::test::pinned_kib() << "\n"
        << "failed_step=" << failure.step << "\n"
        << "error_category=" << (failure.ec ? failure.ec.category().name() : "") << "\n"
        << "error_value=" << failure.ec.value() << "\n"
        << "error_message=" << (failure.ec ? failure.ec.message() : "") << "\n";
    pairs.clear();
    const bool released = rdma_asio::testing::run_until(
        ioc, [] { return rdma_asio::test::pinned_kib() == 0; }, 30s);
    out << "pinned_kib_closed=" << rdma_asio::test::pinned_kib() << "\n";
    if (!released)
        return 0; // the test reads what stayed
    pair_of_streams again(ioc, options);
    end_result second;
    if (!open_pair(ioc, acceptor, at, again, second)) {
        out << "timed_out=reopening\n";
        return 3;
    }
    out << "reopened=" << (second.ec ? second.ec.message() : "yes") << "\n";
    return 0;
}
