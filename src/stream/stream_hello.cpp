#include "rdma_asio/detail/stream/stream_hello.hpp"

#include <cstring>

namespace rdma_asio::detail {

std::optional<stream_hello> read_stream_hello(const void* received, std::size_t n) noexcept {
    stream_hello peer;
    if (received == nullptr || n != sizeof peer)
        return std::nullopt;
    std::memcpy(&peer, received, sizeof peer);
    const stream_hello expected;
    if (peer.magic != expected.magic || peer.version != expected.version ||
        stream_limits_error(peer.limits()) != nullptr)
        return std::nullopt;
    return peer;
}

} // namespace rdma_asio::detail
