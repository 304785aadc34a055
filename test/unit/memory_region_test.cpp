#include "rdma_asio/memory_region.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include <array>
#include <cstddef>
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

} // namespace memory_region_test
