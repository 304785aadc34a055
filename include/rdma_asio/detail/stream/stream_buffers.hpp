// The buffers of one stream read or write, kept without an allocation: the first
// 16 of the caller's sequence, as Asio's sockets keep the first 64. A read_some or
// write_some may move fewer bytes than the whole sequence holds, so the buffers
// beyond are left to the next operation (asio::async_read and async_write call
// again with what is left).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <array>
#include <cstddef>

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
        for (; it != end && count_ < max_buffers; ++it)
            items_[count_++] = Buffer(*it);
    }

    const_iterator begin() const noexcept { return items_.data(); }
    const_iterator end() const noexcept { return items_.data() + count_; }
    bool empty() const noexcept { return count_ == 0; }
    const Buffer& front() const noexcept { return items_[0]; }

private:
    std::array<Buffer, max_buffers> items_{};
    std::size_t count_ = 0;
};

} // namespace rdma_asio::detail
