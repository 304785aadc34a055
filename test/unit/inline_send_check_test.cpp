// The decision to post a work request inline (inline_send_check.hpp): only sends
// and RDMA writes of 1 to max_inline bytes whose every entry lies in a region of
// the QP's own protection domain under its own lkey. What the device then does
// with the rest (its protection error) is in queue_pair_rxe_test.cpp.
#include "rdma_asio/detail/device/region_registry.hpp"
#include "rdma_asio/detail/qp/inline_send_check.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>

namespace inline_send_check_test {

using rdma_asio::detail::inline_send_check;
using rdma_asio::detail::region_registry;

namespace {

// 256 bytes, of which 64 .. 191 are registered under lkey 7.
struct fixture {
    std::shared_ptr<region_registry> regions = std::make_shared<region_registry>();
    std::array<std::byte, 256> memory{};
    fixture() { regions->add(7, memory.data() + 64, 128); }
    std::uint64_t at(std::size_t offset) const {
        return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(memory.data() + offset));
    }
};

std::size_t total(std::initializer_list<ibv_sge> sges) {
    std::size_t n = 0;
    for (const ibv_sge& sge : sges)
        n += sge.length;
    return n;
}

bool allows(inline_send_check& check, ibv_wr_opcode opcode, std::initializer_list<ibv_sge> sges) {
    return check.allows(opcode, std::span<const ibv_sge>(sges.begin(), sges.size()), total(sges));
}

} // namespace

TEST_CASE("sends and RDMA writes within a registered region of the QP's domain go inline",
          "[inline_send_check]") {
    fixture f;
    inline_send_check check(64, f.regions);
    for (ibv_wr_opcode opcode :
         {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM}) {
        INFO("opcode " << opcode);
        CHECK(allows(check, opcode, {{f.at(64), 64, 7}}));
        CHECK(allows(check, opcode, {{f.at(64), 1, 7}}));
        CHECK(allows(check, opcode, {{f.at(100), 16, 7}, {f.at(150), 41, 7}})); // gathered
    }
}

TEST_CASE("nothing else goes inline: the device checks it", "[inline_send_check]") {
    fixture f;
    inline_send_check check(64, f.regions);
    SECTION("longer than max_inline, or empty") {
        CHECK_FALSE(allows(check, IBV_WR_SEND, {{f.at(64), 65, 7}}));
        CHECK_FALSE(allows(check, IBV_WR_SEND, {{f.at(64), 0, 7}}));
        CHECK_FALSE(allows(check, IBV_WR_SEND, {}));
    }
    SECTION("an operation that writes into its buffer") {
        CHECK_FALSE(allows(check, IBV_WR_RDMA_READ, {{f.at(64), 8, 7}}));
        CHECK_FALSE(allows(check, IBV_WR_ATOMIC_FETCH_AND_ADD, {{f.at(64), 8, 7}}));
        CHECK_FALSE(allows(check, IBV_WR_ATOMIC_CMP_AND_SWP, {{f.at(64), 8, 7}}));
    }
    SECTION("past the region's end, before its start, or reaching over it") {
        CHECK_FALSE(allows(check, IBV_WR_SEND, {{f.at(192), 8, 7}}));
        CHECK_FALSE(allows(check, IBV_WR_SEND, {{f.at(160), 40, 7}}));
        CHECK_FALSE(allows(check, IBV_WR_SEND, {{f.at(32), 8, 7}}));
        CHECK_FALSE(allows(check, IBV_WR_SEND, {{f.at(60), 8, 7}}));
    }
    SECTION("an lkey the registry does not hold (another domain's, made up)") {
        CHECK_FALSE(allows(check, IBV_WR_SEND, {{f.at(64), 8, 8}}));
        CHECK_FALSE(allows(check, IBV_WR_SEND, {{f.at(64), 8, 7}, {f.at(72), 8, 9}}));
    }
    SECTION("a region that has left since it last vouched") {
        CHECK(allows(check, IBV_WR_SEND, {{f.at(64), 8, 7}}));
        f.regions->remove(7);
        CHECK_FALSE(allows(check, IBV_WR_SEND, {{f.at(64), 8, 7}}));
    }
    SECTION("a QP whose protection domain the library does not know") {
        inline_send_check unknown(64, nullptr);
        CHECK_FALSE(allows(unknown, IBV_WR_SEND, {{f.at(64), 8, 7}}));
    }
    SECTION("a QP that allows no inline data") {
        inline_send_check none(0, f.regions);
        CHECK_FALSE(allows(none, IBV_WR_SEND, {{f.at(64), 8, 7}}));
    }
}

TEST_CASE("the program's own bytes (a stream's small write) go inline by length and opcode "
          "alone, and never past max_inline",
          "[inline_send_check]") {
    inline_send_check check(64, nullptr); // no registry: no region vouches for them
    CHECK(check.allows_copy(IBV_WR_RDMA_WRITE_WITH_IMM, 64));
    CHECK(check.allows_copy(IBV_WR_SEND, 1));
    CHECK_FALSE(check.allows_copy(IBV_WR_RDMA_WRITE_WITH_IMM, 65));
    CHECK_FALSE(check.allows_copy(IBV_WR_RDMA_WRITE_WITH_IMM, 0));
    CHECK_FALSE(check.allows_copy(IBV_WR_RDMA_READ, 8));
    CHECK_FALSE(check.allows_copy(IBV_WR_ATOMIC_FETCH_AND_ADD, 8));
    CHECK_FALSE(inline_send_check(0, nullptr).allows_copy(IBV_WR_SEND, 1));
}

} // namespace inline_send_check_test
