// Names that changed keep compiling, with a deprecation warning, and mean what the
// new names mean: async_event_stream_hook (its header too) and
// basic_async_event_stream::hook() are async_event_stream_ref and ref();
// connection::work_requests() is connection::queue_pair().
#include "rdma_asio/async_event_stream_hook.hpp"
#include "rdma_asio/connection.hpp"

#include <catch2/catch.hpp>

#include "fake_kernel.hpp"
#include "recorder.hpp"

#include "asio_alias.hpp"

#include <chrono>
#include <type_traits>
#include <utility>

// The point of this file is to use the deprecated names.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace former_names_test {

using namespace std::chrono_literals;

static_assert(
    std::is_same_v<rdma_asio::async_event_stream_hook, rdma_asio::async_event_stream_ref>);
static_assert(std::is_same_v<decltype(std::declval<rdma_asio::connection&>().work_requests()),
                             rdma_asio::queue_pair&>);

TEST_CASE("hook() is ref(): an event delivered through it reaches the stream's waiter",
          "[former_names]") {
    asio::io_context ioc;
    rdma_asio::test::fake_async_fd kernel;
    rdma_asio::async_event_stream stream = kernel.stream(ioc.get_executor());
    const rdma_asio::async_event_stream_hook hook = stream.hook();
    rdma_asio::test::recorder<rdma_asio::async_event> r;
    stream.async_next(r.handler());
    REQUIRE(hook.deliver(rdma_asio::async_event(rdma_asio::event_type::gid_avail, 1, ibv_gid{})));
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == rdma_asio::event_type::gid_avail);
    stream.close();
    CHECK_FALSE(
        hook.deliver(rdma_asio::async_event(rdma_asio::event_type::gid_avail, 1, ibv_gid{})));
}

} // namespace former_names_test
