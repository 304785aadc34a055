// Work requests as Asio operations on rxe: routing, room in the queues, errors,
// cancellation, and every completion token.
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/qp/qp_operation.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/queue_pair.hpp"
#include "rdma_asio/testing/loopback.hpp"
#include "rdma_asio/wc_error.hpp"

#include <catch2/catch.hpp>

#include "counting_allocator.hpp"
#include "each_token.hpp"
#include "event_collector.hpp"
#include "kernel_resources.hpp"
#include "recorder.hpp"
#include "run_coroutine.hpp"
#include "run_until.hpp"
#include "test_device.hpp"
#include "verbs_resources.hpp"

#include "asio_alias.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace queue_pair_rxe_test {

using namespace std::chrono_literals;
using rdma_asio::errc;
using rdma_asio::wc_errc;
using rdma_asio::test::test_device_name;

namespace {

// What an operation completed with: calls(), ec(), value() (the bytes).
using result = rdma_asio::test::recorder<std::size_t>;

constexpr std::size_t slot_size = 64;

// Two RC queue pairs on rxe0 connected to each other, each with a CQ of its own
// on one channel, and registered memory: slots of 64 bytes, the first half for
// `a`, the second for `b`.
struct qp_pair {
    explicit qp_pair(asio::io_context& io, rdma_asio::qp_options options = {})
        : ioc(io), ctx(test_device_name()), pd(ctx), channel(ioc.get_executor(), ctx),
          cq_a(channel, 1024), cq_b(channel, 1024), a(pd, cq_a, cq_a, options),
          b(pd, cq_b, cq_b, options), memory(2 * 1024 * slot_size),
          mr(pd, asio::buffer(memory),
             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                 IBV_ACCESS_REMOTE_ATOMIC) {
        rdma_asio::test::connect_rc_pair(ctx.native_handle(), a.native_handle(), b.native_handle());
    }

    rdma_asio::registered_buffer slot_a(std::size_t i) { return mr.at(i * slot_size, slot_size); }
    rdma_asio::registered_buffer slot_b(std::size_t i) {
        return mr.at((1024 + i) * slot_size, slot_size);
    }
    void put(rdma_asio::registered_buffer b, std::uint64_t value) {
        std::memcpy(b.data, &value, sizeof value);
    }
    std::uint64_t get(rdma_asio::registered_buffer b) {
        std::uint64_t value = 0;
        std::memcpy(&value, b.data, sizeof value);
        return value;
    }

    // Runs the io_context until `done()` or the bound.
    bool run_until(const std::function<bool()>& done, std::chrono::seconds limit = 30s) {
        return rdma_asio::test::run_until(ioc, done, limit);
    }

    asio::io_context& ioc;
    rdma_asio::context ctx;
    rdma_asio::protection_domain pd;
    rdma_asio::completion_channel channel;
    rdma_asio::completion_queue cq_a, cq_b;
    rdma_asio::queue_pair a, b;
    std::vector<std::byte> memory;
    rdma_asio::memory_region mr;
};

} // namespace

// snippet-begin: work-requests-echo
// Receives one message and sends it back, like a TCP echo server's loop body.
asio::awaitable<void> echo_once(rdma_asio::queue_pair& qp, const rdma_asio::memory_region& mr) {
    std::size_t n = co_await qp.async_receive(mr.at(0, 64), asio::use_awaitable);
    co_await qp.async_send(mr.at(0, n), asio::use_awaitable);
}
// snippet-end

TEST_CASE("the documented echo: a queue pair made from a protection domain and a CQ",
          "[queue_pair][docs]") {
    asio::io_context ioc;
    const std::string device = test_device_name();
    // snippet-begin: work-requests-setup
    rdma_asio::context ctx(device); // e.g. "rxe0"
    rdma_asio::protection_domain pd(ctx);
    rdma_asio::completion_channel channel(ioc.get_executor(), ctx);
    rdma_asio::completion_queue cq(channel, 256);
    // An RC QP in the RESET state: connect it before its first work request.
    rdma_asio::queue_pair qp(pd, cq, cq, {.send_depth = 16, .receive_depth = 16});
    std::vector<std::byte> memory(4096);
    rdma_asio::memory_region mr(pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
    // snippet-end

    // The client side of the test: its own QP and memory on the same device.
    rdma_asio::completion_queue client_cq(channel, 16);
    rdma_asio::queue_pair client(pd, client_cq, client_cq);
    std::vector<std::byte> client_memory(128);
    rdma_asio::memory_region client_mr(pd, asio::buffer(client_memory), IBV_ACCESS_LOCAL_WRITE);
    // snippet-begin: work-requests-connect
    rdma_asio::testing::connect_loopback(ctx.native_handle(), qp.native_handle(),
                                         client.native_handle());
    // snippet-end

    bool echoed = false;
    asio::co_spawn(ioc, echo_once(qp, mr), [&](std::exception_ptr e) { echoed = !e; });
    rdma_asio::test::run_coroutine(ioc, [&]() -> asio::awaitable<void> {
        std::memcpy(client_memory.data(), "hello", 6);
        result back;
        client.async_receive(client_mr.at(64, 64), back.handler());
        co_await client.async_send(client_mr.at(0, 6), asio::use_awaitable);
        while (back.calls() == 0)
            co_await asio::post(ioc, asio::use_awaitable);
        CHECK_FALSE(back.ec());
        CHECK(back.value() == 6);
        CHECK(std::memcmp(client_memory.data() + 64, "hello", 6) == 0);
    }());
    // Its send's own completion may come just after the client's receive.
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         !echoed && std::chrono::steady_clock::now() < deadline;)
        ioc.run_one_for(20ms);
    CHECK(echoed);
}

TEST_CASE("a send reaches the peer's receive with its immediate data", "[queue_pair]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    rdma_asio::receive_info info;
    result received, sent;
    f.b.async_receive(f.slot_b(0), info, received.handler());
    f.put(f.slot_a(0), 0x1122334455667788u);
    f.a.async_send(f.slot_a(0), rdma_asio::immediate_data{0xabcdef01u}, sent.handler());
    CHECK(sent.calls() == 0); // never inside the initiating call
    REQUIRE(f.run_until([&] { return received.calls() == 1 && sent.calls() == 1; }));
    CHECK_FALSE(sent.ec());
    CHECK(sent.value() == slot_size);
    CHECK_FALSE(received.ec());
    CHECK(received.value() == slot_size);
    CHECK(f.get(f.slot_b(0)) == 0x1122334455667788u);
    REQUIRE(info.immediate.has_value());
    CHECK(*info.immediate == 0xabcdef01u);
    CHECK((info.wc_flags & IBV_WC_WITH_IMM) != 0);
    CHECK_FALSE(info.written);
    // Idle again: nothing polls, nothing is outstanding.
    CHECK(f.cq_a.counters().completions == 1);
    CHECK(f.cq_b.counters().completions == 1);
}

TEST_CASE("a coroutine awaits each send and receive in turn", "[queue_pair]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    rdma_asio::test::run_coroutine(ioc, [&]() -> asio::awaitable<void> {
        for (std::uint64_t i = 0; i < 50; ++i) {
            // The receive is posted before the send starts; its handler waits.
            result got;
            f.b.async_receive(f.slot_b(i), got.handler());
            f.put(f.slot_a(i), i * 7);
            std::size_t n = co_await f.a.async_send(f.slot_a(i), asio::use_awaitable);
            CHECK(n == slot_size);
            while (got.calls() == 0) // the receive's completion may come just after
                co_await asio::post(ioc, asio::use_awaitable);
            CHECK_FALSE(got.ec());
            CHECK(f.get(f.slot_b(i)) == i * 7);
        }
    }());
}

TEST_CASE("RDMA writes and reads move memory without the peer's CPU", "[queue_pair]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    f.put(f.slot_a(1), 4242);
    result wrote, read;
    // a writes its slot 1 into b's slot 3, then reads it back into its slot 2.
    f.a.async_write(f.slot_a(1), f.mr.remote_at((1024 + 3) * slot_size, slot_size),
                    wrote.handler());
    REQUIRE(f.run_until([&] { return wrote.calls() == 1; }));
    CHECK_FALSE(wrote.ec());
    CHECK(wrote.value() == slot_size);
    CHECK(f.get(f.slot_b(3)) == 4242);
    f.a.async_read(f.slot_a(2), f.mr.remote_at((1024 + 3) * slot_size, slot_size), read.handler());
    REQUIRE(f.run_until([&] { return read.calls() == 1; }));
    CHECK_FALSE(read.ec());
    CHECK(f.get(f.slot_a(2)) == 4242);
}

TEST_CASE("an RDMA write with immediate data lands in the peer's memory and completes one of its "
          "receives with the immediate",
          "[queue_pair][write_with_imm]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    f.put(f.slot_b(4), 0); // the receive's own buffer, which the write must leave alone
    f.put(f.slot_a(1), 0x0123456789abcdefu);
    rdma_asio::receive_info info;
    result received, wrote;
    // A receive with no buffer at all will do for a write's immediate.
    f.b.async_receive(rdma_asio::registered_buffer{}, info, received.handler());
    f.a.async_write(f.slot_a(1), f.mr.remote_at((1024 + 5) * slot_size, slot_size),
                    rdma_asio::immediate_data{0x5eedu}, wrote.handler());
    CHECK(wrote.calls() == 0); // never inside the initiating call
    REQUIRE(f.run_until([&] { return received.calls() == 1 && wrote.calls() == 1; }));
    CHECK_FALSE(wrote.ec());
    CHECK(wrote.value() == slot_size);
    CHECK_FALSE(received.ec());
    CHECK(received.value() == slot_size); // the write's length
    REQUIRE(info.immediate.has_value());
    CHECK(*info.immediate == 0x5eedu);
    CHECK(info.written);
    CHECK(f.get(f.slot_b(5)) == 0x0123456789abcdefu);
    CHECK(f.get(f.slot_b(4)) == 0);
    // Into a receive with a buffer: the buffer stays as it was.
    f.b.async_receive(f.slot_b(4), info, received.handler());
    f.a.async_write(f.mr.at(1 * slot_size, 8), f.mr.remote_at((1024 + 6) * slot_size, 8),
                    rdma_asio::immediate_data{7}, wrote.handler());
    REQUIRE(f.run_until([&] { return received.calls() == 2 && wrote.calls() == 2; }));
    CHECK_FALSE(received.ec());
    CHECK(received.value() == 8);
    CHECK(*info.immediate == 7);
    CHECK(info.written);
    CHECK(f.get(f.slot_b(4)) == 0);
    CHECK(f.get(f.slot_b(6)) == 0x0123456789abcdefu);
}

TEST_CASE("a send gathers several buffers into one message, and a receive scatters one over "
          "several",
          "[queue_pair][sge]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    // a's slot 11 holds "abc", slot 12 "defgh", slot 13 "ij": one message "abcdefghij".
    std::memcpy(f.slot_a(11).data, "abc", 3);
    std::memcpy(f.slot_a(12).data, "defgh", 5);
    std::memcpy(f.slot_a(13).data, "ij", 2);
    const std::array gather{f.mr.at(11 * slot_size, 3), f.mr.at(12 * slot_size, 5),
                            f.mr.at(13 * slot_size, 2)};
    // b receives it into 4 bytes of slot 11, then 6 bytes of slot 12.
    const std::array scatter{f.mr.at((1024 + 11) * slot_size, 4),
                             f.mr.at((1024 + 12) * slot_size, 6)};
    result sent, received, wrote;
    f.b.async_receive(scatter, received.handler());
    f.a.async_send(gather, sent.handler());
    REQUIRE(f.run_until([&] { return sent.calls() == 1 && received.calls() == 1; }));
    CHECK_FALSE(sent.ec());
    CHECK(sent.value() == 10);
    CHECK_FALSE(received.ec());
    CHECK(received.value() == 10);
    CHECK(std::string(static_cast<const char*>(f.slot_b(11).data), 4) == "abcd");
    CHECK(std::string(static_cast<const char*>(f.slot_b(12).data), 6) == "efghij");

    // One RDMA write gathering the same three into b's slot 14.
    f.a.async_write(gather, f.mr.remote_at((1024 + 14) * slot_size, 10), wrote.handler());
    REQUIRE(f.run_until([&] { return wrote.calls() == 1; }));
    CHECK_FALSE(wrote.ec());
    CHECK(wrote.value() == 10);
    CHECK(std::string(static_cast<const char*>(f.slot_b(14).data), 10) == "abcdefghij");
}

namespace {

// The QP's capacities (ibv_qp_cap), as the device set them.
ibv_qp_cap caps_of(const rdma_asio::queue_pair& qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    REQUIRE(ibv_query_qp(qp.native_handle(), &attr, IBV_QP_CAP, &init) == 0);
    return init.cap;
}

std::uint32_t max_inline_of(const rdma_asio::queue_pair& qp) {
    return caps_of(qp).max_inline_data;
}

} // namespace

TEST_CASE("a list longer than the queue pair's scatter/gather entries fails its post, and one "
          "longer than an operation carries is never posted",
          "[queue_pair][sge][misuse]") {
    asio::io_context ioc;
    rdma_asio::qp_options one_entry;
    one_entry.max_send_sge = 1;
    // No inline room asked for: rxe sizes a work request for the larger of the
    // two, and would then take four entries.
    one_entry.max_inline = 0;
    qp_pair f(ioc, one_entry);
    REQUIRE(caps_of(f.a).max_send_sge == 1);
    // Longer than the QP takes inline: rxe takes an inline list of any length.
    const std::uint32_t half = max_inline_of(f.a) / 2 + 8;
    const std::array two{f.mr.at(0, half), f.mr.at(half, half)};
    const std::array five{f.mr.at(0, 1), f.mr.at(1, 1), f.mr.at(2, 1), f.mr.at(3, 1),
                          f.mr.at(4, 1)};
    result too_many_for_qp, too_many, fine;
    f.a.async_send(two, too_many_for_qp.handler());
    f.a.async_send(five, too_many.handler());
    REQUIRE(f.run_until([&] { return too_many_for_qp.ran() && too_many.ran(); }));
    CHECK(too_many_for_qp.ec() == rdma_asio::detail::errno_code(EINVAL)); // ibv_post_send's
    CHECK(too_many.ec() == rdma_asio::detail::errno_code(E2BIG));
    // Neither was posted, so the QP still works.
    result got;
    f.b.async_receive(f.slot_b(0), got.handler());
    f.a.async_send(f.slot_a(0), fine.handler());
    REQUIRE(f.run_until([&] { return fine.calls() == 1 && got.calls() == 1; }));
    CHECK_FALSE(fine.ec());
    CHECK_FALSE(got.ec());
}

TEST_CASE("receives let in together are posted as one list: one the QP refuses fails alone, and "
          "those after it are still posted, in order",
          "[queue_pair][sge]") {
    asio::io_context ioc;
    rdma_asio::qp_options options;
    options.max_receive_sge = 1;
    options.receive_depth = 2;
    qp_pair f(ioc, options);
    const ibv_qp_cap caps = caps_of(f.b);
    REQUIRE(caps.max_recv_sge == 1);
    const std::size_t depth = caps.max_recv_wr;
    REQUIRE(depth >= 2);
    REQUIRE(depth <= 16);
    // b's receive queue filled; behind it, waiting for room, a receive of two
    // entries (more than the QP takes) and `depth` more of one. The first
    // messages' completions, read together, let the waiting ones in together.
    std::vector<result> first(depth), after(depth), sent(2 * depth);
    result refused;
    for (std::size_t i = 0; i < depth; ++i)
        f.b.async_receive(f.slot_b(i), first[i].handler());
    const std::array two{f.slot_b(depth), f.slot_b(depth + 1)};
    f.b.async_receive(two, refused.handler());
    for (std::size_t i = 0; i < depth; ++i)
        f.b.async_receive(f.slot_b(depth + 2 + i), after[i].handler());
    auto send = [&](std::size_t i) {
        f.put(f.slot_a(i), 100 + i);
        f.a.async_send(f.mr.at(i * slot_size, 8), sent[i].handler());
    };
    auto all_ran = [](const std::vector<result>& r) {
        return std::all_of(r.begin(), r.end(), [](const result& x) { return x.calls() == 1; });
    };
    for (std::size_t i = 0; i < depth; ++i)
        send(i);
    REQUIRE(f.run_until([&] { return all_ran(first) && refused.calls() == 1; }));
    CHECK(refused.ec() == rdma_asio::detail::errno_code(EINVAL)); // ibv_post_recv's
    for (std::size_t i = 0; i < depth; ++i) {
        CHECK_FALSE(first[i].ec());
        CHECK(f.get(f.slot_b(i)) == 100 + i);
    }
    // Every receive behind the refused one was posted: the next messages land
    // in them, in the order they were started.
    for (std::size_t i = depth; i < 2 * depth; ++i)
        send(i);
    REQUIRE(f.run_until([&] { return all_ran(after) && all_ran(sent); }));
    for (std::size_t i = 0; i < depth; ++i) {
        CHECK_FALSE(after[i].ec());
        CHECK(f.get(f.slot_b(depth + 2 + i)) == 100 + depth + i);
    }
    for (const result& r : sent)
        CHECK_FALSE(r.ec());
}

namespace {
// What an atomic operation completed with: the value before.
using atomic_result = rdma_asio::test::recorder<std::uint64_t>;
} // namespace

TEST_CASE("fetch-and-add and compare-and-swap change the peer's 64 bits and return what they "
          "held",
          "[queue_pair][atomic]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    const rdma_asio::remote_buffer counter = f.mr.remote_at((1024 + 7) * slot_size, 8);
    f.put(f.slot_b(7), 40);
    f.put(f.slot_a(7), 0);
    atomic_result added, swapped, refused;
    f.a.async_fetch_add(f.slot_a(7), counter, 2, added.handler());
    CHECK(added.calls() == 0); // never inside the initiating call
    REQUIRE(f.run_until([&] { return added.calls() == 1; }));
    CHECK_FALSE(added.ec());
    CHECK(added.value() == 40);
    CHECK(f.get(f.slot_a(7)) == 40); // also in the result buffer
    CHECK(f.get(f.slot_b(7)) == 42);

    f.a.async_compare_swap(f.slot_a(7), counter, 42, 100, swapped.handler());
    REQUIRE(f.run_until([&] { return swapped.calls() == 1; }));
    CHECK_FALSE(swapped.ec());
    CHECK(swapped.value() == 42); // equal to the expected value: swapped
    CHECK(f.get(f.slot_b(7)) == 100);

    f.a.async_compare_swap(f.slot_a(7), counter, 42, 7, refused.handler());
    REQUIRE(f.run_until([&] { return refused.calls() == 1; }));
    CHECK_FALSE(refused.ec());
    CHECK(refused.value() == 100); // not the expected value: left alone
    CHECK(f.get(f.slot_b(7)) == 100);
}

TEST_CASE("an atomic with a misaligned address or a short result buffer ends with "
          "misaligned_atomic, never posted",
          "[queue_pair][atomic][misuse]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    const rdma_asio::remote_buffer counter = f.mr.remote_at((1024 + 8) * slot_size, 8);
    f.put(f.slot_b(8), 5);
    atomic_result remote_off, local_off, too_short, fine;
    f.a.async_fetch_add(f.slot_a(8), f.mr.remote_at((1024 + 8) * slot_size + 4, 8), 1,
                        remote_off.handler());
    f.a.async_fetch_add(f.slot_a(8) + 4, counter, 1, local_off.handler());
    f.a.async_compare_swap(f.mr.at(8 * slot_size, 4), counter, 5, 6, too_short.handler());
    CHECK(remote_off.calls() + local_off.calls() + too_short.calls() == 0);
    REQUIRE(f.run_until([&] { return remote_off.ran() && local_off.ran() && too_short.ran(); }));
    CHECK(remote_off.ec() == rdma_asio::errc::misaligned_atomic);
    CHECK(remote_off.ec().message().find("8-byte aligned remote address") != std::string::npos);
    CHECK(local_off.ec() == rdma_asio::errc::misaligned_atomic);
    CHECK(too_short.ec() == rdma_asio::errc::misaligned_atomic);
    CHECK(f.get(f.slot_b(8)) == 5);
    // Nothing was posted: the QP works, and its CQ saw no completion.
    CHECK(f.cq_a.counters().completions == 0);
    f.a.async_fetch_add(f.slot_a(8), counter, 1, fine.handler());
    REQUIRE(f.run_until([&] { return fine.calls() == 1; }));
    CHECK_FALSE(fine.ec());
    CHECK(fine.value() == 5);
    CHECK(f.get(f.slot_b(8)) == 6);
}

TEST_CASE("fetch-and-add from two queue pairs on one counter loses no add",
          "[queue_pair][atomic]") {
    // a's adds run at b's end and b's at a's: two responders on one word.
    asio::io_context ioc;
    qp_pair f(ioc);
    constexpr std::uint64_t adds = 200;
    const rdma_asio::remote_buffer counter = f.mr.remote_at((1024 + 9) * slot_size, 8);
    f.put(f.slot_b(9), 0);
    std::vector<std::uint64_t> seen;
    std::size_t failed = 0;
    auto adder = [&](rdma_asio::queue_pair& qp,
                     rdma_asio::registered_buffer result) -> asio::awaitable<void> {
        for (std::uint64_t i = 0; i < adds; ++i) {
            auto [ec, before] = co_await qp.async_fetch_add(
                result, counter, 1, asio::experimental::as_tuple(asio::use_awaitable));
            if (ec)
                ++failed;
            else
                seen.push_back(before);
        }
    };
    using namespace asio::experimental::awaitable_operators;
    rdma_asio::test::run_coroutine(ioc, adder(f.a, f.slot_a(9)) && adder(f.b, f.slot_a(10)));
    CHECK(failed == 0);
    CHECK(f.get(f.slot_b(9)) == 2 * adds);
    // Each add saw a value no other add saw: 0 .. 2 * adds - 1, once each.
    std::sort(seen.begin(), seen.end());
    REQUIRE(seen.size() == 2 * adds);
    for (std::uint64_t i = 0; i < seen.size(); ++i)
        CHECK(seen[i] == i);
}

namespace {

// b's first `size` bytes, zeroed: where the inline tests' bytes go.
rdma_asio::registered_buffer zeroed_target(qp_pair& f, std::size_t size) {
    const rdma_asio::registered_buffer target = f.mr.at(1024 * slot_size, size);
    std::memset(target.data, 0, size);
    return target;
}

// `from` to `target`: an RDMA write by a, or a send by a into a receive by b.
void send_or_write(qp_pair& f, bool write, rdma_asio::registered_buffer from,
                   rdma_asio::registered_buffer target, result& received, result& sent) {
    if (write) {
        f.a.async_write(from, f.mr.remote_at(1024 * slot_size, target.size), sent.handler());
    } else {
        f.b.async_receive(target, received.handler());
        f.a.async_send(from, sent.handler());
    }
}

} // namespace

// Sends and writes up to the QP's max_inline_data go inline (IBV_SEND_INLINE: the
// bytes are copied into the work request, and the device checks no lkey) only from
// regions of the QP's own protection domain that the library registered. A buffer
// outside them must meet the device's protection check at every size, inline or
// not: it fails, and none of its bytes reach the peer. (Posted inline, each of
// these "succeeded" and sent whatever lay at the address; under AddressSanitizer
// the one past its region read past a heap block.)
TEST_CASE("a send or RDMA write from a buffer outside the QP's protection domain's regions fails "
          "with the device's protection error at every size, inline or not",
          "[queue_pair][inline]") {
    enum class kind { past_the_region, other_domain, made_up_lkey, never_registered };
    const kind k = GENERATE(kind::past_the_region, kind::other_domain, kind::made_up_lkey,
                            kind::never_registered);
    const bool write = GENERATE(false, true);
    asio::io_context ioc;
    qp_pair f(ioc);
    const std::uint32_t max_inline = max_inline_of(f.a);
    REQUIRE(max_inline >= 64);
    const std::uint32_t size = GENERATE_COPY(as<std::uint32_t>{}, 1u, max_inline, max_inline + 1);
    CAPTURE(static_cast<int>(k), write, size, max_inline);

    // Every kind of memory below holds 0xa5 bytes; the peer's memory holds zeros.
    std::vector<std::byte> small(64, std::byte{0xa5});
    rdma_asio::memory_region small_mr(f.pd, asio::buffer(small), 0);
    rdma_asio::protection_domain other_pd(f.ctx);
    std::vector<std::byte> other(2 * max_inline + 2, std::byte{0xa5});
    rdma_asio::memory_region other_mr(other_pd, asio::buffer(other), 0);
    std::vector<std::byte> unregistered(2 * max_inline + 2, std::byte{0xa5});
    rdma_asio::registered_buffer from;
    switch (k) {
    case kind::past_the_region: // right after the end of a 64-byte region, its lkey
        from = small_mr.at(small.size(), 0);
        from.size = size;
        break;
    case kind::other_domain:
        from = other_mr.at(0, size);
        break;
    case kind::made_up_lkey: // this domain's memory under a key of no region
        from = f.mr.at(0, size);
        std::memset(from.data, 0xa5, size);
        from.lkey = 0xdeadbeef;
        break;
    case kind::never_registered:
        from = rdma_asio::registered_buffer{unregistered.data(), size};
        break;
    }

    const rdma_asio::registered_buffer target = zeroed_target(f, size);
    result received, sent;
    send_or_write(f, write, from, target, received, sent);
    REQUIRE(f.run_until([&] { return sent.calls() == 1; }));
    // The device read the buffer and refused it (rxe says so with
    // IBV_WC_LOC_QP_OP_ERR, other devices with IBV_WC_LOC_PROT_ERR).
    CHECK((sent.ec() == wc_errc::local_qp_operation_error ||
           sent.ec() == wc_errc::local_protection_error));
    // Nothing left: the receive still waits, the peer's memory holds its zeros.
    ioc.run_for(100ms);
    CHECK(received.calls() == 0);
    const auto* bytes = static_cast<const unsigned char*>(target.data);
    CHECK(std::count(bytes, bytes + size, 0) == static_cast<std::ptrdiff_t>(size));
}

namespace {

// An RDMA write of the program's own bytes, as a stream posts its small writes
// (qp_operation::copy_at_post): started on the queue pair's state directly.
struct program_bytes_write final : rdma_asio::detail::qp_operation {
    program_bytes_write(const void* bytes, std::size_t n, rdma_asio::remote_buffer to)
        : qp_operation(rdma_asio::detail::work_queue::send) {
        opcode = IBV_WR_RDMA_WRITE;
        copy_at_post = true;
        sges[0] =
            ibv_sge{reinterpret_cast<std::uintptr_t>(bytes), static_cast<std::uint32_t>(n), 0};
        sge_count = 1;
        length = n;
        remote_address = to.address;
        rkey = to.rkey;
    }
    void complete(rdma_asio::detail::delivery) override {
        ++ends;
        ec = result;
    }
    void destroy() noexcept override {}

    int ends = 0;
    rdma_asio::error_code ec;
};

} // namespace

// A stream's small write goes inline straight from the caller's memory, which no
// region holds: the post copies it, the device reads nothing. Only that request
// may skip the region check, only inline, and only when it is posted in the call.
TEST_CASE("the program's own bytes go inline from memory no region holds, are read by the post "
          "alone, are refused past max_inline, and are never started when they cannot be posted "
          "at once",
          "[queue_pair][inline]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    auto impl = rdma_asio::detail::io_object_access::state(f.a);
    const std::uint32_t max_inline = max_inline_of(f.a);
    REQUIRE(max_inline >= 16);
    const rdma_asio::registered_buffer target = f.slot_b(3);
    const rdma_asio::remote_buffer to = f.mr.remote_at((1024 + 3) * slot_size, slot_size);

    std::array<char, 16> bytes{};
    std::memcpy(bytes.data(), "0123456789abcdef", bytes.size());
    program_bytes_write w(bytes.data(), bytes.size(), to);
    REQUIRE(impl->start_at_once(w));
    bytes.fill('x'); // the post took its copy
    REQUIRE(f.run_until([&] { return w.ends == 1; }));
    CHECK_FALSE(w.ec);
    CHECK(std::string(static_cast<const char*>(target.data), 16) == "0123456789abcdef");

    // One byte more than the QP carries inline: refused by the post, the device
    // never asked to read it through an lkey it does not have.
    const std::vector<char> longer(max_inline + 1, 'y');
    program_bytes_write too_long(longer.data(), longer.size(),
                                 f.mr.remote_at((1024 + 5) * slot_size, slot_size));
    REQUIRE(impl->start_at_once(too_long));
    REQUIRE(f.run_until([&] { return too_long.ends == 1; }));
    CHECK(too_long.ec == rdma_asio::detail::errno_code(EINVAL));
    const auto* untouched = static_cast<const unsigned char*>(f.slot_b(5).data);
    CHECK(std::count(untouched, untouched + slot_size, 0) ==
          static_cast<std::ptrdiff_t>(slot_size));

    // The QP still works, and a program's send from the same memory through
    // queue_pair (no region vouches) still meets the device's protection check.
    result sent, received;
    f.b.async_receive(f.slot_b(6), received.handler());
    f.a.async_send(rdma_asio::registered_buffer{bytes.data(), bytes.size(), 0}, sent.handler());
    REQUIRE(f.run_until([&] { return sent.calls() == 1; }));
    CHECK((sent.ec() == wc_errc::local_qp_operation_error ||
           sent.ec() == wc_errc::local_protection_error));

    // Closed, nothing may be posted: not started, and it never ends.
    f.a.close();
    program_bytes_write after_close(bytes.data(), bytes.size(), to);
    CHECK_FALSE(impl->start_at_once(after_close));
    ioc.poll();
    CHECK(after_close.ends == 0);
}

TEST_CASE("a send or RDMA write from the QP's own regions still arrives whole at the inline size "
          "and one byte past it",
          "[queue_pair][inline]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    const std::uint32_t max_inline = max_inline_of(f.a);
    const bool write = GENERATE(false, true);
    const std::uint32_t size = GENERATE_COPY(as<std::uint32_t>{}, 1u, max_inline, max_inline + 1);
    CAPTURE(write, size);
    // A hand-made buffer within the region, under its own key, is as good as at()'s.
    rdma_asio::registered_buffer from{f.slot_a(0).data, size, f.mr.lkey()};
    std::memset(from.data, 0x5a, size);
    const rdma_asio::registered_buffer target = zeroed_target(f, size);
    result received, sent;
    send_or_write(f, write, from, target, received, sent);
    REQUIRE(f.run_until([&] { return sent.calls() == 1 && received.calls() == (write ? 0 : 1); }));
    CHECK_FALSE(sent.ec());
    CHECK(sent.value() == size);
    if (!write) {
        CHECK_FALSE(received.ec());
        CHECK(received.value() == size);
    }
    const auto* bytes = static_cast<const unsigned char*>(target.data);
    CHECK(std::count(bytes, bytes + size, 0x5a) == static_cast<std::ptrdiff_t>(size));
}

namespace {

// What the throwing handlers below throw.
struct handler_failure {};

} // namespace

TEST_CASE("a handler that throws loses none of the completions read with it", "[queue_pair]") {
    // The demultiplexer runs the handlers of a batch of completions itself, one
    // after the other. A throw must leave the others to run later, each once.
    asio::io_context ioc;
    qp_pair f(ioc);
    constexpr std::size_t count = 16;
    std::vector<int> calls(count, 0);
    std::vector<rdma_asio::error_code> errors(count);
    for (std::size_t i = 0; i < count; ++i)
        f.a.async_write(f.slot_a(i), f.mr.remote_at((1024 + i) * slot_size, slot_size),
                        [&, i](rdma_asio::error_code ec, std::size_t) {
                            ++calls[i];
                            errors[i] = ec;
                            throw handler_failure{};
                        });
    // Every write completes before the io_context runs: the first polls read
    // several completions at once.
    std::this_thread::sleep_for(100ms);
    const int thrown = rdma_asio::test::run_catching<handler_failure>(
        ioc, [&] { return std::all_of(calls.begin(), calls.end(), [](int c) { return c > 0; }); },
        30s);
    CHECK(thrown == int(count));
    for (std::size_t i = 0; i < count; ++i) {
        CHECK(calls[i] == 1);
        CHECK_FALSE(errors[i]);
    }
    // The queue pair and its CQ go on working.
    result after;
    f.a.async_write(f.slot_a(0), f.mr.remote_at(1024 * slot_size, slot_size), after.handler());
    REQUIRE(f.run_until([&] { return after.calls() == 1; }));
    CHECK_FALSE(after.ec());
}

// A receive whose CQ's reader sleeps: the channel's wake-up reads the completion
// and runs the handler in place, inside the reactor's handler. A throw there
// called std::terminate (the dispatcher completed its waits in a noexcept loop).
TEST_CASE("a receive handler that throws inside the completion channel's wake-up comes out of "
          "run(), and the queue pair goes on receiving",
          "[queue_pair]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    int thrower_calls = 0;
    f.b.async_receive(f.slot_b(0), [&](rdma_asio::error_code, std::size_t) {
        ++thrower_calls;
        throw handler_failure{};
    });
    // The reader polls, arms and sleeps on the channel.
    ioc.run_for(100ms);
    REQUIRE(thrower_calls == 0);
    result sent;
    f.put(f.slot_a(0), 7);
    f.a.async_send(f.slot_a(0), sent.handler());
    const int thrown = rdma_asio::test::run_catching<handler_failure>(
        ioc, [&] { return thrower_calls > 0 && sent.calls() > 0; }, 30s);
    CHECK(thrower_calls == 1);
    CHECK(thrown == 1);
    CHECK(sent.calls() == 1);
    CHECK_FALSE(sent.ec());
    CHECK(f.get(f.slot_b(0)) == 7);
    // The same queue pairs carry the next message.
    result received, again;
    f.b.async_receive(f.slot_b(1), received.handler());
    f.put(f.slot_a(1), 8);
    f.a.async_send(f.slot_a(1), again.handler());
    ioc.restart();
    REQUIRE(f.run_until([&] { return received.calls() == 1 && again.calls() == 1; }));
    CHECK_FALSE(received.ec());
    CHECK(f.get(f.slot_b(1)) == 8);
}

TEST_CASE("four times the send queue's depth started at once all complete, in order",
          "[queue_pair]") {
    asio::io_context ioc;
    rdma_asio::qp_options options;
    options.send_depth = 8;
    options.receive_depth = 64;
    qp_pair f(ioc, options);
    const ibv_qp_cap caps = caps_of(f.a);
    const std::size_t count = 4 * caps.max_send_wr;
    REQUIRE(count <= 64);

    std::vector<std::size_t> order;
    std::vector<rdma_asio::error_code> errors;
    int received = 0;
    for (std::size_t i = 0; i < count; ++i)
        f.b.async_receive(f.slot_b(i), [&](rdma_asio::error_code ec, std::size_t) {
            CHECK_FALSE(ec);
            ++received;
        });
    for (std::size_t i = 0; i < count; ++i) {
        f.put(f.slot_a(i), i);
        f.a.async_send(f.slot_a(i), [&, i](rdma_asio::error_code ec, std::size_t) {
            errors.push_back(ec);
            order.push_back(i);
        });
    }
    REQUIRE(f.run_until([&] { return order.size() == count && received == int(count); }));
    for (std::size_t i = 0; i < count; ++i) {
        CHECK(order[i] == i);
        CHECK_FALSE(errors[i]);
        CHECK(f.get(f.slot_b(i)) == i);
    }
}

TEST_CASE("sends admitted together go unsignaled but the last, and every one still ends once, in "
          "order",
          "[queue_pair][unsignaled]") {
    asio::io_context ioc;
    rdma_asio::qp_options options;
    options.send_depth = 8;
    qp_pair f(ioc, options);
    const ibv_qp_cap caps = caps_of(f.a);
    const std::size_t depth = caps.max_send_wr;
    constexpr std::size_t count = 256; // RDMA writes: no receive to run out of
    std::vector<std::size_t> order;
    std::vector<rdma_asio::error_code> errors;
    for (std::size_t i = 0; i < count; ++i) {
        f.put(f.slot_a(i), i + 1);
        f.a.async_write(f.slot_a(i), f.mr.remote_at((1024 + i) * slot_size, slot_size),
                        [&, i](rdma_asio::error_code ec, std::size_t) {
                            errors.push_back(ec);
                            order.push_back(i);
                        });
    }
    REQUIRE(f.run_until([&] { return order.size() == count; }));
    for (std::size_t i = 0; i < count; ++i) {
        CHECK(order[i] == i);
        CHECK_FALSE(errors[i]);
        CHECK(f.get(f.slot_b(i)) == i + 1);
    }
    ioc.restart();
    ioc.poll();
    CHECK(order.size() == count); // none twice
    // Fewer completions than writes: those admitted together by one poll's
    // completions went unsignaled, all but the last of each batch.
    const std::uint64_t completions = f.cq_a.counters().completions;
    INFO("send depth " << depth << ", completions read " << completions);
    CHECK(completions > 0);
    CHECK(completions < count);
}

TEST_CASE("when the send after an unsignaled one fails to post, a fence still ends the unsignaled "
          "one",
          "[queue_pair][unsignaled]") {
    asio::io_context ioc;
    rdma_asio::qp_options options;
    options.send_depth = 2;
    options.max_send_sge = 1;
    options.max_inline = 0; // so that a work request holds one entry (rxe sizes it so)
    qp_pair f(ioc, options);
    const ibv_qp_cap caps = caps_of(f.a);
    const std::size_t depth = caps.max_send_wr; // rxe rounds 2 up
    REQUIRE(depth + 3 <= 64);
    REQUIRE(caps.max_send_sge == 1);
    const std::size_t n = depth + 3;
    std::vector<rdma_asio::error_code> ends(n, asio::error::fault);
    std::vector<int> calls(n, 0);
    auto record = [&](std::size_t i) {
        return [&, i](rdma_asio::error_code ec, std::size_t) {
            ends[i] = ec;
            ++calls[i];
        };
    };
    // `depth` sends posted, which wait (receiver not ready, retried for ever)
    // until the peer posts receives; three more wait for room, the last with two
    // entries, which the QP refuses (ibv_post_send: EINVAL).
    for (std::size_t i = 0; i + 1 < n; ++i)
        f.a.async_send(f.mr.at(i * slot_size, 8), record(i));
    const std::array<rdma_asio::registered_buffer, 2> two{f.mr.at((n - 1) * slot_size, 8),
                                                          f.mr.at(n * slot_size, 8)};
    f.a.async_send(two, record(n - 1));
    ioc.run_for(100ms);
    for (int c : calls)
        REQUIRE(c == 0);
    int received = 0;
    for (std::size_t i = 0; i < n; ++i)
        f.b.async_receive(f.slot_b(i), [&](rdma_asio::error_code, std::size_t) { ++received; });
    // The posted sends complete before anything is polled, so that one poll
    // reads them all and admits the three waiting together: the first two
    // unsignaled, the third failing to post.
    std::this_thread::sleep_for(300ms);
    REQUIRE(f.run_until([&] {
        for (int c : calls)
            if (c == 0)
                return false;
        return received == int(n - 1);
    }));
    for (std::size_t i = 0; i + 1 < n; ++i) {
        INFO("send " << i);
        CHECK(calls[i] == 1);
        CHECK_FALSE(ends[i]);
    }
    CHECK(calls[n - 1] == 1);
    CHECK(ends[n - 1] == asio::error::invalid_argument);
    // The posted sends' completions, then the fence's: the two admitted together
    // had none of their own (without the fence, the second would never end).
    CHECK(f.cq_a.counters().completions == depth + 1);
}

TEST_CASE("an RDMA write with a wrong rkey fails with the remote access error, and the QP "
          "with it",
          "[queue_pair]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    rdma_asio::remote_buffer wrong = f.mr.remote_at(1024 * slot_size, slot_size);
    wrong.rkey ^= 0x5a5a;
    result wrote;
    f.a.async_write(f.slot_a(0), wrong, wrote.handler());
    REQUIRE(f.run_until([&] { return wrote.calls() == 1; }));
    CHECK(wrote.ec() == wc_errc::remote_access_error);
    CHECK(wrote.ec().message().find("IBV_WC_REM_ACCESS_ERR") != std::string::npos);

    // The QP is in the error state now: later operations end with the flush error.
    result later, later_receive;
    f.a.async_send(f.slot_a(1), later.handler());
    f.a.async_receive(f.slot_a(2), later_receive.handler());
    REQUIRE(f.run_until([&] { return later.calls() == 1 && later_receive.calls() == 1; }));
    CHECK(later.ec() == wc_errc::flushed);
    CHECK(later_receive.ec() == wc_errc::flushed);
}

TEST_CASE("receives of a QP that went to the error state give the flush error", "[queue_pair]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    result posted;
    f.b.async_receive(f.slot_b(0), posted.handler());
    ioc.poll();
    // Moved to error behind the library's back: the device flushes the receive,
    // and the library learns of the error state from that completion.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    REQUIRE(ibv_modify_qp(f.b.native_handle(), &attr, IBV_QP_STATE) == 0);
    REQUIRE(f.run_until([&] { return posted.calls() == 1; }));
    CHECK(posted.ec() == wc_errc::flushed);
    CHECK(posted.value() == 0);
    CHECK(f.cq_b.counters().completions == 1); // it went through the device

    // Posted after: ends with the same error without a trip through the device
    // (rxe in Linux 6.1 does not flush a receive posted to a QP already in error).
    result later;
    f.b.async_receive(f.slot_b(1), later.handler());
    REQUIRE(f.run_until([&] { return later.calls() == 1; }));
    CHECK(later.ec() == wc_errc::flushed);
    CHECK(f.cq_b.counters().completions == 1);
}

TEST_CASE("terminal cancellation of a posted receive ends it once, after its flush",
          "[queue_pair][cancel]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    asio::cancellation_signal signal;
    result cancelled, other;
    f.b.async_receive(f.slot_b(0),
                      asio::bind_cancellation_slot(signal.slot(), cancelled.handler()));
    f.b.async_receive(f.slot_b(1), other.handler());
    ioc.poll();
    signal.emit(asio::cancellation_type::terminal);
    CHECK(cancelled.calls() == 0); // not before the device has let go of the buffer
    REQUIRE(f.run_until([&] { return cancelled.calls() == 1 && other.calls() == 1; }));
    CHECK(cancelled.ec() == asio::error::operation_aborted);
    CHECK(other.ec() == wc_errc::flushed);
    CHECK(f.cq_b.counters().completions == 2); // both flush completions were read

    result later;
    f.b.async_receive(f.slot_b(2), later.handler());
    REQUIRE(f.run_until([&] { return later.calls() == 1; }));
    CHECK(later.ec() == wc_errc::flushed);
    ioc.restart();
    ioc.run_for(100ms);
    CHECK(cancelled.calls() == 1);
    CHECK(other.calls() == 1);
}

namespace {

// The receive of a message that may come, raced against a timer, as
// docs/cancellation.md shows it: both results are seen, whichever side wins.
asio::awaitable<std::size_t> receive_or_timeout(rdma_asio::queue_pair& qp,
                                                rdma_asio::registered_buffer buffer,
                                                std::chrono::milliseconds timeout,
                                                rdma_asio::error_code& ec) {
    asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
    // snippet-begin: receive-or-timer
    auto [order, receive_ec, received, timer_ec] =
        co_await asio::experimental::make_parallel_group(
            qp.async_receive(buffer, asio::experimental::deferred),
            timer.async_wait(asio::experimental::deferred))
            .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
    // Read the receive's own result, not only the order: a message that arrived as
    // the timer fired is in `buffer` even when order[0] is the timer's side.
    ec = receive_ec; // success, or operation_aborted after the receive's flush
    co_return received;
    // snippet-end
}

} // namespace

TEST_CASE("a receive raced against a timer in a parallel group keeps its result either way",
          "[queue_pair][cancel]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    rdma_asio::test::run_coroutine(ioc, [&]() -> asio::awaitable<void> {
        // The message comes first: the receive's result, the timer cancelled.
        f.put(f.slot_a(0), 77);
        f.a.async_send(f.slot_a(0), [](rdma_asio::error_code, std::size_t) {});
        rdma_asio::error_code ec = asio::error::would_block;
        std::size_t n = co_await receive_or_timeout(f.b, f.slot_b(0), 20s, ec);
        CHECK_FALSE(ec);
        CHECK(n == slot_size);
        CHECK(f.get(f.slot_b(0)) == 77);
        // Nothing comes: the timer wins, the posted receive is cancelled (terminal,
        // as every race sends) and still reports how it ended, after its flush.
        n = co_await receive_or_timeout(f.b, f.slot_b(1), 50ms, ec);
        CHECK(ec == asio::error::operation_aborted);
        CHECK(n == 0);
    }());
}

TEST_CASE("a cancelled operation that waited for room was never posted", "[queue_pair][cancel]") {
    asio::io_context ioc;
    rdma_asio::qp_options options;
    options.send_depth = 1;
    options.receive_depth = 1;
    qp_pair f(ioc, options);
    const std::size_t depth = caps_of(f.b).max_recv_wr;

    std::vector<result> posted(depth);
    for (auto& o : posted)
        f.b.async_receive(f.slot_b(0), o.handler());
    asio::cancellation_signal signal;
    result waiting;
    f.b.async_receive(f.slot_b(1), asio::bind_cancellation_slot(signal.slot(), waiting.handler()));
    signal.emit(asio::cancellation_type::partial);
    REQUIRE(f.run_until([&] { return waiting.calls() == 1; }));
    CHECK(waiting.ec() == asio::error::operation_aborted);
    // The QP is fine: a send reaches the receives that were posted.
    result sent;
    f.a.async_send(f.slot_a(0), sent.handler());
    REQUIRE(f.run_until([&] { return sent.calls() == 1 && posted[0].calls() == 1; }));
    CHECK_FALSE(sent.ec());
    CHECK_FALSE(posted[0].ec());
}

TEST_CASE("a CQ serves either queue pairs or its owner's polls", "[queue_pair][misuse]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    std::array<ibv_wc, 4> wcs;
    result polled;
    f.cq_a.async_poll(wcs, polled.handler());
    REQUIRE(f.run_until([&] { return polled.calls() == 1; }));
    CHECK(polled.ec() == errc::completion_queue_in_use);
    CHECK(polled.ec().message().find("give the queue pairs a completion queue of their own") !=
          std::string::npos);

    rdma_asio::completion_queue mine(f.channel, 16);
    result mine_polled;
    mine.async_poll(wcs, mine_polled.handler());
    mine.cancel();
    REQUIRE(f.run_until([&] { return mine_polled.calls() == 1; }));
    rdma_asio::queue_pair qp(ioc.get_executor());
    rdma_asio::error_code ec;
    qp.open(f.pd, mine, mine, {}, ec);
    CHECK(ec == errc::completion_queue_in_use);
    CHECK_FALSE(qp.is_open());
}

// Every operation of a queue pair and of a CQ posts, arms or claims only as it is
// launched: made with deferred and dropped unlaunched, none leaves a trace. Were
// the dropped receive posted, the message below would land in its buffer and the
// real receive would never end; were a write or an atomic posted, the peer's word
// would change; were a poll or a wait of the CQ's owner started, the CQ would be
// claimed and refuse queue pairs (completion_queue_in_use).
TEST_CASE("queue pair and CQ operations made with deferred and never launched change nothing",
          "[queue_pair][deferred]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    const auto deferred = asio::experimental::deferred;
    const rdma_asio::remote_buffer word = f.mr.remote_at((1024 + 9) * slot_size, 8);
    f.put(f.slot_b(9), 40);
    f.put(f.slot_a(1), 1111);
    rdma_asio::completion_queue fresh(f.channel, 16);
    std::array<ibv_wc, 4> wcs;
    {
        auto receive = f.b.async_receive(f.slot_b(0), deferred);
        auto send = f.a.async_send(f.slot_a(2), deferred);
        auto send_imm = f.a.async_send(f.slot_a(2), rdma_asio::immediate_data{5}, deferred);
        auto write = f.a.async_write(f.slot_a(1), word, deferred);
        auto read = f.a.async_read(f.slot_a(3), word, deferred);
        auto add = f.a.async_fetch_add(f.slot_a(4), word, 2, deferred);
        auto swap = f.a.async_compare_swap(f.slot_a(5), word, 40, 7, deferred);
        auto error = f.a.async_wait_error(deferred);
        auto poll = fresh.async_poll(wcs, deferred);
        auto wait = fresh.async_wait(deferred);
    }
    f.put(f.slot_a(6), 77);
    result got, sent;
    f.b.async_receive(f.slot_b(1), got.handler());
    f.a.async_send(f.slot_a(6), sent.handler());
    REQUIRE(f.run_until([&] { return got.calls() == 1 && sent.calls() == 1; }));
    CHECK_FALSE(sent.ec());
    CHECK_FALSE(got.ec());
    CHECK(f.get(f.slot_b(1)) == 77);
    CHECK(f.get(f.slot_b(0)) == 0);  // the dropped receive's buffer
    CHECK(f.get(f.slot_b(9)) == 40); // no write, no atomic
    CHECK(f.get(f.slot_a(3)) == 0);  // no read
    rdma_asio::queue_pair on_fresh(ioc.get_executor());
    rdma_asio::error_code ec;
    on_fresh.open(f.pd, fresh, fresh, {}, ec);
    CHECK_FALSE(ec); // the CQ was never claimed by its owner's poll or wait
}

// Before, the queue pair did not hold its protection domain: with the
// protection_domain object and its last memory region gone first,
// ibv_dealloc_pd(3) failed with EBUSY, unreported, and the PD stayed.
TEST_CASE("a queue pair keeps its protection domain until its QP is destroyed",
          "[queue_pair][close]") {
    asio::io_context ioc;
    rdma_asio::context ctx(test_device_name());
    rdma_asio::completion_channel channel(ioc.get_executor(), ctx);
    rdma_asio::completion_queue cq(channel, 16);
    const int pds_before = rdma_asio::test::kernel_pds_of_this_process();
    std::weak_ptr<ibv_pd> pd_left;
    rdma_asio::queue_pair qp(ioc.get_executor());
    {
        rdma_asio::protection_domain pd(ctx);
        pd_left = pd.share();
        std::vector<std::byte> memory(64);
        rdma_asio::memory_region mr(pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE);
        qp.open(pd, cq, cq);
        CHECK(rdma_asio::test::kernel_pds_of_this_process() == pds_before + 1);
    } // the protection_domain object and its only region go first
    CHECK_FALSE(pd_left.expired());
    CHECK(rdma_asio::test::kernel_pds_of_this_process() == pds_before + 1);
    qp.close();
    CHECK(pd_left.expired());
    CHECK(rdma_asio::test::kernel_pds_of_this_process() == pds_before); // deallocated, not refused
}

TEST_CASE("closing a queue pair with operations outstanding ends each once",
          "[queue_pair][close]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    std::vector<result> receives(8);
    for (std::size_t i = 0; i < receives.size(); ++i)
        f.b.async_receive(f.slot_b(i), receives[i].handler());
    ioc.poll();
    f.b.close();
    result after;
    f.b.async_receive(f.slot_b(0), after.handler());
    REQUIRE(f.run_until([&] {
        for (auto& r : receives)
            if (r.calls() == 0)
                return false;
        return after.calls() == 1;
    }));
    for (auto& r : receives) {
        CHECK(r.calls() == 1);
        CHECK(r.ec() == asio::error::operation_aborted);
    }
    CHECK(after.ec() == asio::error::bad_descriptor);
    // Nothing keeps the io_context busy afterwards: run_for() returns because it ran
    // out of work, not at its deadline. (The CQs' cancelled reactor waits may still
    // complete in it: on io_uring a cancellation completes when the kernel says so,
    // on epoll at once.) No operation ends a second time.
    ioc.restart();
    ioc.run_for(5s);
    CHECK(ioc.stopped());
    for (auto& r : receives)
        CHECK(r.calls() == 1);
    CHECK(after.calls() == 1);
}

// A queue_pair posts RC work requests: a UD QP taken as one had its first send
// posted with RDMA fields and no address handle (the provider read a null one and
// the process died). It is refused, and its CQ stays free for a queue pair that
// may use it.
TEST_CASE("queue_pair::assign refuses a QP that is not reliable connected", "[queue_pair]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    rdma_asio::completion_queue cq(f.channel, 16);
    auto ud = rdma_asio::test::make_ud_qp(f.pd.native_handle(), cq.native_handle());
    rdma_asio::queue_pair qp(ioc.get_executor());
    rdma_asio::error_code ec;
    qp.assign(ud.get(), cq, cq, ec);
    CHECK(ec == asio::error::invalid_argument);
    CHECK_FALSE(qp.is_open());
    try {
        qp.assign(ud.get(), cq, cq);
        FAIL("assign of a UD QP did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::invalid_argument);
        CHECK(std::string(e.what()).find("rdma_asio::queue_pair::assign") != std::string::npos);
    }
    // An operation on the refused object ends as on any closed one, with no post.
    result sent;
    qp.async_send(f.slot_a(0), sent.handler());
    REQUIRE(f.run_until([&] { return sent.calls() == 1; }));
    CHECK(sent.ec() == asio::error::bad_descriptor);
    // The CQ was not claimed: an RC QP on it is taken.
    auto rc =
        rdma_asio::test::make_rc_qp(f.pd.native_handle(), cq.native_handle(), cq.native_handle());
    qp.assign(rc.get(), cq, cq, ec);
    CHECK_FALSE(ec);
    CHECK(qp.is_open());
    qp.close();
}

TEST_CASE("a borrowed queue pair closed with receives outstanding, whose CQ is closed before "
          "their flush, ends each once and is freed",
          "[queue_pair][close]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    std::optional<rdma_asio::completion_queue> cq(std::in_place, f.channel, 16);
    auto raw =
        rdma_asio::test::make_rc_qp(f.pd.native_handle(), cq->native_handle(), cq->native_handle());
    rdma_asio::test::connect_rc(f.ctx.native_handle(), raw.get(), f.a.native_handle()->qp_num);
    rdma_asio::queue_pair qp(ioc.get_executor());
    qp.assign(raw.get(), *cq, *cq);
    const std::weak_ptr<rdma_asio::detail::queue_pair_impl> state =
        rdma_asio::detail::io_object_access::state(qp);
    std::vector<result> receives(4);
    for (std::size_t i = 0; i < receives.size(); ++i)
        qp.async_receive(f.slot_b(i), receives[i].handler());
    ioc.poll();
    // close() moves the borrowed QP to the error state; the CQ object goes before
    // the flush completions are read (ibv_destroy_cq fails with EBUSY while the QP
    // exists, so the CQ is kept, closed), which ends the receives without them.
    qp.close();
    cq.reset();
    REQUIRE(f.run_until([&] {
        for (auto& r : receives)
            if (r.calls() == 0)
                return false;
        return true;
    }));
    for (auto& r : receives) {
        CHECK(r.calls() == 1);
        CHECK(r.ec() == asio::error::bad_descriptor);
    }
    ioc.restart();
    CHECK(ioc.run_for(200ms) == 0);
    // Nothing holds the closed queue pair's state any more.
    CHECK(state.expired());
}

TEST_CASE("a CQ overrun reported by the device ends its queue pair's operations at once, "
          "with the overrun",
          "[queue_pair][events]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    rdma_asio::async_event_stream events(ioc, f.ctx);
    // A CQ of one entry under four RDMA writes, with the io_context not running:
    // rxe keeps the completions it has room for (the library's first poll, at the
    // start, may already take one) and raises CQ_ERR for each one it loses.
    rdma_asio::completion_queue small(f.channel, 1);
    rdma_asio::completion_queue peer_cq(f.channel, 16);
    rdma_asio::qp_options options;
    options.send_depth = 4;
    rdma_asio::queue_pair qp(f.pd, small, small, options);
    rdma_asio::queue_pair peer(f.pd, peer_cq, peer_cq);
    rdma_asio::test::connect_rc(f.ctx.native_handle(), qp.native_handle(),
                                peer.native_handle()->qp_num);
    rdma_asio::test::connect_rc(f.ctx.native_handle(), peer.native_handle(),
                                qp.native_handle()->qp_num);
    qp.watch_errors(events);
    // The user's own loop over the device's events: it still gets them.
    const rdma_asio::test::event_type_log log(events);
    const auto& seen = log.types();
    std::vector<result> writes(4);
    for (std::size_t i = 0; i < writes.size(); ++i)
        qp.async_write(f.slot_a(i), f.mr.remote_at((1024 + i) * slot_size, slot_size),
                       writes[i].handler());
    std::this_thread::sleep_for(300ms); // the completions land; the CQ overruns
    REQUIRE(f.run_until([&] {
        for (auto& w : writes)
            if (w.calls() == 0)
                return false;
        return true;
    }));
    ioc.restart();
    ioc.run_for(200ms); // the rest of the CQ_ERR events, if any
    int overrun = 0;
    for (auto& w : writes) {
        CHECK(w.calls() == 1);
        CAPTURE(w.ec().message());
        CHECK((!w.ec() || w.ec() == errc::completion_queue_overrun));
        overrun += w.ec() == errc::completion_queue_overrun ? 1 : 0;
    }
    // One CQ_ERR per lost completion: each write whose completion was lost ended
    // with the overrun (without watch_errors it would wait for ever).
    const auto lost = std::count(seen.begin(), seen.end(), rdma_asio::event_type::cq_err);
    CAPTURE(lost, overrun);
    CHECK(lost >= 1);
    CHECK(overrun >= lost);
    result later;
    qp.async_send(f.slot_a(0), later.handler());
    REQUIRE(f.run_until([&] { return later.calls() == 1; }));
    CHECK(later.ec() == errc::completion_queue_overrun);
    events.cancel();
    qp.close();
    ioc.restart();
    ioc.run_for(100ms);
}

TEST_CASE("an operation's memory comes from its handler's associated allocator", "[queue_pair]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    rdma_asio::test::allocation_count count;
    result received;
    f.b.async_receive(
        f.slot_b(0),
        asio::bind_allocator(rdma_asio::test::counting_allocator<void>(count), received.handler()));
    // Pending: the operation's state is held through the allocator.
    CHECK(count.allocations == 1);
    CHECK(count.bytes_held > 0);
    result sent;
    f.put(f.slot_a(0), 7);
    f.a.async_send(f.slot_a(0), sent.handler());
    REQUIRE(f.run_until([&] { return received.calls() == 1 && sent.calls() == 1; }));
    CHECK_FALSE(received.ec());
    CHECK(count.bytes_held == 0); // given back before the handler ran
}

TEST_CASE("100 000 messages through per-operation awaits on two threads, none lost, "
          "duplicated or misrouted",
          "[queue_pair][stress]") {
    asio::io_context ioc(2);
    qp_pair f(ioc);
    constexpr std::uint64_t total = 100000;
    constexpr std::size_t senders = 32, receivers = 64;
    std::atomic<std::uint64_t> received{0}, sent{0}, bad{0}, errors{0};
    std::atomic<int> finished{0};
    std::vector<std::atomic<std::uint8_t>> seen(total);

    // Each receiver coroutine owns a slot: it awaits a message there, checks its
    // sequence number, and awaits the next, until all have arrived.
    auto receiver = [&](std::size_t slot) -> asio::awaitable<void> {
        while (received.load() < total) {
            std::size_t n = co_await f.b.async_receive(f.slot_b(slot), asio::use_awaitable);
            const std::uint64_t seq = f.get(f.slot_b(slot));
            if (n != slot_size || seq >= total || seen[seq].fetch_add(1) != 0)
                ++bad;
            ++received;
        }
    };
    // Each sender coroutine sends the sequence numbers first, first + senders, ...
    auto sender = [&](std::size_t slot) -> asio::awaitable<void> {
        for (std::uint64_t seq = slot; seq < total; seq += senders) {
            f.put(f.slot_a(slot), seq);
            std::size_t n = co_await f.a.async_send(f.slot_a(slot), asio::use_awaitable);
            if (n != slot_size)
                ++bad;
            ++sent;
        }
    };
    auto done = [&](std::exception_ptr e) {
        if (e)
            ++errors;
        ++finished;
    };
    for (std::size_t s = 0; s < receivers; ++s)
        asio::co_spawn(ioc, receiver(s), done);
    for (std::size_t s = 0; s < senders; ++s)
        asio::co_spawn(ioc, sender(s), done);

    const auto deadline = std::chrono::steady_clock::now() + 240s;
    auto work = [&] {
        while ((received < total || sent < total) && errors == 0 &&
               std::chrono::steady_clock::now() < deadline)
            ioc.run_one_for(20ms);
    };
    std::thread second(work);
    work();
    second.join();
    CHECK(errors == 0);
    CHECK(bad == 0);
    CHECK(sent == total);
    CHECK(received == total);
    std::uint64_t missing = 0;
    for (auto& s : seen)
        if (s.load() != 1)
            ++missing;
    CHECK(missing == 0);
    // The receivers still waiting (one per slot beyond the last message) end when
    // the queue pair closes; bounded.
    f.b.close();
    const auto closing = std::chrono::steady_clock::now() + 30s;
    while (finished < int(senders + receivers) && std::chrono::steady_clock::now() < closing) {
        ioc.restart();
        ioc.run_one_for(20ms);
    }
    CHECK(finished == int(senders + receivers));
}

TEST_CASE("queue_pair operations complete through every completion token", "[queue_pair][tokens]") {
    asio::io_context ioc;
    qp_pair f(ioc);
    using rdma_asio::test::each_token;
    auto got = each_token<std::size_t>::complete(
        ioc,
        [&](auto&& token) {
            return f.a.async_send(f.slot_a(0), std::forward<decltype(token)>(token));
        },
        [&] { f.b.async_receive(f.slot_b(0), [](rdma_asio::error_code, std::size_t) {}); });
    REQUIRE(got.calls() == 1);
    CHECK_FALSE(got.ec());
    CHECK(got.value() == slot_size);
}

} // namespace queue_pair_rxe_test
