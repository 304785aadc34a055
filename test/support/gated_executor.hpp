// An executor that holds the first function submitted to it at a gate, on the
// thread that submitted it, until the test opens the gate, then runs it (and
// every later one) on an io_context, never inline. A test associates it with a
// handler to stop the library's thread at the moment it hands that handler's
// operation on, and to start something else in exactly that moment.
//
// Every wait is bounded: the gate opens by itself after `bound`, and the test
// learns whether the submission came in time (wait_until_held).
#pragma once

#include "asio_alias.hpp"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>

namespace rdma_asio::test {

class gate {
public:
    /// Blocks the first caller until open() or `bound`; later callers pass.
    void pass(std::chrono::milliseconds bound) {
        std::unique_lock lock(mutex_);
        if (used_)
            return;
        used_ = true;
        held_ = true;
        changed_.notify_all();
        changed_.wait_for(lock, bound, [&] { return open_; });
        held_ = false;
    }
    /// Whether a submission is held at the gate within `bound`.
    bool wait_until_held(std::chrono::milliseconds bound) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, bound, [&] { return held_; });
    }
    void open() {
        std::lock_guard lock(mutex_);
        open_ = true;
        changed_.notify_all();
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool used_ = false;
    bool held_ = false;
    bool open_ = false;
};

/// Opens its gate when destroyed, so that a failed REQUIRE leaves no thread held.
struct gate_opener {
    gate& g;
    ~gate_opener() { g.open(); }
};

class gated_executor {
public:
    gated_executor(asio::io_context::executor_type inner, std::shared_ptr<gate> g,
                   std::chrono::milliseconds bound = std::chrono::seconds(10))
        : inner_(std::move(inner)), gate_(std::move(g)), bound_(bound) {}

    asio::execution_context& query(asio::execution::context_t) const noexcept {
        return asio::query(inner_, asio::execution::context);
    }
    static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
        return asio::execution::blocking.never;
    }
    template <class F>
    void execute(F&& f) const {
        gate_->pass(bound_);
        asio::post(inner_, std::forward<F>(f));
    }
    friend bool operator==(const gated_executor& a, const gated_executor& b) noexcept {
        return a.inner_ == b.inner_ && a.gate_ == b.gate_;
    }
    friend bool operator!=(const gated_executor& a, const gated_executor& b) noexcept {
        return !(a == b);
    }

private:
    asio::io_context::executor_type inner_;
    std::shared_ptr<gate> gate_;
    std::chrono::milliseconds bound_;
};

} // namespace rdma_asio::test
