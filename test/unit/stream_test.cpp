// rdma_asio::stream without a device: the sizes a stream refuses as it is made,
// before anything is allocated for them, and an accept or connect into a stream
// that is made and never launched, which allocates nothing of its ring.
#include <rdma_asio/detail/stream/stream_core.hpp>
#include <rdma_asio/stream.hpp>

#include "asio_alias.hpp"
#include "source_dir.hpp"

#include <catch2/catch.hpp>

#include <malloc.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

// What the process holds from malloc now: the arenas' blocks in use and the
// blocks of their own mapping (large ones, such as a ring).
std::size_t held_by_malloc() {
    const struct mallinfo2 info = ::mallinfo2();
    return info.uordblks + info.hblkhd;
}

} // namespace

TEST_CASE("a stream refuses sizes it cannot have as it is made, naming the option", "[stream]") {
    asio::io_context ioc;
    struct refused {
        std::size_t ring;
        std::uint32_t notices;
        const char* says;
    };
    for (const refused r : {refused{256 * 1024, 0, "stream_options::notices"},
                            refused{256 * 1024, 3, "stream_options::notices"},
                            refused{0, 32, "stream_options::receive_ring"},
                            refused{std::size_t{1} << 30, 32, "stream_options::receive_ring"},
                            refused{std::size_t{2} << 30, 32, "stream_options::receive_ring"}}) {
        CAPTURE(r.ring, r.notices);
        rdma_asio::stream_options options;
        options.receive_ring = r.ring;
        options.notices = r.notices;
        try {
            rdma_asio::stream s(ioc, options);
            FAIL("a stream was made with sizes it cannot have");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == asio::error::invalid_argument);
            CHECK_THAT(e.what(), Catch::Contains("rdma_asio::stream") && Catch::Contains(r.says));
        }
    }
    // The limits themselves are sizes a stream may have; nothing is allocated yet.
    rdma_asio::stream_options largest;
    largest.receive_ring = (std::size_t{1} << 30) - 1;
    largest.notices = 4;
    rdma_asio::stream s(ioc, largest);
    CHECK_FALSE(s.is_open());
    CHECK(s.options().receive_ring == largest.receive_ring);
}

TEST_CASE("a connect into a stream made and never launched allocates nothing of its ring",
          "[stream]") {
    // malloc's own books: under a sanitizer, which replaces malloc, they stay
    // empty, and this cannot be measured.
    const std::size_t before_probe = held_by_malloc();
    std::vector<char> probe(4 << 20);
    const bool measurable = held_by_malloc() >= before_probe + (4 << 20);
    probe = {};
    probe.shrink_to_fit();
    if (!measurable) {
        WARN("malloc's statistics (mallinfo2) do not see allocations here (a sanitizer's "
             "allocator): not measured in this build");
        return;
    }
    asio::io_context ioc;
    rdma_asio::stream_options options;
    options.receive_ring = 8 << 20;
    rdma_asio::stream s(ioc, options);
    const std::size_t before = held_by_malloc();
    {
        auto op = rdma_asio::async_connect(s, {asio::ip::make_address("10.0.0.1"), 18999},
                                           asio::experimental::deferred);
        // Made, never launched: less than a ring's eighth more (the operation's
        // own few hundred bytes).
        CHECK(held_by_malloc() < before + (1 << 20));
    }
    CHECK_FALSE(s.is_open());
    ioc.poll();
    CHECK(ioc.stopped()); // nothing was started
}

TEST_CASE("a stream that is not open answers the socket calls with bad_descriptor, and the "
          "throwing forms name the call",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::stream s(ioc);
    rdma_asio::error_code ec;
    CHECK(s.local_endpoint(ec) == asio::ip::tcp::endpoint());
    CHECK(ec == asio::error::bad_descriptor);
    ec.clear();
    s.remote_endpoint(ec);
    CHECK(ec == asio::error::bad_descriptor);
    ec.clear();
    CHECK(s.available(ec) == 0);
    CHECK(ec == asio::error::bad_descriptor);
    ec.clear();
    s.shutdown(rdma_asio::stream::shutdown_send, ec);
    CHECK(ec == asio::error::bad_descriptor);
    ec.clear();
    s.cancel(ec);
    CHECK(ec == asio::error::bad_descriptor);
    ec = asio::error::eof;
    s.close(ec); // nothing can fail
    CHECK_FALSE(ec);
    const auto names = [](const std::function<void()>& call, const std::string& name) {
        try {
            call();
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == asio::error::bad_descriptor);
            CHECK(std::string(e.what()).find(name) != std::string::npos);
            return;
        }
        FAIL(name << " did not throw");
    };
    names([&] { s.shutdown(rdma_asio::stream::shutdown_receive); }, "rdma_asio::stream::shutdown");
    names([&] { s.local_endpoint(); }, "rdma_asio::stream::local_endpoint");
    names([&] { s.remote_endpoint(); }, "rdma_asio::stream::remote_endpoint");
    names([&] { s.available(); }, "rdma_asio::stream::available");
    rdma_asio::connection c(ioc);
    names([&] { c.local_endpoint(); }, "rdma_asio::connection::local_endpoint");
    names([&] { c.remote_endpoint(); }, "rdma_asio::connection::remote_endpoint");
}

TEST_CASE("stream.md's socket calls compile, and on a stream not open stop at the first error",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::stream s(ioc);
    // snippet-begin: stream-socket-calls
    rdma_asio::error_code ec;
    const asio::ip::tcp::endpoint peer = s.remote_endpoint(ec);
    if (!ec && s.available() == 0)
        s.shutdown(rdma_asio::stream::shutdown_both, ec);
    // snippet-end
    CHECK(ec == asio::error::bad_descriptor);
    CHECK(peer == asio::ip::tcp::endpoint());
}

namespace {
// Compiled, not run: with an executor that has a default completion token, every
// initiating function of an accept or a connect into a stream takes it, and the
// connect_options overload is not taken for a token.
using awaitable_executor = asio::use_awaitable_t<>::executor_with_default<asio::any_io_executor>;
[[maybe_unused]] asio::awaitable<void>
default_tokens(rdma_asio::basic_acceptor<awaitable_executor>& acceptor,
               rdma_asio::basic_stream<awaitable_executor>& stream, asio::io_context& ioc) {
    co_await acceptor.async_accept(stream);
    co_await rdma_asio::async_accept(acceptor, stream);
    rdma_asio::basic_stream<awaitable_executor> accepted =
        co_await rdma_asio::async_accept(acceptor, rdma_asio::stream_options());
    rdma_asio::basic_stream<asio::io_context::executor_type> on_context =
        co_await rdma_asio::async_accept(acceptor, ioc, rdma_asio::stream_options());
    accepted = co_await rdma_asio::async_accept(acceptor);
    on_context = co_await rdma_asio::async_accept(acceptor, ioc);
    const auto strand = asio::make_strand(ioc);
    rdma_asio::basic_stream<asio::strand<asio::io_context::executor_type>> on_strand =
        co_await rdma_asio::async_accept(acceptor, strand);
    on_strand = co_await rdma_asio::async_accept(acceptor, asio::make_strand(ioc));
    rdma_asio::stream_options options_lvalue; // not taken for a token
    accepted = co_await rdma_asio::async_accept(acceptor, options_lvalue);
    co_await rdma_asio::async_connect(stream, asio::ip::tcp::endpoint());
    const rdma_asio::connect_options options;
    co_await rdma_asio::async_connect(stream, asio::ip::tcp::endpoint(), options);
    co_await rdma_asio::async_connect(stream, "kvhost", "7000");
    co_await rdma_asio::async_connect(stream, "kvhost", "7000", options);
    const asio::ip::tcp::resolver::results_type resolved;
    asio::ip::tcp::endpoint connected = co_await rdma_asio::async_connect(stream, resolved);
    // Named: g++ 12 cannot keep a braced list's array across a co_await ("array used
    // as initializer").
    const std::vector<asio::ip::tcp::endpoint> endpoints{connected};
    connected = co_await rdma_asio::async_connect(stream, endpoints, options);
    co_await stream.async_read_some(asio::mutable_buffer());
}
// Compiled, not run: a stream converts to another executor type as Asio's sockets do.
[[maybe_unused]] asio::awaitable<void> converted(rdma_asio::stream stream) {
    auto awaited = asio::use_awaitable.as_default_on(std::move(stream));
    co_await awaited.async_read_some(asio::mutable_buffer());
    stream = std::move(awaited);
}
} // namespace

TEST_CASE("a stream converts to and from another executor type, as Asio's sockets do, keeping "
          "its executor and its options",
          "[stream]") {
    using strand_type = asio::strand<asio::io_context::executor_type>;
    asio::io_context ioc;
    const strand_type strand = asio::make_strand(ioc);
    rdma_asio::stream_options options;
    options.receive_ring = 4096;
    rdma_asio::basic_stream<strand_type> on_strand(strand, options);
    rdma_asio::stream any(std::move(on_strand));
    REQUIRE(any.get_executor().target<strand_type>() != nullptr);
    CHECK(*any.get_executor().target<strand_type>() == strand);
    CHECK(any.options().receive_ring == 4096);
    CHECK_FALSE(any.is_open());
    rdma_asio::basic_stream<strand_type> back(asio::make_strand(ioc));
    back = rdma_asio::basic_stream<strand_type>(strand, options);
    any = std::move(back);
    CHECK(any.options().receive_ring == 4096);
    // Not open after the moves: a read ends with bad_descriptor, posted.
    std::optional<rdma_asio::error_code> got;
    any.async_read_some(asio::mutable_buffer(),
                        [&](rdma_asio::error_code ec, std::size_t) { got = ec; });
    CHECK_FALSE(got);
    ioc.run_for(std::chrono::seconds(10));
    REQUIRE(got);
    CHECK(*got == asio::error::bad_descriptor);
}

TEST_CASE("an accept that completes with a new stream, on an acceptor not open, ends with "
          "bad_descriptor and a stream not open, on the executor asked",
          "[stream]") {
    using strand_type = asio::strand<asio::io_context::executor_type>;
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc);
    std::optional<rdma_asio::error_code> got;
    std::optional<rdma_asio::stream> plain;
    rdma_asio::async_accept(acceptor, rdma_asio::stream_options(),
                            [&](rdma_asio::error_code ec, rdma_asio::stream s) {
                                got = ec;
                                plain.emplace(std::move(s));
                            });
    std::optional<rdma_asio::error_code> got_on_new_strand;
    rdma_asio::async_accept(acceptor, asio::make_strand(ioc),
                            [&](rdma_asio::error_code ec, rdma_asio::stream s) {
                                got_on_new_strand = ec; // converted from a strand's stream
                                CHECK_FALSE(s.is_open());
                            });
    std::optional<rdma_asio::error_code> got_default;
    rdma_asio::async_accept(acceptor, [&](rdma_asio::error_code ec, rdma_asio::stream s) {
        got_default = ec;
        CHECK_FALSE(s.is_open());
    });
    const strand_type strand = asio::make_strand(ioc);
    std::optional<rdma_asio::error_code> got_on_strand;
    std::optional<rdma_asio::basic_stream<strand_type>> on_strand;
    rdma_asio::async_accept(acceptor, strand, rdma_asio::stream_options(),
                            [&](rdma_asio::error_code ec, rdma_asio::basic_stream<strand_type> s) {
                                got_on_strand = ec;
                                on_strand.emplace(std::move(s));
                            });
    CHECK_FALSE(got); // never inside the call
    CHECK_FALSE(got_on_strand);
    ioc.run_for(std::chrono::seconds(10));
    REQUIRE(got);
    REQUIRE(got_on_strand);
    REQUIRE(got_default);
    CHECK(*got == asio::error::bad_descriptor);
    CHECK(*got_default == asio::error::bad_descriptor);
    REQUIRE(got_on_new_strand);
    CHECK(*got_on_new_strand == asio::error::bad_descriptor);
    CHECK(*got_on_strand == asio::error::bad_descriptor);
    REQUIRE(plain);
    REQUIRE(on_strand);
    CHECK_FALSE(plain->is_open());
    CHECK_FALSE(on_strand->is_open());
    CHECK(on_strand->get_executor() == strand);
}

TEST_CASE("a stream's connect over no endpoint ends with host_not_found and a default endpoint, "
          "posted, and by a service that does not resolve with the resolver's error, and the "
          "stream stays not open",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::stream s(ioc);
    std::optional<rdma_asio::error_code> over_none;
    std::optional<asio::ip::tcp::endpoint> reported;
    rdma_asio::async_connect(s, std::vector<asio::ip::tcp::endpoint>{},
                             [&](rdma_asio::error_code ec, asio::ip::tcp::endpoint e) {
                                 over_none = ec;
                                 reported = e;
                             });
    std::optional<rdma_asio::error_code> by_name;
    // A numeric host, so that no name server is asked: the service fails to resolve.
    rdma_asio::async_connect(s, "127.0.0.1", "no-such-service-rdma-asio",
                             [&](rdma_asio::error_code ec) { by_name = ec; });
    CHECK_FALSE(over_none); // never inside the call
    CHECK_FALSE(by_name);
    ioc.run_for(std::chrono::seconds(10));
    REQUIRE(over_none);
    REQUIRE(by_name);
    CHECK(*over_none == asio::error::host_not_found);
    CHECK(*reported == asio::ip::tcp::endpoint());
    CHECK(*by_name == asio::error::service_not_found);
    CHECK_FALSE(s.is_open());
}

TEST_CASE("acceptor.async_accept(stream) on an acceptor not open ends with bad_descriptor, and "
          "leaves the stream not open",
          "[stream]") {
    asio::io_context ioc;
    rdma_asio::acceptor acceptor(ioc);
    rdma_asio::stream s(ioc);
    std::optional<rdma_asio::error_code> got;
    acceptor.async_accept(s, [&](rdma_asio::error_code ec) { got = ec; });
    CHECK_FALSE(got); // never inside the call
    ioc.run_for(std::chrono::seconds(10));
    REQUIRE(got);
    CHECK(*got == asio::error::bad_descriptor);
    CHECK_FALSE(s.is_open());
}

TEST_CASE("stream.md states the registered memory a stream holds besides its rings as the code "
          "makes it",
          "[stream][docs]") {
    std::ifstream page(std::string(rdma_asio::test::source_dir()) + "/docs/stream.md");
    REQUIRE(page);
    std::stringstream text;
    text << page.rdbuf();
    const std::string stated =
        "a copy of the peer's ring and " +
        std::to_string(rdma_asio::detail::stream_memory::registered_besides_rings) + " bytes more";
    CAPTURE(stated);
    CHECK(text.str().find(stated) != std::string::npos);
}

TEST_CASE("the stream's errors give the messages stream.md lists", "[stream][docs]") {
    using rdma_asio::error_code;
    CHECK(error_code(asio::error::eof).message() == "End of file");
    CHECK(error_code(rdma_asio::errc::disconnected).message() ==
          "the connection was disconnected (RDMA_CM_EVENT_DISCONNECTED)");
    CHECK(error_code(asio::error::broken_pipe).message() == "Broken pipe");
    CHECK(error_code(asio::error::already_started).message() == "Operation already in progress");
    CHECK(error_code(asio::error::bad_descriptor).message() == "Bad file descriptor");
    // Standalone Asio gives operation_aborted words of its own; Boost.Asio the system's.
    CHECK(error_code(asio::error::operation_aborted).message() ==
          (RDMA_ASIO_USE_BOOST_ASIO ? "Operation canceled" : "Operation aborted."));
    asio::io_context ioc;
    rdma_asio::stream_options empty;
    empty.receive_ring = 0;
    CHECK_THROWS_WITH(rdma_asio::stream(ioc, empty),
                      Catch::StartsWith("rdma_asio::stream: the receive ring is empty "
                                        "(stream_options::receive_ring: 1 to 2^30 - 1 bytes)"));
    rdma_asio::stream_options huge;
    huge.receive_ring = std::size_t{1} << 30;
    CHECK_THROWS_WITH(rdma_asio::stream(ioc, huge),
                      Catch::StartsWith("rdma_asio::stream: the receive ring is larger than "
                                        "2^30 - 1 bytes"));
    rdma_asio::stream_options few;
    few.notices = 3;
    CHECK_THROWS_WITH(rdma_asio::stream(ioc, few),
                      Catch::StartsWith("rdma_asio::stream: fewer than 4 notification receives "
                                        "(stream_options::notices: at least 4)"));
    rdma_asio::stream_options no_first;
    no_first.initial_receive_ring = 0;
    CHECK_THROWS_WITH(rdma_asio::stream(ioc, no_first),
                      Catch::StartsWith("rdma_asio::stream: the first receive ring is empty "
                                        "(stream_options::initial_receive_ring: at least 1 byte)"));
    // A first ring larger than the largest is the largest: not an error.
    rdma_asio::stream_options larger_first;
    larger_first.receive_ring = 8192;
    larger_first.initial_receive_ring = 1 << 20;
    CHECK_NOTHROW(rdma_asio::stream(ioc, larger_first));
    rdma_asio::stream_options negative_idle;
    negative_idle.shrink_after_idle = std::chrono::milliseconds(-1);
    CHECK_THROWS_WITH(
        rdma_asio::stream(ioc, negative_idle),
        Catch::StartsWith("rdma_asio::stream: a negative idle time before a ring "
                          "shrinks (stream_options::shrink_after_idle: zero or more)"));
    rdma_asio::stream_options never_shrinks;
    never_shrinks.shrink_after_idle = std::chrono::milliseconds(0);
    CHECK_NOTHROW(rdma_asio::stream(ioc, never_shrinks));
}
