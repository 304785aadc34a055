#include "rdma_asio/context.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"

#include "asio_alias.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memory_region_rxe_test {

using rdma_asio::test::test_device_name;

namespace {
rdma_asio::error_code sys(int e) {
    return {e, asio::error::get_system_category()};
}
} // namespace

TEST_CASE("a memory_region registers the caller's memory with its keys", "[memory_region]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::protection_domain pd(ctx);
    std::vector<std::byte> bytes(4096);
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    rdma_asio::memory_region mr(pd, asio::buffer(bytes), access);
    REQUIRE(mr.is_open());
    CHECK(mr.buffer().data() == bytes.data());
    CHECK(mr.buffer().size() == bytes.size());
    CHECK(mr.lkey() == mr.native_handle()->lkey);
    CHECK(mr.rkey() == mr.native_handle()->rkey);
    CHECK(mr.access() == access);
    CHECK(mr.native_handle()->pd == pd.native_handle());

    rdma_asio::registered_buffer part = mr.at(100, 200);
    CHECK(part.data == bytes.data() + 100);
    CHECK(part.size == 200);
    CHECK(part.lkey == mr.lkey());
    rdma_asio::registered_buffer whole = mr.whole();
    CHECK(whole.data == bytes.data());
    CHECK(whole.size == bytes.size());

    rdma_asio::remote_buffer remote = mr.remote_at(4000, 96);
    CHECK(remote.address == reinterpret_cast<std::uintptr_t>(bytes.data()) + 4000);
    CHECK(remote.size == 96);
    CHECK(remote.rkey == mr.rkey());

    rdma_asio::error_code ec;
    mr.open(pd, asio::buffer(bytes), access, ec);
    CHECK(ec == asio::error::already_open);

    rdma_asio::memory_region moved(std::move(mr));
    CHECK(moved.is_open());
    CHECK_FALSE(mr.is_open());
    moved.close(ec);
    CHECK_FALSE(ec);
    CHECK_FALSE(moved.is_open());
}

TEST_CASE("ranges outside a memory region are refused", "[memory_region]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::protection_domain pd(ctx);
    std::vector<std::byte> bytes(64);
    rdma_asio::memory_region mr(pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE);
    rdma_asio::error_code ec;
    CHECK(mr.at(64, 0, ec).size == 0); // the empty range at the end is inside
    CHECK_FALSE(ec);
    mr.at(65, 0, ec);
    CHECK(ec == asio::error::invalid_argument);
    mr.at(1, 64, ec);
    CHECK(ec == asio::error::invalid_argument);
    mr.at(8, SIZE_MAX, ec); // offset + size would wrap
    CHECK(ec == asio::error::invalid_argument);
    mr.remote_at(0, 65, ec);
    CHECK(ec == asio::error::invalid_argument);
    try {
        mr.remote_at(60, 8);
        FAIL("remote_at past the end did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::invalid_argument);
        CHECK(std::string(e.what()).find("memory_region::remote_at") != std::string::npos);
    }
}

TEST_CASE("ibv_reg_mr's refusals reach the caller with its errno", "[memory_region]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::protection_domain pd(ctx);
    std::vector<std::byte> bytes(64);
    rdma_asio::memory_region mr;
    rdma_asio::error_code ec;

    // ibv_reg_mr(3): remote write needs local write.
    mr.open(pd, asio::buffer(bytes), IBV_ACCESS_REMOTE_WRITE, ec);
    CHECK(ec == sys(EINVAL));
    CHECK_FALSE(mr.is_open());

    // Memory that is not mapped: the kernel cannot pin it.
    void* hole = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(hole != MAP_FAILED);
    ::munmap(hole, 4096);
    mr.open(pd, asio::mutable_buffer(hole, 4096), IBV_ACCESS_LOCAL_WRITE, ec);
    CHECK(ec == sys(EFAULT));
    CHECK_FALSE(mr.is_open());

    try {
        rdma_asio::memory_region thrown(pd, asio::buffer(bytes), IBV_ACCESS_REMOTE_WRITE);
        FAIL("ibv_reg_mr with remote write alone did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == sys(EINVAL));
        CHECK(std::string(e.what()).find("ibv_reg_mr") != std::string::npos);
    }
}

} // namespace memory_region_rxe_test
