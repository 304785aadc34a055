// Zeroed bytes that start on a page boundary and fill whole pages: memory to
// register (ibv_reg_mr(3)). The kernel pins, and counts against the locked-memory
// limit, every page a registration touches; memory from the heap starts inside a
// page, so a buffer of N pages registered from there pins N + 1 of them, and a few
// bytes pin a page of their own anyway.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

namespace rdma_asio::detail {

class page_aligned_bytes {
public:
    page_aligned_bytes() noexcept = default;
    /// `size` zeroed bytes at the start of whole pages. Throws std::bad_alloc.
    explicit page_aligned_bytes(std::size_t size) : size_(size) {
        if (size == 0)
            return;
        const std::size_t page = page_size();
        const std::size_t whole = (size + page - 1) / page * page;
        void* p = std::aligned_alloc(page, whole);
        if (p == nullptr)
            throw std::bad_alloc();
        std::memset(p, 0, whole);
        bytes_.reset(static_cast<std::byte*>(p));
    }

    // A moved-from one is empty: no bytes, size 0.
    page_aligned_bytes(page_aligned_bytes&& other) noexcept
        : bytes_(std::move(other.bytes_)), size_(std::exchange(other.size_, 0)) {}
    page_aligned_bytes& operator=(page_aligned_bytes&& other) noexcept {
        bytes_ = std::move(other.bytes_);
        size_ = std::exchange(other.size_, 0);
        return *this;
    }

    std::byte* data() noexcept { return bytes_.get(); }
    const std::byte* data() const noexcept { return bytes_.get(); }
    std::size_t size() const noexcept { return size_; }

    static std::size_t page_size() noexcept {
        static const std::size_t page = [] {
            const long n = ::sysconf(_SC_PAGESIZE);
            return n > 0 ? static_cast<std::size_t>(n) : std::size_t{4096};
        }();
        return page;
    }

private:
    struct release {
        void operator()(std::byte* p) const noexcept { std::free(p); }
    };
    std::unique_ptr<std::byte[], release> bytes_;
    std::size_t size_ = 0;
};

} // namespace rdma_asio::detail
