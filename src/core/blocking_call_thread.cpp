#include "rdma_asio/detail/core/blocking_call_thread.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace rdma_asio::detail {
namespace {

class blocking_call_service : public asio::execution_context::service {
public:
    // Calls that wait for a kernel timeout are rare; more at once than this wait
    // in turn.
    static constexpr std::size_t max_threads = 4;

    using key_type = blocking_call_service;
    static inline asio::execution_context::id id;

    explicit blocking_call_service(asio::execution_context& ctx)
        : asio::execution_context::service(ctx) {}

    ~blocking_call_service() override { stop(); }

    void submit(std::function<void()> call) {
        std::unique_lock lock(mutex_);
        if (stopped_) {
            lock.unlock();
            return; // `call` is destroyed here, not run
        }
        calls_.push_back(std::move(call));
        // A call waits behind another only when every thread is busy: one
        // destination that never answers must not hold up the others.
        if (idle_ < calls_.size() && threads_.size() < max_threads) {
            try {
                threads_.emplace_back([this] { run(); });
            } catch (...) {
                if (threads_.empty()) { // nobody would ever run it
                    calls_.pop_back();
                    throw;
                }
            }
        }
        lock.unlock();
        wake_.notify_one();
    }

private:
    void shutdown() override { stop(); }

    void stop() noexcept {
        std::deque<std::function<void()>> dropped;
        {
            std::lock_guard lock(mutex_);
            stopped_ = true;
            dropped.swap(calls_);
        }
        wake_.notify_all();
        for (std::thread& t : threads_)
            t.join();
        threads_.clear();
        // The calls that never ran go now, outside the lock: they may own
        // handlers whose destruction reaches other objects.
    }

    void run() {
        std::unique_lock lock(mutex_);
        for (;;) {
            ++idle_;
            wake_.wait(lock, [this] { return stopped_ || !calls_.empty(); });
            --idle_;
            if (stopped_)
                return;
            std::function<void()> call = std::move(calls_.front());
            calls_.pop_front();
            lock.unlock();
            try {
                call();
            } catch (...) {
                // A call reports its own failures; the thread serves the next.
            }
            call = nullptr; // what it owns goes before the lock is taken again
            lock.lock();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> calls_;
    std::size_t idle_ = 0; // threads waiting for a call
    bool stopped_ = false;
    std::vector<std::thread> threads_;
};

} // namespace

void run_blocking_call(const asio::any_io_executor& ex, std::function<void()> call) {
    asio::use_service<blocking_call_service>(asio::query(ex, asio::execution::context))
        .submit(std::move(call));
}

} // namespace rdma_asio::detail
