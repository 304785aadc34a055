// The stream's hello (stream_hello.hpp): a hello of this version with sizes a
// stream can have is read back as sent; anything else is not taken for one.
#include "rdma_asio/detail/stream/stream_hello.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

using rdma_asio::detail::read_stream_hello;
using rdma_asio::detail::stream_hello;

namespace {

stream_hello a_hello() {
    stream_hello h;
    h.ring_address = 0x7f0012340000;
    h.ring_rkey = 0x1234;
    h.ring_bytes = 256 * 1024;
    h.control_address = 0x7f0056780000;
    h.control_rkey = 0x5678;
    h.notices = 32;
    return h;
}

// `h` as its send carries it, in a buffer 8 bytes longer.
std::array<std::byte, sizeof(stream_hello) + 8> sent(const stream_hello& h) {
    std::array<std::byte, sizeof(stream_hello) + 8> bytes{};
    std::memcpy(bytes.data(), &h, sizeof h);
    return bytes;
}

} // namespace

TEST_CASE("a stream's hello is read back as it was sent", "[stream]") {
    const stream_hello h = a_hello();
    const auto bytes = sent(h);
    const auto got = read_stream_hello(bytes.data(), sizeof(stream_hello));
    REQUIRE(got);
    CHECK(got->ring_address == h.ring_address);
    CHECK(got->ring_rkey == h.ring_rkey);
    CHECK(got->ring_bytes == h.ring_bytes);
    CHECK(got->control_address == h.control_address);
    CHECK(got->control_rkey == h.control_rkey);
    CHECK(got->notices == h.notices);
    CHECK(got->limits().ring_bytes == h.ring_bytes);
    CHECK(got->limits().notices == h.notices);
}

TEST_CASE("a message that is not a stream's hello of this version is not taken for one",
          "[stream]") {
    const auto good = sent(a_hello());
    CHECK_FALSE(read_stream_hello(nullptr, sizeof(stream_hello)));
    CHECK_FALSE(read_stream_hello(good.data(), 0));
    CHECK_FALSE(read_stream_hello(good.data(), sizeof(stream_hello) - 1));
    CHECK_FALSE(read_stream_hello(good.data(), sizeof(stream_hello) + 1));

    stream_hello other_magic = a_hello();
    other_magic.magic ^= 1;
    CHECK_FALSE(read_stream_hello(sent(other_magic).data(), sizeof(stream_hello)));
    // Version 1's records were 16 bytes: a peer of that version is not taken.
    for (std::uint32_t version : {1u, 3u}) {
        stream_hello other_version = a_hello();
        other_version.version = version;
        CHECK_FALSE(read_stream_hello(sent(other_version).data(), sizeof(stream_hello)));
    }
    // Sizes no stream has: the checks a stream's own options meet.
    stream_hello empty_ring = a_hello();
    empty_ring.ring_bytes = 0;
    CHECK_FALSE(read_stream_hello(sent(empty_ring).data(), sizeof(stream_hello)));
    stream_hello huge_ring = a_hello();
    huge_ring.ring_bytes = 1u << 30;
    CHECK_FALSE(read_stream_hello(sent(huge_ring).data(), sizeof(stream_hello)));
    stream_hello few_notices = a_hello();
    few_notices.notices = 3;
    CHECK_FALSE(read_stream_hello(sent(few_notices).data(), sizeof(stream_hello)));
    few_notices.notices = 4;
    CHECK(read_stream_hello(sent(few_notices).data(), sizeof(stream_hello)));
}
