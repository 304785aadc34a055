// Every initiating function of the library, called with a plain callback passed as
// a const lvalue (as Asio's own operations take it: they copy it), and each
// completing once, posted, with bad_descriptor on an object that is not open. One
// translation unit names them all, so that an operation added without this shape
// fails to compile here. (Each object's every completion token, and its work on a
// device, are in its own tests: each_token.hpp.)
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/datagram_queue_pair.hpp"
#include "rdma_asio/queue_pair.hpp"
#include "rdma_asio/shared_receive_queue.hpp"
#include "rdma_asio/subnet_event_client.hpp"
#if RDMA_ASIO_HAVE_MLX5DV
#include "rdma_asio/devx_event_channel.hpp"
#include "rdma_asio/devx_eventfd.hpp"
#endif

#include <catch2/catch.hpp>

#include "run_until.hpp"

#include "asio_alias.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <netinet/in.h>

namespace initiating_functions_test {

using namespace std::chrono_literals;

namespace {

// What each completion got, in the order the handlers ran (on the test's thread).
struct outcomes {
    std::vector<rdma_asio::error_code> got;
};

// A callback that records its error; any values after it are ignored.
struct record {
    outcomes* into;
    template <class... Values>
    void operator()(rdma_asio::error_code ec, Values&&...) const {
        into->got.push_back(ec);
    }
};

} // namespace

TEST_CASE("a connection is a template on its executor, as every object, and a closed one behaves "
          "as a closed object",
          "[tokens][misuse]") {
    using typed = rdma_asio::basic_connection<asio::io_context::executor_type>;
    static_assert(
        std::is_same_v<rdma_asio::connection, rdma_asio::basic_connection<asio::any_io_executor>>);
    static_assert(std::is_same_v<typed::rebind_executor<asio::any_io_executor>::other,
                                 rdma_asio::connection>);
    static_assert(std::is_same_v<decltype(std::declval<typed&>().queue_pair()),
                                 rdma_asio::basic_queue_pair<asio::io_context::executor_type>&>);
    static_assert(std::is_same_v<decltype(std::declval<typed&>().id()),
                                 rdma_asio::basic_cm_id<asio::io_context::executor_type>&>);
    static_assert(
        std::is_same_v<decltype(rdma_asio::connection_options{}.receive_depth), std::uint32_t>);

    asio::io_context ioc;
    typed closed(ioc);
    CHECK_FALSE(closed.is_open());
    CHECK(closed.get_executor() == ioc.get_executor());
    CHECK(closed.qp() == nullptr);
    // Moves into the type-erased connection, as Asio's sockets do.
    rdma_asio::connection erased(std::move(closed));
    CHECK_FALSE(erased.is_open());
    CHECK(erased.get_executor() == asio::any_io_executor(ioc.get_executor()));
    erased.cancel();
    try {
        erased.queue_pair();
        FAIL("a closed connection gave a queue pair");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
    }
    outcomes o;
    const record handler{&o};
    erased.async_disconnect(handler);
    ioc.run_for(5s);
    REQUIRE(o.got.size() == 1);
    CHECK(o.got[0] == asio::error::bad_descriptor);
    erased.close();
    CHECK_FALSE(erased.is_open());
}

TEST_CASE("every initiating function takes a const lvalue callback, and on an object that is not "
          "open completes it once with bad_descriptor",
          "[tokens][misuse]") {
    asio::io_context ioc;
    outcomes o;
    const record handler{&o};

    rdma_asio::async_event_stream events(ioc);

    rdma_asio::error_code ignored; // without rdma_cm (this host), it stays closed anyway
    rdma_asio::cm_event_channel cm_channel(ioc, ignored);
    cm_channel.close();

    rdma_asio::cm_id id(ioc);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    const auto* dst = reinterpret_cast<const sockaddr*>(&addr);
    const rdma_conn_param param{};

    rdma_asio::completion_queue cq(ioc);
    std::array<ibv_wc, 4> wcs{};

    const rdma_asio::registered_buffer buffer{};
    const rdma_asio::remote_buffer remote{};
    rdma_asio::receive_info info;
    rdma_asio::queue_pair qp(ioc);

    rdma_asio::shared_receive_queue srq(ioc);

    rdma_asio::datagram_queue_pair dqp(ioc);
    const rdma_asio::datagram_endpoint to{};
    rdma_asio::datagram_endpoint from;

    rdma_asio::subnet_event_client subnet(ioc);

#if RDMA_ASIO_HAVE_MLX5DV
    rdma_asio::devx_event_channel devx(ioc);
    std::array<std::byte, 64> devx_buffer{};
    rdma_asio::devx_eventfd eventfd(ioc, ignored);
    eventfd.close();
#endif

    // Each call is one operation started.
    const std::function<void()> calls[] = {
        [&] { events.async_next(handler); },
        [&] { events.async_next([](const rdma_asio::async_event&) { return true; }, handler); },
        [&] { cm_channel.async_next(handler); },
        [&] { id.async_resolve_addr(nullptr, dst, 1s, handler); },
        [&] { id.async_resolve_route(1s, handler); },
        [&] { id.async_connect(param, handler); },
        [&] { id.async_accept(param, handler); },
        [&] { id.async_disconnect(handler); },
        [&] { id.async_join_multicast(dst, handler); },
        [&] { id.async_get_request(handler); },
        [&] { id.async_next(handler); },
        [&] { cq.async_poll(wcs, handler); },
        [&] { cq.async_wait(handler); },
        [&] { qp.async_send(buffer, handler); },
        [&] { qp.async_send(buffer, rdma_asio::immediate_data{1}, handler); },
        [&] { qp.async_receive(buffer, handler); },
        [&] { qp.async_receive(buffer, info, handler); },
        [&] { qp.async_write(buffer, remote, handler); },
        [&] { qp.async_write(buffer, remote, rdma_asio::immediate_data{1}, handler); },
        [&] { qp.async_read(buffer, remote, handler); },
        [&] { qp.async_fetch_add(buffer, remote, 1, handler); },
        [&] { qp.async_compare_swap(buffer, remote, 1, 2, handler); },
        [&] { qp.async_wait_error(handler); },
        [&] { qp.async_close(events, handler); },
        [&] { srq.async_receive(buffer, handler); },
        [&] { srq.async_receive(buffer, info, handler); },
        [&] { srq.async_wait_limit(events, 1, handler); },
        [&] { dqp.async_send_to(buffer, to, handler); },
        [&] { dqp.async_send_to(buffer, to, rdma_asio::immediate_data{1}, handler); },
        [&] { dqp.async_receive(buffer, handler); },
        [&] { dqp.async_receive(buffer, info, handler); },
        [&] { dqp.async_receive_from(buffer, from, handler); },
        [&] { subnet.async_register(rdma_asio::sm_event_mask::all, handler); },
        [&] { subnet.async_unregister(rdma_asio::sm_event_mask::all, handler); },
        [&] { subnet.async_next(handler); },
        [&] { subnet.async_close(handler); },
#if RDMA_ASIO_HAVE_MLX5DV
        [&] { devx.async_next(asio::buffer(devx_buffer), handler); },
        [&] { eventfd.async_wait(handler); },
#endif
    };
    for (const auto& call : calls)
        call();
    const std::size_t started = std::size(calls);

    CHECK(o.got.empty()); // never inside the initiating call
    REQUIRE(rdma_asio::test::run_until(
        ioc, [&] { return o.got.size() >= started; }, 10s));
    ioc.poll(); // a second completion of any of them would run now
    CHECK(o.got.size() == started);
    for (std::size_t i = 0; i < o.got.size(); ++i) {
        INFO("completion " << i);
        CHECK(o.got[i] == asio::error::bad_descriptor);
    }
}

} // namespace initiating_functions_test
