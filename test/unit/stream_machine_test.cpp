// The stream's flow control (stream_machine.hpp): the encoding of its
// notifications, each half's rules, and two sides run against each other over a
// simulated RC link (in-order delivery, receives consumed and posted again a
// quarter at a time and before every record, records landing in their slots,
// data writes reported done after they land), with writes from the program's
// memory and copied ones gathered, in random schedules: every byte arrives once
// and in order, no notification finds no receive posted, no write lands on
// bytes not read yet, no record is overwritten before it is read, and the
// exchange never stalls while a side has something to do.
#include "rdma_asio/detail/stream/stream_machine.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <vector>

using rdma_asio::detail::stream_credit_record;
using rdma_asio::detail::stream_limits;
using rdma_asio::detail::stream_limits_error;
using rdma_asio::detail::stream_notice;
using rdma_asio::detail::stream_notice_kind;
using rdma_asio::detail::stream_reader_machine;
using rdma_asio::detail::stream_ring_write;
using rdma_asio::detail::stream_writer_machine;

TEST_CASE("a stream notification's kind and value survive the immediate data", "[stream]") {
    for (auto kind : {stream_notice_kind::data, stream_notice_kind::credit, stream_notice_kind::ack,
                      stream_notice_kind::end}) {
        for (std::uint32_t value : {0u, 1u, 4096u, stream_notice::max_value}) {
            const stream_notice back = stream_notice::decode(stream_notice{kind, value}.encode());
            CHECK(back.kind == kind);
            CHECK(back.value == value);
        }
    }
}

TEST_CASE("a stream's sizes: a ring of 1 to 2^30 - 1 bytes, at least 4 notices", "[stream]") {
    CHECK(stream_limits_error({1, 4}) == nullptr);
    CHECK(stream_limits_error({(1u << 30) - 1, 4}) == nullptr);
    CHECK(stream_limits_error({256 * 1024, 32}) == nullptr);
    const char* empty = stream_limits_error({0, 32});
    REQUIRE(empty != nullptr);
    CHECK_THAT(empty, Catch::Contains("receive_ring"));
    const char* large = stream_limits_error({1u << 30, 32});
    REQUIRE(large != nullptr);
    CHECK_THAT(large, Catch::Contains("receive_ring"));
    CHECK(stream_limits_error({std::uint64_t{2} << 30, 32}) != nullptr);
    for (std::uint32_t notices : {0u, 1u, 3u}) {
        const char* few = stream_limits_error({256 * 1024, notices});
        REQUIRE(few != nullptr);
        CHECK_THAT(few, Catch::Contains("notices"));
    }
}

TEST_CASE("a stream writer fills the peer's ring, wraps, and waits for the reader's record",
          "[stream]") {
    stream_writer_machine w(stream_limits{100, 8});
    auto first = w.next_data(70, 1000);
    REQUIRE(first);
    CHECK(first->offset == 0);
    CHECK(first->first == 70);
    CHECK(first->second == 0);
    w.data_posted(*first);
    // 30 bytes left: a larger write takes what fits.
    auto second = w.next_data(50, 1000);
    REQUIRE(second);
    CHECK(second->bytes() == 30);
    w.data_posted(*second);
    CHECK_FALSE(w.next_data(1, 1000)); // full
    // The reader read 80 bytes: the next write starts at offset 0 (100 % 100),
    // and one that starts at 90 wraps.
    w.on_record({80, 2});
    auto third = w.next_data(10, 1000);
    REQUIRE(third);
    CHECK(third->offset == 0);
    w.data_posted(*third);
    w.on_record({100, 3});
    auto fourth = w.next_data(95, 1000);
    REQUIRE(fourth);
    CHECK(fourth->offset == 10);
    CHECK(fourth->bytes() == 90);
    // An old record changes nothing.
    w.on_record({50, 1});
    CHECK(w.bytes_in_flight() == 10);
    // max_write caps a write.
    CHECK(w.next_data(50, 4)->bytes() == 4);
}

TEST_CASE("a stream writer keeps two of the peer's receives for a credit and an "
          "acknowledgement",
          "[stream]") {
    stream_writer_machine w(stream_limits{1 << 20, 4});
    for (int i = 0; i < 2; ++i) {
        auto write = w.next_data(1, 1);
        REQUIRE(write);
        w.data_posted(*write);
    }
    CHECK_FALSE(w.next_data(1, 1)); // N - 2 data notifications in flight
    CHECK_FALSE(w.may_end());
    REQUIRE(w.may_credit());
    REQUIRE(w.may_ack());
    CHECK(w.credit_posted() == 0);
    CHECK(w.ack_posted() == 1);
    CHECK_FALSE(w.may_credit()); // one record each in flight
    CHECK_FALSE(w.may_ack());
    CHECK(w.notices_in_flight() == 4);
    w.on_record({2, 3}); // the data and the credit reaped, not the acknowledgement
    CHECK(w.may_credit());
    CHECK_FALSE(w.may_ack());
    CHECK(w.next_data(1, 1));
    w.end_posted();
    CHECK(w.ended());
    CHECK_FALSE(w.next_data(1, 1));
    CHECK_FALSE(w.may_end());
}

TEST_CASE("a stream writer gathers copied writes while one of its data writes is unfinished",
          "[stream]") {
    stream_writer_machine w(stream_limits{800, 8});
    // Nothing unfinished: staged bytes go at once.
    auto a = w.next_stage(10, 1000);
    REQUIRE(a);
    w.staged(*a);
    auto flush = w.next_flush();
    REQUIRE(flush);
    CHECK(flush->offset == 0);
    CHECK(flush->bytes() == 10);
    w.data_posted(*flush);
    CHECK(w.unfinished() == 1);
    // One unfinished: small writes gather after it, and nothing goes from the
    // caller's memory ahead of them.
    for (int i = 0; i < 9; ++i) {
        auto b = w.next_stage(10, 1000);
        REQUIRE(b);
        CHECK(b->offset == 10 + 10 * static_cast<std::uint64_t>(i));
        w.staged(*b);
        CHECK_FALSE(w.next_flush());
    }
    CHECK(w.staged_bytes() == 90);
    CHECK_FALSE(w.next_data(1, 1000));
    CHECK_FALSE(w.may_end());
    // Its completion lets them go as one write.
    w.data_done();
    flush = w.next_flush();
    REQUIRE(flush);
    CHECK(flush->offset == 10);
    CHECK(flush->bytes() == 90);
    w.data_posted(*flush);
    CHECK(w.staged_bytes() == 0);
    CHECK(w.bytes_in_flight() == 100);
    // An eighth of the ring staged goes without waiting.
    auto c = w.next_stage(99, 1000);
    w.staged(*c);
    CHECK_FALSE(w.next_flush());
    auto d = w.next_stage(1, 1000);
    w.staged(*d);
    CHECK(w.next_flush()->bytes() == 100);
    // Staging needs room in the ring, not a notification.
    w.data_posted(*w.next_flush());
    for (int i = 0; i < 3; ++i) {
        auto e = w.next_stage(100, 1000);
        w.staged(*e);
        w.data_posted(*w.next_flush());
    }
    CHECK(w.notices_in_flight() == 6); // 8 - 2: the data's share is spent
    CHECK(w.bytes_in_flight() == 500);
    auto f = w.next_stage(250, 1000);
    REQUIRE(f);
    w.staged(*f);
    CHECK_FALSE(w.next_flush());
    CHECK(w.next_stage(100, 1000)->bytes() == 50); // the room left
    w.staged(*w.next_stage(100, 1000));
    CHECK_FALSE(w.next_stage(1, 1000)); // full
    // The reader's record: room again, and staged bytes that wrap the ring go
    // as one write in two parts.
    w.on_record({500, 6});
    auto h = w.next_stage(100, 1000);
    REQUIRE(h);
    CHECK(h->offset == 0);
    w.staged(*h);
    for (int i = 0; i < 6; ++i)
        w.data_done();
    flush = w.next_flush();
    REQUIRE(flush);
    CHECK(flush->offset == 500);
    CHECK(flush->first == 300);
    CHECK(flush->second == 100);
    w.data_posted(*flush);
    CHECK(w.may_end());
}

TEST_CASE("a stream reader follows the writer round its ring, ends after the end, and owes "
          "records when there is news",
          "[stream]") {
    stream_reader_machine r(stream_limits{100, 10});
    CHECK_FALSE(r.credit_due());
    r.on_notice({stream_notice_kind::data, 90});
    CHECK(r.readable().offset == 0);
    CHECK(r.readable().length == 90);
    CHECK_FALSE(r.credit_due()); // 1 of 8 notifications, nothing read
    r.read(20);
    CHECK_FALSE(r.credit_due()); // 20 < a quarter of the ring, more to read
    r.read(10);
    CHECK(r.credit_due()); // 30 read
    CHECK(r.record(false).bytes_read == 30);
    r.read(60);
    r.on_notice({stream_notice_kind::data, 30});
    // From 90 to the ring's end, then the rest from 0.
    CHECK(r.readable().offset == 90);
    CHECK(r.readable().length == 10);
    r.read(10);
    CHECK(r.readable().offset == 0);
    CHECK(r.readable().length == 20);
    // A credit is owed an acknowledgement; records alone are no news.
    r.read(20);
    (void)r.record(false);
    r.on_notice({stream_notice_kind::credit, 0});
    r.on_notice({stream_notice_kind::ack, 1});
    CHECK(r.ack_due());
    CHECK_FALSE(r.credit_due());
    r.reposted(r.repost_pending());
    const stream_credit_record ack = r.record(true);
    CHECK_FALSE(r.ack_due());
    CHECK(ack.notices_reaped == 4);
    CHECK(ack.bytes_read == 120);
    // Everything read before the end: at the end.
    r.on_notice({stream_notice_kind::data, 5});
    r.on_notice({stream_notice_kind::end, 0});
    CHECK(r.peer_ended());
    CHECK_FALSE(r.at_end());
    r.read(5);
    CHECK(r.at_end());
}

TEST_CASE("a stream reader posts its receives again a quarter at a time, and a record counts "
          "only those posted again",
          "[stream]") {
    stream_reader_machine r(stream_limits{1000, 8}); // batches of 2
    r.on_notice({stream_notice_kind::data, 10});
    CHECK(r.repost_pending() == 1);
    CHECK_FALSE(r.repost_due());
    CHECK(r.record(false).notices_reaped == 0); // reaped, not posted again: not reported
    r.on_notice({stream_notice_kind::data, 10});
    CHECK(r.repost_due());
    r.reposted(2);
    CHECK(r.repost_pending() == 0);
    CHECK_FALSE(r.repost_due());
    r.on_notice({stream_notice_kind::credit, 0});
    r.reposted(r.repost_pending());
    const stream_credit_record ack = r.record(true);
    CHECK(ack.notices_reaped == 3);
    CHECK(ack.bytes_read == 0);
    // The smallest stream (4 receives) posts each again at once.
    stream_reader_machine small(stream_limits{1000, 4});
    small.on_notice({stream_notice_kind::data, 1});
    CHECK(small.repost_due());
}

namespace {

// One side of the simulated link: its two halves, its ring, its control slots,
// its posted receives and what it has to do.
struct side {
    side(const stream_limits& mine, const stream_limits& peer)
        : writer(peer), reader(mine), receives(mine.notices), max_ring(mine.ring_bytes) {
        add_ring(0, mine.ring_bytes);
    }

    void add_ring(std::uint32_t generation, std::uint64_t bytes) {
        rings[generation].assign(bytes, 0);
        occupied[generation].assign(bytes, false);
    }
    // The rings the reader no longer reads are let go: a write into one fails.
    void drop_old_rings() {
        while (rings.begin()->first < reader.reading_generation()) {
            occupied.erase(rings.begin()->first);
            rings.erase(rings.begin());
        }
    }

    stream_writer_machine writer;
    stream_reader_machine reader;
    // By generation: this side's rings, and which of their bytes were written
    // and not read yet.
    std::map<std::uint32_t, std::vector<std::uint8_t>> rings;
    std::map<std::uint32_t, std::vector<bool>> occupied;
    std::uint32_t receives;      // posted, not consumed
    std::uint64_t max_ring;      // the reader grows its ring up to this
    std::uint64_t min_ring = 0;  // and shrinks it to this, when not 0
    std::uint32_t resizes = 0;   // rings announced
    std::uint32_t announced = 0; // the generation of the one announced last
    bool refuses = false;        // as a writer, refuses the peer's new rings now and then
    std::uint32_t refused = 0;   // the peer's rings it refused
    std::uint32_t withdrawn = 0; // of its own announced rings, the peer refused
    struct slot {
        stream_credit_record record;
        std::uint32_t seq = 0;
        bool unread = false;
    };
    std::array<slot, rdma_asio::detail::stream_credit_slots> slots{};
    std::deque<stream_notice> arrived; // consumed a receive, not reaped yet

    std::deque<std::uint8_t> staged; // copied, not posted yet
    std::uint32_t completions = 0;   // data writes delivered, not reported done yet

    std::uint64_t to_send = 0; // bytes the program still writes
    std::uint64_t next_byte = 0;
    std::uint64_t expected_byte = 0; // the next byte this side should read
    bool end_after = false;
};

// What travels from one side to the other, in order: a write lands with its
// notification (RC: the bytes are in place before the notification is seen).
struct in_flight {
    stream_notice notice;
    stream_ring_write write;
    std::vector<std::uint8_t> bytes;
    stream_credit_record record;
    bool plain = false; // an RDMA write without a notification: no receive consumed
};

std::uint8_t pattern(std::uint64_t i) {
    return static_cast<std::uint8_t>(i * 7 + i / 251);
}

struct simulated_link {
    side a, b;
    std::deque<in_flight> a_to_b, b_to_a;
    std::mt19937 rng;
    std::uint64_t max_write;

    simulated_link(const stream_limits& la, const stream_limits& lb, unsigned seed,
                   std::uint64_t max_w)
        : a(la, lb), b(lb, la), rng(seed), max_write(max_w) {}

    std::uint64_t random(std::uint64_t n) {
        return std::uniform_int_distribution<std::uint64_t>(0, n)(rng);
    }

    // The receives of reaped notifications, posted again together.
    static void repost(side& s) {
        const std::uint64_t n = s.reader.repost_pending();
        s.receives += static_cast<std::uint32_t>(n);
        s.reader.reposted(n);
    }

    // The stream's own policy after anything changed: post the staged bytes when
    // due, acknowledge a credit, send a credit when there is news (the pending
    // receives posted first), end after the last byte.
    void records(side& s, std::deque<in_flight>& out) {
        if (auto w = s.writer.next_flush()) {
            REQUIRE(w->bytes() == s.staged.size());
            in_flight f{
                {stream_notice_kind::data, static_cast<std::uint32_t>(w->bytes())}, *w, {}, {}};
            f.bytes.assign(s.staged.begin(), s.staged.end());
            s.staged.clear();
            s.writer.data_posted(*w);
            out.push_back(std::move(f));
        }
        if (s.reader.ack_due() && s.writer.may_ack()) {
            repost(s);
            const stream_credit_record r = record(s, out, true);
            out.push_back({{stream_notice_kind::ack, s.writer.ack_posted()}, {}, {}, r});
        }
        if (s.reader.credit_due() && s.writer.may_credit()) {
            repost(s);
            const stream_credit_record r = record(s, out, false);
            out.push_back({{stream_notice_kind::credit, s.writer.credit_posted()}, {}, {}, r});
        }
        if (s.end_after && s.to_send == 0 && s.writer.may_end()) {
            s.writer.end_posted();
            s.end_after = false;
            out.push_back({{stream_notice_kind::end, 0}, {}, {}, {}});
        }
    }

    // A record: the writer first moves to a ring the peer announced (its staged
    // bytes into the old one, without a notification).
    stream_credit_record record(side& s, std::deque<in_flight>& out, bool ack) {
        if (s.writer.switch_due() && s.refuses && random(2) == 0) {
            // Its copy could not be registered: it stays, and says so.
            const std::uint32_t refused = s.writer.announced()->generation;
            s.writer.refuse_announced();
            REQUIRE_FALSE(s.writer.switch_due());
            REQUIRE(s.writer.refused_generation() == refused);
            ++s.refused;
        } else if (s.writer.switch_due()) {
            if (auto w = s.writer.switch_flush()) {
                REQUIRE(w->bytes() == s.staged.size());
                in_flight f{{}, *w, {}, {}, true};
                f.bytes.assign(s.staged.begin(), s.staged.end());
                s.staged.clear();
                out.push_back(std::move(f));
            }
            const std::uint32_t to = s.writer.announced()->generation;
            s.writer.switch_ring();
            REQUIRE(s.writer.generation() == to);
            REQUIRE_FALSE(s.writer.switch_due());
        }
        return rdma_asio::detail::stream_record(s.reader, s.writer, ack);
    }

    // The reader replaces its ring: a larger one when the writer filled it, a
    // smaller one (the smallest) at random when it is empty, as after an idle
    // spell. The test's "address" of a ring is its generation.
    bool resize(side& s) {
        std::uint64_t bytes = 0;
        if (s.reader.grow_due(s.max_ring))
            bytes = std::min(s.reader.ring_bytes() * 2, s.max_ring);
        else if (s.min_ring != 0 && s.reader.may_shrink(s.min_ring) && random(3) == 0)
            bytes = s.min_ring;
        if (bytes == 0)
            return false;
        const std::uint32_t generation =
            s.reader.announce(s.announced + 1, 0, static_cast<std::uint32_t>(bytes));
        REQUIRE(generation > s.announced); // never one used before
        s.announced = generation;
        s.add_ring(generation, bytes);
        ++s.resizes;
        return true;
    }

    // A write from the program's memory (posted at once) or copied (staged), at
    // random.
    bool write(side& s, std::deque<in_flight>& out) {
        if (s.to_send == 0)
            return false;
        const std::uint64_t wanted = 1 + random(s.to_send - 1);
        if (random(1) == 0) {
            if (auto w = s.writer.next_data(wanted, max_write)) {
                in_flight f{
                    {stream_notice_kind::data, static_cast<std::uint32_t>(w->bytes())}, *w, {}, {}};
                for (std::uint64_t i = 0; i < w->bytes(); ++i)
                    f.bytes.push_back(pattern(s.next_byte++));
                s.writer.data_posted(*w);
                s.to_send -= w->bytes();
                out.push_back(std::move(f));
                return true;
            }
        }
        auto w = s.writer.next_stage(wanted, max_write);
        if (!w) {
            s.writer.note_wait(); // as the stream does: the peer's reader may grow its ring
            return false;
        }
        for (std::uint64_t i = 0; i < w->bytes(); ++i)
            s.staged.push_back(pattern(s.next_byte++));
        s.writer.staged(*w);
        s.to_send -= w->bytes();
        return true;
    }

    // The device reports one of `s`'s delivered data writes done.
    bool finish(side& s) {
        if (s.completions == 0)
            return false;
        --s.completions;
        s.writer.data_done();
        return true;
    }

    // The head of `in` arrives at `to`; false when nothing travels.
    bool deliver(std::deque<in_flight>& in, side& to, side& from) {
        if (in.empty())
            return false;
        in_flight f = std::move(in.front());
        in.pop_front();
        if (f.plain || f.notice.kind == stream_notice_kind::data) {
            // Into a ring the reader still has, and no write lands on bytes not
            // read yet.
            REQUIRE(to.rings.count(f.write.generation) == 1);
            auto& ring = to.rings[f.write.generation];
            auto& occupied = to.occupied[f.write.generation];
            ++from.completions;
            for (std::uint64_t i = 0; i < f.write.bytes(); ++i) {
                const std::uint64_t at = i < f.write.first ? f.write.offset + i : i - f.write.first;
                REQUIRE(at < ring.size());
                REQUIRE_FALSE(occupied[at]);
                occupied[at] = true;
                ring[at] = f.bytes[i];
            }
        }
        if (f.plain)
            return true;          // no notification: nothing consumed, nothing to reap
        REQUIRE(to.receives > 0); // no RNR
        --to.receives;
        if (f.notice.kind == stream_notice_kind::credit ||
            f.notice.kind == stream_notice_kind::ack) {
            auto& slot = to.slots[f.notice.value % rdma_asio::detail::stream_credit_slots];
            REQUIRE_FALSE(slot.unread); // never overwritten before read
            slot = {f.record, f.notice.value, true};
        }
        to.arrived.push_back(f.notice);
        return true;
    }

    bool reap(side& s) {
        if (s.arrived.empty())
            return false;
        const stream_notice n = s.arrived.front();
        s.arrived.pop_front();
        s.reader.on_notice(n);
        if (s.reader.repost_due())
            repost(s);
        if (n.kind == stream_notice_kind::credit || n.kind == stream_notice_kind::ack) {
            auto& slot = s.slots[n.value % rdma_asio::detail::stream_credit_slots];
            REQUIRE(slot.unread);
            REQUIRE(slot.seq == n.value);
            slot.unread = false;
            s.writer.on_record(slot.record);
            if (s.reader.on_record(slot.record)) {
                // The peer refused the ring announced last: it goes, and a
                // write into it fails the test.
                REQUIRE(slot.record.refused_generation == s.announced);
                REQUIRE(s.reader.may_announce());
                s.rings.erase(s.announced);
                s.occupied.erase(s.announced);
                ++s.withdrawn;
            }
            s.drop_old_rings();
        }
        return true;
    }

    bool read(side& s) {
        const auto span = s.reader.readable();
        if (span.length == 0)
            return false;
        REQUIRE(s.rings.count(span.generation) == 1);
        auto& ring = s.rings[span.generation];
        auto& occupied = s.occupied[span.generation];
        const std::uint64_t n = 1 + random(span.length - 1);
        for (std::uint64_t i = 0; i < n; ++i) {
            REQUIRE(occupied[span.offset + i]); // written, not read yet
            occupied[span.offset + i] = false;
            REQUIRE(ring[span.offset + i] == pattern(s.expected_byte++));
        }
        s.reader.read(n);
        s.drop_old_rings();
        return true;
    }

    // One random action that can be taken; false when none can.
    bool step() {
        for (int tries = 0; tries < 32; ++tries) {
            bool done = false;
            switch (random(11)) {
            case 0:
                done = write(a, a_to_b);
                break;
            case 1:
                done = write(b, b_to_a);
                break;
            case 2:
                done = deliver(a_to_b, b, a);
                break;
            case 3:
                done = deliver(b_to_a, a, b);
                break;
            case 4:
                done = reap(a);
                break;
            case 5:
                done = reap(b);
                break;
            case 6:
                done = read(a);
                break;
            case 7:
                done = read(b);
                break;
            case 8:
                done = finish(a);
                break;
            case 9:
                done = finish(b);
                break;
            case 10:
                done = resize(a);
                break;
            case 11:
                done = resize(b);
                break;
            }
            if (done) {
                records(a, a_to_b);
                records(b, b_to_a);
                return true;
            }
        }
        // Try every action in order before saying none is possible.
        const bool any = write(a, a_to_b) || write(b, b_to_a) || deliver(a_to_b, b, a) ||
                         deliver(b_to_a, a, b) || reap(a) || reap(b) || read(a) || read(b) ||
                         finish(a) || finish(b);
        records(a, a_to_b);
        records(b, b_to_a);
        return any || !a_to_b.empty() || !b_to_a.empty();
    }
};

} // namespace

TEST_CASE("two stream machines over a simulated link: every byte once and in order, no RNR, no "
          "overwrite, no stall",
          "[stream]") {
    const unsigned seed = GENERATE(range(1u, 41u));
    std::mt19937 pick(seed);
    const stream_limits la{64 + pick() % 512, static_cast<std::uint32_t>(4 + pick() % 8)};
    const stream_limits lb{64 + pick() % 512, static_cast<std::uint32_t>(4 + pick() % 8)};
    simulated_link l(la, lb, seed, 1 + pick() % 300);
    l.a.to_send = 20000 + pick() % 20000;
    l.b.to_send = pick() % 2 == 0 ? 0 : 5000 + pick() % 20000; // one way, or both
    l.a.end_after = true;
    l.b.end_after = true;
    const std::uint64_t a_total = l.a.to_send, b_total = l.b.to_send;
    INFO("seed " << seed << ", rings " << la.ring_bytes << "/" << lb.ring_bytes << ", notices "
                 << la.notices << "/" << lb.notices);
    std::uint64_t steps = 0;
    while (!(l.a.reader.at_end() && l.b.reader.at_end())) {
        REQUIRE(l.step()); // something can always be done until both ends are read
        REQUIRE(++steps < 10'000'000);
    }
    CHECK(l.b.expected_byte == a_total);
    CHECK(l.a.expected_byte == b_total);
}

TEST_CASE("two stream machines whose rings grow and shrink: every byte once and in order, no "
          "write into a ring let go, no stall",
          "[stream]") {
    const unsigned seed = GENERATE(range(1u, 41u));
    std::mt19937 pick(seed);
    // Small first rings, some of a size that is no power of two.
    const stream_limits la{16 + pick() % 64, static_cast<std::uint32_t>(4 + pick() % 8)};
    const stream_limits lb{16 + pick() % 64, static_cast<std::uint32_t>(4 + pick() % 8)};
    simulated_link l(la, lb, seed, 1 + pick() % 300);
    l.a.max_ring = la.ring_bytes * (1 + pick() % 40);
    l.b.max_ring = lb.ring_bytes * (1 + pick() % 40);
    l.a.min_ring = la.ring_bytes;
    l.b.min_ring = lb.ring_bytes;
    // A third of the schedules: writers that cannot register every copy.
    l.a.refuses = l.b.refuses = seed % 3 == 0;
    l.a.to_send = 20000 + pick() % 20000;
    l.b.to_send = pick() % 2 == 0 ? 0 : 5000 + pick() % 20000;
    l.a.end_after = true;
    l.b.end_after = true;
    const std::uint64_t a_total = l.a.to_send, b_total = l.b.to_send;
    INFO("seed " << seed << ", first rings " << la.ring_bytes << "/" << lb.ring_bytes
                 << ", largest " << l.a.max_ring << "/" << l.b.max_ring << ", notices "
                 << la.notices << "/" << lb.notices);
    std::uint64_t steps = 0;
    while (!(l.a.reader.at_end() && l.b.reader.at_end())) {
        REQUIRE(l.step());
        REQUIRE(++steps < 10'000'000);
    }
    // Whatever is still in flight is records and acknowledgements.
    while (l.step() && ++steps < 10'000'000) {
    }
    CHECK(l.b.expected_byte == a_total);
    CHECK(l.a.expected_byte == b_total);
    INFO("rings announced: " << l.b.resizes << " by b, " << l.a.resizes << " by a; refused "
                             << l.a.refused << " by a, " << l.b.refused << " by b");
    // Every refusal reached the reader, which let that ring go.
    CHECK(l.b.withdrawn == l.a.refused);
    CHECK(l.a.withdrawn == l.b.refused);
    if (l.a.refuses && l.b.resizes > 2)
        CHECK(l.a.refused > 0);
    // b reads a's 20 000 bytes or more: a ring that may grow grew.
    // A reader whose writer can fill its ring grew it: not when the ring may not
    // grow, or when writes of a few bytes spend the notifications first.
    if (l.b.max_ring > lb.ring_bytes && l.max_write >= 16)
        CHECK(l.b.resizes > 0);
    CHECK(l.b.reader.ring_bytes() <= l.b.max_ring);
    CHECK(l.a.writer.data_writes_done() == l.a.writer.data_writes_posted());
    CHECK(l.b.writer.data_writes_done() == l.b.writer.data_writes_posted());
}

TEST_CASE("a stream writer moves to a ring its reader announced, staged bytes first", "[stream]") {
    stream_writer_machine w(stream_limits{100, 8});
    auto first = w.next_data(90, 1000);
    REQUIRE(first);
    w.data_posted(*first); // 90 of 100, unread
    auto staged = w.next_stage(10, 1000);
    REQUIRE(staged);
    CHECK(staged->offset == 90);
    w.staged(*staged);
    CHECK_FALSE(w.next_stage(1, 1000)); // the ring is full
    w.note_wait();
    CHECK(w.ring_waits() == 1);

    // The reader read 40 and announces a ring of 400, generation 1.
    stream_credit_record r{40, 1};
    r.ring_address = 0x1000;
    r.ring_rkey = 7;
    r.ring_bytes = 400;
    r.ring_generation = 1;
    w.on_record(r);
    REQUIRE(w.switch_due());
    CHECK(w.announced()->address == 0x1000);
    CHECK(w.announced()->rkey == 7);
    // The staged bytes go into the old ring, as they were placed.
    auto flush = w.switch_flush();
    REQUIRE(flush);
    CHECK(flush->offset == 90);
    CHECK(flush->bytes() == 10);
    CHECK(flush->generation == 0);
    CHECK(w.switch_ring() == 2); // the copy of the old ring goes after 2 writes
    CHECK(w.generation() == 1);
    CHECK(w.writing_since() == 100);
    CHECK(w.ring_waits() == 0); // the new ring held nobody back yet
    CHECK(w.staged_bytes() == 0);
    // The 60 bytes unread in the old ring count: 340 fit in flight.
    auto next = w.next_data(1000, 1000);
    REQUIRE(next);
    CHECK(next->offset == 0);
    CHECK(next->bytes() == 340);
    CHECK(next->generation == 1);
    // The same record again, or an older ring, changes nothing.
    w.on_record(r);
    CHECK_FALSE(w.switch_due());
    w.data_done();
    w.data_done();
    CHECK(w.data_writes_done() == 2);
}

TEST_CASE("a stream writer takes no ring of a size no stream has", "[stream]") {
    stream_writer_machine w(stream_limits{100, 8});
    stream_credit_record r;
    r.ring_generation = 1;
    r.ring_bytes = 0;
    w.on_record(r);
    CHECK_FALSE(w.switch_due());
    r.ring_bytes = 1u << 30;
    w.on_record(r);
    CHECK_FALSE(w.switch_due());
}

TEST_CASE(
    "a stream reader reads the old ring up to the move, then the new one, and grows on a wait",
    "[stream]") {
    stream_reader_machine r(stream_limits{100, 8});
    r.on_notice({stream_notice_kind::data, 60});
    r.on_notice({stream_notice_kind::data, 40});
    CHECK_FALSE(r.grow_due(400)); // full, but the writer may have had no more
    stream_credit_record waited;
    waited.ring_waits = 1; // a write of the writer's found this ring full
    r.on_notice({stream_notice_kind::ack, 0});
    r.on_record(waited);
    CHECK(r.grow_due(400));
    CHECK_FALSE(r.grow_due(100)); // at its largest
    CHECK(r.announce(0x2000, 9, 200) == 1);
    CHECK_FALSE(r.may_announce());
    CHECK_FALSE(r.grow_due(400));
    CHECK(r.ring_bytes() == 200);
    // The announcement goes in the next record, which is due for it alone.
    CHECK(r.credit_due());
    const stream_credit_record sent = r.record(false);
    CHECK(sent.ring_generation == 1);
    CHECK(sent.ring_address == 0x2000);
    CHECK(sent.ring_rkey == 9);
    CHECK(sent.ring_bytes == 200);
    CHECK_FALSE(r.credit_due());

    r.read(30);
    // The writer moved, with 5 staged bytes written into the old ring at 100.
    stream_credit_record moved;
    moved.writing_generation = 1;
    moved.writing_since = 105;
    r.on_notice({stream_notice_kind::ack, 0});
    r.on_record(moved);
    CHECK(r.unread() == 75);
    r.on_notice({stream_notice_kind::data, 50}); // into the new ring
    CHECK(r.unread() == 125);
    auto span = r.readable();
    CHECK(span.generation == 0);
    CHECK(span.offset == 30);
    CHECK(span.length == 70); // to the old ring's end
    r.read(70);
    span = r.readable();
    CHECK(span.generation == 0);
    CHECK(span.offset == 0);
    CHECK(span.length == 5); // the staged bytes, then that ring holds no more
    CHECK(r.reading_generation() == 0);
    r.read(5);
    CHECK(r.reading_generation() == 1);
    span = r.readable();
    CHECK(span.generation == 1);
    CHECK(span.offset == 0);
    CHECK(span.length == 50);
    CHECK(r.may_announce());
    // Shrinking waits until nothing is unread.
    CHECK_FALSE(r.may_shrink(100));
    r.read(50);
    CHECK(r.may_shrink(100));
    CHECK_FALSE(r.may_shrink(200));
}

TEST_CASE("a stream writer that cannot take the ring its reader announced says so, and the reader "
          "lets it go",
          "[stream]") {
    stream_writer_machine w(stream_limits{100, 8});
    stream_reader_machine r(stream_limits{100, 8});
    REQUIRE(r.announce(0x1000, 7, 200) == 1);
    stream_credit_record announcing = r.record(false);
    w.on_record(announcing);
    REQUIRE(w.switch_due());
    w.refuse_announced();
    CHECK_FALSE(w.switch_due());
    CHECK(w.generation() == 0); // still the first ring
    // The reader's records name the ring until the refusal reaches it: taken no more.
    w.on_record(announcing);
    CHECK_FALSE(w.switch_due());

    stream_reader_machine peer(stream_limits{100, 8});
    const stream_credit_record refusal = stream_record(peer, w, false);
    CHECK(refusal.refused_generation == 1);
    CHECK(refusal.writing_generation == 0);
    CHECK(r.on_record(refusal)); // let ring 1 go
    CHECK(r.may_announce());
    CHECK(r.reading_generation() == 0);
    CHECK(r.ring_bytes() == 100);
    CHECK_FALSE(r.on_record(refusal)); // said once
    // The next ring has a number of its own: the writer takes it.
    REQUIRE(r.announce(0x2000, 8, 200) == 2);
    w.on_record(r.record(false));
    REQUIRE(w.switch_due());
    CHECK(w.announced()->address == 0x2000);
    w.switch_ring();
    CHECK(w.generation() == 2);
}
