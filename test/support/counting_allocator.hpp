// An allocator that counts what goes through it, to check that an operation
// allocates its state through the handler's associated allocator and frees it.
#pragma once

#include <cstddef>
#include <memory>

namespace rdma_asio::test {

struct allocation_count {
    std::size_t allocations = 0;
    std::size_t deallocations = 0;
    std::size_t bytes_held = 0; // allocated and not yet freed
};

template <class T>
struct counting_allocator {
    using value_type = T;

    explicit counting_allocator(allocation_count& c) noexcept : count(&c) {}
    template <class U>
    counting_allocator(const counting_allocator<U>& other) noexcept : count(other.count) {}

    T* allocate(std::size_t n) {
        T* p = std::allocator<T>().allocate(n);
        ++count->allocations;
        count->bytes_held += n * sizeof(T);
        return p;
    }
    void deallocate(T* p, std::size_t n) noexcept {
        ++count->deallocations;
        count->bytes_held -= n * sizeof(T);
        std::allocator<T>().deallocate(p, n);
    }

    template <class U>
    bool operator==(const counting_allocator<U>& other) const noexcept {
        return count == other.count;
    }

    allocation_count* count;
};

} // namespace rdma_asio::test
