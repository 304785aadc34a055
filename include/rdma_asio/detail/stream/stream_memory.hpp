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
// connection's protection domain, which is the stream's alone (an accepted one's
// too: stream_open_start.hpp), so the peer reaches nothing of another
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
//
// Rings are replaced while the stream runs (stream_machine.hpp): this side may
// register a next ring, which it announces, and keeps the one read now until
// the reader reads the next (ring_moved_to); the copy of the peer's ring is
// replaced when the peer announces one (replace_copies), and the old copy kept
// until the data writes posted from it are done (release_copies), since until
// then the device may read it. Each ring is a region of its own with a key of
// its own: the peer reaches a ring only while it is this side's.
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
#include <deque>
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
    /// Makes and registers the copy of the ring the peer announced, of
    /// `peer_ring_bytes`, to be the copy once the writer moves (replace_copies).
    /// False when it cannot be (the locked-memory limit, no memory): the copy in
    /// use stays.
    bool try_register_next_copies(std::size_t peer_ring_bytes) noexcept;
    /// The writer moved: the next copy is the copy now, and the one before is
    /// kept until `writes` data writes in all were done (release_copies).
    void replace_copies(std::uint64_t writes);
    /// `writes_done` data writes in all are done: the copies they were posted
    /// from and no later one is written from go.
    void release_copies(std::uint64_t writes_done) noexcept;

    /// Registers a next ring of `bytes`, for the reader to announce; its
    /// address, key and size (its generation is the reader's to give). Empty
    /// when it cannot be (the locked-memory limit, no memory): the ring read
    /// now stays.
    std::optional<stream_ring_ref> try_register_next_ring(std::size_t bytes) noexcept;
    /// The peer refused the next ring: it goes.
    void drop_next_ring() noexcept;
    /// The reader reads the ring of `generation` now: when it is the next one,
    /// the one before goes (the peer writes no more into it).
    void ring_moved_to(std::uint32_t generation) noexcept;
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

    /// The bytes of the ring of `generation` (the one read now, or the next)
    /// from `offset`: what the peer wrote there.
    const std::byte* ring_at(std::uint32_t generation, std::uint64_t offset) const noexcept {
        return (generation == ring_generation_ ? ring_ : next_ring_).data() + offset;
    }

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

    // A copy of a peer's ring the writer moved away from, kept until the data
    // writes posted before the move (`writes` in all) are done.
    struct old_copies {
        page_aligned_bytes bytes;
        memory_region mr;
        std::uint64_t writes = 0;
    };

    protection_domain pd_;
    page_aligned_bytes ring_;
    std::uint32_t ring_generation_ = 0;
    page_aligned_bytes next_ring_; // announced, not read yet
    memory_region next_ring_mr_;
    page_aligned_bytes copies_;
    page_aligned_bytes next_copies_;
    memory_region next_copies_mr_;
    std::deque<old_copies> old_copies_;
    page_aligned_bytes control_;
    page_aligned_bytes local_; // the hellos, then the record sources
    memory_region ring_mr_, copies_mr_, control_mr_, local_mr_;
    memory_region in_place_mr_;
};

} // namespace rdma_asio::detail
