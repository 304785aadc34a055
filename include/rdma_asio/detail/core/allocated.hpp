// One object in memory from an allocator: made with allocate_constructed, given
// back with destroy_deallocated. Every place that keeps a handler, or an
// operation holding one, in memory from the handler's allocator goes through these
// two, so that a constructor that throws gives its memory back, and an object is
// freed through an allocator rebound to its own type, as std::allocator_traits
// requires.
#pragma once

#include <memory>
#include <utility>

namespace rdma_asio::detail {

/// A T made from `args`, in memory from `allocator` rebound to T.
template <class T, class Allocator, class... Args>
T* allocate_constructed(const Allocator& allocator, Args&&... args) {
    using rebound = typename std::allocator_traits<Allocator>::template rebind_alloc<T>;
    using traits = std::allocator_traits<rebound>;
    rebound alloc(allocator);
    T* p = traits::allocate(alloc, 1);
    try {
        traits::construct(alloc, p, std::forward<Args>(args)...);
    } catch (...) {
        traits::deallocate(alloc, p, 1);
        throw;
    }
    return p;
}

/// Destroys what allocate_constructed<T>(allocator, ...) made and gives its memory
/// back. `allocator` is a copy taken beforehand when it came from the object itself.
template <class T, class Allocator>
void destroy_deallocated(const Allocator& allocator, T* p) noexcept {
    using rebound = typename std::allocator_traits<Allocator>::template rebind_alloc<T>;
    using traits = std::allocator_traits<rebound>;
    rebound alloc(allocator);
    traits::destroy(alloc, p);
    traits::deallocate(alloc, p, 1);
}

} // namespace rdma_asio::detail
