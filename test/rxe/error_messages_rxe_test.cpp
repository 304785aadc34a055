// The mistakes users make most with queue pairs and memory regions, made on rxe:
// each gets the error docs/errors.md's table gives it, and a message that says
// what to do. One test per row of that table (the rows about rdma_cm, devices and
// completion queues are checked where their other tests are: cm_rxe_test,
// context_rxe_test, queue_pair_rxe_test).
#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/queue_pair.hpp"
#include "rdma_asio/shared_receive_queue.hpp"
#include "rdma_asio/testing/loopback.hpp"
#include "rdma_asio/testing/run.hpp"
#include "rdma_asio/wc_error.hpp"

#include <catch2/catch.hpp>

#include "recorder.hpp"
#include "test_device.hpp"

#include "asio_alias.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace error_messages_rxe_test {

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using rdma_asio::errc;
using rdma_asio::wc_errc;
using rdma_asio::test::test_device_name;

namespace {

using result = rdma_asio::test::recorder<std::size_t>;
using atomic_result = rdma_asio::test::recorder<std::uint64_t>;

constexpr int all_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// Two connected queue pairs on rxe0 (the public test helper, as a user's test
// would make them), memory both may use for anything, and a second buffer for
// regions registered with fewer rights.
struct pair_fixture {
    explicit pair_fixture(rdma_asio::testing::loopback_options options = {})
        : ctx(test_device_name()), channel(ioc.get_executor(), ctx), pair(ctx, channel, options),
          memory(4096), mr(pair.pd(), asio::buffer(memory), all_access), other(4096) {}

    template <class Done>
    bool run_until(Done done) {
        return rdma_asio::testing::run_until(ioc, done, 10s);
    }
    // A region over `other` with only `access`.
    rdma_asio::memory_region limited(int access) {
        return rdma_asio::memory_region(pair.pd(), asio::buffer(other), access);
    }

    asio::io_context ioc;
    rdma_asio::context ctx;
    rdma_asio::completion_channel channel;
    rdma_asio::testing::loopback_pair pair;
    std::vector<std::byte> memory;
    rdma_asio::memory_region mr;
    std::vector<std::byte> other;
};

std::string message_of(const result& r) {
    return r.ec().message();
}

} // namespace

TEST_CASE("a receive buffer shorter than the message: both sides are told", "[errors]") {
    pair_fixture f;
    result received, sent;
    f.pair.b().async_receive(f.mr.at(0, 8), received.handler());
    f.pair.a().async_send(f.mr.at(1024, 64), sent.handler());
    REQUIRE(f.run_until([&] { return received.calls() == 1 && sent.calls() == 1; }));
    // rxe says IBV_WC_LOC_QP_OP_ERR, hardware IBV_WC_LOC_LEN_ERR.
    CHECK((received.ec() == wc_errc::local_qp_operation_error ||
           received.ec() == wc_errc::local_length_error));
    CHECK_THAT(message_of(received), Contains("longer than the"));
    CHECK((sent.ec() == wc_errc::remote_operation_error ||
           sent.ec() == wc_errc::remote_invalid_request));
    CHECK_THAT(message_of(sent), Contains("receive buffer"));
}

TEST_CASE("a receive into a region without local write names the flag", "[errors]") {
    pair_fixture f;
    rdma_asio::memory_region read_only = f.limited(0);
    result received, sent;
    f.pair.b().async_receive(read_only.at(0, 64), received.handler());
    f.pair.a().async_send(f.mr.at(0, 8), sent.handler());
    REQUIRE(f.run_until([&] { return received.calls() == 1 && sent.calls() == 1; }));
    CHECK((received.ec() == wc_errc::local_qp_operation_error ||
           received.ec() == wc_errc::local_protection_error));
    CHECK_THAT(message_of(received), Contains("IBV_ACCESS_LOCAL_WRITE"));
    CHECK(sent.ec() == wc_errc::remote_operation_error);
    CHECK_THAT(message_of(sent), Contains("IBV_ACCESS_LOCAL_WRITE"));
}

TEST_CASE("an RDMA write into a region without remote write names the flag", "[errors]") {
    pair_fixture f;
    rdma_asio::memory_region local_only = f.limited(IBV_ACCESS_LOCAL_WRITE);
    result written;
    f.pair.a().async_write(f.mr.at(0, 8), local_only.remote_at(0, 8), written.handler());
    REQUIRE(f.run_until([&] { return written.calls() == 1; }));
    CHECK(written.ec() == wc_errc::remote_access_error);
    CHECK_THAT(message_of(written), Contains("an RDMA write needs IBV_ACCESS_REMOTE_WRITE"));
}

TEST_CASE("an RDMA read of a region without remote read names the flag", "[errors]") {
    pair_fixture f;
    rdma_asio::memory_region local_only = f.limited(IBV_ACCESS_LOCAL_WRITE);
    result read;
    f.pair.a().async_read(f.mr.at(0, 8), local_only.remote_at(0, 8), read.handler());
    REQUIRE(f.run_until([&] { return read.calls() == 1; }));
    CHECK(read.ec() == wc_errc::remote_access_error);
    CHECK_THAT(message_of(read), Contains("a read IBV_ACCESS_REMOTE_READ"));
}

TEST_CASE("an atomic on a region without remote atomic names the flag", "[errors]") {
    pair_fixture f;
    rdma_asio::memory_region no_atomics =
        f.limited(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    atomic_result added;
    f.pair.a().async_fetch_add(f.mr.at(0, 8), no_atomics.remote_at(0, 8), 1, added.handler());
    REQUIRE(f.run_until([&] { return added.calls() == 1; }));
    CHECK(added.ec() == wc_errc::remote_access_error);
    CHECK_THAT(added.ec().message(), Contains("an atomic IBV_ACCESS_REMOTE_ATOMIC"));
}

TEST_CASE("an RDMA write past the end of the peer's region says the range must be the "
          "region's",
          "[errors]") {
    pair_fixture f;
    rdma_asio::remote_buffer past = f.mr.remote_at(f.memory.size() - 8, 8);
    past.size = 64; // 56 bytes beyond the region
    result written;
    f.pair.a().async_write(f.mr.at(0, 64), past, written.handler());
    REQUIRE(f.run_until([&] { return written.calls() == 1; }));
    CHECK(written.ec() == wc_errc::remote_access_error);
    CHECK_THAT(message_of(written), Contains("the rkey and the whole range must be the region's"));
}

TEST_CASE("an RDMA read into a local region without local write names the flag", "[errors]") {
    pair_fixture f;
    rdma_asio::memory_region read_only = f.limited(0);
    result read;
    f.pair.a().async_read(read_only.at(0, 8), f.mr.remote_at(0, 8), read.handler());
    REQUIRE(f.run_until([&] { return read.calls() == 1; }));
    CHECK(read.ec() == wc_errc::local_protection_error);
    CHECK_THAT(message_of(read), Contains("IBV_ACCESS_LOCAL_WRITE"));
}

TEST_CASE("a send from memory in no region of the protection domain says so", "[errors]") {
    pair_fixture f;
    std::vector<std::byte> unregistered(256);
    result received, sent;
    f.pair.b().async_receive(f.mr.at(0, 256), received.handler());
    f.pair.a().async_send(rdma_asio::registered_buffer{unregistered.data(), 256, f.mr.lkey()},
                          sent.handler());
    REQUIRE(f.run_until([&] { return sent.calls() == 1; }));
    CHECK((sent.ec() == wc_errc::local_qp_operation_error ||
           sent.ec() == wc_errc::local_protection_error));
    CHECK_THAT(message_of(sent), Contains("outside the memory regions of the queue pair's "
                                          "protection domain"));
}

TEST_CASE("registering remote write without local write says which flag is missing", "[errors]") {
    pair_fixture f;
    for (int access : {int(IBV_ACCESS_REMOTE_WRITE), int(IBV_ACCESS_REMOTE_ATOMIC)}) {
        try {
            f.limited(access);
            FAIL("ibv_reg_mr accepted remote access without local write");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == asio::error::invalid_argument);
            CHECK_THAT(e.what(), Contains("rdma_asio::memory_region: ibv_reg_mr of 4096 bytes"));
            CHECK_THAT(e.what(), Contains("need IBV_ACCESS_LOCAL_WRITE too"));
        }
    }
}

TEST_CASE("a part of a region past its end gives the offset, the size and the region's length",
          "[errors]") {
    pair_fixture f;
    try {
        (void)f.mr.at(4090, 64);
        FAIL("memory_region::at accepted a range past the end");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::invalid_argument);
        CHECK_THAT(e.what(), Contains("rdma_asio::memory_region::at: 64 bytes at offset 4090 do "
                                      "not fit in the region's 4096 bytes"));
    }
}

TEST_CASE("a send or receive on a queue pair that is not connected says so", "[errors]") {
    pair_fixture f;
    rdma_asio::completion_queue cq(f.channel, 16);
    rdma_asio::queue_pair fresh(f.pair.pd(), cq, cq); // made in the RESET state
    result reset_send, reset_receive;
    fresh.async_send(f.mr.at(0, 8), reset_send.handler());
    fresh.async_receive(f.mr.at(64, 8), reset_receive.handler());
    REQUIRE(f.run_until([&] { return reset_send.calls() == 1 && reset_receive.calls() == 1; }));
    CHECK(reset_send.ec() == errc::queue_pair_not_connected);
    CHECK(reset_send.ec() == std::errc::not_connected);
    CHECK_THAT(message_of(reset_send), Contains("not connected yet"));
    CHECK(reset_receive.ec() == errc::queue_pair_not_connected);

    // In INIT a receive may be posted, a send not yet.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
    REQUIRE(ibv_modify_qp(fresh.native_handle(), &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ==
            0);
    result init_send;
    fresh.async_send(f.mr.at(0, 8), init_send.handler());
    REQUIRE(f.run_until([&] { return init_send.calls() == 1; }));
    CHECK(init_send.ec() == errc::queue_pair_not_connected);
}

TEST_CASE("a receive on a queue pair made on a shared receive queue names the shared queue",
          "[errors]") {
    pair_fixture f;
    rdma_asio::completion_queue cq(f.channel, 16);
    rdma_asio::shared_receive_queue srq(f.ioc.get_executor(), f.pair.pd());
    rdma_asio::queue_pair on_srq(f.pair.pd(), cq, cq, srq);
    result received;
    on_srq.async_receive(f.mr.at(0, 8), received.handler());
    REQUIRE(f.run_until([&] { return received.calls() == 1; }));
    CHECK(received.ec() == errc::receive_on_shared_queue);
    CHECK(received.ec() == std::errc::operation_not_supported);
    CHECK_THAT(message_of(received), Contains("call async_receive on the shared_receive_queue"));
}

TEST_CASE("a send whose peer posts no receive fails after the RNR retries, or says why it waits",
          "[errors]") {
    SECTION("rnr_retry below 7: the send fails and says why") {
        rdma_asio::testing::loopback_options options;
        options.rnr_retry = 1;
        pair_fixture f(options);
        result sent;
        f.pair.a().async_send(f.mr.at(0, 8), sent.handler());
        REQUIRE(f.run_until([&] { return sent.calls() == 1; }));
        CHECK(sent.ec() == wc_errc::rnr_retry_exceeded);
        CHECK_THAT(message_of(sent), Contains("no receive posted"));
    }
    SECTION("rnr_retry 7, the default: the deadline's message names the likely cause") {
        pair_fixture f;
        try {
            rdma_asio::testing::run_coroutine(
                f.ioc,
                [&]() -> asio::awaitable<void> {
                    co_await f.pair.a().async_send(f.mr.at(0, 8), asio::use_awaitable);
                }(),
                300ms);
            FAIL("the send completed without a receive");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == asio::error::timed_out);
            CHECK_THAT(e.what(), Contains("did not finish within 300 ms"));
            CHECK_THAT(e.what(), Contains("a send whose peer posts no receive waits for ever at "
                                          "rnr_retry 7"));
        }
        f.pair.a().close(); // ends the send, which the io_context still holds
        f.ioc.run_for(100ms);
    }
    SECTION("an rnr_retry above 7 is refused by name") {
        rdma_asio::testing::loopback_options options;
        options.rnr_retry = 8;
        try {
            pair_fixture f(options);
            FAIL("rnr_retry 8 was accepted");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == asio::error::invalid_argument);
            CHECK_THAT(e.what(), Contains("rnr_retry must be 0 to 7"));
        }
    }
}

TEST_CASE("operations after one that failed are flushed, and the message says why", "[errors]") {
    pair_fixture f;
    rdma_asio::memory_region local_only = f.limited(IBV_ACCESS_LOCAL_WRITE);
    result bad, after;
    f.pair.a().async_write(f.mr.at(0, 8), local_only.remote_at(0, 8), bad.handler());
    REQUIRE(f.run_until([&] { return bad.calls() == 1; }));
    f.pair.a().async_write(f.mr.at(0, 8), f.mr.remote_at(64, 8), after.handler());
    REQUIRE(f.run_until([&] { return after.calls() == 1; }));
    CHECK(bad.ec() == wc_errc::remote_access_error);
    CHECK(after.ec() == wc_errc::flushed);
    CHECK_THAT(message_of(after), Contains("an earlier one failed"));
}

TEST_CASE("a send on a closed queue pair gives Asio's bad_descriptor, as a closed socket does",
          "[errors]") {
    pair_fixture f;
    f.pair.a().close();
    result sent;
    f.pair.a().async_send(f.mr.at(0, 8), sent.handler());
    REQUIRE(f.run_until([&] { return sent.calls() == 1; }));
    CHECK(sent.ec() == asio::error::bad_descriptor);
}

} // namespace error_messages_rxe_test
