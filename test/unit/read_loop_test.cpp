#include "rdma_asio/detail/core/read_loop.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include <cerrno>
#include <cstddef>
#include <deque>
#include <functional>
#include <system_error>
#include <vector>

namespace read_loop_test {

using rdma_asio::detail::read_result;
using rdma_asio::detail::read_until_would_block;

namespace {

// Records what the loop hands on, and stops wanting more after `limit` events.
struct recording_sink {
    std::size_t limit = 1000;
    std::vector<int> pushed;
    std::vector<rdma_asio::error_code> failures;
    std::size_t asked = 0;
    bool more() noexcept {
        ++asked;
        return pushed.size() < limit;
    }
    void push(int&& v) { pushed.push_back(v); }
    void fail(const rdma_asio::error_code& ec) { failures.push_back(ec); }
};

// A scripted fd: each read takes the next step; an event step carries its value.
struct script {
    struct step {
        read_result result;
        int value = 0;
    };
    std::deque<step> steps;
    std::size_t reads = 0;
    read_result operator()(int& v) noexcept {
        ++reads;
        if (steps.empty())
            return read_result::failed(asio::error::fault); // read past the script
        step s = steps.front();
        steps.pop_front();
        v = s.value;
        return s.result;
    }
};

} // namespace

TEST_CASE("the read loop hands on every event until the fd would block", "[read_loop]") {
    recording_sink sink;
    script fd{{{read_result::event(), 1},
               {read_result::skip(), 99},
               {read_result::event(), 2},
               {read_result::would_block(), 98},
               {read_result::event(), 3}}};
    read_until_would_block<int>(sink, std::ref(fd));
    CHECK(sink.pushed == std::vector<int>{1, 2}); // a skipped read's value goes nowhere
    CHECK(sink.failures.empty());
    CHECK(fd.reads == 4); // nothing read after EAGAIN
    CHECK(fd.steps.size() == 1);
}

TEST_CASE("the read loop stops before a read once the sink wants no more", "[read_loop]") {
    recording_sink sink;
    sink.limit = 2;
    script fd{{{read_result::event(), 1}, {read_result::event(), 2}, {read_result::event(), 3}}};
    read_until_would_block<int>(sink, std::ref(fd));
    CHECK(sink.pushed == std::vector<int>{1, 2});
    CHECK(fd.reads == 2); // the third event stays in the kernel for the next drain
    CHECK(sink.asked == 3);

    recording_sink none;
    none.limit = 0;
    script untouched{{{read_result::event(), 1}}};
    read_until_would_block<int>(none, std::ref(untouched));
    CHECK(untouched.reads == 0);
}

TEST_CASE("a failed read fails the sink once and ends the loop", "[read_loop]") {
    recording_sink sink;
    script fd{{{read_result::event(), 1},
               {read_result::failed(asio::error::bad_descriptor), 97},
               {read_result::event(), 2}}};
    read_until_would_block<int>(sink, std::ref(fd));
    CHECK(sink.pushed == std::vector<int>{1});
    REQUIRE(sink.failures.size() == 1);
    CHECK(sink.failures[0] == asio::error::bad_descriptor);
    CHECK(fd.reads == 2);
}

TEST_CASE("a last event is handed on, then the sink fails, then the loop ends", "[read_loop]") {
    recording_sink sink;
    script fd{
        {{read_result::last_event(asio::error::connection_aborted), 7}, {read_result::event(), 8}}};
    read_until_would_block<int>(sink, std::ref(fd));
    CHECK(sink.pushed == std::vector<int>{7});
    REQUIRE(sink.failures.size() == 1);
    CHECK(sink.failures[0] == asio::error::connection_aborted);
    CHECK(fd.reads == 1);
}

TEST_CASE("each read starts from a fresh value", "[read_loop]") {
    recording_sink sink;
    std::vector<int> seen;
    int reads = 0;
    read_until_would_block<int>(sink, [&](int& v) noexcept {
        seen.push_back(v);
        v = 42;
        return ++reads < 3 ? read_result::skip() : read_result::would_block();
    });
    CHECK(seen == std::vector<int>{0, 0, 0}); // a skipped read leaves nothing behind
}

TEST_CASE("errno of a failed read: EAGAIN waits, EINTR reads again, the rest is final",
          "[read_loop]") {
    CHECK(read_result::from_errno(EAGAIN).what() == read_result::kind::would_block);
    CHECK(read_result::from_errno(EWOULDBLOCK).what() == read_result::kind::would_block);
    CHECK(read_result::from_errno(EINTR).what() == read_result::kind::skip);
    const read_result io = read_result::from_errno(EIO);
    CHECK(io.what() == read_result::kind::failed);
    CHECK(io.error() == rdma_asio::detail::errno_code(EIO));
    const read_result bad = read_result::from_errno(EBADF);
    CHECK(bad.what() == read_result::kind::failed);
    CHECK(bad.error() == asio::error::bad_descriptor);
    // A library that failed without setting errno still failed.
    const read_result silent = read_result::from_errno(0);
    CHECK(silent.what() == read_result::kind::failed);
    CHECK(silent.error() == rdma_asio::detail::errno_code(EIO));
    CHECK_FALSE(read_result::event().error());
}

} // namespace read_loop_test
