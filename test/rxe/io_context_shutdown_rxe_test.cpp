// Destroying the io_context while coroutines wait in rdma_asio operations frees
// what they own, as it does for Asio's own operations.
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/queue_pair.hpp"
#include "rdma_asio/shared_receive_queue.hpp"
#include "rdma_asio/testing/loopback.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"

#include "asio_alias.hpp"

#include <arpa/inet.h>
#include <dirent.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

namespace io_context_shutdown_rxe_test {

using namespace std::chrono_literals;
using rdma_asio::test::test_device_name;

namespace {

int open_fds() {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d) != nullptr)
            ++n;
        ::closedir(d);
    }
    return n;
}

// Counts the coroutines that have started; sets its flag when the coroutine frame
// that owns it is destroyed.
struct frame_guard {
    int* started;
    bool* destroyed;
    frame_guard(int& s, bool& d) : started(&s), destroyed(&d) { ++*started; }
    ~frame_guard() { *destroyed = true; }
};

struct device_objects {
    rdma_asio::context ctx{test_device_name()};
    rdma_asio::async_event_stream stream;
    rdma_asio::completion_channel channel;
    rdma_asio::completion_queue cq;
    rdma_asio::cm_event_channel cm_channel;
    rdma_asio::cm_id listener;

    explicit device_objects(asio::io_context& ioc)
        : stream(ioc, ctx), channel(ioc, ctx), cq(channel, 8), cm_channel(ioc),
          listener(cm_channel) {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
        listener.bind(reinterpret_cast<const sockaddr*>(&addr));
        listener.listen();
    }
};

asio::awaitable<void> wait_on_cq(std::shared_ptr<device_objects> objects, int& started,
                                 bool& destroyed) {
    frame_guard guard(started, destroyed);
    std::array<ibv_wc, 4> wcs;
    co_await objects->cq.async_poll(wcs, asio::use_awaitable);
}

asio::awaitable<void> wait_on_stream(std::shared_ptr<device_objects> objects, int& started,
                                     bool& destroyed) {
    frame_guard guard(started, destroyed);
    co_await objects->stream.async_next(asio::use_awaitable);
}

asio::awaitable<void> wait_for_request(std::shared_ptr<device_objects> objects, int& started,
                                       bool& destroyed) {
    frame_guard guard(started, destroyed);
    co_await objects->listener.async_get_request(asio::use_awaitable);
}

// A connected loopback pair and registered memory, owned by whoever waits on them.
struct pair_objects {
    rdma_asio::context ctx{test_device_name()};
    rdma_asio::completion_channel channel;
    rdma_asio::testing::loopback_pair pair;
    std::vector<std::byte> memory = std::vector<std::byte>(4096);
    rdma_asio::memory_region mr;

    pair_objects(asio::io_context& ioc, std::uint32_t depth)
        : channel(ioc, ctx), pair(ctx, channel, {.depth = depth}),
          mr(pair.pd(), asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE) {}

    std::size_t waiting_sends() {
        return rdma_asio::detail::io_object_access::state(pair.a())->waiting(
            rdma_asio::detail::work_queue::send);
    }
};

// A receive that nothing will ever satisfy: posted, its work request outstanding.
asio::awaitable<void> receive_forever(std::shared_ptr<pair_objects> objects, int& started,
                                      bool& destroyed) {
    frame_guard guard(started, destroyed);
    co_await objects->pair.b().async_receive(objects->mr.at(0, 64), asio::use_awaitable);
}

// Shared by handlers: counts its own destruction, once the last of them is gone.
struct handler_guard {
    explicit handler_guard(int& destroyed) : destroyed_(&destroyed) {}
    handler_guard(const handler_guard&) = delete;
    handler_guard& operator=(const handler_guard&) = delete;
    ~handler_guard() { ++*destroyed_; }

private:
    int* destroyed_;
};

} // namespace

TEST_CASE("destroying the io_context frees coroutines waiting in rdma_asio operations",
          "[completion_queue][async_event_stream][cm_id][shutdown]") {
    {
        // librdmacm opens the device once per process and keeps it: do that first.
        asio::io_context warm_up;
        device_objects once(warm_up);
    }
    const int fds_before = open_fds();
    std::weak_ptr<device_objects> objects_left;
    bool cq_frame = false, stream_frame = false, cm_frame = false;
    {
        asio::io_context ioc;
        auto objects = std::make_shared<device_objects>(ioc);
        objects_left = objects;
        int started = 0;
        asio::co_spawn(ioc, wait_on_cq(objects, started, cq_frame), asio::detached);
        asio::co_spawn(ioc, wait_on_stream(objects, started, stream_frame), asio::detached);
        asio::co_spawn(ioc, wait_for_request(std::move(objects), started, cm_frame),
                       asio::detached);
        // Each coroutine starts its wait in the step that counts it. On a busy
        // emulated guest that can take longer than any fixed pause.
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (started < 3 && std::chrono::steady_clock::now() < deadline)
            ioc.run_for(20ms);
        REQUIRE(started == 3);
        ioc.run_for(100ms);
        REQUIRE_FALSE(objects_left.expired()); // all three wait
        REQUIRE(open_fds() > fds_before);
    }
    CHECK(cq_frame);
    CHECK(stream_frame);
    CHECK(cm_frame);
    CHECK(objects_left.expired());
    CHECK(open_fds() == fds_before);
}

} // namespace io_context_shutdown_rxe_test

namespace io_context_shutdown_rxe_test {

// A coroutine awaiting a receive that is posted, and callbacks whose sends wait for
// room behind one that is posted (the peer never receives it: RNR retries without
// end): each owns the loopback pair it waits on. Before, the operations were held
// only by the queue pair's bookkeeping, and the frame, the handlers and the whole
// pair (QPs, CQs, PD, device) stayed.
TEST_CASE("destroying the io_context frees what queue_pair operations' handlers own",
          "[queue_pair][shutdown]") {
    {
        asio::io_context warm_up;
        pair_objects once(warm_up, 1);
    }
    const int fds_before = open_fds();
    std::weak_ptr<pair_objects> receiver_left, sender_left;
    bool receive_frame = false;
    int guards_destroyed = 0, handlers_invoked = 0;
    {
        asio::io_context ioc;
        auto receiver = std::make_shared<pair_objects>(ioc, 4);
        auto sender = std::make_shared<pair_objects>(ioc, 1);
        receiver_left = receiver;
        sender_left = sender;
        int started = 0;
        asio::co_spawn(ioc, receive_forever(std::move(receiver), started, receive_frame),
                       asio::detached);
        auto guard = std::make_shared<handler_guard>(guards_destroyed);
        for (std::size_t i = 0; i < 3; ++i)
            sender->pair.a().async_send(
                sender->mr.at(64 * i, 64),
                [sender, guard, &handlers_invoked](rdma_asio::error_code, std::size_t) {
                    ++handlers_invoked;
                });
        // And a wait with no work request, for the queue pair to leave service.
        sender->pair.a().async_wait_error(
            [sender, guard, &handlers_invoked](rdma_asio::error_code) { ++handlers_invoked; });
        guard.reset();
        const auto deadline = std::chrono::steady_clock::now() + 20s;
        while (started < 1 && std::chrono::steady_clock::now() < deadline)
            ioc.run_for(20ms);
        REQUIRE(started == 1);
        ioc.run_for(100ms);
        // One send posted, two waiting for room; the receive posted.
        REQUIRE(sender->waiting_sends() == 2);
        sender.reset();
        REQUIRE_FALSE(receiver_left.expired());
        REQUIRE_FALSE(sender_left.expired());
        REQUIRE(guards_destroyed == 0);
    }
    CHECK(receive_frame);
    CHECK(guards_destroyed == 1); // the four handlers, which shared it, are gone
    CHECK(handlers_invoked == 0);
    CHECK(receiver_left.expired());
    CHECK(sender_left.expired());
    CHECK(open_fds() == fds_before);
}

namespace {

// A queue pair on a shared receive queue of two entries, and memory.
struct srq_objects {
    rdma_asio::context ctx{test_device_name()};
    rdma_asio::protection_domain pd{ctx};
    rdma_asio::completion_channel channel;
    rdma_asio::completion_queue cq;
    rdma_asio::shared_receive_queue srq;
    rdma_asio::queue_pair qp;
    std::vector<std::byte> memory = std::vector<std::byte>(1024);
    rdma_asio::memory_region mr{pd, asio::buffer(memory), IBV_ACCESS_LOCAL_WRITE};

    explicit srq_objects(asio::io_context& ioc)
        : channel(ioc.get_executor(), ctx), cq(channel, 64),
          srq(ioc.get_executor(), pd, {.depth = 2}), qp(pd, cq, cq, srq) {}
};

} // namespace

TEST_CASE("destroying the io_context frees what shared_receive_queue receives' handlers own",
          "[shared_receive_queue][shutdown]") {
    {
        asio::io_context warm_up;
        srq_objects once(warm_up);
    }
    const int fds_before = open_fds();
    std::weak_ptr<srq_objects> left;
    int guards_destroyed = 0, handlers_invoked = 0;
    {
        asio::io_context ioc;
        auto objects = std::make_shared<srq_objects>(ioc);
        left = objects;
        auto guard = std::make_shared<handler_guard>(guards_destroyed);
        // Each handler owns the objects, the SRQ included: only the io_context's
        // destruction can end them.
        for (std::size_t i = 0; i < 6; ++i)
            objects->srq.async_receive(
                objects->mr.at(64 * i, 64),
                [objects, guard, &handlers_invoked](rdma_asio::error_code, std::size_t) {
                    ++handlers_invoked;
                });
        guard.reset();
        ioc.run_for(100ms);
        REQUIRE(objects->srq.posted() >= 2); // the device may round the depth up
        REQUIRE(objects->srq.waiting() == 6 - objects->srq.posted());
        objects.reset();
        REQUIRE_FALSE(left.expired());
        REQUIRE(guards_destroyed == 0);
    }
    CHECK(guards_destroyed == 1); // the six handlers, which shared it, are gone
    CHECK(handlers_invoked == 0);
    CHECK(left.expired());
    CHECK(open_fds() == fds_before);
}

} // namespace io_context_shutdown_rxe_test
