#include "rdma_asio/detail/stream/stream_machine.hpp"

#include <algorithm>

namespace rdma_asio::detail {

const char* stream_limits_error(const stream_limits& limits) noexcept {
    if (limits.ring_bytes == 0)
        return "the receive ring is empty (stream_options::receive_ring: 1 to 2^30 - 1 bytes)";
    if (limits.ring_bytes > stream_notice::max_value)
        return "the receive ring is larger than 2^30 - 1 bytes (stream_options::receive_ring)";
    if (limits.notices < 4)
        return "fewer than 4 notification receives (stream_options::notices: at least 4)";
    return nullptr;
}

namespace {

// Of the peer's posted receives, those data and the end may use: the other two
// are the credit's and the acknowledgement's.
constexpr std::uint64_t reserved_for_records = 2;

// `n` bytes from `position` (a count since the stream began) in a ring of
// `ring_bytes`: at its offset, then what wraps, at 0.
stream_ring_write ring_span(std::uint64_t position, std::uint64_t n, std::uint64_t ring_bytes) {
    stream_ring_write write;
    write.offset = position % ring_bytes;
    write.first = std::min(n, ring_bytes - write.offset);
    write.second = n - write.first;
    return write;
}

} // namespace

bool stream_writer_machine::notice_free() const noexcept {
    return notices_in_flight() + reserved_for_records < peer_.notices;
}

// Up to `wanted` bytes after those written and staged, as far as the ring has
// room and a notification's value reaches.
std::optional<stream_ring_write>
stream_writer_machine::place(std::uint64_t wanted, std::uint64_t max_write) const noexcept {
    const std::uint64_t taken = written_ + staged_;
    const std::uint64_t free_bytes = peer_.ring_bytes - (taken - peer_read_);
    const std::uint64_t limit = std::uint64_t{stream_notice::max_value} - staged_;
    const std::uint64_t n = std::min({wanted, max_write, free_bytes, limit});
    if (n == 0 || ended_)
        return std::nullopt;
    return ring_span(taken, n, peer_.ring_bytes);
}

std::optional<stream_ring_write>
stream_writer_machine::next_data(std::uint64_t wanted, std::uint64_t max_write) const noexcept {
    if (staged_ != 0 || !notice_free())
        return std::nullopt;
    return place(wanted, max_write);
}

std::optional<stream_ring_write>
stream_writer_machine::next_stage(std::uint64_t wanted, std::uint64_t max_write) const noexcept {
    return place(wanted, max_write);
}

void stream_writer_machine::staged(const stream_ring_write& write) noexcept {
    staged_ += write.bytes();
}

std::optional<stream_ring_write> stream_writer_machine::next_flush(bool at_once) const noexcept {
    const std::uint64_t gather = std::max<std::uint64_t>(peer_.ring_bytes / 8, 1);
    if (staged_ == 0 || ended_ || !notice_free() ||
        (!at_once && unfinished_ != 0 && staged_ < gather))
        return std::nullopt;
    return ring_span(written_, staged_, peer_.ring_bytes);
}

void stream_writer_machine::data_posted(const stream_ring_write& write) noexcept {
    written_ += write.bytes();
    staged_ -= std::min(staged_, write.bytes());
    ++sent_;
    ++unfinished_;
}

void stream_writer_machine::data_done() noexcept {
    if (unfinished_ > 0)
        --unfinished_;
}

bool stream_writer_machine::may_end() const noexcept {
    return !ended_ && staged_ == 0 && notice_free();
}

void stream_writer_machine::end_posted() noexcept {
    ended_ = true;
    ++sent_;
}

std::uint32_t stream_writer_machine::next_record() noexcept {
    ++sent_;
    return records_++ & stream_notice::max_value;
}

std::uint32_t stream_writer_machine::credit_posted() noexcept {
    const std::uint32_t seq = next_record();
    credit_seq_ = sent_;
    return seq;
}

std::uint32_t stream_writer_machine::ack_posted() noexcept {
    const std::uint32_t seq = next_record();
    ack_seq_ = sent_;
    return seq;
}

void stream_writer_machine::on_record(const stream_credit_record& record) noexcept {
    // Totals: a record older than one already seen changes nothing.
    peer_read_ = std::max(peer_read_, std::min(record.bytes_read, written_));
    peer_reaped_ = std::max(peer_reaped_, std::min(record.notices_reaped, sent_));
}

void stream_reader_machine::on_notice(const stream_notice& notice) noexcept {
    ++reaped_;
    switch (notice.kind) {
    case stream_notice_kind::data:
        arrived_ += notice.value;
        ++reaped_data_;
        break;
    case stream_notice_kind::credit:
        ack_owed_ = true;
        break;
    case stream_notice_kind::ack:
        break;
    case stream_notice_kind::end:
        peer_ended_ = true;
        ++reaped_data_;
        break;
    }
}

stream_reader_machine::span stream_reader_machine::readable() const noexcept {
    const std::uint64_t offset = read_ % mine_.ring_bytes;
    return {offset, std::min(unread(), mine_.ring_bytes - offset)};
}

void stream_reader_machine::read(std::uint64_t n) noexcept {
    read_ += std::min(n, unread());
}

bool stream_reader_machine::credit_due() const noexcept {
    const std::uint64_t newly_read = read_ - reported_.bytes_read;
    const std::uint64_t newly_reaped = reaped_data_ - reported_data_;
    if (newly_read == 0 && newly_reaped == 0)
        return false; // records and acknowledgements alone are no news
    return newly_read >= std::max<std::uint64_t>(mine_.ring_bytes / 4, 1) ||
           newly_reaped >= std::max<std::uint64_t>((mine_.notices - reserved_for_records) / 2, 1);
}

bool stream_reader_machine::repost_due() const noexcept {
    // A quarter: a call per receive costs a lock and a doorbell's bookkeeping
    // each, and the writer learns of receives only from records, which post
    // every pending one first; so the batch never holds the writer back.
    return repost_pending() >= std::max<std::uint64_t>(1, mine_.notices / 4);
}

stream_credit_record stream_reader_machine::record(bool ack) noexcept {
    if (ack)
        ack_owed_ = false;
    reported_ = {read_, reposted_};
    reported_data_ = reaped_data_;
    return reported_;
}

} // namespace rdma_asio::detail
