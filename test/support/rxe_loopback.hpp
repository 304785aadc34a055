// What the rxe tests of connections and streams share: rxe0's address in the
// test VM (10.0.0.1, veth0), a token that hands back errors, a server and a
// client run together under one deadline, a bounded wait for a condition, and
// bytes a reader can check.
#pragma once

#include "asio_alias.hpp"
#include "run_coroutine.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace rdma_asio::test {

inline asio::ip::tcp::endpoint rxe0_endpoint(std::uint16_t port) {
    return {asio::ip::make_address("10.0.0.1"), port};
}

// co_await op(..., with_error): a tuple of the error and the results, no throw.
inline const auto with_error = asio::experimental::as_tuple(asio::use_awaitable);

// Runs `server` and `client` together on `ioc`; a missed deadline fails the test.
inline void run_pair(asio::io_context& ioc, asio::awaitable<void> server,
                     asio::awaitable<void> client,
                     std::chrono::steady_clock::duration deadline = std::chrono::seconds(60)) {
    using namespace asio::experimental::awaitable_operators;
    run_coroutine(ioc, std::move(server) && std::move(client), deadline);
}

// Waits until `done()` holds, looking every 5 ms; bounded by the caller's deadline.
inline asio::awaitable<void> until(std::function<bool()> done) {
    while (!done()) {
        asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(5));
        co_await t.async_wait(asio::use_awaitable);
    }
}

// n bytes that differ with `seed` and do not repeat within a ring's length.
inline std::vector<std::uint8_t> byte_pattern(std::size_t n, unsigned seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<std::uint8_t>(i * 31 + seed + i / 977);
    return v;
}

// Empty when `got` is `expected`, else where they part: a failed CHECK prints
// this line instead of megabytes (Catch's expansion of two large vectors takes
// minutes in the emulated guest).
inline std::string byte_difference(const std::vector<std::uint8_t>& got,
                                   const std::vector<std::uint8_t>& expected) {
    const auto [g, e] = std::mismatch(got.begin(), got.end(), expected.begin(), expected.end());
    if (g == got.end() && e == expected.end())
        return {};
    return "got " + std::to_string(got.size()) + " bytes, expected " +
           std::to_string(expected.size()) + "; the first difference at byte " +
           std::to_string(g - got.begin());
}

} // namespace rdma_asio::test
