#include "rdma_asio/detail/core/op_block_cache.hpp"

#include <array>

namespace rdma_asio::detail {
namespace {

bool fits(std::size_t size, std::size_t align) noexcept {
    return size <= op_block_cache::block_size && align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__;
}

struct thread_blocks {
    std::array<void*, op_block_cache::max_blocks> blocks{};
    std::size_t count = 0;

    thread_blocks() = default;
    thread_blocks(const thread_blocks&) = delete;
    thread_blocks& operator=(const thread_blocks&) = delete;
    ~thread_blocks() {
        while (count > 0)
            ::operator delete(blocks[--count]);
    }
};

thread_local thread_blocks cache;

} // namespace

void* op_block_cache::allocate(std::size_t size, std::size_t align) {
    if (!fits(size, align))
        return ::operator new(size, std::align_val_t(align));
    if (cache.count > 0)
        return cache.blocks[--cache.count];
    return ::operator new(block_size);
}

void op_block_cache::deallocate(void* p, std::size_t size, std::size_t align) noexcept {
    if (!fits(size, align))
        return ::operator delete(p, std::align_val_t(align));
    if (cache.count < max_blocks) {
        cache.blocks[cache.count++] = p;
        return;
    }
    ::operator delete(p);
}

std::size_t op_block_cache::cached() noexcept {
    return cache.count;
}

} // namespace rdma_asio::detail
