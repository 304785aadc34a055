// A stream operation's buffers: the first 16 of the caller's sequence, kept
// without an allocation; the sequence's bytes beyond them are left for the next
// operation (a read_some or write_some may move fewer bytes than asked).
#include <rdma_asio/detail/stream/stream_buffers.hpp>

#include "asio_alias.hpp"

#include <catch2/catch.hpp>

#include <array>
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
