// Registered memory's allocation (page_aligned_bytes.hpp): on whole pages,
// zeroed, and empty once moved from (a stream moves a ring or a copy of the
// peer's ring when it replaces one, and counts what it holds by their sizes).
#include "rdma_asio/detail/device/page_aligned_bytes.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

using rdma_asio::detail::page_aligned_bytes;

TEST_CASE("page-aligned bytes start on a page, are zeroed, and are empty once moved from",
          "[memory]") {
    const std::size_t page = page_aligned_bytes::page_size();
    page_aligned_bytes a(page + 10);
    REQUIRE(a.data() != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % page == 0);
    CHECK(a.size() == page + 10);
    bool zeroed = true;
    for (std::size_t i = 0; i < a.size(); ++i)
        zeroed = zeroed && a.data()[i] == std::byte{0};
    CHECK(zeroed);

    std::byte* const at = a.data();
    page_aligned_bytes b(std::move(a));
    CHECK(b.data() == at);
    CHECK(b.size() == page + 10);
    CHECK(a.data() == nullptr); // NOLINT(bugprone-use-after-move): what is tested
    CHECK(a.size() == 0);

    page_aligned_bytes c(8);
    c = std::move(b);
    CHECK(c.data() == at);
    CHECK(c.size() == page + 10);
    CHECK(b.size() == 0); // NOLINT(bugprone-use-after-move)
    CHECK(page_aligned_bytes().size() == 0);
}
