// When a stream grows or shrinks its ring (stream_ring_policy.hpp), on the
// reader's machine driven as the peer's notifications and records would.
#include "rdma_asio/detail/stream/stream_ring_policy.hpp"

#include <catch2/catch.hpp>

#include <cstdint>

using rdma_asio::detail::stream_credit_record;
using rdma_asio::detail::stream_limits;
using rdma_asio::detail::stream_notice_kind;
using rdma_asio::detail::stream_reader_machine;
using rdma_asio::detail::stream_ring_policy;

namespace {

constexpr std::uint64_t first = 4096;
constexpr std::uint64_t largest = 16384;

stream_reader_machine reader_of(std::uint64_t ring) {
    return stream_reader_machine(stream_limits{ring, 32});
}

// The peer's writer wrote `n` bytes and notified them.
void arrive(stream_reader_machine& reader, std::uint32_t n) {
    reader.on_notice({stream_notice_kind::data, n});
}

// The peer's record: its writer writes into `generation` since `since`, and a
// write of its program found that ring full `waits` times.
void record(stream_reader_machine& reader, std::uint32_t generation, std::uint64_t since,
            std::uint32_t waits) {
    stream_credit_record r;
    r.writing_generation = generation;
    r.writing_since = since;
    r.ring_waits = waits;
    reader.on_record(r);
}

// A ring of `bytes` announced and the peer's writer moved to it at `since`.
void replaced(stream_reader_machine& reader, std::uint32_t bytes, std::uint64_t since) {
    const std::uint32_t generation = reader.announce(0x1000, 7, bytes);
    record(reader, generation, since, 0);
    REQUIRE(reader.reading_generation() == generation);
    REQUIRE(reader.ring_bytes() == bytes);
}

} // namespace

TEST_CASE("a ring grows to twice its size when the writer says it found it full, up to the "
          "largest",
          "[stream]") {
    stream_ring_policy policy(first, largest);
    stream_reader_machine reader = reader_of(first);
    CHECK(policy.grow_to(reader) == 0); // the writer was not held back
    record(reader, 0, 0, 0);
    CHECK(policy.grow_to(reader) == 0);
    record(reader, 0, 0, 1);
    CHECK(policy.grow_to(reader) == 2 * first);
    replaced(reader, 2 * first, 0);
    CHECK(policy.grow_to(reader) == 0); // the wait was the old ring's
    record(reader, 1, 0, 1);
    CHECK(policy.grow_to(reader) == 4 * first);

    stream_ring_policy capped(first, 6000);
    stream_reader_machine small = reader_of(first);
    record(small, 0, 0, 3);
    CHECK(capped.grow_to(small) == 6000);
    replaced(small, 6000, 0);
    record(small, 1, 0, 3);
    CHECK(capped.grow_to(small) == 0); // at the largest
}

TEST_CASE("a ring that could not be registered is tried again only after the next look",
          "[stream]") {
    stream_ring_policy policy(first, largest);
    stream_reader_machine reader = reader_of(first);
    CHECK_FALSE(policy.look_due(reader)); // at the first size: nothing to look at
    record(reader, 0, 0, 1);
    REQUIRE(policy.grow_to(reader) == 2 * first);
    policy.refused();
    CHECK(policy.refusing());
    CHECK(policy.grow_to(reader) == 0);
    record(reader, 0, 0, 2); // the writer keeps waiting: still no new try
    CHECK(policy.grow_to(reader) == 0);
    CHECK(policy.look_due(reader)); // the refusal is to be forgotten
    policy.armed(reader);
    CHECK(policy.look(reader) == 0); // nothing to shrink at the first size
    CHECK_FALSE(policy.refusing());
    CHECK(policy.grow_to(reader) == 2 * first);
    CHECK_FALSE(policy.look_due(reader));
}

TEST_CASE("a grown ring goes back to the first size once nothing arrived between two looks "
          "and nothing is unread",
          "[stream]") {
    stream_ring_policy policy(first, largest);
    stream_reader_machine reader = reader_of(first);
    arrive(reader, 1000);
    reader.read(1000); // the old ring is read before the new one
    record(reader, 0, 0, 1);
    replaced(reader, 2 * first, 1000);
    arrive(reader, 500);
    REQUIRE(policy.look_due(reader));
    policy.armed(reader);

    SECTION("bytes arrived since the timer was armed: not idle, looked at again") {
        arrive(reader, 100);
        reader.read(600);
        CHECK(policy.look(reader) == 0);
        CHECK(policy.look_due(reader));
        CHECK(policy.look(reader) == first); // nothing since the last look
    }
    SECTION("nothing arrived, but bytes are unread: kept") {
        CHECK(policy.look(reader) == 0);
        reader.read(500);
        CHECK(policy.look(reader) == first);
    }
    SECTION("nothing arrived and nothing is unread: back to the first size") {
        reader.read(500);
        CHECK(policy.look(reader) == first);
        replaced(reader, first, 1500);
        CHECK_FALSE(policy.look_due(reader)); // the timer stops
    }
    SECTION("a ring announced and not moved to yet: not replaced again") {
        reader.read(500);
        reader.announce(0x2000, 8, 4 * first);
        CHECK(policy.look(reader) == 0);
    }
}
