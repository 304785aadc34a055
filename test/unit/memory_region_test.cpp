#include "rdma_asio/detail/device/region_registry.hpp"
#include "rdma_asio/memory_region.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace memory_region_test {

// Registering needs a device: test/rxe/memory_region_rxe_test.cpp.

TEST_CASE("a default memory_region is not registered and refuses ranges", "[memory_region]") {
    rdma_asio::memory_region mr;
    CHECK_FALSE(mr.is_open());
    CHECK(mr.native_handle() == nullptr);
    CHECK(mr.buffer().size() == 0);
    CHECK(mr.lkey() == 0);
    CHECK(mr.rkey() == 0);
    rdma_asio::error_code ec;
    mr.at(0, 0, ec);
    CHECK(ec == asio::error::bad_descriptor);
    mr.remote_at(0, 0, ec);
    CHECK(ec == asio::error::bad_descriptor);
    try {
        mr.at(0, 1);
        FAIL("at() on an unregistered region did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("memory_region::at") != std::string::npos);
    }
    mr.close(ec);
    CHECK_FALSE(ec);
}

TEST_CASE("registering in a closed protection_domain is refused", "[memory_region]") {
    rdma_asio::protection_domain pd;
    std::array<std::byte, 64> bytes{};
    rdma_asio::memory_region mr;
    rdma_asio::error_code ec;
    mr.open(pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(mr.is_open());
    try {
        rdma_asio::memory_region thrown(pd, asio::buffer(bytes), 0);
        FAIL("registering in a closed protection_domain did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("ibv_reg_mr") != std::string::npos);
    }
}

TEST_CASE("a registered_buffer advances as an Asio buffer and names its sge", "[memory_region]") {
    std::array<std::byte, 32> bytes{};
    rdma_asio::registered_buffer b{bytes.data(), bytes.size(), 0x1234};
    ibv_sge sge = b.sge();
    CHECK(sge.addr == reinterpret_cast<std::uintptr_t>(bytes.data()));
    CHECK(sge.length == 32);
    CHECK(sge.lkey == 0x1234);

    rdma_asio::registered_buffer tail = b + 8;
    CHECK(tail.data == bytes.data() + 8);
    CHECK(tail.size == 24);
    CHECK(tail.lkey == 0x1234);
    CHECK(tail.buffer().data() == bytes.data() + 8);
    CHECK(tail.buffer().size() == 24);

    tail += 100; // past the end: empty at the end, as asio::mutable_buffer
    CHECK(tail.data == bytes.data() + 32);
    CHECK(tail.size == 0);
}

// A queue pair posts a send inline (no lkey checked by the device) only when the
// registry of its protection domain covers every entry: the same checks the device
// makes of a request it reads, key and bounds.
namespace {

// A registry and 256 bytes of memory; at(offset) is an address in it as an sge
// names it.
struct registry_fixture {
    rdma_asio::detail::region_registry regions;
    std::array<std::byte, 256> memory{};
    std::uint64_t at(std::size_t offset) const {
        return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(memory.data() + offset));
    }
    static std::span<const ibv_sge> list(std::initializer_list<ibv_sge> sges) {
        return {sges.begin(), sges.size()};
    }
};

} // namespace

TEST_CASE("the region registry covers only entries within a region held under their own lkey",
          "[memory_region][region_registry]") {
    registry_fixture f;
    auto& regions = f.regions;
    auto& memory = f.memory;
    const auto at = [&](std::size_t offset) { return f.at(offset); };
    const auto covers = [&](std::initializer_list<ibv_sge> sges) {
        rdma_asio::detail::region_registry::last_region none; // asks the registry itself
        return regions.covers(registry_fixture::list(sges), none);
    };
    CHECK_FALSE(covers({{at(0), 8, 7}}));    // nothing held yet
    regions.add(7, memory.data() + 64, 128); // bytes 64 .. 191 under lkey 7
    regions.add(3, memory.data(), 32);       // bytes 0 .. 31 under lkey 3
    CHECK(regions.size() == 2);

    CHECK(covers({{at(64), 128, 7}}));                      // the whole region
    CHECK(covers({{at(100), 8, 7}, {at(0), 32, 3}}));       // two regions, each its own key
    CHECK(covers({{at(192), 0, 7}}));                       // empty, at the very end
    CHECK_FALSE(covers({{at(64), 129, 7}}));                // one byte past the end
    CHECK_FALSE(covers({{at(190), 8, 7}}));                 // starts inside, ends outside
    CHECK_FALSE(covers({{at(32), 8, 7}}));                  // before the region
    CHECK_FALSE(covers({{at(0), 8, 7}}));                   // another region's bytes, wrong key
    CHECK_FALSE(covers({{at(100), 8, 9}}));                 // a key of no region
    CHECK_FALSE(covers({{at(100), 8, 7}, {at(40), 8, 3}})); // one entry of two outside
    // No sum wraps: an address or length near the top of the address space.
    CHECK_FALSE(covers({{std::numeric_limits<std::uint64_t>::max() - 4, 8, 7}}));
    CHECK_FALSE(covers({{at(100), std::numeric_limits<std::uint32_t>::max(), 7}}));

    regions.remove(7);
    CHECK_FALSE(covers({{at(100), 8, 7}}));
    CHECK(covers({{at(0), 8, 3}}));
    regions.remove(7); // not held: nothing happens
    CHECK(regions.size() == 1);
    // A key given again (the device reuses a deregistered region's key) names the
    // new range only.
    regions.add(3, memory.data() + 128, 16);
    CHECK(regions.size() == 1);
    CHECK_FALSE(covers({{at(0), 8, 3}}));
    CHECK(covers({{at(128), 16, 3}}));
}

// A queue pair keeps the last region that answered, so that the next send from it is
// checked without the lock; a region that leaves (or a key given again) must never
// be vouched for from that copy.
TEST_CASE("the region registry's answer from a caller's last region holds only while no region "
          "has left",
          "[memory_region][region_registry]") {
    registry_fixture f;
    auto& regions = f.regions;
    auto& memory = f.memory;
    rdma_asio::detail::region_registry::last_region last;
    const auto at = [&](std::size_t offset) { return f.at(offset); };
    const auto covers = [&](std::initializer_list<ibv_sge> sges) {
        return regions.covers(registry_fixture::list(sges), last);
    };
    CHECK_FALSE(covers({{at(0), 8, 7}})); // empty copy, nothing held
    CHECK(last.generation == 0);
    regions.add(7, memory.data(), 128);
    regions.add(9, memory.data() + 128, 128);
    CHECK(covers({{at(8), 8, 7}}));
    CHECK(last.lkey == 7);
    CHECK(last.generation != 0);
    // From the copy: the same region's bounds and key still hold.
    CHECK(covers({{at(0), 128, 7}}));
    CHECK_FALSE(covers({{at(0), 129, 7}}));
    CHECK_FALSE(covers({{at(8), 8, 8}}));
    // Another region: asked under the lock, and remembered.
    CHECK(covers({{at(130), 8, 9}}));
    CHECK(last.lkey == 9);
    // Adding a region keeps the copy; a region leaving does not, even another one.
    regions.add(11, memory.data(), 16);
    CHECK(covers({{at(130), 8, 9}}));
    regions.remove(7);
    const auto before = last.generation;
    CHECK(covers({{at(130), 8, 9}})); // still held: asked again, remembered anew
    CHECK(last.generation != before);
    regions.remove(9);
    CHECK_FALSE(covers({{at(130), 8, 9}})); // gone: the copy is not trusted
    // A key given again over other bytes: the copy of the old range is not trusted.
    regions.add(11, memory.data() + 64, 16);
    CHECK(covers({{at(64), 16, 11}}));
    regions.add(11, memory.data() + 200, 16);
    CHECK_FALSE(covers({{at(64), 16, 11}}));
    CHECK(covers({{at(200), 16, 11}}));
}

TEST_CASE("a protection domain this library did not allocate has no region registry",
          "[memory_region][region_registry]") {
    CHECK(rdma_asio::detail::regions_of(nullptr) == nullptr);
    ibv_pd* not_ours = nullptr;
    std::shared_ptr<ibv_pd> foreign(not_ours, [](ibv_pd*) {});
    CHECK(rdma_asio::detail::regions_of(foreign) == nullptr);
}

} // namespace memory_region_test
