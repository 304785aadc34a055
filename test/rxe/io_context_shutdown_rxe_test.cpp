// Destroying the io_context while coroutines wait in rdma_asio operations frees
// what they own, as it does for Asio's own operations.
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/completion_queue.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"

#include "asio_alias.hpp"

#include <arpa/inet.h>
#include <dirent.h>

#include <array>
#include <chrono>
#include <memory>

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
