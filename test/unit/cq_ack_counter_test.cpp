// Batched acks of a CQ's events, on a hand-made ibv_cq: ibv_ack_cq_events only
// adds to its comp_events_completed (under its mutex), which is what
// ibv_destroy_cq later waits for, so no device is needed.
#include "rdma_asio/detail/cq/cq_ack_counter.hpp"

#include <catch2/catch.hpp>

#include <pthread.h>

#include <random>

namespace cq_ack_counter_test {

using rdma_asio::detail::cq_ack_counter;

namespace {

struct hand_made_cq {
    hand_made_cq() {
        pthread_mutex_init(&cq.mutex, nullptr);
        pthread_cond_init(&cq.cond, nullptr);
    }
    ~hand_made_cq() {
        pthread_cond_destroy(&cq.cond);
        pthread_mutex_destroy(&cq.mutex);
    }
    hand_made_cq(const hand_made_cq&) = delete;
    hand_made_cq& operator=(const hand_made_cq&) = delete;

    std::uint32_t acked() const { return cq.comp_events_completed; }
    ibv_cq cq{};
};

} // namespace

TEST_CASE("events are acked in batches, the remainder on flush", "[cq_ack_counter]") {
    hand_made_cq h;
    cq_ack_counter acks(4);
    acks.cq = &h.cq;
    CHECK(acks.batch() == 4);
    for (int i = 0; i < 3; ++i)
        acks.event_got();
    CHECK(acks.events() == 3);
    CHECK(acks.unacked() == 3);
    CHECK(acks.ack_calls() == 0);
    CHECK(h.acked() == 0);

    acks.event_got(); // the batch is full
    CHECK(acks.ack_calls() == 1);
    CHECK(h.acked() == 4);
    CHECK(acks.unacked() == 0);

    for (int i = 0; i < 6; ++i)
        acks.event_got();
    CHECK(acks.events() == 10);
    CHECK(acks.ack_calls() == 2);
    CHECK(h.acked() == 8);
    CHECK(acks.unacked() == 2);

    acks.flush(); // before ibv_destroy_cq: every event got is acked
    CHECK(acks.ack_calls() == 3);
    CHECK(h.acked() == 10);
    CHECK(acks.unacked() == 0);

    acks.flush(); // nothing owed: no call
    CHECK(acks.ack_calls() == 3);
    CHECK(h.acked() == 10);
}

TEST_CASE("a batch of 0 acks every event", "[cq_ack_counter]") {
    hand_made_cq h;
    cq_ack_counter acks(0);
    acks.cq = &h.cq;
    CHECK(acks.batch() == 1);
    acks.event_got();
    acks.event_got();
    CHECK(acks.ack_calls() == 2);
    CHECK(h.acked() == 2);
    acks.flush();
    CHECK(acks.ack_calls() == 2);
}

TEST_CASE("a CQ without events is never acked", "[cq_ack_counter]") {
    hand_made_cq h;
    cq_ack_counter acks;
    acks.cq = &h.cq;
    CHECK(acks.batch() == 64);
    acks.flush();
    CHECK(acks.ack_calls() == 0);
    CHECK(h.acked() == 0);
}

TEST_CASE("never more acks than events, whatever the batch and the flushes", "[cq_ack_counter]") {
    std::mt19937 random(14);
    for (unsigned batch : {1u, 2u, 3u, 7u, 64u}) {
        hand_made_cq h;
        cq_ack_counter acks(batch);
        acks.cq = &h.cq;
        for (int i = 0; i < 500; ++i) {
            if (random() % 10 == 0)
                acks.flush();
            else
                acks.event_got();
            REQUIRE(h.acked() <= acks.events());
            REQUIRE(h.acked() + acks.unacked() == acks.events());
            REQUIRE(acks.unacked() < batch);
        }
        acks.flush();
        CHECK(h.acked() == acks.events());
    }
}

} // namespace cq_ack_counter_test
