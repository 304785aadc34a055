// The decisions of a CQ's async_poll, without a device: the test plays the CQ
// (what each poll finds, whether the arm works) and the channel (events, wake-ups),
// the way ibv_req_notify_cq(3) and ibv_get_cq_event(3) describe them.
#include "rdma_asio/detail/cq/cq_poll_machine.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include <cerrno>
#include <system_error>

namespace cq_poll_machine_test {

using namespace std::chrono_literals;
using rdma_asio::detail::cq_poll_machine;
using act = cq_poll_machine::action;

namespace {

constexpr std::size_t span = 16;
const rdma_asio::error_code no_error{};
const rdma_asio::error_code poll_error(EIO, asio::error::get_system_category());
const rdma_asio::error_code arm_error(EINVAL, asio::error::get_system_category());
const cq_poll_machine::clock::time_point t0{};

// Drives an operation that finds the CQ empty and has no spin budget up to its
// wait: first poll, arm (when not armed yet), re-poll.
void start_and_wait(cq_poll_machine& m) {
    auto s = m.start(span, 0ns);
    REQUIRE(s.what == act::poll);
    s = m.polled(0, no_error, t0);
    if (s.what == act::arm) {
        s = m.armed(no_error);
        REQUIRE(s.what == act::poll);
        s = m.polled(0, no_error, t0);
    }
    REQUIRE(s.what == act::wait);
}

} // namespace

TEST_CASE("a poll that finds completions completes at once, posted, without arming",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    auto s = m.start(span, 0ns);
    REQUIRE(s.what == act::poll);
    s = m.polled(5, no_error, t0);
    CHECK(s.what == act::complete);
    CHECK_FALSE(s.ec);
    CHECK(s.n == 5);
    CHECK(s.post); // still inside the initiating call
    CHECK_FALSE(m.is_armed());
    CHECK(m.arms() == 0);
}

TEST_CASE("the clock is read only while a spin budget runs", "[cq_poll_machine]") {
    cq_poll_machine m;
    auto s = m.start(span, 0ns);
    CHECK_FALSE(m.reads_clock()); // no budget: the first poll needs no time
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::arm);
    s = m.armed(no_error);
    CHECK_FALSE(m.reads_clock()); // the re-poll
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::wait);
    s = m.event(no_error, false, 0);
    CHECK_FALSE(m.reads_clock()); // the event's poll

    cq_poll_machine spinning;
    s = spinning.start(span, 100us);
    CHECK(spinning.reads_clock()); // the budget starts at the first empty poll
    s = spinning.polled(0, no_error, t0);
    REQUIRE(s.what == act::yield);
    s = spinning.resumed(false, t0);
    CHECK(spinning.reads_clock()); // each slice's polls
}

TEST_CASE("a read that yields first lets the handlers run once and polls again before it arms, "
          "reading no clock",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    auto s = m.start(span, 0ns, true);
    REQUIRE(s.what == act::poll);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::yield); // not arm: the ready handlers may post
    CHECK_FALSE(m.reads_clock());
    s = m.resumed(false, t0);
    REQUIRE(s.what == act::poll);
    CHECK_FALSE(m.reads_clock());
    s = m.polled(2, no_error, t0);
    CHECK(s.what == act::complete);
    CHECK(s.n == 2);
    CHECK_FALSE(s.post); // outside the initiating call now
    CHECK(m.yield_hits() == 1);
    CHECK(m.arms() == 0);

    // Nothing after the yield either: armed, polled again, waited on.
    s = m.start(span, 0ns, true);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::yield);
    s = m.resumed(false, t0);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::arm);
    s = m.armed(no_error);
    REQUIRE(s.what == act::poll);
    s = m.polled(0, no_error, t0);
    CHECK(s.what == act::wait);
    CHECK(m.yield_hits() == 1);

    // Closed or cancelled during the yield: ends with operation_aborted.
    cq_poll_machine stopped;
    s = stopped.start(span, 0ns, true);
    s = stopped.polled(0, no_error, t0);
    REQUIRE(s.what == act::yield);
    s = stopped.resumed(true, t0);
    CHECK(s.what == act::complete);
    CHECK(s.ec == asio::error::operation_aborted);

    // Without yield_first, as before: armed at once.
    cq_poll_machine plain;
    s = plain.start(span, 0ns);
    s = plain.polled(0, no_error, t0);
    CHECK(s.what == act::arm);
}

namespace {
// One read of a reader that yields first, on a CQ that stays empty until the
// poll after the yield (which finds `after_yield` completions) or for good.
// True when it yielded.
bool read_yielding(cq_poll_machine& m, std::size_t after_yield) {
    auto s = m.start(span, 0ns, true);
    s = m.polled(0, no_error, t0);
    const bool yielded = s.what == act::yield;
    if (yielded) {
        s = m.resumed(false, t0);
        s = m.polled(after_yield, no_error, t0);
        if (s.what == act::complete)
            return true;
    }
    if (s.what == act::arm)
        s = m.armed(no_error);
    if (s.what == act::poll)
        s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::wait);
    s = m.event(no_error, false, 0);
    REQUIRE(s.what == act::poll);
    s = m.polled(1, no_error, t0);
    REQUIRE(s.what == act::complete);
    return yielded;
}
} // namespace

TEST_CASE("a reader whose yields find nothing stops yielding, tries one now and then, and "
          "yields again once one finds a completion",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    int yields = 0;
    for (int i = 0; i < cq_poll_machine::yield_score_max; ++i)
        yields += read_yielding(m, 0) ? 1 : 0;
    CHECK(yields == cq_poll_machine::yield_score_max); // each miss spent one
    CHECK(m.yields_skipped() == 0);

    // Spent: the next reads arm at once, but one in yield_probe_every yields.
    yields = 0;
    for (int i = 0; i < 2 * cq_poll_machine::yield_probe_every; ++i)
        yields += read_yielding(m, 0) ? 1 : 0;
    CHECK(yields == 2);
    CHECK(m.yields_skipped() == 2 * (cq_poll_machine::yield_probe_every - 1));
    CHECK(m.yield_hits() == 0);

    // A probe that finds a completion earns yield_hit_score more yields.
    int until_probe = 0;
    while (!read_yielding(m, 0))
        ++until_probe;
    CHECK(until_probe == cq_poll_machine::yield_probe_every - 1);
    // The next probe hits.
    for (int i = 0; i < cq_poll_machine::yield_probe_every - 1; ++i)
        CHECK_FALSE(read_yielding(m, 3));
    CHECK(read_yielding(m, 3));
    CHECK(m.yield_hits() == 1);
    yields = 0;
    for (int i = 0; i < cq_poll_machine::yield_hit_score; ++i)
        yields += read_yielding(m, 0) ? 1 : 0;
    CHECK(yields == cq_poll_machine::yield_hit_score);
    CHECK_FALSE(read_yielding(m, 0)); // spent again

    // Hits keep it yielding: one in three is more than the one in five a yield needs.
    cq_poll_machine mixed;
    yields = 0;
    for (int i = 0; i < 300; ++i)
        yields += read_yielding(mixed, i % 3 == 0 ? 1 : 0) ? 1 : 0;
    CHECK(yields == 300);
}

TEST_CASE("an empty span fails with invalid_argument before any poll", "[cq_poll_machine]") {
    cq_poll_machine m;
    auto s = m.start(0, 0ns);
    CHECK(s.what == act::complete);
    CHECK(s.ec == asio::error::invalid_argument);
    CHECK(s.n == 0);
    CHECK(s.post);
}

TEST_CASE("an empty CQ is armed, polled again, then waited on, and the event's poll delivers",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    auto s = m.start(span, 0ns);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::arm); // no spin budget: arm at once
    s = m.armed(no_error);
    CHECK(m.is_armed());
    CHECK(m.arms() == 1);
    REQUIRE(s.what == act::poll); // the re-poll after arming
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::wait);
    CHECK(m.repoll_hits() == 0);

    s = m.event(no_error, false, 0); // the CQ's event
    CHECK_FALSE(m.is_armed());       // one event per arm
    REQUIRE(s.what == act::poll);
    s = m.polled(3, no_error, t0);
    CHECK(s.what == act::complete);
    CHECK(s.n == 3);
    CHECK_FALSE(s.post); // in the event's handler, not the initiating call
    CHECK(m.empty_wakeups() == 0);
    CHECK(m.arms() == 1);
}

TEST_CASE("the re-poll after arming finds completions that came before the arm, and their event "
          "later finds the CQ empty and is handled quietly",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    auto s = m.start(span, 0ns);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::arm);
    s = m.armed(no_error);
    REQUIRE(s.what == act::poll);
    // A completion arrived between the empty poll and the arm: no event would
    // report it, the re-poll does.
    s = m.polled(1, no_error, t0);
    CHECK(s.what == act::complete);
    CHECK(s.n == 1);
    CHECK(s.post);
    CHECK(m.repoll_hits() == 1);
    CHECK(m.is_armed()); // the arm stays: its event may still come

    // The next poll finds the CQ empty and, armed already, waits without arming.
    s = m.start(span, 0ns);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::wait);
    CHECK(m.arms() == 1);
    // The arm's event was raised by the completion the re-poll took: the CQ is empty.
    s = m.event(no_error, false, 0);
    REQUIRE(s.what == act::poll);
    s = m.polled(0, no_error, t0);
    CHECK(m.empty_wakeups() == 1);
    REQUIRE(s.what == act::arm); // arm again and go on waiting
    s = m.armed(no_error);
    CHECK(m.arms() == 2);
    REQUIRE(s.what == act::poll);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::wait);
    s = m.event(no_error, false, 0);
    s = m.polled(2, no_error, t0);
    CHECK(s.what == act::complete);
    CHECK(s.n == 2);
    CHECK(m.empty_wakeups() == 1);
}

TEST_CASE("a wake-up's peek completes the wait, and the arm's event it leaves owed is no empty "
          "wake-up",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    start_and_wait(m);
    CHECK_FALSE(m.on_wake(0));  // the peek found nothing: wait on
    CHECK_FALSE(m.on_wake(-1)); // an error: left for the next poll to report
    CHECK(m.wake_hits() == 0);
    CHECK_FALSE(m.event_owed());
    REQUIRE(m.on_wake(4));
    CHECK(m.wake_hits() == 1);
    CHECK(m.event_owed());
    auto s = m.event(no_error, false, 4); // the wait completes with the peeked completions
    CHECK(s.what == act::complete);
    CHECK(s.n == 4);
    CHECK_FALSE(s.post);
    CHECK(m.is_armed()); // its event is still due

    // The next wait reads that event: the CQ is empty, as expected, not counted.
    s = m.start(span, 0ns);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::wait); // still armed
    s = m.event(no_error, false, 0);
    CHECK_FALSE(m.event_owed());
    CHECK_FALSE(m.is_armed());
    REQUIRE(s.what == act::poll);
    s = m.polled(0, no_error, t0);
    CHECK(m.empty_wakeups() == 0);
    REQUIRE(s.what == act::arm);
    s = m.armed(no_error);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::wait);
    // A later event that finds the CQ empty is counted again.
    s = m.event(no_error, false, 0);
    s = m.polled(0, no_error, t0);
    CHECK(m.empty_wakeups() == 1);
    CHECK(s.what == act::arm);
}

TEST_CASE("a peek owes the event also when the event's poll finds completions",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    start_and_wait(m);
    REQUIRE(m.on_wake(1));
    m.event(no_error, false, 1);
    auto s = m.start(span, 0ns);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::wait);
    s = m.event(no_error, false, 0);
    s = m.polled(2, no_error, t0);
    CHECK(s.what == act::complete);
    CHECK(s.n == 2);
    CHECK_FALSE(m.event_owed()); // consumed by that event
    CHECK(m.empty_wakeups() == 0);
}

TEST_CASE("errors of the poll and the arm end the operation with them", "[cq_poll_machine]") {
    cq_poll_machine m;
    SECTION("the first poll") {
        m.start(span, 0ns);
        auto s = m.polled(0, poll_error, t0);
        CHECK(s.what == act::complete);
        CHECK(s.ec == poll_error);
        CHECK(s.post);
    }
    SECTION("the arm: posted, and the CQ is not armed") {
        m.start(span, 0ns);
        auto s = m.polled(0, no_error, t0);
        REQUIRE(s.what == act::arm);
        s = m.armed(arm_error);
        CHECK(s.what == act::complete);
        CHECK(s.ec == arm_error);
        CHECK(s.n == 0);
        CHECK(s.post);
        CHECK_FALSE(m.is_armed());
        CHECK(m.arms() == 0);
        // The next operation tries the arm again.
        m.start(span, 0ns);
        CHECK(m.polled(0, no_error, t0).what == act::arm);
    }
    SECTION("the re-poll after arming: no repoll hit") {
        m.start(span, 0ns);
        m.polled(0, no_error, t0);
        m.armed(no_error);
        auto s = m.polled(0, poll_error, t0);
        CHECK(s.what == act::complete);
        CHECK(s.ec == poll_error);
        CHECK(s.post);
        CHECK(m.repoll_hits() == 0);
    }
    SECTION("the poll after the event: no empty wake-up") {
        start_and_wait(m);
        m.event(no_error, false, 0);
        auto s = m.polled(0, poll_error, t0);
        CHECK(s.what == act::complete);
        CHECK(s.ec == poll_error);
        CHECK_FALSE(s.post);
        CHECK(m.empty_wakeups() == 0);
    }
    SECTION("the wait (e.g. the device was removed)") {
        start_and_wait(m);
        const rdma_asio::error_code removed(ENODEV, asio::error::get_system_category());
        auto s = m.event(removed, false, 0);
        CHECK(s.what == act::complete);
        CHECK(s.ec == removed);
        CHECK(s.n == 0);
        CHECK_FALSE(s.post);
    }
    SECTION("a poll the machine did not ask for") {
        auto s = m.polled(1, no_error, t0);
        CHECK(s.what == act::complete);
        CHECK(s.ec == asio::error::invalid_argument);
    }
}

TEST_CASE("a wait that ends after the CQ was closed completes with operation_aborted",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    start_and_wait(m);
    auto s = m.event(no_error, true, 0);
    CHECK(s.what == act::complete);
    CHECK(s.ec == asio::error::operation_aborted);
    CHECK(s.n == 0);
}

TEST_CASE("a spin budget polls in slices until completions come or the budget ends",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    const auto budget = 100us;
    auto s = m.start(span, budget);
    REQUIRE(s.what == act::poll);
    s = m.polled(0, no_error, t0); // the budget starts here
    // Spinning, no arm; first the handlers that are ready run.
    REQUIRE(s.what == act::yield);
    s = m.resumed(false, t0); // the first slice starts here
    REQUIRE(s.what == act::poll);
    s = m.polled(0, no_error, t0 + 5us);
    REQUIRE(s.what == act::poll);

    SECTION("found in the first slice: completes at once (outside the initiating call), a "
            "spin hit") {
        s = m.polled(2, no_error, t0 + 10us);
        CHECK(s.what == act::complete);
        CHECK(s.n == 2);
        CHECK_FALSE(s.post);
        CHECK(m.spin_hits() == 1);
        CHECK(m.arms() == 0);
    }
    SECTION("closed or cancelled during the first yield: operation_aborted") {
        cq_poll_machine fresh;
        s = fresh.start(span, budget);
        s = fresh.polled(0, no_error, t0);
        REQUIRE(s.what == act::yield);
        s = fresh.resumed(true, t0 + 1us);
        CHECK(s.what == act::complete);
        CHECK(s.ec == asio::error::operation_aborted);
        CHECK(fresh.arms() == 0);
    }
    SECTION("a slice ends: yield, then spin on; found later: completes at once") {
        s = m.polled(0, no_error, t0 + cq_poll_machine::spin_slice);
        REQUIRE(s.what == act::yield);
        s = m.resumed(false, t0 + 30us);
        REQUIRE(s.what == act::poll);
        s = m.polled(0, no_error, t0 + 49us); // the new slice ends at 50 us
        REQUIRE(s.what == act::poll);
        s = m.polled(0, no_error, t0 + 50us);
        REQUIRE(s.what == act::yield);
        s = m.resumed(false, t0 + 51us);
        s = m.polled(1, no_error, t0 + 52us);
        CHECK(s.what == act::complete);
        CHECK(s.n == 1);
        CHECK_FALSE(s.post);
        CHECK(m.spin_hits() == 1);
    }
    SECTION("the budget ends: arm, even at a slice's end") {
        s = m.polled(0, no_error, t0 + 19us);
        REQUIRE(s.what == act::poll);
        s = m.polled(0, no_error, t0 + 20us);
        REQUIRE(s.what == act::yield);
        s = m.resumed(false, t0 + 90us);
        s = m.polled(0, no_error, t0 + 110us); // past the budget and the slice
        REQUIRE(s.what == act::arm);
        s = m.armed(no_error);
        s = m.polled(0, no_error, t0 + 111us);
        CHECK(s.what == act::wait);
        CHECK(m.spin_hits() == 0);
    }
    SECTION("closed or cancelled while yielding: operation_aborted") {
        s = m.polled(0, no_error, t0 + 20us);
        REQUIRE(s.what == act::yield);
        s = m.resumed(true, t0 + 21us);
        CHECK(s.what == act::complete);
        CHECK(s.ec == asio::error::operation_aborted);
        CHECK_FALSE(s.post);
        CHECK(m.arms() == 0);
    }
    SECTION("an error while spinning ends it, no spin hit") {
        s = m.polled(0, poll_error, t0 + 6us);
        CHECK(s.what == act::complete);
        CHECK(s.ec == poll_error);
        CHECK(m.spin_hits() == 0);
    }
}

TEST_CASE("a spinning poll that is already armed waits without arming", "[cq_poll_machine]") {
    cq_poll_machine m;
    m.armed_by_caller();
    auto s = m.start(span, 10us);
    s = m.polled(0, no_error, t0);
    REQUIRE(s.what == act::yield);
    s = m.resumed(false, t0);
    REQUIRE(s.what == act::poll);
    s = m.polled(0, no_error, t0 + 10us);
    CHECK(s.what == act::wait);
    CHECK(m.arms() == 1);
}

TEST_CASE("completions held when cancellation came are given back, and the handler gets "
          "operation_aborted",
          "[cq_poll_machine]") {
    auto r = cq_poll_machine::finish(no_error, 3, true);
    CHECK(r.ec == asio::error::operation_aborted);
    CHECK(r.n == 0);
    CHECK(r.give_back == 3);

    r = cq_poll_machine::finish(no_error, 3, false);
    CHECK_FALSE(r.ec);
    CHECK(r.n == 3);
    CHECK(r.give_back == 0);

    // An error or an abort has nothing to give back.
    r = cq_poll_machine::finish(poll_error, 0, true);
    CHECK(r.ec == poll_error);
    CHECK(r.give_back == 0);
    r = cq_poll_machine::finish(asio::error::operation_aborted, 0, true);
    CHECK(r.ec == asio::error::operation_aborted);
    CHECK(r.give_back == 0);
}

TEST_CASE("request_notify arms for the next poll, and async_wait's event uses the arm up",
          "[cq_poll_machine]") {
    cq_poll_machine m;
    m.armed_by_caller();
    CHECK(m.is_armed());
    CHECK(m.arms() == 1);
    auto s = m.start(span, 0ns);
    s = m.polled(0, no_error, t0);
    CHECK(s.what == act::wait);                            // no second arm
    s = m.event(asio::error::operation_aborted, false, 0); // cancelled
    CHECK(s.ec == asio::error::operation_aborted);
    CHECK(m.is_armed()); // a cancelled wait read no event

    m.event_read();
    CHECK_FALSE(m.is_armed());
    m.start(span, 0ns);
    CHECK(m.polled(0, no_error, t0).what == act::arm);
}

} // namespace cq_poll_machine_test
