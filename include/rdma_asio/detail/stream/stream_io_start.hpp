// The start of a stream's read or write, for the library's one initiation
// (io_object.hpp, initiate_operation): run as the operation is launched, it keeps
// the first 16 buffers of the caller's sequence (stream_buffers.hpp) and hands
// them and the handler to the stream's state.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/stream/stream_buffers.hpp"
#include "rdma_asio/detail/stream/stream_core.hpp"

#include <memory>
#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

/// `Buffer`: asio::mutable_buffer for a read, asio::const_buffer for a write.
template <class Buffer>
struct stream_io_start {
    template <class IoExecutor, class Handler, class Buffers>
    void operator()(const std::shared_ptr<stream_core>& core, const IoExecutor& io_ex,
                    Handler&& handler, const Buffers& buffers) const {
        const stream_buffers<Buffer> kept(buffers);
        if constexpr (std::is_same_v<Buffer, asio::mutable_buffer>)
            core->async_read_some(kept, std::forward<Handler>(handler), io_ex);
        else
            core->async_write_some(kept, std::forward<Handler>(handler), io_ex);
    }
};

} // namespace rdma_asio::detail
