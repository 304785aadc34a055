// A stream's registered memory: every region a stream registers, with the access
// each gets, in one place, since these are where the stream meets the verbs'
// protection.
//
//   region     what it holds                               access
//   ring       the peer's bytes, which it RDMA-writes      local write, remote write
//   control    the peer's credit records, RDMA-written     local write, remote write
//   local      this side's hello (sent), the peer's        local write
//              (received), the sources of this side's
//              record writes
//   copies     the mirror of the peer's ring: copied       local write
//              writes are staged here and posted from here
//   in place   the caller's memory, while a write from it  none: the device reads it,
//              is in flight (stream_core.hpp)              the peer gets no key
//
// Only the ring and the control block are open to the peer, for RDMA writes
// alone, each by a key of its own that the hello tells. Every region is in the
// connection's protection domain, so the peer reaches nothing of another
// connection's, nor anything of this one's that was not told to it.
//
// Each region's memory starts on a page and fills whole pages
// (page_aligned_bytes.hpp): the kernel pins every page a registration touches,
// so a ring of N pages pins N, not N + 1, and the 272 bytes besides the rings pin
// two pages, not one per region. The control block keeps a page of its own: in one
// registration with the hellos and the record sources, the peer's key to it would
// reach them too.
//
// The ring is allocated with the stream's state (its size is checked before,
// stream_limits_error); the rest is registered when the connection is prepared,
// and the copy of the peer's ring once the peer's hello says how large it is.
// No I/O here besides registration.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/device/page_aligned_bytes.hpp"
#include "rdma_asio/detail/stream/stream_hello.hpp"
#include "rdma_asio/detail/stream/stream_machine.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace rdma_asio::detail {

class stream_memory {
public:
    /// The record writes that may be in flight at once, each from a source of its own.
    static constexpr std::size_t record_sources = 8;
    /// What an open stream registers besides its ring and the copy of the peer's:
    /// the control block, the two hellos and the record sources. docs/stream.md
    /// states it; a unit test compares.
    static constexpr std::size_t registered_besides_rings =
        stream_credit_slots * sizeof(stream_credit_record) + 2 * sizeof(stream_hello) +
        record_sources * sizeof(stream_credit_record);

    explicit stream_memory(std::size_t ring_bytes)
        : ring_(ring_bytes), control_(control_bytes), local_(hellos_bytes + records_bytes) {}

    /// Registers the ring, the control block, the hellos and the record sources
    /// in `pd`, which later registrations use too. Throws system_error.
    void register_own(protection_domain pd);

    /// This side's hello, naming its ring, its control block and `notices`,
    /// written where its send goes from: the buffer to send.
    registered_buffer own_hello(std::uint32_t notices);
    /// Where the peer's hello is received.
    registered_buffer peer_hello_buffer() const;
    /// The peer's hello from the `n` bytes received; empty when they are not one.
    std::optional<stream_hello> peer_hello(std::size_t n) const noexcept;

    /// Makes and registers the copy of the peer's ring. Throws system_error or
    /// std::bad_alloc.
    void register_copies(std::size_t peer_ring_bytes);
    std::size_t copies_size() const noexcept { return copies_.size(); }
    /// The copy's bytes at [offset, offset + first) and [0, second): where a
    /// staged write is copied to.
    std::array<asio::mutable_buffer, 2> copies_at(std::uint64_t offset, std::uint64_t first,
                                                  std::uint64_t second) noexcept;
    registered_buffer registered_copies(std::uint64_t offset, std::uint64_t n) const;

    /// The peer's record that landed in slot `seq % stream_credit_slots`.
    stream_credit_record landed_record(std::uint32_t seq) const noexcept;
    /// Puts `r` in the source for record `seq`: what its write sends.
    registered_buffer record_source(std::uint32_t seq, const stream_credit_record& r);

    /// The ring's bytes from `offset`: what the peer wrote there.
    const std::byte* ring_at(std::uint64_t offset) const noexcept { return ring_.data() + offset; }

    /// Registers `memory` for one write from it, with no access flag; false when it
    /// cannot be (the locked-memory limit, memory the kernel will not pin).
    bool register_in_place(asio::const_buffer memory) noexcept;
    registered_buffer in_place_at(std::uint64_t offset, std::uint64_t n) const;
    /// The write from the caller's memory is done: the device no longer reads it.
    void release_in_place() noexcept { in_place_mr_.close(); }

private:
    static constexpr std::size_t control_bytes = stream_credit_slots * sizeof(stream_credit_record);
    static constexpr std::size_t hellos_bytes = 2 * sizeof(stream_hello); // mine, the peer's
    static constexpr std::size_t records_bytes = record_sources * sizeof(stream_credit_record);
    static_assert(control_bytes + hellos_bytes + records_bytes == registered_besides_rings);

    protection_domain pd_;
    page_aligned_bytes ring_;
    page_aligned_bytes copies_;
    page_aligned_bytes control_;
    page_aligned_bytes local_; // the hellos, then the record sources
    memory_region ring_mr_, copies_mr_, control_mr_, local_mr_;
    memory_region in_place_mr_;
};

} // namespace rdma_asio::detail
