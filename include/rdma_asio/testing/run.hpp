// Running a test's asynchronous code to its end, with a deadline: a coroutine
// (run_coroutine) or a chain of completion handlers (run_until). Neither depends on
// a test framework: a missed deadline is a system_error, which any framework
// reports as a failed test.
#pragma once

#include "rdma_asio/asio.hpp"

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

namespace rdma_asio::testing {

/// How long run_coroutine and run_until wait by default.
inline constexpr std::chrono::seconds default_deadline{60};

namespace detail {

// Runs `ioc` in short slices until `done()` or the deadline; true when done. A
// slice ends after 20 ms even with nothing to run, so that a completion arriving
// on another executor (a std::future's, a thread's) is seen in time; an io_context
// that ran out of work is restarted and waited on without spinning.
template <class Done>
bool run_slices(asio::io_context& ioc, Done&& done, std::chrono::steady_clock::duration limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline)
            return false;
        if (ioc.stopped()) {
            ioc.restart();
            if (ioc.poll() == 0)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        ioc.run_one_for(std::chrono::milliseconds(20));
    }
    return true;
}

// What run_coroutine says when the deadline passes: how long it waited and the
// usual reason an RDMA test waits for ever.
inline std::string unfinished_message(std::chrono::steady_clock::duration limit) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit).count();
    return "rdma_asio::testing::run_coroutine: the coroutine did not finish within " +
           std::to_string(ms) +
           " ms; it still waits for an operation (a send whose peer posts no receive waits for "
           "ever at rnr_retry 7, loopback_options' default)";
}

template <class T>
struct coroutine_outcome {
    bool done = false;
    std::exception_ptr failure;
    std::optional<T> value;
};
template <>
struct coroutine_outcome<void> {
    bool done = false;
    std::exception_ptr failure;
};

} // namespace detail

/// Runs `body` on `ioc` (on this thread) until it returns, and returns its value;
/// rethrows what it threw. Throws system_error(asio::error::timed_out) when
/// it has not returned after `limit`: the coroutine is then left suspended where
/// it was, and ends (destroyed, not resumed) with the io_context. T must be
/// default-constructible: Asio's co_spawn hands one over with an exception.
template <class T>
T run_coroutine(asio::io_context& ioc, asio::awaitable<T> body,
                std::chrono::steady_clock::duration limit = default_deadline) {
    // Shared with the completion handler, which may outlive this call after a
    // missed deadline.
    auto outcome = std::make_shared<detail::coroutine_outcome<T>>();
    if constexpr (std::is_void_v<T>) {
        asio::co_spawn(ioc, std::move(body), [outcome](std::exception_ptr e) {
            outcome->done = true;
            outcome->failure = e;
        });
    } else {
        asio::co_spawn(ioc, std::move(body), [outcome](std::exception_ptr e, T value) {
            outcome->done = true;
            outcome->failure = e;
            if (!e)
                outcome->value.emplace(std::move(value));
        });
    }
    if (!detail::run_slices(
            ioc, [&] { return outcome->done; }, limit))
        throw system_error(asio::error::timed_out, detail::unfinished_message(limit));
    if (outcome->failure)
        std::rethrow_exception(outcome->failure);
    if constexpr (!std::is_void_v<T>)
        return std::move(*outcome->value);
}

/// Runs `ioc` on this thread until `done()` holds, for a chain of completion
/// handlers that records its progress where `done` can see it. False when `limit`
/// passed first. What a handler throws comes out of here.
template <class Done>
bool run_until(asio::io_context& ioc, Done&& done,
               std::chrono::steady_clock::duration limit = default_deadline) {
    return detail::run_slices(ioc, std::forward<Done>(done), limit);
}

} // namespace rdma_asio::testing
