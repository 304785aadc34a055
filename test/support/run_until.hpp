// Runs an io_context on the test's thread until a condition holds or a bound
// passes: the bounded wait of tests that drive handlers and check state between,
// also with handlers that throw.
#pragma once

#include "asio_alias.hpp"

#include <algorithm>
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

/// The same, for a `done()` that is costly (a run of the rdma tool, say): it is
/// asked every `period` while handlers run between, not after each handler.
inline bool run_until_every(asio::io_context& ioc, std::chrono::steady_clock::duration period,
                            const std::function<bool()>& done,
                            std::chrono::steady_clock::duration limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        if (done())
            return true;
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline)
            return false;
        const auto next = std::min(now + period, deadline);
        while (std::chrono::steady_clock::now() < next) {
            ioc.restart();
            ioc.run_one_for(std::chrono::milliseconds(20));
        }
    }
}

/// The same, for handlers that throw `Exception`: each one that comes out of run
/// is caught and counted, and the io_context goes on. Returns how many came.
template <class Exception>
int run_catching(asio::io_context& ioc, const std::function<bool()>& done,
                 std::chrono::steady_clock::duration limit) {
    int caught = 0;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        try {
            ioc.restart();
            ioc.run_one_for(std::chrono::milliseconds(20));
        } catch (const Exception&) {
            ++caught;
        }
    }
    return caught;
}

} // namespace rdma_asio::test
