// The SA state machine, without I/O: the test plays the Subnet Administrator.
#include "rdma_asio/detail/subnet/sa_subscriber.hpp"

#include <catch2/catch.hpp>

#include "rdma_asio/error.hpp"

#include "asio_alias.hpp"

#include <vector>

namespace sa_subscriber_test {

namespace sa = rdma_asio::detail::sa;
using rdma_asio::errc;
using rdma_asio::event_type;
using rdma_asio::sm_event_mask;
using rdma_asio::detail::sa_subscriber;
using namespace std::chrono_literals;

namespace {

ibv_gid gid(std::uint8_t first, std::uint8_t last) {
    ibv_gid g{};
    g.raw[0] = first;
    g.raw[15] = last;
    return g;
}
const ibv_gid port_a = gid(0xfe, 0xa);
const ibv_gid port_b = gid(0xfe, 0xb);
const ibv_gid group_1 = gid(0xff, 0x1);
const ibv_gid group_2 = gid(0xff, 0x2);

struct request {
    sa::mad_header header;
    sa::inform_info info;
};

request parse(const sa::mad_buffer& mad) {
    request r;
    REQUIRE_FALSE(sa::decode_header(mad, r.header));
    REQUIRE(r.header.method == sa::method::set);
    REQUIRE_FALSE(sa::decode_inform_info(mad, r.info));
    return r;
}

// The SA's answer, with the high 32 bits of the TID changed as the kernel does.
sa::mad_buffer answer(const request& r, std::uint16_t status = 0) {
    return sa::encode_inform_info_response(r.header.tid | 0x0000002a00000000, r.info, status);
}

sa::mad_buffer report(std::uint64_t tid, std::uint16_t trap, const ibv_gid& subject) {
    sa::notice n;
    n.type = 4;
    n.producer_type = 4;
    n.trap_number = trap;
    n.set_subject_gid(subject);
    return sa::encode_report(tid, n);
}

struct fixture {
    sa_subscriber::clock::time_point now{};
    sa_subscriber fsm{sa_subscriber::config{}, 100};
    sa_subscriber::actions out;

    std::vector<request> take_requests() {
        std::vector<request> requests;
        for (const auto& mad : out.sends)
            requests.push_back(parse(mad));
        out.sends.clear();
        return requests;
    }
    // Registers every multicast group event and has the SA accept it; clears `out`.
    void register_all_groups() {
        fsm.start_register(sm_event_mask::mgid_all, {}, now, out);
        CHECK(answer_all() == std::vector<std::uint16_t>{66, 67});
        out = {};
    }
    // Answers every request with `status`; returns the trap numbers asked for.
    std::vector<std::uint16_t> answer_all(std::uint16_t status = 0) {
        std::vector<std::uint16_t> traps;
        for (const auto& r : take_requests()) {
            traps.push_back(r.info.trap_number);
            fsm.on_mad(answer(r, status), now, out);
        }
        return traps;
    }
};

} // namespace

TEST_CASE("registering all GID events subscribes traps 64 and 65 once confirmed",
          "[sa_subscriber]") {
    fixture f;
    const auto op = f.fsm.start_register(sm_event_mask::ugid_all, {}, f.now, f.out);
    CHECK(f.out.completions.empty());
    REQUIRE(f.out.sends.size() == 2);
    CHECK(f.fsm.active());
    CHECK(f.fsm.next_deadline() == f.now + 500ms);

    const auto requests = f.take_requests();
    CHECK(requests[0].info.trap_number == 64);
    CHECK(requests[1].info.trap_number == 65);
    for (const auto& r : requests) {
        CHECK(r.info.subscribe);
        CHECK(r.info.qpn == 1);
        CHECK(r.info.lid_range_begin == 0xffff);
    }
    f.fsm.on_mad(answer(requests[0]), f.now, f.out);
    CHECK(f.out.completions.empty()); // one answer still missing
    f.fsm.on_mad(answer(requests[1]), f.now, f.out);
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == op);
    CHECK_FALSE(f.out.completions[0].ec);
    CHECK(f.fsm.subscribed(64));
    CHECK(f.fsm.subscribed(65));
    CHECK_FALSE(f.fsm.subscribed(66));
    CHECK_FALSE(f.fsm.next_deadline());
    CHECK(f.fsm.counters().requests == 2);
}

TEST_CASE("a Report is answered, filtered per GID and deduplicated by TID", "[sa_subscriber]") {
    fixture f;
    const ibv_gid gids[] = {port_a, group_1};
    f.fsm.start_register(sm_event_mask::ugid | sm_event_mask::mgid, gids, f.now, f.out);
    CHECK(f.answer_all().size() == 4);
    f.out = {};

    f.fsm.on_mad(report(1, 65, port_a), f.now, f.out);
    f.fsm.on_mad(report(2, 65, port_b), f.now, f.out); // not registered
    f.fsm.on_mad(report(3, 66, group_1), f.now, f.out);
    f.fsm.on_mad(report(4, 66, group_2), f.now, f.out); // not registered
    f.fsm.on_mad(report(1, 65, port_a), f.now, f.out);  // the SA's retry of TID 1

    REQUIRE(f.out.events.size() == 2);
    CHECK(f.out.events[0].type == event_type::gid_unavail);
    CHECK(f.out.events[0].gid.raw[15] == 0xa);
    CHECK(f.out.events[1].type == event_type::mcg_created);
    CHECK(f.out.events[1].gid.raw[15] == 0x1);
    // Every Report, the duplicate and the filtered ones too, got its ReportResp.
    REQUIRE(f.out.sends.size() == 5);
    const std::uint64_t tids[] = {1, 2, 3, 4, 1};
    for (std::size_t i = 0; i < 5; ++i) {
        sa::mad_header h;
        REQUIRE_FALSE(sa::decode_header(f.out.sends[i], h));
        CHECK(h.method == sa::method::report_resp);
        CHECK(h.tid == tids[i]);
    }
    CHECK(f.fsm.counters().reports == 4);
    CHECK(f.fsm.counters().duplicate_reports == 1);
    CHECK(f.fsm.counters().filtered == 2);
    CHECK(f.fsm.counters().events == 2);
}

TEST_CASE("an unanswered request is sent again, then fails with ETIMEDOUT", "[sa_subscriber]") {
    fixture f;
    const auto op = f.fsm.start_register(sm_event_mask::mgid_all, {}, f.now, f.out);
    const auto first = f.out.sends;
    REQUIRE(first.size() == 2);
    f.out.sends.clear();
    for (int retry = 1; retry <= 3; ++retry) {
        f.now += 499ms;
        f.fsm.on_timer(f.now, f.out);
        CHECK(f.out.sends.empty()); // not due yet
        f.now += 1ms;
        f.fsm.on_timer(f.now, f.out);
        CAPTURE(retry);
        REQUIRE(f.out.sends.size() == 2);
        CHECK(f.out.sends == first); // the same MADs, the same TIDs
        f.out.sends.clear();
    }
    f.now += 500ms;
    f.fsm.on_timer(f.now, f.out);
    CHECK(f.out.sends.empty());
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == op);
    CHECK(f.out.completions[0].ec == asio::error::timed_out);
    CHECK(f.fsm.counters().retries == 6);
    CHECK(f.fsm.counters().timeouts == 2);
    // The registration was rolled back; the subscriptions may exist at the SA, so
    // shutting down still unsubscribes them.
    CHECK_FALSE(f.fsm.subscribed(66));
    f.fsm.on_mad(report(9, 66, group_1), f.now, f.out);
    CHECK(f.out.events.empty());
    CHECK(f.fsm.abandon().size() == 2);
}

TEST_CASE("a refused subscription fails the registration and changes nothing", "[sa_subscriber]") {
    fixture f;
    const ibv_gid gids[] = {port_a};
    const auto op = f.fsm.start_register(sm_event_mask::ugid, gids, f.now, f.out);
    auto requests = f.take_requests();
    REQUIRE(requests.size() == 2);
    f.fsm.on_mad(answer(requests[0], 0x0200), f.now, f.out);
    f.fsm.on_mad(answer(requests[1]), f.now, f.out);
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == op);
    CHECK(f.out.completions[0].ec == errc::sa_request_refused);
    CHECK(f.fsm.counters().refusals == 1);
    f.fsm.on_mad(report(5, 64, port_a), f.now, f.out);
    CHECK(f.out.events.empty()); // rolled back
}

TEST_CASE("operations run one at a time, in order", "[sa_subscriber]") {
    fixture f;
    const auto first = f.fsm.start_register(sm_event_mask::ugid_all, {}, f.now, f.out);
    const auto second = f.fsm.start_register(sm_event_mask::mgid_all, {}, f.now, f.out);
    CHECK(first != second);
    // Only the first operation has asked anything so far.
    CHECK(f.answer_all() == std::vector<std::uint16_t>{64, 65});
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == first);
    // Its completion started the second.
    CHECK(f.answer_all() == std::vector<std::uint16_t>{66, 67});
    REQUIRE(f.out.completions.size() == 2);
    CHECK(f.out.completions[1].op == second);
    CHECK_FALSE(f.out.completions[1].ec);
}

TEST_CASE("unregistering unsubscribes what no registration needs", "[sa_subscriber]") {
    fixture f;
    const ibv_gid groups[] = {group_1, group_2};
    f.fsm.start_register(sm_event_mask::mgid, groups, f.now, f.out);
    CHECK(f.answer_all() == std::vector<std::uint16_t>{66, 67});
    f.out = {};

    const ibv_gid one[] = {group_1};
    auto op = f.fsm.start_unregister(sm_event_mask::mgid, one, f.now, f.out);
    // group_2 still needs traps 66/67: nothing to ask, done at once.
    CHECK(f.out.sends.empty());
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == op);
    f.fsm.on_mad(report(1, 66, group_1), f.now, f.out);
    CHECK(f.out.events.empty()); // stopped at once
    f.out = {};

    const ibv_gid other[] = {group_2};
    op = f.fsm.start_unregister(sm_event_mask::mgid, other, f.now, f.out);
    const auto requests = f.take_requests();
    REQUIRE(requests.size() == 2);
    for (const auto& r : requests) {
        CHECK_FALSE(r.info.subscribe);
        CHECK(r.info.qpn == 1);              // the SA refuses other QPNs
        CHECK(r.info.resp_time_value == 18); // and other RespTimeValues
    }
    for (const auto& r : requests)
        f.fsm.on_mad(answer(r), f.now, f.out);
    REQUIRE(f.out.completions.size() == 1);
    CHECK_FALSE(f.out.completions[0].ec);
    CHECK_FALSE(f.fsm.subscribed(66));
    CHECK_FALSE(f.fsm.active()); // no Report can come: nothing to read
}

TEST_CASE("an unsubscribe refused on its first sending fails the unregistration",
          "[sa_subscriber]") {
    fixture f;
    f.register_all_groups();
    // A refusal of a request sent once is the SA's considered answer (e.g. an
    // unsubscribe that does not match the subscription): it is reported.
    const auto op = f.fsm.start_unregister_all(f.now, f.out);
    CHECK(f.answer_all(0x0200) == std::vector<std::uint16_t>{66, 67});
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == op);
    CHECK(f.out.completions[0].ec == errc::sa_request_refused);
    CHECK(f.fsm.counters().refusals == 2);
}

TEST_CASE("an unsubscribe refused after it was sent again succeeds: an earlier copy may "
          "have removed the subscription",
          "[sa_subscriber]") {
    fixture f;
    f.register_all_groups();

    const auto op = f.fsm.start_unregister_all(f.now, f.out);
    const auto first = f.take_requests();
    REQUIRE(first.size() == 2);
    // The SA carries out both unsubscribes, but its answers are not read in time
    // (the kernel drops an answer that arrives after its send timed out): the
    // same Sets go again, and the SA, which holds no such subscription any more,
    // refuses them.
    f.now += 500ms;
    f.fsm.on_timer(f.now, f.out);
    const auto again = f.take_requests();
    REQUIRE(again.size() == 2);
    for (std::size_t i = 0; i < again.size(); ++i)
        CHECK(again[i].header.tid == first[i].header.tid);
    for (const auto& r : again)
        f.fsm.on_mad(answer(r, 0x0200), f.now, f.out);

    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == op);
    CHECK_FALSE(f.out.completions[0].ec);
    CHECK_FALSE(f.fsm.subscribed(66));
    CHECK_FALSE(f.fsm.subscribed(67));
    CHECK_FALSE(f.fsm.active()); // no subscription left that could bring Reports
    CHECK(f.fsm.abandon().empty());
    CHECK(f.fsm.counters().refusals == 2); // still counted
    CHECK(f.fsm.counters().retries == 2);
}

TEST_CASE("a subscribe refused after it was sent again still fails the registration",
          "[sa_subscriber]") {
    fixture f;
    const auto op = f.fsm.start_register(sm_event_mask::mgid_all, {}, f.now, f.out);
    CHECK(f.take_requests().size() == 2);
    f.now += 500ms;
    f.fsm.on_timer(f.now, f.out);
    // The SA accepts a repeated subscribe; a refusal is its answer to the request.
    CHECK(f.answer_all(0x0200) == std::vector<std::uint16_t>{66, 67});
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == op);
    CHECK(f.out.completions[0].ec == errc::sa_request_refused);
}

TEST_CASE("invalid masks and GID lists fail with EINVAL before any MAD", "[sa_subscriber]") {
    fixture f;
    const ibv_gid unicast[] = {port_a};
    const ibv_gid multicast[] = {group_1};
    struct bad {
        sm_event_mask mask;
        std::span<const ibv_gid> gids;
    };
    const bad cases[] = {
        {sm_event_mask{}, {}},                                // nothing
        {static_cast<sm_event_mask>(1u << 9), {}},            // unknown flag
        {sm_event_mask::mgid, {}},                            // per-GID without GIDs
        {sm_event_mask::ugid_all, unicast},                   // GIDs without per-GID flag
        {sm_event_mask::mgid, unicast},                       // a unicast GID as MGID
        {sm_event_mask::ugid, multicast},                     // a multicast GID as port GID
        {sm_event_mask::ugid | sm_event_mask::mgid, unicast}, // MGID flag but no multicast GID
    };
    for (const auto& c : cases) {
        f.out = {};
        f.fsm.start_register(c.mask, c.gids, f.now, f.out);
        CHECK(f.out.sends.empty());
        REQUIRE(f.out.completions.size() == 1);
        CHECK(f.out.completions[0].ec == asio::error::invalid_argument);
    }
    CHECK_FALSE(f.fsm.active());
}

TEST_CASE("resubscribing after an SM change asks for every needed trap again", "[sa_subscriber]") {
    fixture f;
    f.fsm.start_register(sm_event_mask::all, {}, f.now, f.out);
    CHECK(f.answer_all().size() == 4);
    f.out = {};
    f.fsm.resubscribe(f.now, f.out);
    CHECK(f.answer_all() == std::vector<std::uint16_t>{64, 65, 66, 67});
    CHECK(f.out.completions.empty()); // nobody waits for a resubscription
    CHECK(f.fsm.subscribed(64));
    CHECK(f.fsm.counters().resubscriptions == 1);
}

TEST_CASE("abandoning unsubscribes every subscription once", "[sa_subscriber]") {
    fixture f;
    f.fsm.start_register(sm_event_mask::ugid_all, {}, f.now, f.out);
    f.answer_all();
    // A registration still in flight when the client goes: its trap may exist too.
    f.fsm.start_register(sm_event_mask::mgid_all, {}, f.now, f.out);
    CHECK(f.take_requests().size() == 2);
    const auto goodbyes = f.fsm.abandon();
    REQUIRE(goodbyes.size() == 4);
    for (const auto& mad : goodbyes)
        CHECK_FALSE(parse(mad).info.subscribe);
    CHECK_FALSE(f.fsm.active());
    CHECK(f.fsm.abandon().empty());
}

TEST_CASE("malformed MADs are counted and change nothing", "[sa_subscriber]") {
    fixture f;
    f.fsm.start_register(sm_event_mask::ugid_all, {}, f.now, f.out);
    f.answer_all();
    f.out = {};
    auto r = report(1, 64, port_a);
    f.fsm.on_mad(std::span<const std::uint8_t>(r.data(), 100), f.now, f.out); // cut short
    f.fsm.on_mad(std::span<const std::uint8_t>(r.data(), 10), f.now, f.out);
    CHECK(f.out.events.empty());
    CHECK(f.out.sends.empty()); // nothing answered that could not be read
    CHECK(f.fsm.counters().malformed == 2);
}

namespace {

// Lets every pending request of the fixture use up its retries and time out.
void time_out_everything(fixture& f) {
    for (int round = 0; round <= 3; ++round) {
        f.now += 500ms;
        f.fsm.on_timer(f.now, f.out);
    }
    f.out.sends.clear();
}

} // namespace

TEST_CASE("after a timed-out unsubscribe the next registration subscribes again",
          "[sa_subscriber]") {
    fixture f;
    f.fsm.start_register(sm_event_mask::mgid_all, {}, f.now, f.out);
    CHECK(f.answer_all() == std::vector<std::uint16_t>{66, 67});
    f.out = {};

    const auto gone = f.fsm.start_unregister(sm_event_mask::mgid_all, {}, f.now, f.out);
    CHECK(f.take_requests().size() == 2); // the unsubscribes; the SA never answers
    time_out_everything(f);
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == gone);
    CHECK(f.out.completions[0].ec == asio::error::timed_out);
    // The SA may or may not have dropped them: not known to be subscribed.
    CHECK_FALSE(f.fsm.subscribed(66));
    CHECK_FALSE(f.fsm.subscribed(67));
    f.out = {};

    const auto again = f.fsm.start_register(sm_event_mask::mgid_all, {}, f.now, f.out);
    CHECK(f.out.completions.empty()); // no success without asking the SA
    const auto requests = f.take_requests();
    REQUIRE(requests.size() == 2);
    for (const auto& r : requests)
        CHECK(r.info.subscribe);
    for (const auto& r : requests)
        f.fsm.on_mad(answer(r), f.now, f.out);
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == again);
    CHECK_FALSE(f.out.completions[0].ec);
    CHECK(f.fsm.subscribed(66));
    CHECK(f.fsm.subscribed(67));
}

TEST_CASE("after a timed-out unsubscribe a later unregistration unsubscribes again and "
          "tolerates the SA's refusal",
          "[sa_subscriber]") {
    fixture f;
    f.fsm.start_register(sm_event_mask::ugid_all, {}, f.now, f.out);
    CHECK(f.answer_all() == std::vector<std::uint16_t>{64, 65});
    f.out = {};
    // Unregistering part of it times out; the registration it left stays local.
    f.fsm.start_unregister(sm_event_mask::ugid_all, {}, f.now, f.out);
    time_out_everything(f);
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.fsm.active()); // the subscriptions may still bring Reports
    f.out = {};
    // Shutting down asks again; the SA, which did drop them, refuses: no error.
    const auto all = f.fsm.start_unregister_all(f.now, f.out);
    const auto requests = f.take_requests();
    REQUIRE(requests.size() == 2);
    for (const auto& r : requests) {
        CHECK_FALSE(r.info.subscribe);
        f.fsm.on_mad(answer(r, 0x0200), f.now, f.out);
    }
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].op == all);
    CHECK_FALSE(f.out.completions[0].ec);
    CHECK_FALSE(f.fsm.active());
}

TEST_CASE("after a timed-out resubscription the next registration subscribes again",
          "[sa_subscriber]") {
    fixture f;
    f.fsm.start_register(sm_event_mask::ugid_all, {}, f.now, f.out);
    CHECK(f.answer_all() == std::vector<std::uint16_t>{64, 65});
    f.out = {};
    f.fsm.resubscribe(f.now, f.out);
    CHECK(f.take_requests().size() == 2);
    time_out_everything(f);
    CHECK(f.out.completions.empty()); // nobody waits for a resubscription
    CHECK_FALSE(f.fsm.subscribed(64));

    const ibv_gid one[] = {port_a};
    f.fsm.start_register(sm_event_mask::ugid, one, f.now, f.out);
    CHECK(f.out.completions.empty());
    const auto requests = f.take_requests();
    REQUIRE(requests.size() == 2);
    for (const auto& r : requests)
        CHECK(r.info.subscribe);
}

TEST_CASE("a refused subscribe leaves a subscription of unknown state unknown", "[sa_subscriber]") {
    fixture f;
    f.fsm.start_register(sm_event_mask::mgid_all, {}, f.now, f.out);
    CHECK(f.take_requests().size() == 2);
    time_out_everything(f); // the subscribes may have reached the SA
    f.out = {};
    f.fsm.start_register(sm_event_mask::mgid_all, {}, f.now, f.out);
    CHECK(f.answer_all(0x0200) == std::vector<std::uint16_t>{66, 67});
    REQUIRE(f.out.completions.size() == 1);
    CHECK(f.out.completions[0].ec == errc::sa_request_refused);
    // The refusal says nothing about the earlier, timed-out subscribes: shutting
    // down still unsubscribes both traps.
    CHECK(f.fsm.active());
    const auto goodbyes = f.fsm.abandon();
    REQUIRE(goodbyes.size() == 2);
    for (const auto& mad : goodbyes)
        CHECK_FALSE(parse(mad).info.subscribe);
}

TEST_CASE("refused resubscriptions leave the subscriptions unknown: Reports are still read "
          "and shutdown unsubscribes",
          "[sa_subscriber]") {
    fixture f;
    f.fsm.start_register(sm_event_mask::all, {}, f.now, f.out);
    CHECK(f.answer_all().size() == 4);
    f.out = {};
    // The SM changed; it may or may not have kept the subscriptions, and it refuses
    // them now.
    f.fsm.resubscribe(f.now, f.out);
    CHECK(f.answer_all(0x0200) == std::vector<std::uint16_t>{64, 65, 66, 67});
    CHECK_FALSE(f.fsm.subscribed(64));
    CHECK(f.fsm.active());
    const auto goodbyes = f.fsm.abandon();
    CHECK(goodbyes.size() == 4);
}

TEST_CASE("the kernel gives up on each sending before the same request goes again",
          "[sa_subscriber]") {
    using rdma_asio::detail::kernel_send_timeout;
    // The kernel refuses a request whose TID it still holds: each sending must be
    // over for it before sa_subscriber sends the MAD again, after config::timeout.
    const sa_subscriber::config defaults;
    CHECK(kernel_send_timeout(defaults.timeout) < defaults.timeout);
    CHECK(kernel_send_timeout(500ms) == 438ms);
    CHECK(kernel_send_timeout(100ms) == 88ms);
    CHECK(kernel_send_timeout(2ms) == 1ms);
    // 0 would tell the kernel that no answer is expected: it would drop the answer.
    CHECK(kernel_send_timeout(1ms) == 1ms);
    CHECK(kernel_send_timeout(0ms) == 1ms);
}

} // namespace sa_subscriber_test
