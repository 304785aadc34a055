// The per-thread cache of operation blocks: blocks come back for reuse, no more
// than max_blocks stay cached, and what does not fit a block bypasses the cache.
#include "rdma_asio/detail/core/op_block_cache.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <thread>
#include <vector>

namespace op_block_cache_test {

using rdma_asio::detail::op_allocator;
using rdma_asio::detail::op_block_cache;

namespace {

// Empties this thread's cache, so that each test starts from none cached.
void drain_cache() {
    std::vector<void*> taken;
    while (op_block_cache::cached() > 0)
        taken.push_back(
            op_block_cache::allocate(op_block_cache::block_size, alignof(std::max_align_t)));
    for (void* p : taken)
        ::operator delete(p);
}

} // namespace

TEST_CASE("a block given back is the next one handed out", "[op_block_cache]") {
    drain_cache();
    void* first = op_block_cache::allocate(200, 8);
    op_block_cache::deallocate(first, 200, 8);
    CHECK(op_block_cache::cached() == 1);
    // Any size up to a block reuses it.
    void* second = op_block_cache::allocate(op_block_cache::block_size, 16);
    CHECK(second == first);
    CHECK(op_block_cache::cached() == 0);
    op_block_cache::deallocate(second, op_block_cache::block_size, 16);
}

TEST_CASE("a batch of operations freed at once is reused in full, up to the cap",
          "[op_block_cache]") {
    drain_cache();
    struct alignas(16) op_like {
        unsigned char bytes[320];
    };
    op_allocator<op_like> alloc;
    // A poll's batch: 32 operations end, then their handlers start 32 more.
    std::vector<op_like*> ops;
    for (int i = 0; i < 32; ++i)
        ops.push_back(alloc.allocate(1));
    for (op_like* p : ops)
        alloc.deallocate(p, 1);
    CHECK(op_block_cache::cached() == 32);
    std::vector<op_like*> again;
    for (int i = 0; i < 32; ++i)
        again.push_back(alloc.allocate(1));
    CHECK(op_block_cache::cached() == 0);
    for (op_like* p : again)
        alloc.deallocate(p, 1);
    // More than the cap: the rest goes back to operator delete.
    std::vector<op_like*> many;
    for (std::size_t i = 0; i < op_block_cache::max_blocks + 10; ++i)
        many.push_back(alloc.allocate(1));
    for (op_like* p : many)
        alloc.deallocate(p, 1);
    CHECK(op_block_cache::cached() == op_block_cache::max_blocks);
}

TEST_CASE("what does not fit a block, in size or alignment, bypasses the cache",
          "[op_block_cache]") {
    drain_cache();
    void* big = op_block_cache::allocate(op_block_cache::block_size + 1, 8);
    op_block_cache::deallocate(big, op_block_cache::block_size + 1, 8);
    CHECK(op_block_cache::cached() == 0);
    void* aligned = op_block_cache::allocate(64, 256);
    CHECK(reinterpret_cast<std::uintptr_t>(aligned) % 256 == 0);
    op_block_cache::deallocate(aligned, 64, 256);
    CHECK(op_block_cache::cached() == 0);
}

TEST_CASE("each thread has a cache of its own", "[op_block_cache]") {
    drain_cache();
    void* p = op_block_cache::allocate(100, 8);
    op_block_cache::deallocate(p, 100, 8);
    std::size_t cached_there = 99;
    // Freed on another thread, a block goes to that thread's cache, which frees
    // it when the thread ends.
    void* q = op_block_cache::allocate(100, 8);
    std::thread t([&] {
        op_block_cache::deallocate(q, 100, 8);
        cached_there = op_block_cache::cached();
    });
    t.join();
    CHECK(cached_there == 1);
    CHECK(op_block_cache::cached() == 0);
}

} // namespace op_block_cache_test
