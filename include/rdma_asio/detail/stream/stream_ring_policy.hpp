// When a stream replaces its receive ring, and with what size: decisions with no
// I/O (stream_core.hpp registers the rings and keeps the timer).
//
// Grow: the peer's writer said a write of its program found the ring full
// (stream_reader_machine::grow_due), so the ring doubles, up to the largest
// size (stream_options::receive_ring). Only the writer knows its program had
// more to write: a reader that reads as bytes arrive never sees its ring full.
//
// Shrink: a ring above the first size (stream_options::initial_receive_ring)
// goes back to it once nothing arrived in it between two looks, a period
// (stream_options::shrink_idle_after) apart, and nothing in it is unread. Looks
// rather than a deadline moved on every arrival: the stream's hot path pays
// nothing for it, and the timer runs only while there is something to decide
// (look_due). So an idle ring shrinks after one to two periods.
//
// Refusal: a ring that could not be registered (the locked-memory limit, most
// likely) is not tried again before the next look: at most one failing
// registration per period, whatever the writer's traffic, and the stream keeps
// the size it has meanwhile.
#pragma once

#include "rdma_asio/detail/stream/stream_machine.hpp"

#include <algorithm>
#include <cstdint>

namespace rdma_asio::detail {

class stream_ring_policy {
public:
    stream_ring_policy(std::uint64_t first_bytes, std::uint64_t max_bytes) noexcept
        : first_(first_bytes), max_(max_bytes) {}

    /// The size to grow to now, or 0 for none.
    std::uint64_t grow_to(const stream_reader_machine& reader) const noexcept {
        if (refused_ || !reader.grow_due(max_))
            return 0;
        return std::min(reader.ring_bytes() * 2, max_);
    }
    /// A ring could not be registered: none is tried before the next look.
    void refused() noexcept { refused_ = true; }
    bool refusing() const noexcept { return refused_; }

    /// Whether a look is to come: the newest ring is above the first size, or
    /// a refusal waits to be forgotten.
    bool look_due(const stream_reader_machine& reader) const noexcept {
        return refused_ || reader.ring_bytes() > first_;
    }
    /// The timer was armed for a look: arrivals count from here.
    void armed(const stream_reader_machine& reader) noexcept { arrived_ = reader.arrived(); }
    /// A look, a period after the one before (or after armed): forgets a
    /// refusal; returns the size to shrink to now, or 0 for none.
    std::uint64_t look(const stream_reader_machine& reader) noexcept {
        refused_ = false;
        const bool idle = reader.arrived() == arrived_;
        arrived_ = reader.arrived();
        if (idle && reader.may_announce() && reader.may_shrink(first_))
            return first_;
        return 0;
    }

private:
    std::uint64_t first_;
    std::uint64_t max_;
    bool refused_ = false;
    std::uint64_t arrived_ = 0; // the reader's arrivals at the last look
};

} // namespace rdma_asio::detail
