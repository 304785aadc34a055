// The flow control of a byte stream over an RC queue pair, with no I/O: where
// the next bytes go in the peer's receive ring, whether they may go now, what
// the peer's notifications mean, and when to tell the peer what this side has
// read. It calls no verb: the stream asks it, posts, and feeds back what came.
//
// The protocol, and why:
// - Each side registers a receive ring (REMOTE_WRITE) that the peer writes into
//   with RDMA writes, in order, wrapping at its end: the writer needs no
//   receive buffer of the reader's, and the reader copies out only what its
//   program reads. A write is notified by the immediate data of an RDMA write
//   with immediate (the last of at most two writes, when the bytes wrap), which
//   consumes one posted receive of the reader's: its kind (2 bits) and a value
//   (30 bits, the bytes written). RC delivers writes and their notifications in
//   order, so the reader needs no offset: it follows the writer.
// - No write may find the peer without a posted receive (an RNR NAK stalls the
//   queue pair, and with rnr_retry 7 it would retry for ever), and none may
//   overwrite bytes the reader has not read. So the writer spends two credits,
//   both returned by the reader's credit records: ring bytes (returned as the
//   reader's program reads them) and notifications (returned as the reader
//   reaps them and posts their receives again, a quarter of them at a time,
//   and every one before a record, which counts only receives posted again).
// - A credit record is {bytes read, notifications reaped}, both totals since
//   the start, carried as the 16-byte payload of an RDMA write with immediate
//   into one of four slots of the writer's control block (the immediate names
//   the slot by the record's sequence number). Totals make records idempotent
//   and order-free; a slot is rewritten only four records later, after the
//   reader of the slot has read it (below), so a record is never read torn.
// - Records travel as notifications too, and so need credit themselves. Of the
//   N receives each side keeps posted, data and the end of the stream may use
//   N - 2; the other two are one slot for a credit (sent when there is news:
//   see below) and one for an acknowledgement, the reply every credit
//   gets. Each slot holds one record in flight until the peer reports it
//   reaped. The acknowledgement breaks the cycle that would otherwise stall a
//   one-way stream: a reader's credits consume the writer's receives, which
//   only the writer's records report, and a writer that never reads has no
//   news of its own. An acknowledgement is never acknowledged, and a reader
//   sends its next credit only after the acknowledgement of its last one came
//   (its slot reported reaped), so the acknowledgement's slot is free again by
//   then: the exchange ends, and needs no more than the two receives.
// - A credit goes only when the writer may be waiting for it: when a quarter of
//   the ring was read or half the data notifications reaped since the last
//   record. A writer that found the ring full or its notifications spent has
//   left at least that much unreported, so the rule cannot stall it, and a
//   request and its reply cost no record each way.
// - Small writes are gathered. A copied write is staged: copied into the
//   writer's mirror of the peer's ring, where it will land, and finished for
//   the program at once; staged bytes go as one RDMA write (one notification)
//   when no data write of this side is unfinished (its completion not reported
//   by the device yet) or when they reach an eighth of the ring. A program that
//   writes many small pieces pays one write per device round trip, not one per
//   piece; a lone write, or one after a pause, goes at once. Staging needs room
//   in the ring but no notification, so it also gathers while the writer waits
//   for a credit. Writes from the caller's memory (no copy) go at once, after
//   the staged bytes.
// - The end of the stream (shutdown) is a notification after the last data:
//   the reader's reads end with eof once it has read everything before it.
// - A reader may replace its ring (to grow it when the writer fills it, or to
//   shrink it when idle) while bytes flow: it registers the new ring and
//   announces it, by its address, key, size and a generation one above the
//   current one, in every record until the writer has moved. The writer moves
//   before it posts its next record: its staged bytes go into the old ring as
//   one write without a notification (none may be free, and none is needed),
//   the new ring begins at the position it has written to, T, and every record
//   from then on says "writing into generation g since T". RC order does the
//   rest: the reader reaps that record after every notification of a write into
//   the old ring and before any into the new one, so at that record all bytes
//   up to T have arrived (the staged ones included); it reads the old ring up
//   to T, lets it go, and reads on at offset 0 of the new one. The writer's
//   room is the new ring's size less everything in flight, in the old ring
//   too, so that what is in flight never passes the ring's size (a ring that
//   shrank waits for the old one to be read down). The reader's credit rule
//   counts a quarter of the newest ring (a ring grows at most twofold). A
//   ring grows when the writer says, in a record, that a write of its program
//   found it full (only the writer knows that its program had more to write;
//   the reader cannot tell a full ring from a writer that wrote exactly that
//   much), so that it grows by one step per round trip while the writer is
//   held back, and not for a writer that never fills it. The
//   writer's copy of the old ring goes once the writes posted from it are done
//   (data_writes_done reaches what switch_ring returned). One replacement is
//   under way at a time: the reader announces the next only once it reads the
//   new ring.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace rdma_asio::detail {

/// What a notification (the immediate data) says.
enum class stream_notice_kind : std::uint32_t {
    data = 0,   ///< value: the bytes written into the reader's ring
    credit = 1, ///< value: the record's sequence number (its slot)
    ack = 2,    ///< the same, a reply to a credit
    end = 3,    ///< the writer shut down: no data after this
};

struct stream_notice {
    stream_notice_kind kind = stream_notice_kind::data;
    std::uint32_t value = 0; ///< below 2^30

    static constexpr std::uint32_t max_value = (1u << 30) - 1;
    std::uint32_t encode() const noexcept {
        return static_cast<std::uint32_t>(kind) << 30 | (value & max_value);
    }
    static stream_notice decode(std::uint32_t imm) noexcept {
        return {static_cast<stream_notice_kind>(imm >> 30), imm & max_value};
    }
};

/// A receive ring as its reader names it to the writer. Generation 0 is the one
/// the hello named; each later one replaces the one before.
struct stream_ring_ref {
    std::uint64_t address = 0;
    std::uint32_t rkey = 0;
    std::uint32_t bytes = 0;
    std::uint32_t generation = 0;
};

/// A credit record: totals since the stream began, in the sender's view of
/// what it received, and the state of a ring's replacement (above) in each
/// direction. Its 56 bytes travel as they are (hello version 2).
struct stream_credit_record {
    std::uint64_t bytes_read = 0;     ///< of the peer's bytes, by the program
    std::uint64_t notices_reaped = 0; ///< of the peer's notifications, their receives posted again
    /// As the peer's reader: the newest ring it announced (its current one
    /// when none is under way; generation 0 names nothing new).
    std::uint64_t ring_address = 0;
    std::uint32_t ring_rkey = 0;
    std::uint32_t ring_bytes = 0;
    std::uint32_t ring_generation = 0;
    /// As the peer's writer: the generation of this side's ring it writes
    /// into, and the position (bytes since the stream began) it began at.
    std::uint32_t writing_generation = 0;
    std::uint64_t writing_since = 0;
    /// As the peer's writer: how often a write of its program found the ring
    /// of writing_generation full (its size held the writer back).
    std::uint32_t ring_waits = 0;
    /// As the peer's writer: the newest ring of this side's it could not take
    /// (its copy could not be registered); 0 for none. This side lets it go.
    std::uint32_t refused_generation = 0;
};
static_assert(sizeof(stream_credit_record) == 56, "the record's layout is the wire format");

/// The control block's slots for credit records.
inline constexpr std::uint32_t stream_credit_slots = 4;

/// Sizes both sides agree on (each side's ring may differ: these are the
/// peer's, for the writer, and this side's, for the reader).
struct stream_limits {
    std::uint64_t ring_bytes = 0; ///< the receive ring, at most 2^30 - 1
    std::uint32_t notices = 0;    ///< receives posted for notifications, at least 4
};

/// What is wrong with `limits` as a stream's own or its peer's, or null when
/// nothing is: a ring of 1 to 2^30 - 1 bytes (a notification's value carries a
/// ring position's difference in 30 bits), at least 4 notification receives.
/// Said before anything is allocated for them, and of a peer's hello.
const char* stream_limits_error(const stream_limits& limits) noexcept;

/// A write into the peer's ring: `first` bytes at `offset`, then, when they
/// wrap, `second` bytes at offset 0; one notification for both.
struct stream_ring_write {
    std::uint64_t offset = 0;
    std::uint64_t first = 0;
    std::uint64_t second = 0;
    std::uint32_t generation = 0; ///< of the ring (and of the writer's copy of it)
    std::uint64_t bytes() const noexcept { return first + second; }
};

/// The writer's half: the peer's ring and receives.
class stream_writer_machine {
public:
    explicit stream_writer_machine(const stream_limits& peer) noexcept : peer_(peer) {}

    /// Where up to `wanted` bytes (at most `max_write`) go now, written at once
    /// from the caller's memory; nothing when bytes are staged (they go first),
    /// the ring is full, the notifications are spent, or the stream was ended.
    std::optional<stream_ring_write> next_data(std::uint64_t wanted,
                                               std::uint64_t max_write) const noexcept;
    /// Where up to `wanted` bytes (at most `max_write`) are to be copied, after
    /// those staged; nothing when the ring is full or the stream was ended.
    std::optional<stream_ring_write> next_stage(std::uint64_t wanted,
                                                std::uint64_t max_write) const noexcept;
    /// The bytes next_stage gave were copied.
    void staged(const stream_ring_write& write) noexcept;
    /// The staged bytes, when they are to go now as one write: a notification
    /// is free, and no data write is unfinished or they reach an eighth of the
    /// ring (or, with `at_once`, whenever a notification is free).
    std::optional<stream_ring_write> next_flush(bool at_once = false) const noexcept;
    /// The write next_data or next_flush gave was posted.
    void data_posted(const stream_ring_write& write) noexcept;
    /// The device reported a posted data write done (or failed).
    void data_done() noexcept;
    /// Whether the end may be sent (nothing staged, a notification is free;
    /// not sent yet).
    bool may_end() const noexcept;
    void end_posted() noexcept;
    bool ended() const noexcept { return ended_; }

    /// Whether a credit (or an acknowledgement) may go: its slot is free.
    bool may_credit() const noexcept { return credit_seq_ <= peer_reaped_; }
    bool may_ack() const noexcept { return ack_seq_ <= peer_reaped_; }
    /// A credit or an acknowledgement was posted: its record's sequence
    /// number (its slot is sequence % stream_credit_slots).
    std::uint32_t credit_posted() noexcept;
    std::uint32_t ack_posted() noexcept;

    /// The peer's record arrived (its totals, and the ring it announced).
    void on_record(const stream_credit_record& record) noexcept;
    /// A write of the program waits: when the peer's ring has no room, that is
    /// counted for the peer (ring_waits), whose reader may grow the ring.
    void note_wait() noexcept;
    /// How often a write found the ring written into now full.
    std::uint32_t ring_waits() const noexcept { return ring_waits_; }

    /// The peer announced a ring this side does not write into yet: move to it
    /// before the next record is posted (switch_flush, then switch_ring), or
    /// refuse it.
    bool switch_due() const noexcept { return announced_.has_value(); }
    /// The announced ring cannot be written into (its copy could not be
    /// registered): the writer stays on its ring, and every later record says
    /// so, for the peer to let that ring go. A ring of that generation or an
    /// older one is not taken again.
    void refuse_announced() noexcept;
    std::uint32_t refused_generation() const noexcept { return refused_; }
    const std::optional<stream_ring_ref>& announced() const noexcept { return announced_; }
    /// At the move: the staged bytes, into the old ring, as a write without a
    /// notification; nothing when none are staged.
    std::optional<stream_ring_write> switch_flush() const noexcept;
    /// The move, once switch_flush's write (if any) was posted: later bytes go
    /// to the announced ring from its offset 0. Returns data_writes_posted()
    /// at the move: the copy of the old ring may go once data_writes_done()
    /// reaches it.
    std::uint64_t switch_ring() noexcept;
    /// The generation of the peer's ring written into, and the position it
    /// began at: what every record says (writing_generation, writing_since).
    std::uint32_t generation() const noexcept { return generation_; }
    std::uint64_t writing_since() const noexcept { return base_; }
    /// Data writes (switch_flush's included) posted and reported done, since
    /// the stream began.
    std::uint64_t data_writes_posted() const noexcept { return writes_posted_; }
    std::uint64_t data_writes_done() const noexcept { return writes_done_; }

    /// Bytes in the peer's ring not read yet, notifications not reaped yet.
    std::uint64_t bytes_in_flight() const noexcept { return written_ - peer_read_; }
    std::uint64_t notices_in_flight() const noexcept { return sent_ - peer_reaped_; }
    /// Bytes copied for the peer and not posted yet.
    std::uint64_t staged_bytes() const noexcept { return staged_; }
    /// Data writes posted and not reported done.
    std::uint32_t unfinished() const noexcept { return unfinished_; }

private:
    std::uint32_t next_record() noexcept;
    bool notice_free() const noexcept;
    std::optional<stream_ring_write> place(std::uint64_t wanted,
                                           std::uint64_t max_write) const noexcept;

    stream_limits peer_;                       // ring_bytes: of the ring written into now
    std::uint32_t generation_ = 0;             // of that ring
    std::uint64_t base_ = 0;                   // the position at its offset 0
    std::optional<stream_ring_ref> announced_; // the ring to move to
    std::uint32_t refused_ = 0;                // the newest generation refused
    std::uint64_t writes_posted_ = 0;
    std::uint64_t writes_done_ = 0;
    std::uint32_t ring_waits_ = 0;  // of the ring written into now
    std::uint64_t written_ = 0;     // bytes written into the peer's ring
    std::uint64_t staged_ = 0;      // bytes copied after them, not posted yet
    std::uint32_t unfinished_ = 0;  // data writes posted, not reported done
    std::uint64_t peer_read_ = 0;   // of them, read by the peer's program
    std::uint64_t sent_ = 0;        // notifications sent (the last one's number)
    std::uint64_t peer_reaped_ = 0; // of them, reaped by the peer
    std::uint64_t credit_seq_ = 0;  // notification number of the credit in flight
    std::uint64_t ack_seq_ = 0;     // of the acknowledgement in flight
    std::uint32_t records_ = 0;     // records sent
    bool ended_ = false;
};

/// The reader's half: this side's ring, what arrived in it and what was read.
class stream_reader_machine {
public:
    explicit stream_reader_machine(const stream_limits& mine) noexcept
        : mine_(mine), ring_{0, 0, static_cast<std::uint32_t>(mine.ring_bytes), 0} {}

    /// What a reaped notification means for the reader (the receive it came on
    /// is to be posted again: see repost_due).
    void on_notice(const stream_notice& notice) noexcept;

    /// The receives of reaped notifications not posted again yet. They are
    /// posted again together, in one call, when repost_due() says (a quarter of
    /// the receives), and all of them before any record: a record reports only
    /// receives posted again, since the writer may spend every receive a record
    /// reports, and one that is not posted would meet RNR.
    std::uint64_t repost_pending() const noexcept { return reaped_ - reposted_; }
    bool repost_due() const noexcept;
    /// `n` of the pending receives were posted again.
    void reposted(std::uint64_t n) noexcept { reposted_ += n; }

    /// The bytes that may be read now: at `offset` in the ring of `generation`,
    /// `length` of them up to the ring's end or the end of what that ring holds
    /// (the rest comes next).
    struct span {
        std::uint64_t offset = 0;
        std::uint64_t length = 0;
        std::uint32_t generation = 0;
    };
    span readable() const noexcept;
    /// The program read `n` of them.
    void read(std::uint64_t n) noexcept;
    /// The peer ended the stream and everything before the end was read.
    bool at_end() const noexcept { return peer_ended_ && read_ == arrived_; }
    bool peer_ended() const noexcept { return peer_ended_; }
    std::uint64_t unread() const noexcept { return arrived_ - read_; }
    /// The bytes the peer wrote and notified, since the stream began.
    std::uint64_t arrived() const noexcept { return arrived_; }

    /// Whether this side should send a credit: a quarter of the ring read or
    /// half the data notifications reaped since the last record, or a ring
    /// announced and not in a record yet. (The slot's rule is the writer's
    /// may_credit.)
    bool credit_due() const noexcept;

    /// The peer's record arrived: when it says the peer writes into the ring
    /// announced, every byte before its position has arrived, and the ring is
    /// read from there on. Returns true when it says the peer refused the ring
    /// announced: that ring is no longer announced (let it go), and a later one
    /// may be.
    bool on_record(const stream_credit_record& record) noexcept;
    /// Whether a new ring may be announced: none is under way, and the ring
    /// read now is the newest.
    bool may_announce() const noexcept { return !next_; }
    /// Whether the ring should grow: the peer's writer said a write of its
    /// found this ring full (ring_waits in a record), and it is below
    /// `max_bytes`. (Only the writer knows its program had more to write.)
    bool grow_due(std::uint64_t max_bytes) const noexcept;
    /// Whether the ring could go down to `min_bytes` now: it is larger, and
    /// nothing in it is unread.
    bool may_shrink(std::uint64_t min_bytes) const noexcept;
    /// A new ring of `bytes` was registered at `address` with `rkey`: it goes
    /// into every record until the writer has moved to it. Returns its
    /// generation, above every one announced before (a refused one's number is
    /// not used again). Only when may_announce().
    std::uint32_t announce(std::uint64_t address, std::uint32_t rkey, std::uint32_t bytes) noexcept;
    /// The ring read now; rings of older generations are no longer needed.
    std::uint32_t reading_generation() const noexcept { return ring_.generation; }
    /// The size of the newest ring (the announced one, once announced).
    std::uint64_t ring_bytes() const noexcept { return next_ ? next_->ref.bytes : ring_.bytes; }
    /// Whether a credit came that has not been acknowledged yet.
    bool ack_due() const noexcept { return ack_owed_; }
    /// The record to send now (post the pending receives first); `ack` says it
    /// answers a credit.
    stream_credit_record record(bool ack) noexcept;

private:
    struct ring_state {
        stream_ring_ref ref;
        std::uint64_t base = 0; // the position at its offset 0, once known
        bool begun = false;     // the writer moved to it (base is known)
    };
    void move_on() noexcept;

    stream_limits mine_;                // notices; ring_bytes: the first ring's
    stream_ring_ref ring_;              // the ring read now
    std::uint64_t base_ = 0;            // the position at its offset 0
    std::optional<ring_state> next_;    // announced, and not read yet
    std::uint32_t last_generation_ = 0; // the newest announced, refused ones too
    bool announce_reported_ = true;     // next_ went in a record
    bool writer_waited_ = false;        // on the ring read now (ring_waits)
    std::uint64_t arrived_ = 0;         // bytes the peer wrote and notified
    std::uint64_t read_ = 0;            // of them, read by the program
    std::uint64_t reaped_ = 0;          // the peer's notifications reaped
    std::uint64_t reposted_ = 0;        // of their receives, posted again
    std::uint64_t reaped_data_ = 0;
    stream_credit_record reported_; // the last record sent
    std::uint64_t reported_data_ = 0;
    bool ack_owed_ = false;
    bool peer_ended_ = false;
};

/// The record a side sends now: its reader's totals and newest ring
/// (reader.record), and the ring its writer writes into, and since where.
/// (The writer moves to an announced ring first: switch_due.)
stream_credit_record stream_record(stream_reader_machine& reader,
                                   const stream_writer_machine& writer, bool ack) noexcept;

} // namespace rdma_asio::detail
