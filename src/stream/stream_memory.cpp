// A stream's regions and the access each gets (stream_memory.hpp says why here).
#include "rdma_asio/detail/stream/stream_memory.hpp"

#include <cstring>
#include <utility>

namespace rdma_asio::detail {

void stream_memory::register_own(protection_domain pd) {
    pd_ = std::move(pd);
    const int remote_write = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    ring_mr_ = memory_region(pd_, asio::buffer(ring_.data(), ring_.size()), remote_write);
    control_mr_ = memory_region(pd_, asio::buffer(control_.data(), control_.size()), remote_write);
    local_mr_ =
        memory_region(pd_, asio::buffer(local_.data(), local_.size()), IBV_ACCESS_LOCAL_WRITE);
}

registered_buffer stream_memory::own_hello(std::uint32_t notices) {
    stream_hello mine;
    mine.ring_address = reinterpret_cast<std::uintptr_t>(ring_.data());
    mine.ring_rkey = ring_mr_.remote_at(0, ring_.size()).rkey;
    mine.ring_bytes = static_cast<std::uint32_t>(ring_.size());
    mine.control_address = reinterpret_cast<std::uintptr_t>(control_.data());
    mine.control_rkey = control_mr_.remote_at(0, control_.size()).rkey;
    mine.notices = notices;
    std::memcpy(local_.data(), &mine, sizeof mine);
    return local_mr_.at(0, sizeof mine);
}

registered_buffer stream_memory::peer_hello_buffer() const {
    return local_mr_.at(sizeof(stream_hello), sizeof(stream_hello));
}

std::optional<stream_hello> stream_memory::peer_hello(std::size_t n) const noexcept {
    return read_stream_hello(local_.data() + sizeof(stream_hello), n);
}

void stream_memory::register_copies(std::size_t peer_ring_bytes) {
    copies_ = page_aligned_bytes(peer_ring_bytes);
    copies_mr_ =
        memory_region(pd_, asio::buffer(copies_.data(), copies_.size()), IBV_ACCESS_LOCAL_WRITE);
}

std::array<asio::mutable_buffer, 2>
stream_memory::copies_at(std::uint64_t offset, std::uint64_t first, std::uint64_t second) noexcept {
    return {asio::buffer(copies_.data() + offset, static_cast<std::size_t>(first)),
            asio::buffer(copies_.data(), static_cast<std::size_t>(second))};
}

registered_buffer stream_memory::registered_copies(std::uint64_t offset, std::uint64_t n) const {
    return copies_mr_.at(static_cast<std::size_t>(offset), static_cast<std::size_t>(n));
}

stream_credit_record stream_memory::landed_record(std::uint32_t seq) const noexcept {
    stream_credit_record record;
    std::memcpy(&record,
                control_.data() + (seq % stream_credit_slots) * sizeof(stream_credit_record),
                sizeof record);
    return record;
}

registered_buffer stream_memory::record_source(std::uint32_t seq, const stream_credit_record& r) {
    const std::size_t at = hellos_bytes + (seq % record_sources) * sizeof r;
    std::memcpy(local_.data() + at, &r, sizeof r);
    return local_mr_.at(at, sizeof r);
}

bool stream_memory::register_in_place(asio::const_buffer memory) noexcept {
    error_code ec;
    // No access flag: the device only reads this memory, and no key to it is told.
    in_place_mr_.open(pd_, asio::mutable_buffer(const_cast<void*>(memory.data()), memory.size()), 0,
                      ec);
    return !ec;
}

registered_buffer stream_memory::in_place_at(std::uint64_t offset, std::uint64_t n) const {
    return in_place_mr_.at(static_cast<std::size_t>(offset), static_cast<std::size_t>(n));
}

} // namespace rdma_asio::detail
