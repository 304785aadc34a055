// A stream's regions and the access each gets (stream_memory.hpp says why here).
#include "rdma_asio/detail/stream/stream_memory.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/device/locked_memory.hpp"

#include <cstring>
#include <exception>
#include <string>
#include <utility>

namespace rdma_asio::detail {
namespace {

// Registers `bytes` with `access`. Throws system_error naming the stream's region
// and, for ENOMEM under a finite locked-memory limit, errc::locked_memory_limit:
// the program sees it as its accept's or connect's error, without the message.
memory_region register_region(const protection_domain& pd, page_aligned_bytes& bytes, int access,
                              const char* what) {
    memory_region mr;
    error_code ec;
    mr.open(pd, asio::buffer(bytes.data(), bytes.size()), access, ec);
    if (ec)
        throw_error(registration_error(ec),
                    ("rdma_asio::stream: registering its " + std::string(what) + " (" +
                     std::to_string(bytes.size()) + " bytes)")
                        .c_str());
    return mr;
}

} // namespace

void stream_memory::register_own(protection_domain pd) {
    pd_ = std::move(pd);
    const int remote_write = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    ring_mr_ = register_region(pd_, ring_, remote_write, "receive ring");
    control_mr_ = register_region(pd_, control_, remote_write, "control block");
    local_mr_ = register_region(pd_, local_, IBV_ACCESS_LOCAL_WRITE, "hellos and records");
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
    copies_mr_ = register_region(pd_, copies_, IBV_ACCESS_LOCAL_WRITE, "copy of the peer's ring");
}

bool stream_memory::try_register_next_copies(std::size_t peer_ring_bytes) noexcept {
    try {
        page_aligned_bytes bytes(peer_ring_bytes);
        next_copies_mr_ =
            register_region(pd_, bytes, IBV_ACCESS_LOCAL_WRITE, "copy of the peer's next ring");
        next_copies_ = std::move(bytes);
        return true;
    } catch (const std::exception&) { // system_error, bad_alloc
        return false;
    }
}

void stream_memory::replace_copies(std::uint64_t writes) {
    old_copies_.push_back({std::move(copies_), std::move(copies_mr_), writes});
    copies_ = std::move(next_copies_);
    copies_mr_ = std::move(next_copies_mr_);
}

void stream_memory::release_copies(std::uint64_t writes_done) noexcept {
    while (!old_copies_.empty() && old_copies_.front().writes <= writes_done)
        old_copies_.pop_front(); // deregistered, then freed
}

std::optional<stream_ring_ref> stream_memory::try_register_next_ring(std::size_t bytes) noexcept {
    try {
        page_aligned_bytes ring(bytes);
        next_ring_mr_ = register_region(pd_, ring, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                        "next receive ring");
        next_ring_ = std::move(ring);
    } catch (const std::exception&) { // system_error, bad_alloc
        return std::nullopt;
    }
    error_code ec;
    const remote_buffer remote = next_ring_mr_.remote_at(0, next_ring_.size(), ec);
    if (ec)
        return std::nullopt;
    return stream_ring_ref{remote.address, remote.rkey,
                           static_cast<std::uint32_t>(next_ring_.size()), 0};
}

void stream_memory::drop_next_ring() noexcept {
    next_ring_mr_.close(); // deregistered first: the peer's key to it goes
    next_ring_ = page_aligned_bytes();
}

void stream_memory::ring_moved_to(std::uint32_t generation) noexcept {
    if (generation == ring_generation_ || !next_ring_mr_.is_open())
        return;
    ring_mr_ = std::move(next_ring_mr_); // the old ring's registration goes
    ring_ = std::move(next_ring_);
    ring_generation_ = generation;
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
