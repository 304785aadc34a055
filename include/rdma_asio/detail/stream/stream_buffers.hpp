// The buffers of one stream read or write, kept without an allocation: the first
// 16 of the caller's sequence, as Asio's sockets keep the first 64. A read_some or
// write_some may move fewer bytes than the whole sequence holds, so the buffers
// beyond are left to the next operation (asio::async_read and async_write call
// again with what is left).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <cstddef>
#include <new>
#include <type_traits>

namespace rdma_asio::detail {

template <class Buffer>
class stream_buffers {
public:
    using value_type = Buffer;
    using const_iterator = const Buffer*;
    static constexpr std::size_t max_buffers = 16;

    template <class BufferSequence>
    explicit stream_buffers(const BufferSequence& buffers) {
        auto it = asio::buffer_sequence_begin(buffers);
        const auto end = asio::buffer_sequence_end(buffers);
        guarded([&] {
            for (; it != end && count_ < max_buffers; ++it)
                append(Buffer(*it));
        });
    }
    stream_buffers(const stream_buffers& other) {
        guarded([&] {
            for (const Buffer& b : other)
                append(b);
        });
    }
    stream_buffers& operator=(const stream_buffers&) = delete;
    ~stream_buffers() { destroy(); }

    const_iterator begin() const noexcept {
        return std::launder(reinterpret_cast<const Buffer*>(storage_));
    }
    const_iterator end() const noexcept { return begin() + count_; }
    bool empty() const noexcept { return count_ == 0; }
    const Buffer& front() const noexcept { return *begin(); }

private:
    // Raw storage, not an array of sixteen buffers: an operation's buffers are
    // made as it is launched and copied as it waits, and most operations have one
    // buffer, so only the buffers held are made and copied (an array's sixteen
    // made and copied cost about 400 instructions of a 64-byte round trip's).
    void append(const Buffer& b) {
        ::new (static_cast<void*>(storage_ + count_ * sizeof(Buffer))) Buffer(b);
        ++count_;
    }
    void destroy() noexcept {
        if constexpr (!std::is_trivially_destructible_v<Buffer>) {
            for (const Buffer& b : *this)
                b.~Buffer();
        }
        count_ = 0;
    }
    // A buffer's copy may throw where Asio checks buffers (buffer debugging
    // keeps a function in each): those made are destroyed first.
    template <class F>
    void guarded(F&& f) {
        try {
            f();
        } catch (...) {
            destroy();
            throw;
        }
    }

    alignas(Buffer) std::byte storage_[max_buffers * sizeof(Buffer)];
    std::size_t count_ = 0;
};

} // namespace rdma_asio::detail
