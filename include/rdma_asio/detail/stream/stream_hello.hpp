// The stream's hello, with no I/O: what each side tells its peer first, and the
// check of what arrived as the peer's.
//
// Each side's first message is a send that names its ring and its control block
// (address, length, rkey) and how many notification receives it keeps posted.
// Both sides post the receive for the peer's hello before the connection is
// accepted or connected, so that it never meets RNR, and send nothing else before
// the peer's hello arrived: the writer needs the peer's ring and receives before
// it may write.
//
// Why the check is strict: the peer is another program. A message that is not
// exactly a hello of this version, or names sizes no stream can have
// (stream_limits_error), ends the stream with invalid_argument instead of being
// taken as the peer's ring.
#pragma once

#include "rdma_asio/detail/stream/stream_machine.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>

namespace rdma_asio::detail {

/// What a side tells its peer first.
struct stream_hello {
    std::uint32_t magic = 0x52414d53; // "RAMS"
    /// 2: credit records of 48 bytes, which may announce a new ring
    /// (stream_machine.hpp); a peer of version 1 sent 16.
    std::uint32_t version = 2;
    std::uint64_t ring_address = 0;
    std::uint32_t ring_rkey = 0;
    std::uint32_t ring_bytes = 0;
    std::uint64_t control_address = 0;
    std::uint32_t control_rkey = 0;
    std::uint32_t notices = 0;

    /// The sizes it names, as the writer's limits.
    stream_limits limits() const noexcept { return {ring_bytes, notices}; }
};

/// The peer's hello from the `n` bytes its send put at `received`; empty when they
/// are not one: another length, magic or version, or sizes no stream has.
std::optional<stream_hello> read_stream_hello(const void* received, std::size_t n) noexcept;

} // namespace rdma_asio::detail
