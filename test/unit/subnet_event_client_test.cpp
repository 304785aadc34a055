// subnet_event_client without a fabric: what can be checked on any host. The
// client against a real SA is tested in test/subnet (label subnet).
#include "rdma_asio/subnet_event_client.hpp"

#include <catch2/catch.hpp>

#include "recorder.hpp"

#include "fake_kernel.hpp"

#include "rdma_asio/error.hpp"

#include "asio_alias.hpp"

#include <chrono>
#include <string>
#include <type_traits>

namespace subnet_event_client_test {

using namespace std::chrono_literals;
using rdma_asio::async_event;
using rdma_asio::sm_event_mask;
using rdma_asio::subnet_event_client;
using rdma_asio::test::recorder;

using typed_client = rdma_asio::basic_subnet_event_client<asio::io_context::executor_type>;

// Port 1 of a CA that does not exist.
subnet_event_client::options no_such_ca() {
    subnet_event_client::options o;
    o.ca_name = "no_such_ca_here";
    return o;
}
static_assert(std::is_same_v<typed_client::executor_type, asio::io_context::executor_type>);
static_assert(std::is_same_v<subnet_event_client::executor_type, asio::any_io_executor>);
static_assert(
    std::is_same_v<subnet_event_client::rebind_executor<asio::io_context::executor_type>::other,
                   typed_client>);
static_assert(std::is_same_v<subnet_event_client::native_handle_type, int>);
static_assert(!std::is_copy_constructible_v<subnet_event_client>);
static_assert(std::is_nothrow_move_constructible_v<subnet_event_client>);
static_assert(std::is_nothrow_move_assignable_v<subnet_event_client>);
static_assert(std::is_nothrow_constructible_v<subnet_event_client, typed_client&&>);
static_assert(!std::is_constructible_v<typed_client, subnet_event_client&&>);
static_assert(std::is_same_v<subnet_event_client::options, rdma_asio::subnet_event_client_options>);

TEST_CASE("a client for a CA that does not exist fails naming umad_get_port and the CA",
          "[subnet_event_client]") {
    asio::io_context ioc;
    try {
        subnet_event_client client(ioc, no_such_ca());
        FAIL("constructed a client for a CA that does not exist");
    } catch (const rdma_asio::system_error& e) {
        CHECK(std::string(e.what()).find("umad_get_port") != std::string::npos);
        CHECK(std::string(e.what()).find("no_such_ca_here") != std::string::npos);
        // libibumad says EIO; the client says what is wrong.
        CHECK(e.code() == rdma_asio::errc::device_not_found);
    }
    CHECK(ioc.poll() == 0); // nothing was started
}

TEST_CASE("open reports a client's errors as error codes", "[subnet_event_client]") {
    asio::io_context ioc;
    typed_client client(ioc);
    CHECK_FALSE(client.is_open());
    CHECK(client.native_handle() == -1);
    rdma_asio::error_code ec;
    client.open(no_such_ca(), ec);
    CHECK(ec == rdma_asio::errc::device_not_found);
    CHECK_FALSE(client.is_open());

    // A closed stream.
    rdma_asio::async_event_stream closed_stream(ioc);
    client.open(closed_stream, no_such_ca(), ec);
    CHECK(ec == asio::error::bad_descriptor);
    rdma_asio::test::fake_async_fd kernel;
    rdma_asio::async_event_stream stream = kernel.stream(ioc.get_executor());
    client.open(stream, no_such_ca(), ec);
    CHECK(ec == rdma_asio::errc::device_not_found);
    CHECK_FALSE(client.is_open());
    // The throwing form names the call.
    try {
        client.open(stream, no_such_ca());
        FAIL("opened a client for a CA that does not exist");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == rdma_asio::errc::device_not_found);
        CHECK(std::string(e.what()).find("umad_get_port") != std::string::npos);
    }
    // The stream is untouched and still works.
    CHECK(stream.is_open());
    kernel.raise(IBV_EVENT_PORT_ACTIVE, 1);
    recorder<async_event> r;
    stream.async_next(r.handler());
    ioc.run_for(5s);
    REQUIRE(r.calls() == 1);
    CHECK(r.value().type() == rdma_asio::event_type::port_active);
}

TEST_CASE("every operation of a client that is not open completes with bad_descriptor",
          "[subnet_event_client]") {
    asio::io_context ioc;
    subnet_event_client never_opened(ioc);
    typed_client typed(ioc.get_executor());
    subnet_event_client moved_from(ioc);
    subnet_event_client moved_to(std::move(moved_from));
    CHECK_FALSE(moved_to.is_open());

    recorder<> registered, unregistered, closed, deferred;
    recorder<async_event> next;
    const ibv_gid gids[1] = {};
    never_opened.async_register(sm_event_mask::ugid, gids, registered.handler());
    typed.async_unregister(sm_event_mask::all, unregistered.handler());
    moved_from.async_close(closed.handler());
    never_opened.async_next(next.handler());
    auto op = typed.async_register(sm_event_mask::all, asio::experimental::deferred);
    std::move(op)(deferred.handler());
    // Completed, not thrown, and never inside the initiating call.
    CHECK(registered.calls() + unregistered.calls() + closed.calls() + next.calls() +
              deferred.calls() ==
          0);
    ioc.run_for(5s);
    for (const auto* r : {&registered, &unregistered, &closed, &deferred}) {
        REQUIRE(r->calls() == 1);
        CHECK(r->ec() == asio::error::bad_descriptor);
    }
    REQUIRE(next.calls() == 1);
    CHECK(next.ec() == asio::error::bad_descriptor);

    // Queries throw.
    CHECK_THROWS_AS(never_opened.counters(), rdma_asio::system_error);
    CHECK_THROWS_AS(typed.subscribed(64), rdma_asio::system_error);
    CHECK_THROWS_AS(moved_from.delivery(), rdma_asio::system_error);
    CHECK_THROWS_AS(moved_from.resubscribe(), rdma_asio::system_error);
    // cancel() and close() do nothing.
    moved_from.cancel();
    moved_from.close();
    CHECK(moved_from.get_executor() == moved_to.get_executor());
}

} // namespace subnet_event_client_test
