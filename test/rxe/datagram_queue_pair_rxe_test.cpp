// UD queue pairs on rxe: datagrams by address, the sender's address to reply to,
// the GRH's room kept out of the user's buffers, multicast groups joined through
// rdma_cm, and the misuse cases.
#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/datagram_queue_pair.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/testing/loopback.hpp"
#include "rdma_asio/wc_error.hpp"

#include <catch2/catch.hpp>

#include "each_token.hpp"
#include "gated_executor.hpp"
#include "ipv4_address.hpp"
#include "kernel_resources.hpp"
#include "recorder.hpp"
#include "run_until.hpp"
#include "test_device.hpp"

#include "asio_alias.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace datagram_queue_pair_rxe_test {

using namespace std::chrono_literals;
using rdma_asio::test::test_device_name;

namespace {

using result = rdma_asio::test::recorder<std::size_t>;

constexpr std::size_t slot_size = 256;

bool run_until(asio::io_context& ioc, const std::function<bool()>& done) {
    return rdma_asio::test::run_until(ioc, done, 30s);
}

// UD queue pairs of one device on one CQ, and registered memory in slots.
struct datagram_fixture {
    datagram_fixture(asio::io_context& io, std::size_t n, std::size_t slots = 64)
        : ctx(test_device_name()), pd(ctx), channel(io.get_executor(), ctx), cq(channel, 1024),
          memory(slots * slot_size), mr(pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE) {
        for (std::size_t i = 0; i < n; ++i)
            qps.emplace_back(pd, cq, cq, options());
    }

    rdma_asio::datagram_options options() {
        rdma_asio::datagram_options o;
        // The IPv4-mapped GID on RoCE, which multicast over IPv4 needs too.
        o.gid_index = static_cast<std::uint8_t>(
            rdma_asio::testing::loopback_gid_index(ctx.native_handle(), 1));
        return o;
    }
    rdma_asio::registered_buffer slot(std::size_t i, std::size_t size = slot_size) {
        return mr.at(i * slot_size, size);
    }
    unsigned char* bytes(std::size_t i) { return static_cast<unsigned char*>(slot(i).data); }

    rdma_asio::context ctx;
    rdma_asio::protection_domain pd;
    rdma_asio::completion_channel channel;
    rdma_asio::completion_queue cq;
    std::vector<std::byte> memory;
    rdma_asio::memory_region mr;
    std::deque<rdma_asio::datagram_queue_pair> qps;
};

using rdma_asio::test::as_sockaddr;
using rdma_asio::test::ipv4;

} // namespace

// snippet-begin: datagram-echo
// Answers one datagram: receives it, and sends it back to whoever sent it.
asio::awaitable<std::size_t> echo_one(rdma_asio::datagram_queue_pair& qp,
                                      rdma_asio::registered_buffer buffer) {
    rdma_asio::datagram_endpoint sender;
    std::size_t n = co_await qp.async_receive_from(buffer, sender, asio::use_awaitable);
    rdma_asio::registered_buffer datagram = buffer;
    datagram.size = n; // what arrived, not the whole buffer
    co_await qp.async_send_to(datagram, sender, asio::use_awaitable);
    co_return n;
}
// snippet-end

TEST_CASE("the documented datagram echo: a datagram there, the same one back to its sender",
          "[datagram_queue_pair][docs]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 0);
    // snippet-begin: datagram-setup
    // Two UD queue pairs on one CQ; a UD queue pair is ready to send at once.
    rdma_asio::completion_queue cq(f.channel, 256);
    rdma_asio::datagram_queue_pair server(f.pd, cq, cq, {.gid_index = 1});
    rdma_asio::datagram_queue_pair client(f.pd, cq, cq, {.gid_index = 1});
    // snippet-end
    REQUIRE(f.options().gid_index == 1); // the snippet's index is the test device's

    bool echoed = false;
    std::size_t echoed_bytes = 0;
    asio::co_spawn(ioc, echo_one(server, f.slot(0)), [&](std::exception_ptr e, std::size_t n) {
        echoed = !e;
        echoed_bytes = n;
    });
    ioc.poll(); // the server's receive is posted: a datagram that finds none is dropped
    std::memcpy(f.bytes(1), "ping", 4);
    result reply, sent;
    rdma_asio::datagram_endpoint replied_by;
    client.async_receive_from(f.slot(2), replied_by, reply.handler());
    client.async_send_to(f.slot(1, 4), server.local_endpoint(), sent.handler());
    REQUIRE(run_until(ioc, [&] { return echoed && reply.calls() == 1; }));
    CHECK(echoed_bytes == 4);
    CHECK_FALSE(reply.ec());
    CHECK(reply.value() == 4);
    CHECK(std::memcmp(f.bytes(2), "ping", 4) == 0);
    CHECK(replied_by == server.local_endpoint());
}

TEST_CASE("a datagram arrives whole in a buffer of exactly its size, naming its sender",
          "[datagram_queue_pair]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    auto& a = f.qps[0];
    auto& b = f.qps[1];
    const rdma_asio::datagram_endpoint a_address = a.local_endpoint();
    CHECK(a_address.qp_num == a.native_handle()->qp_num);
    CHECK(a_address.is_global()); // RoCE
    CHECK(a_address.qkey == rdma_asio::default_qkey);

    // 100 bytes into a 100-byte buffer: the device's 40 bytes of GRH room are not
    // the buffer's (with them in it, the datagram would not fit).
    constexpr std::size_t size = 100;
    for (std::size_t i = 0; i < size; ++i)
        f.bytes(0)[i] = static_cast<unsigned char>(i * 7 + 1);
    std::memset(f.bytes(1), 0xee, slot_size);
    rdma_asio::datagram_endpoint sender;
    result received, sent;
    b.async_receive_from(f.slot(1, size), sender, received.handler());
    a.async_send_to(f.slot(0, size), b.local_endpoint(), sent.handler());
    REQUIRE(run_until(ioc, [&] { return received.calls() == 1 && sent.calls() == 1; }));
    CHECK_FALSE(sent.ec());
    CHECK(sent.value() == size);
    REQUIRE_FALSE(received.ec());
    CHECK(received.value() == size);
    CHECK(std::memcmp(f.bytes(0), f.bytes(1), size) == 0);
    CHECK(f.bytes(1)[size] == 0xee); // nothing beyond the buffer
    CHECK(sender == a_address);

    // Immediate data, and many datagrams in a row through the receive ring: each
    // names its sender and carries its number.
    constexpr std::size_t n = 150; // more than the receive queue's 64: slots reused
    std::size_t got = 0;
    std::vector<std::uint32_t> immediates;
    std::function<void()> receive_next = [&] {
        auto info = std::make_shared<rdma_asio::receive_info>();
        auto from = std::make_shared<rdma_asio::datagram_endpoint>();
        b.async_receive(f.slot(2, 8), *info, [&, info](rdma_asio::error_code ec, std::size_t len) {
            if (ec || len != 8)
                return;
            ++got;
            immediates.push_back(info->immediate.value_or(~0u));
            if (got < n)
                receive_next();
        });
    };
    for (int i = 0; i < 4; ++i) // a few posted ahead
        receive_next();
    std::size_t sends_done = 0;
    std::function<void(std::uint32_t)> send_next = [&](std::uint32_t k) {
        a.async_send_to(f.slot(3, 8), b.local_endpoint(), rdma_asio::immediate_data{k},
                        [&, k](rdma_asio::error_code ec, std::size_t) {
                            if (ec)
                                return;
                            ++sends_done;
                            if (k + 1 < n)
                                send_next(k + 1);
                        });
    };
    send_next(0);
    REQUIRE(run_until(ioc, [&] { return sends_done == n && got >= n - 3; }));
    // A datagram that finds no receive posted is dropped: with four posted ahead
    // and each reposted as it completes, none was, in this run of one thread.
    CHECK(got >= n - 3);
    for (std::size_t i = 1; i < immediates.size(); ++i)
        CHECK(immediates[i] > immediates[i - 1]); // in order, none twice
}

TEST_CASE("a datagram longer than its receive's buffer ends that receive with a length error",
          "[datagram_queue_pair][misuse]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    result received, sent;
    f.qps[1].async_receive(f.slot(1, 16), received.handler());
    f.qps[0].async_send_to(f.slot(0, 64), f.qps[1].local_endpoint(), sent.handler());
    REQUIRE(run_until(ioc, [&] { return received.calls() == 1 && sent.calls() == 1; }));
    CHECK_FALSE(sent.ec()); // the sender learns nothing: a datagram has no answer
    // The verbs' status for it is IBV_WC_LOC_LEN_ERR; rxe (Linux 6.1) reports
    // IBV_WC_LOC_QP_OP_ERR for a UD receive.
    const rdma_asio::error_code ec = received.ec();
    CHECK((ec == rdma_asio::wc_errc::local_length_error ||
           ec == rdma_asio::wc_errc::local_qp_operation_error));
}

TEST_CASE("a destination the device cannot address ends its send before anything is sent",
          "[datagram_queue_pair][misuse]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    // No GID: RoCE needs one (ibv_create_ah fails with EINVAL).
    rdma_asio::datagram_endpoint nowhere;
    nowhere.qp_num = f.qps[1].local_endpoint().qp_num;
    result sent;
    f.qps[0].async_send_to(f.slot(0, 8), nowhere, sent.handler());
    REQUIRE(run_until(ioc, [&] { return sent.calls() == 1; }));
    CHECK(sent.ec() == asio::error::invalid_argument);
    // The queue pair is still usable.
    result again, received;
    f.qps[1].async_receive(f.slot(1, 8), received.handler());
    f.qps[0].async_send_to(f.slot(0, 8), f.qps[1].local_endpoint(), again.handler());
    REQUIRE(run_until(ioc, [&] { return again.calls() == 1 && received.calls() == 1; }));
    CHECK_FALSE(again.ec());
    CHECK_FALSE(received.ec());
}

TEST_CASE("a multicast group joined through rdma_cm reaches the queue pairs attached to it, and "
          "only those",
          "[datagram_queue_pair][multicast]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 4);
    auto& sender = f.qps[0];
    rdma_asio::cm_event_channel cm(ioc);
    // snippet-begin: multicast-join
    // Join the group on the device of 10.0.0.1, then let a queue pair receive it.
    rdma_asio::cm_id id(cm, RDMA_PS_UDP);
    id.bind(as_sockaddr(ipv4("10.0.0.1", 0)));
    const sockaddr_in group_address = ipv4("239.1.2.3", 0);
    // snippet-end
    std::optional<rdma_asio::datagram_endpoint> group;
    rdma_asio::error_code join_ec;
    id.async_join_multicast(as_sockaddr(group_address),
                            [&](rdma_asio::error_code ec, rdma_asio::datagram_endpoint g) {
                                join_ec = ec;
                                group = g;
                            });
    REQUIRE(run_until(ioc, [&] { return group.has_value(); }));
    REQUIRE_FALSE(join_ec);
    CHECK(group->qp_num == rdma_asio::multicast_qp_num);
    CHECK(group->qkey == rdma_asio::default_qkey);
    CHECK(group->gid[15] == 3); // ::ffff:239.1.2.3
    CHECK(group->gid[12] == 239);

    f.qps[1].attach_multicast(*group);
    f.qps[2].attach_multicast(*group);
    // f.qps[3] is not attached.
    constexpr std::size_t n = 3;
    std::vector<result> at1(n), at2(n);
    result at3;
    for (std::size_t i = 0; i < n; ++i) {
        f.qps[1].async_receive(f.slot(10 + i, 8), at1[i].handler());
        f.qps[2].async_receive(f.slot(20 + i, 8), at2[i].handler());
    }
    f.qps[3].async_receive(f.slot(30, 8), at3.handler());
    std::vector<result> sent(n);
    for (std::size_t i = 0; i < n; ++i) {
        f.bytes(i)[0] = static_cast<unsigned char>(0x40 + i);
        sender.async_send_to(f.slot(i, 8), *group, sent[i].handler());
    }
    auto all = [](const std::vector<result>& rs) {
        for (const result& r : rs)
            if (r.calls() != 1)
                return false;
        return true;
    };
    REQUIRE(run_until(ioc, [&] { return all(at1) && all(at2) && all(sent); }));
    for (std::size_t i = 0; i < n; ++i) {
        CHECK_FALSE(at1[i].ec());
        CHECK_FALSE(at2[i].ec());
        CHECK(f.bytes(10 + i)[0] == 0x40 + i);
        CHECK(f.bytes(20 + i)[0] == 0x40 + i);
    }
    // Delivered to the group's members together: the one not attached got none.
    ioc.restart();
    ioc.run_for(200ms);
    CHECK(at3.calls() == 0);

    // Detached, a queue pair receives no more of it; the other still does.
    f.qps[1].detach_multicast(*group);
    result after1, after2, sent_after;
    f.qps[1].async_receive(f.slot(13, 8), after1.handler());
    f.qps[2].async_receive(f.slot(23, 8), after2.handler());
    sender.async_send_to(f.slot(0, 8), *group, sent_after.handler());
    REQUIRE(run_until(ioc, [&] { return after2.calls() == 1 && sent_after.calls() == 1; }));
    CHECK_FALSE(after2.ec());
    ioc.restart();
    ioc.run_for(200ms);
    CHECK(after1.calls() == 0);
    CHECK(at3.calls() == 0);

    f.qps[2].detach_multicast(*group);
    id.leave_multicast(as_sockaddr(group_address));
    // Leaving twice: the group is not joined any more.
    rdma_asio::error_code ec;
    id.leave_multicast(as_sockaddr(group_address), ec);
    CHECK(ec);
}

// snippet-begin: multicast-send
// Joins the group at `group_address` on `id`, lets `receiver` receive the group's
// datagrams, and sends `buffer` to every member.
asio::awaitable<void> join_and_send(rdma_asio::cm_id& id, const sockaddr* group_address,
                                    rdma_asio::datagram_queue_pair& receiver,
                                    rdma_asio::datagram_queue_pair& sender,
                                    rdma_asio::registered_buffer buffer) {
    rdma_asio::datagram_endpoint group =
        co_await id.async_join_multicast(group_address, asio::use_awaitable);
    receiver.attach_multicast(group);
    co_await sender.async_send_to(buffer, group, asio::use_awaitable);
}
// snippet-end

TEST_CASE("the documented multicast coroutine: joined, attached, one datagram to the group",
          "[datagram_queue_pair][multicast][docs]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    rdma_asio::cm_event_channel cm(ioc);
    rdma_asio::cm_id id(cm, RDMA_PS_UDP);
    id.bind(as_sockaddr(ipv4("10.0.0.1", 0)));
    const sockaddr_in group_address = ipv4("239.1.2.5", 0);
    result received;
    f.qps[1].async_receive(f.slot(1, 8), received.handler()); // posted before anything is sent
    std::memcpy(f.bytes(0), "to all", 6);
    bool sent = false;
    asio::co_spawn(ioc,
                   join_and_send(id, as_sockaddr(group_address), f.qps[1], f.qps[0], f.slot(0, 6)),
                   [&](std::exception_ptr e) { sent = !e; });
    REQUIRE(run_until(ioc, [&] { return sent && received.calls() == 1; }));
    CHECK_FALSE(received.ec());
    CHECK(received.value() == 6);
    CHECK(std::memcmp(f.bytes(1), "to all", 6) == 0);
}

TEST_CASE("terminal cancellation of a posted datagram receive ends it once, and the queue pair "
          "with it",
          "[datagram_queue_pair][cancellation]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    asio::cancellation_signal signal; // outlives the operation bound to it
    result cancelled, later;
    rdma_asio::datagram_endpoint from;
    f.qps[1].async_receive_from(f.slot(1, 8), from,
                                asio::bind_cancellation_slot(signal.slot(), cancelled.handler()));
    ioc.poll();
    CHECK(cancelled.calls() == 0);
    signal.emit(asio::cancellation_type::terminal);
    REQUIRE(run_until(ioc, [&] { return cancelled.calls() == 1; }));
    CHECK(cancelled.ec() == asio::error::operation_aborted);
    // The QP went to the error state to flush it: later operations end with it.
    f.qps[1].async_receive(f.slot(2, 8), later.handler());
    REQUIRE(run_until(ioc, [&] { return later.calls() == 1; }));
    CHECK(later.ec() == rdma_asio::wc_errc::flushed);
    ioc.restart();
    ioc.poll();
    CHECK(cancelled.calls() == 1);
}

TEST_CASE("a queue pair closed while attached to a group, and an id closed while joined, leave "
          "nothing behind",
          "[datagram_queue_pair][multicast][close]") {
    asio::io_context ioc;
    const int pds_before = rdma_asio::test::kernel_pds_of_this_process();
    {
        datagram_fixture f(ioc, 1);
        rdma_asio::cm_event_channel cm(ioc);
        rdma_asio::cm_id id(cm, RDMA_PS_UDP);
        id.bind(as_sockaddr(ipv4("10.0.0.1", 0)));
        std::optional<rdma_asio::datagram_endpoint> group;
        id.async_join_multicast(as_sockaddr(ipv4("239.1.2.6", 0)),
                                [&](rdma_asio::error_code ec, rdma_asio::datagram_endpoint g) {
                                    if (!ec)
                                        group = g;
                                });
        REQUIRE(run_until(ioc, [&] { return group.has_value(); }));
        f.qps[0].attach_multicast(*group);
        // Neither detached nor left: close() does both (ibv_destroy_qp refuses a
        // QP still attached to a group).
    }
    // The QP was destroyed, so its protection domain could be deallocated.
    CHECK(rdma_asio::test::kernel_pds_of_this_process() == pds_before);
}

TEST_CASE("joining a multicast group is refused on a connection's port space, an unbound id, "
          "a unicast address and a bad address",
          "[datagram_queue_pair][multicast][misuse]") {
    asio::io_context ioc;
    rdma_asio::cm_event_channel cm(ioc);
    const sockaddr_in group = ipv4("239.1.2.4", 0);
    auto join = [&](rdma_asio::cm_id& id, const sockaddr* address) {
        std::optional<rdma_asio::error_code> got;
        id.async_join_multicast(
            address, [&](rdma_asio::error_code ec, rdma_asio::datagram_endpoint) { got = ec; });
        REQUIRE(run_until(ioc, [&] { return got.has_value(); }));
        return *got;
    };
    SECTION("a TCP port space id") {
        rdma_asio::cm_id id(cm, RDMA_PS_TCP);
        id.bind(as_sockaddr(ipv4("10.0.0.1", 0)));
        CHECK(join(id, as_sockaddr(group)) == asio::error::invalid_argument);
    }
    SECTION("an id bound to no device") {
        rdma_asio::cm_id id(cm, RDMA_PS_UDP);
        CHECK(join(id, as_sockaddr(group)) == asio::error::no_such_device);
    }
    SECTION("a unicast address") {
        rdma_asio::cm_id id(cm, RDMA_PS_UDP);
        id.bind(as_sockaddr(ipv4("10.0.0.1", 0)));
        CHECK(join(id, as_sockaddr(ipv4("10.0.0.1", 0))) == asio::error::invalid_argument);
    }
    SECTION("no address") {
        rdma_asio::cm_id id(cm, RDMA_PS_UDP);
        id.bind(as_sockaddr(ipv4("10.0.0.1", 0)));
        CHECK(join(id, nullptr) == asio::error::invalid_argument);
        rdma_asio::error_code ec;
        id.leave_multicast(nullptr, ec);
        CHECK(ec == asio::error::invalid_argument);
    }
    SECTION("a closed id") {
        rdma_asio::cm_id id(cm, RDMA_PS_UDP);
        id.close();
        CHECK(join(id, as_sockaddr(group)) == asio::error::bad_descriptor);
        rdma_asio::error_code ec;
        id.leave_multicast(as_sockaddr(group), ec);
        CHECK(ec == asio::error::bad_descriptor);
    }
}

TEST_CASE("a closed or moved-from datagram queue pair refuses everything, through every token",
          "[datagram_queue_pair][misuse]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    rdma_asio::datagram_queue_pair moved(std::move(f.qps[0]));
    CHECK_FALSE(f.qps[0].is_open());
    CHECK(moved.is_open());
    f.qps[1].close();
    using rdma_asio::test::each_token;
    // One object and one operation per run of the test case (each_token's
    // sections would not run twice in one): the moved-from one, then the closed one.
    const std::size_t which = GENERATE(0, 1);
    rdma_asio::datagram_queue_pair* closed = &f.qps[which];
    INFO((which == 0 ? "moved-from" : "closed"));
    SECTION("async_send_to") {
        each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return closed->async_send_to(f.slot(0, 8), moved.local_endpoint(),
                                             std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    SECTION("async_receive_from") {
        rdma_asio::datagram_endpoint from;
        each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return closed->async_receive_from(f.slot(0, 8), from,
                                                  std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    SECTION("the members that are not operations") {
        rdma_asio::error_code ec;
        closed->attach_multicast(moved.local_endpoint(), ec);
        CHECK(ec == asio::error::bad_descriptor);
        closed->detach_multicast(moved.local_endpoint(), ec);
        CHECK(ec == asio::error::bad_descriptor);
        CHECK_THROWS_AS(closed->local_endpoint(), rdma_asio::system_error);
    }
    // Opening twice.
    rdma_asio::error_code ec;
    moved.open(f.pd, f.cq, f.cq, f.options(), ec);
    CHECK(ec == asio::error::already_open);
}

namespace {
// An address on the test device's own IPv4 subnet that no host holds: the
// kernel's neighbour resolution for it gets no answer (the link is the guest's
// own veth pair, so nothing leaves the machine).
rdma_asio::datagram_endpoint silent_destination(const rdma_asio::datagram_queue_pair& qp) {
    rdma_asio::datagram_endpoint to = qp.local_endpoint();
    const std::array<std::uint8_t, 12> v4_mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    REQUIRE(std::equal(v4_mapped.begin(), v4_mapped.end(), to.gid.begin()));
    to.gid[15] = 200; // x.y.z.200 on the device's /24
    return to;
}
} // namespace

TEST_CASE("a send to a destination nobody answers for holds up neither its caller nor the queue "
          "pair's other sends, and ends with the kernel's error",
          "[datagram_queue_pair][misuse][mt]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    result unanswered, sent, received;
    // Its address handle takes the kernel about a second to fail (ibv_create_ah
    // waits for the neighbour): made off this thread, while the rest goes on.
    f.qps[0].async_send_to(f.slot(0, 8), silent_destination(f.qps[1]), unanswered.handler());
    f.qps[1].async_receive(f.slot(1, 8), received.handler());
    f.qps[0].async_send_to(f.slot(2, 8), f.qps[1].local_endpoint(), sent.handler());
    REQUIRE(run_until(ioc, [&] { return sent.calls() == 1 && received.calls() == 1; }));
    CHECK_FALSE(sent.ec());
    CHECK_FALSE(received.ec());
    // Before: the first call blocked until ibv_create_ah failed, and its send had
    // ended before the second was even started.
    CHECK(unanswered.calls() == 0);
    REQUIRE(run_until(ioc, [&] { return unanswered.calls() == 1; }));
    INFO("the unanswered send ended with: " << unanswered.ec().message());
    CHECK(unanswered.ec());
    CHECK(unanswered.ec() != asio::error::operation_aborted);
}

namespace {

// 'A' from qps[0] to qps[1] with `first_handler` (which records into
// `first_out`), then `between()`, then 'B' with a plain handler, then `after()`:
// both arrive, in the order they were started.
template <class Handler>
void check_two_sends_keep_their_order(
    asio::io_context& ioc, datagram_fixture& f, const result& first_out, Handler first_handler,
    const std::function<void()>& between, const std::function<void()>& after = [] {}) {
    result first_in, second_in, second_out;
    f.qps[1].async_receive(f.slot(10, 8), first_in.handler());
    f.qps[1].async_receive(f.slot(11, 8), second_in.handler());
    f.bytes(0)[0] = 'A';
    f.bytes(1)[0] = 'B';
    f.qps[0].async_send_to(f.slot(0, 8), f.qps[1].local_endpoint(), std::move(first_handler));
    between();
    f.qps[0].async_send_to(f.slot(1, 8), f.qps[1].local_endpoint(), second_out.handler());
    after();
    REQUIRE(run_until(ioc, [&] {
        return first_in.calls() == 1 && second_in.calls() == 1 && first_out.calls() == 1 &&
               second_out.calls() == 1;
    }));
    CHECK_FALSE(first_out.ec());
    CHECK_FALSE(second_out.ec());
    CHECK(f.bytes(10)[0] == 'A');
    CHECK(f.bytes(11)[0] == 'B');
}

} // namespace

TEST_CASE("a send started after its destination's handle was made, while an earlier send to it "
          "has not started yet, goes after that one",
          "[datagram_queue_pair][mt]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    result first_out;
    // The io_context does not run: the handle is made on the blocking-call thread
    // meanwhile, and the first send's start waits, posted, for the io_context.
    // Before: the second send saw the handle made and was posted at once, first.
    check_two_sends_keep_their_order(ioc, f, first_out, first_out.handler(), [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    });
}

// The same order when the later send starts in the moment the handle's maker
// (the blocking-call thread) is handing it to the sends that waited for it: the
// first send's handler has an executor that holds that thread there. Before, the
// later send saw the handle made, posted its start at once, and went first (the
// multicast test below caught it: three datagrams arrived '@' last).
TEST_CASE("a send started while its destination's handle is being handed to the sends that "
          "waited for it goes after those sends",
          "[datagram_queue_pair][mt]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    result first_out;
    auto g = std::make_shared<rdma_asio::test::gate>();
    const rdma_asio::test::gate_opener opener{*g};
    check_two_sends_keep_their_order(
        ioc, f, first_out, first_out.on(rdma_asio::test::gated_executor(ioc.get_executor(), g)),
        [&] {
            // The handle is made, and the thread that made it is held while it
            // hands the first send on.
            REQUIRE(g->wait_until_held(10s));
        },
        [&] { g->open(); });
}

TEST_CASE("a send waiting for its destination's address handle ends at once when cancelled, "
          "and a closed queue pair's waiting send with operation_aborted",
          "[datagram_queue_pair][cancellation][mt]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    asio::cancellation_signal signal; // outlives the operation bound to it
    result cancelled, closed_under;
    f.qps[0].async_send_to(f.slot(0, 8), silent_destination(f.qps[1]),
                           asio::bind_cancellation_slot(signal.slot(), cancelled.handler()));
    ioc.poll();
    CHECK(cancelled.calls() == 0);
    signal.emit(asio::cancellation_type::total);
    // Ends before the kernel gives up on the neighbour: the first run of the
    // handlers posted by the cancellation.
    REQUIRE(run_until(ioc, [&] { return cancelled.calls() == 1; }));
    CHECK(cancelled.ec() == asio::error::operation_aborted);

    f.qps[1].async_send_to(f.slot(1, 8), silent_destination(f.qps[0]), closed_under.handler());
    ioc.poll();
    f.qps[1].close();
    REQUIRE(run_until(ioc, [&] { return closed_under.calls() == 1; }));
    CHECK(closed_under.ec() == asio::error::operation_aborted);
    ioc.restart();
    ioc.poll();
    CHECK(cancelled.calls() == 1);
    CHECK(closed_under.calls() == 1);
}

// The close's race with the handle's making: the handle is made (on the
// blocking-call thread) and the send's start posted, but not run, when the queue
// pair is closed. The send was pending at the close, so it ends as the close's
// pending operations do. (It ended with bad_descriptor, as a send started after
// the close: seen 2 times in 30 runs of the test above, whose second send raced
// so when its destination's handle was made fast.)
TEST_CASE("a send whose address handle was made just before its queue pair closed, its start not "
          "run yet, ends with operation_aborted",
          "[datagram_queue_pair][cancellation][mt]") {
    asio::io_context ioc;
    datagram_fixture f(ioc, 2);
    const rdma_asio::datagram_endpoint to = f.qps[0].local_endpoint();
    result closed_under;
    f.qps[1].async_send_to(f.slot(1, 8), to, closed_under.handler());
    // The io_context is not run meanwhile: the send's start, posted once the
    // handle is made, waits in it.
    // Held here, as a blocking call still queued for the queue pair holds it,
    // so that it outlives the close.
    const auto state = rdma_asio::detail::io_object_access::state(f.qps[1]);
    REQUIRE(state);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!state->address_handle_made(to) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(1ms);
    REQUIRE(state->address_handle_made(to));
    CHECK(closed_under.calls() == 0);
    f.qps[1].close();
    REQUIRE(run_until(ioc, [&] { return closed_under.calls() == 1; }));
    CHECK(closed_under.ec() == asio::error::operation_aborted);
}

TEST_CASE("an io_context destroyed while a send waits for its address handle destroys its "
          "handler, not invoked",
          "[datagram_queue_pair][shutdown][mt]") {
    auto sentinel = std::make_shared<int>(0);
    bool invoked = false;
    {
        asio::io_context ioc;
        datagram_fixture f(ioc, 2);
        f.qps[0].async_send_to(
            f.slot(0, 8), silent_destination(f.qps[1]),
            [&invoked, keep = sentinel](rdma_asio::error_code, std::size_t) { invoked = true; });
        ioc.poll();
        CHECK(sentinel.use_count() == 2);
    }
    CHECK(sentinel.use_count() == 1); // the handler was freed
    CHECK_FALSE(invoked);
}

TEST_CASE("a datagram queue pair's address handles and GRH ring go with it: its protection "
          "domain is deallocated",
          "[datagram_queue_pair][close]") {
    asio::io_context ioc;
    const int pds_before = rdma_asio::test::kernel_pds_of_this_process();
    result received, sent;
    {
        datagram_fixture f(ioc, 2);
        CHECK(rdma_asio::test::kernel_pds_of_this_process() == pds_before + 1);
        f.qps[1].async_receive(f.slot(1, 8), received.handler());
        f.qps[0].async_send_to(f.slot(0, 8), f.qps[1].local_endpoint(), sent.handler());
        REQUIRE(run_until(ioc, [&] { return received.calls() == 1 && sent.calls() == 1; }));
        // One receive left posted: close() ends it.
        result pending;
        f.qps[1].async_receive(f.slot(2, 8), pending.handler());
        f.qps[1].close();
        REQUIRE(run_until(ioc, [&] { return pending.calls() == 1; }));
        CHECK(pending.ec() == asio::error::operation_aborted);
    }
    // The address handle the send made, the ring's region, both QPs and the PD
    // are gone: ibv_dealloc_pd found nothing left in it.
    CHECK(rdma_asio::test::kernel_pds_of_this_process() == pds_before);
    CHECK_FALSE(received.ec());
    CHECK_FALSE(sent.ec());
}

} // namespace datagram_queue_pair_rxe_test
