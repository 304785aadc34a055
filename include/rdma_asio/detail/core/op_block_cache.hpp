// Memory of queue_pair operations whose handlers name no allocator of their own:
// a per-thread cache of fixed-size blocks.
//
// Why not Asio's recycling allocator alone: it keeps two blocks per thread. A poll
// hands out a batch of up to 32 completions, all of one CQ (a QP's receives often
// have a CQ of their own), so a batch frees up to 32 operations at once and their
// handlers then start as many on the other queue: all but two of those went back
// to malloc. This cache keeps up to 64 blocks per thread.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace rdma_asio::detail {

class op_block_cache {
public:
    /// Operations up to this size and the default alignment come from the cache.
    /// A queue pair's operation is about 580 bytes with a callback or a
    /// coroutine's handler (test/unit/queue_pair_test.cpp checks that it fits).
    static constexpr std::size_t block_size = 1024;
    /// Blocks kept per thread at most (64 KiB); more go back to operator delete.
    static constexpr std::size_t max_blocks = 64;

    /// Memory for `size` bytes aligned to `align`: a cached block when one fits.
    static void* allocate(std::size_t size, std::size_t align);
    /// Gives back what allocate(size, align) returned.
    static void deallocate(void* p, std::size_t size, std::size_t align) noexcept;
    /// Blocks cached on this thread now (for tests).
    static std::size_t cached() noexcept;
};

/// The allocator over op_block_cache: stateless, all instances equal.
template <class T>
struct op_allocator {
    using value_type = T;

    op_allocator() noexcept = default;
    template <class U>
    op_allocator(const op_allocator<U>&) noexcept {}

    T* allocate(std::size_t n) {
        return static_cast<T*>(op_block_cache::allocate(n * sizeof(T), alignof(T)));
    }
    void deallocate(T* p, std::size_t n) noexcept {
        op_block_cache::deallocate(p, n * sizeof(T), alignof(T));
    }

    template <class U>
    bool operator==(const op_allocator<U>&) const noexcept {
        return true;
    }
};

} // namespace rdma_asio::detail
