// The lock of the event dispatcher and of the queue pair's completion path: a
// mutex whose uncontended lock and unlock are one atomic instruction each, inline.
//
// Why not std::mutex: every event takes the dispatcher's lock twice (the wait's
// start, the wake-up), and glibc's pthread_mutex_lock/unlock, general-purpose
// (types, robust and priority-inheritance mutexes, elision), cost about 45
// instructions per pair through the PLT: about a tenth of what the dispatcher
// adds to a bare Asio wait (docs/performance.md). The locks are held for a few
// hundred instructions and are rarely contended, which is the case this design
// is for.
//
// The algorithm is the three-state futex mutex ("Futexes Are Tricky", Drepper,
// mutex 2): 0 unlocked, 1 locked, 2 locked and maybe waited for. Waiting is
// std::atomic<int>::wait (a futex on Linux), so a contended lock sleeps instead
// of spinning; only an unlock that finds 2 pays the wake-up call. Acquire on
// lock and release on unlock: ThreadSanitizer sees the ordering through the
// atomics. Not recursive; unlock only by the owner, as any mutex.
#pragma once

#include <atomic>

namespace rdma_asio::detail {

class atomic_mutex {
public:
    atomic_mutex() = default;
    atomic_mutex(const atomic_mutex&) = delete;
    atomic_mutex& operator=(const atomic_mutex&) = delete;

    void lock() noexcept {
        int expected = 0;
        if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                            std::memory_order_relaxed))
            lock_contended(expected);
    }

    bool try_lock() noexcept {
        int expected = 0;
        return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                              std::memory_order_relaxed);
    }

    void unlock() noexcept {
        if (state_.exchange(0, std::memory_order_release) == 2)
            state_.notify_one();
    }

private:
    // Marks the lock as waited for (2), then sleeps while it stays 2; whoever
    // takes it this way leaves it at 2, so that its unlock wakes the next sleeper
    // (one spurious wake-up at worst, never a lost one).
    void lock_contended(int seen) noexcept {
        if (seen != 2)
            seen = state_.exchange(2, std::memory_order_acquire);
        while (seen != 0) {
            state_.wait(2, std::memory_order_relaxed);
            seen = state_.exchange(2, std::memory_order_acquire);
        }
    }

    std::atomic<int> state_{0};
};

/// An atomic_mutex that can be turned off: an io_context made for one thread
/// (ASIO_CONCURRENCY_HINT_UNSAFE) locks nothing in its scheduler, and the
/// dispatchers serving it then lock nothing either. Set `enabled` before the
/// mutex is shared.
struct optional_atomic_mutex {
    atomic_mutex mutex;
    bool enabled = true;
    void lock() noexcept {
        if (enabled)
            mutex.lock();
    }
    void unlock() noexcept {
        if (enabled)
            mutex.unlock();
    }
};

} // namespace rdma_asio::detail
