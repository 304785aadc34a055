// Runs a test's coroutine on an io_context to its end, bounded, in small slices
// (a completion on another executor, e.g. use_future's, never leaves the loop
// blocked until the deadline). Rethrows what the coroutine threw, so Catch2's
// REQUIRE inside it fails the test.
#pragma once

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <exception>

namespace rdma_asio::test {

inline void run_coroutine(asio::io_context& ioc, asio::awaitable<void> body,
                          std::chrono::seconds limit = std::chrono::seconds(60)) {
    bool done = false;
    std::exception_ptr failure;
    asio::co_spawn(ioc, std::move(body), [&](std::exception_ptr e) {
        done = true;
        failure = e;
    });
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(std::chrono::milliseconds(20));
    REQUIRE(done);
    if (failure)
        std::rethrow_exception(failure);
}

} // namespace rdma_asio::test
