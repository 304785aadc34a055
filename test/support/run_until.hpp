// Runs an io_context on the test's thread until a condition holds or a bound
// passes: the bounded wait of tests that drive handlers and check state between.
#pragma once

#include "asio_alias.hpp"

#include <chrono>
#include <functional>

namespace rdma_asio::test {

/// Runs `ioc` a handler (or 20 ms) at a time until `done()` or `limit`; returns
/// done().
inline bool run_until(asio::io_context& ioc, const std::function<bool()>& done,
                      std::chrono::steady_clock::duration limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        ioc.restart();
        ioc.run_one_for(std::chrono::milliseconds(20));
    }
    return done();
}

} // namespace rdma_asio::test
