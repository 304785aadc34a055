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

// `n` bytes from `position` (a count since the ring began) in a ring of
// `ring_bytes`: at its offset, then what wraps, at 0.
stream_ring_write ring_span(std::uint64_t position, std::uint64_t n, std::uint64_t ring_bytes,
                            std::uint32_t generation) {
    stream_ring_write write;
    write.offset = position % ring_bytes;
    write.first = std::min(n, ring_bytes - write.offset);
    write.second = n - write.first;
    write.generation = generation;
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
    // Everything in flight counts, in the old ring too: what may be in flight
    // never passes the ring's size, and bytes ring_bytes apart, which share an
    // offset, are never in flight together.
    const std::uint64_t in_flight = std::min(taken - peer_read_, peer_.ring_bytes);
    const std::uint64_t free_bytes = peer_.ring_bytes - in_flight;
    const std::uint64_t limit = std::uint64_t{stream_notice::max_value} - staged_;
    const std::uint64_t n = std::min({wanted, max_write, free_bytes, limit});
    if (n == 0 || ended_)
        return std::nullopt;
    return ring_span(taken - base_, n, peer_.ring_bytes, generation_);
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

void stream_writer_machine::note_wait() noexcept {
    if (!ended_ && written_ + staged_ - peer_read_ >= peer_.ring_bytes)
        ++ring_waits_;
}

void stream_writer_machine::staged(const stream_ring_write& write) noexcept {
    staged_ += write.bytes();
}

std::optional<stream_ring_write> stream_writer_machine::next_flush(bool at_once) const noexcept {
    const std::uint64_t gather = std::max<std::uint64_t>(peer_.ring_bytes / 8, 1);
    if (staged_ == 0 || ended_ || !notice_free() ||
        (!at_once && unfinished_ != 0 && staged_ < gather))
        return std::nullopt;
    return ring_span(written_ - base_, staged_, peer_.ring_bytes, generation_);
}

void stream_writer_machine::data_posted(const stream_ring_write& write) noexcept {
    written_ += write.bytes();
    staged_ -= std::min(staged_, write.bytes());
    ++sent_;
    ++unfinished_;
    ++writes_posted_;
}

void stream_writer_machine::data_done() noexcept {
    if (unfinished_ > 0)
        --unfinished_;
    if (writes_done_ < writes_posted_)
        ++writes_done_;
}

std::optional<stream_ring_write> stream_writer_machine::switch_flush() const noexcept {
    if (!announced_ || staged_ == 0)
        return std::nullopt;
    return ring_span(written_ - base_, staged_, peer_.ring_bytes, generation_);
}

std::uint64_t stream_writer_machine::switch_ring() noexcept {
    if (staged_ != 0) { // switch_flush's write: data, but no notification
        written_ += staged_;
        staged_ = 0;
        ++unfinished_;
        ++writes_posted_;
    }
    if (announced_) {
        peer_.ring_bytes = announced_->bytes;
        generation_ = announced_->generation;
        base_ = written_;
        announced_.reset();
        ring_waits_ = 0; // the new ring has held nobody back yet
    }
    return writes_posted_;
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
    // Generations only grow: a record that names this ring or an older one (or
    // one announced already) changes nothing. A ring of no bytes is no ring.
    const std::uint32_t newest =
        std::max(announced_ ? announced_->generation : generation_, refused_);
    if (record.ring_generation > newest &&
        stream_limits_error({record.ring_bytes, peer_.notices}) == nullptr)
        announced_ = stream_ring_ref{record.ring_address, record.ring_rkey, record.ring_bytes,
                                     record.ring_generation};
}

void stream_writer_machine::refuse_announced() noexcept {
    if (announced_)
        refused_ = announced_->generation;
    announced_.reset();
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
    const std::uint64_t offset = (read_ - base_) % ring_.bytes;
    // This ring holds what arrived before the next one began.
    const std::uint64_t end = next_ && next_->begun ? next_->base : arrived_;
    return {offset, std::min(end - read_, ring_.bytes - offset), ring_.generation};
}

void stream_reader_machine::read(std::uint64_t n) noexcept {
    read_ += std::min(n, unread());
    move_on();
}

// Once everything the old ring holds was read, the new one is read from its
// offset 0.
void stream_reader_machine::move_on() noexcept {
    if (next_ && next_->begun && read_ >= next_->base) {
        ring_ = next_->ref;
        base_ = next_->base;
        next_.reset();
    }
}

bool stream_reader_machine::on_record(const stream_credit_record& record) noexcept {
    // Generations are never used twice, so a refusal names this ring or an
    // older one, refused before.
    const bool refused =
        next_ && !next_->begun && record.refused_generation == next_->ref.generation;
    if (refused) {
        next_.reset();
        announce_reported_ = true;
    }
    if (record.writing_generation == ring_.generation && !next_ && record.ring_waits != 0)
        writer_waited_ = true;
    if (!next_ || next_->begun || record.writing_generation != next_->ref.generation)
        return refused;
    // Every notification of a write into the old ring was reaped before this
    // record (RC order); the staged bytes written without one end at T.
    // (A position past what the writer could have had room for is not taken.)
    next_->begun = true;
    next_->base = std::min(std::max(record.writing_since, arrived_), read_ + ring_.bytes);
    arrived_ = next_->base;
    move_on();
    return false;
}

bool stream_reader_machine::grow_due(std::uint64_t max_bytes) const noexcept {
    return writer_waited_ && !next_ && ring_.bytes < max_bytes;
}

bool stream_reader_machine::may_shrink(std::uint64_t min_bytes) const noexcept {
    return !next_ && ring_.bytes > min_bytes && unread() == 0;
}

std::uint32_t stream_reader_machine::announce(std::uint64_t address, std::uint32_t rkey,
                                              std::uint32_t bytes) noexcept {
    next_ = ring_state{{address, rkey, bytes, ++last_generation_}};
    announce_reported_ = false;
    writer_waited_ = false;
    return next_->ref.generation;
}

bool stream_reader_machine::credit_due() const noexcept {
    const std::uint64_t newly_read = read_ - reported_.bytes_read;
    const std::uint64_t newly_reaped = reaped_data_ - reported_data_;
    if (!announce_reported_)
        return true;
    if (newly_read == 0 && newly_reaped == 0)
        return false; // records and acknowledgements alone are no news
    // A quarter of the newest ring: the writer's room is counted in it once it
    // moves, and a ring at most doubles, so before it moves it is at most half
    // the old one.
    return newly_read >= std::max<std::uint64_t>(ring_bytes() / 4, 1) ||
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
    const stream_ring_ref& newest = next_ ? next_->ref : ring_;
    if (newest.generation != 0) { // generation 0 is the hello's: nothing to say
        reported_.ring_address = newest.address;
        reported_.ring_rkey = newest.rkey;
        reported_.ring_bytes = newest.bytes;
        reported_.ring_generation = newest.generation;
    }
    announce_reported_ = true;
    return reported_;
}

stream_credit_record stream_record(stream_reader_machine& reader,
                                   const stream_writer_machine& writer, bool ack) noexcept {
    stream_credit_record r = reader.record(ack);
    r.writing_generation = writer.generation();
    r.writing_since = writer.writing_since();
    r.ring_waits = writer.ring_waits();
    r.refused_generation = writer.refused_generation();
    return r;
}

} // namespace rdma_asio::detail
