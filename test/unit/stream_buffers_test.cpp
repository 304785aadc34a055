// A stream operation's buffers: the first 16 of the caller's sequence, kept
// without an allocation; the sequence's bytes beyond them are left for the next
// operation (a read_some or write_some may move fewer bytes than asked).
#include <rdma_asio/detail/stream/stream_buffers.hpp>

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <new>
#include <vector>

TEST_CASE("a stream operation keeps the first 16 buffers of a longer sequence", "[stream]") {
    std::array<char, 20> bytes{};
    std::vector<asio::const_buffer> twenty;
    for (std::size_t i = 0; i < bytes.size(); ++i)
        twenty.push_back(asio::buffer(&bytes[i], 1));
    const rdma_asio::detail::stream_buffers<asio::const_buffer> kept(twenty);
    CHECK(asio::buffer_size(kept) == 16);
    CHECK(kept.front().data() == &bytes[0]);
    CHECK((kept.end() - 1)->data() == &bytes[15]);
}

TEST_CASE("a stream operation keeps a single buffer and a short sequence whole", "[stream]") {
    std::array<char, 8> bytes{};
    const rdma_asio::detail::stream_buffers<asio::mutable_buffer> one(asio::buffer(bytes));
    CHECK(asio::buffer_size(one) == 8);
    CHECK(one.end() - one.begin() == 1);
    const std::array<asio::mutable_buffer, 2> two{asio::buffer(bytes.data(), 3),
                                                  asio::buffer(bytes.data() + 3, 5)};
    const rdma_asio::detail::stream_buffers<asio::mutable_buffer> both(two);
    CHECK(asio::buffer_size(both) == 8);
    CHECK_FALSE(both.empty());
    const rdma_asio::detail::stream_buffers<asio::mutable_buffer> none(
        std::vector<asio::mutable_buffer>{});
    CHECK(none.empty());
}

namespace {

// A buffer type that counts the buffers alive (as Asio's buffer debugging makes
// buffers with a member to destroy), and whose copy can be made to throw.
struct counted_buffer {
    static inline int alive = 0;
    static inline int copies_left = -1; // copies that succeed before one throws; -1: all

    explicit counted_buffer(asio::const_buffer b) : data(b) { ++alive; }
    counted_buffer(const counted_buffer& other) : data(other.data) {
        if (copies_left == 0)
            throw std::bad_alloc();
        if (copies_left > 0)
            --copies_left;
        ++alive;
    }
    counted_buffer& operator=(const counted_buffer&) = delete;
    ~counted_buffer() { --alive; }

    asio::const_buffer data;
};

} // namespace

TEST_CASE("a stream operation's kept buffers are copied and destroyed as many as it holds",
          "[stream]") {
    std::array<char, 3> bytes{};
    const std::array<asio::const_buffer, 3> three{
        asio::buffer(&bytes[0], 1), asio::buffer(&bytes[1], 1), asio::buffer(&bytes[2], 1)};
    counted_buffer::alive = 0;
    counted_buffer::copies_left = -1;
    {
        const rdma_asio::detail::stream_buffers<counted_buffer> kept(three);
        CHECK(counted_buffer::alive == 3);
        {
            const rdma_asio::detail::stream_buffers<counted_buffer> copy(kept);
            CHECK(counted_buffer::alive == 6);
            REQUIRE(copy.end() - copy.begin() == 3);
            CHECK(copy.begin()[2].data.data() == &bytes[2]);
        }
        CHECK(counted_buffer::alive == 3);

        // A copy that fails at its second buffer leaves nothing of itself.
        counted_buffer::copies_left = 1;
        CHECK_THROWS_AS(rdma_asio::detail::stream_buffers<counted_buffer>(kept), std::bad_alloc);
        CHECK(counted_buffer::alive == 3);
        counted_buffer::copies_left = -1;
    }
    CHECK(counted_buffer::alive == 0);
}
