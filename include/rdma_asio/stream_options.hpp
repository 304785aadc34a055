// What a stream registers and how it writes: the options a stream is made with.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace rdma_asio {

/// The memory a stream registers, per direction.
struct stream_options {
    /// The largest ring the peer writes into: what may be in flight towards
    /// this side, at most 2^30 - 1 bytes. The peer keeps a copy of the same size
    /// for what it writes, so a stream registers its own ring and a copy of the
    /// peer's.
    std::size_t receive_ring = 256 * 1024;
    /// The ring a stream starts with (receive_ring when that is smaller). Each
    /// time the peer fills it, the stream replaces it with one twice as large,
    /// up to receive_ring, so that an idle stream holds little registered
    /// memory and a busy one as much as it uses. Set it to receive_ring for a
    /// ring of one size.
    std::size_t initial_receive_ring = 4096;
    /// A ring that grew goes back to initial_receive_ring once nothing arrived
    /// in it for this long and the program read all it holds (the stream looks
    /// once per period, so after one to two periods of quiet). The peer moves
    /// to the small ring with its next record. Zero: a ring keeps the size it
    /// grew to until the stream is destroyed.
    std::chrono::milliseconds shrink_after_idle{std::chrono::seconds(2)};
    /// Receives kept posted for the peer's notifications (at least 4): writes
    /// the peer may have in flight before this side reaps them.
    std::uint32_t notices = 32;
    /// A write whose first buffer holds at least this many bytes is carried from
    /// the caller's memory without a copy: registered for that write with local
    /// access only, and written into the peer's ring from there. Such a write
    /// completes once the peer's device has its bytes (not when they are posted).
    /// SIZE_MAX (the default): every write is copied. Registering memory per
    /// write costs the kernel pinning its pages: on rxe it measured slower than
    /// the copy (docs/performance.md); measure on your device before choosing.
    std::size_t zero_copy_from = std::numeric_limits<std::size_t>::max();
};

} // namespace rdma_asio
