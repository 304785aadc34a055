#include "rdma_asio/device_list.hpp"
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"

#include <string_view>

namespace device_list_test {

using rdma_asio::errc;
using rdma_asio::test::fake_sysfs_kind;

TEST_CASE("device_list without kernel support reports no_kernel_support", "[.sysfs_absent]") {
    REQUIRE(fake_sysfs_kind() == "absent"); // run through ctest: unit.no_device.sysfs_absent

    rdma_asio::error_code ec;
    rdma_asio::device_list list(ec);
    CHECK(ec == errc::no_kernel_support);
    CHECK(list.empty());
    CHECK(list.native_handle() == nullptr);
    CHECK(list.begin() == list.end());
    CHECK(list.find("rxe0") == nullptr);

    try {
        rdma_asio::device_list throwing;
        FAIL("device_list() did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == errc::no_kernel_support);
        CHECK(std::string_view(e.what()).find("ibv_get_device_list") != std::string_view::npos);
    }
}

TEST_CASE("device_list with the uverbs ABI and no device is empty", "[.sysfs_empty]") {
    REQUIRE(fake_sysfs_kind() == "empty"); // run through ctest: unit.no_device.sysfs_empty

    rdma_asio::error_code ec;
    rdma_asio::device_list list(ec);
    CHECK_FALSE(ec);
    CHECK(list.size() == 0);
    CHECK(list.native_handle() != nullptr);
    CHECK(list.begin() == list.end());
    CHECK(list.find("rxe0") == nullptr);
}

TEST_CASE("a moved-from device_list is empty", "[device_list]") {
    rdma_asio::error_code ec;
    rdma_asio::device_list a(ec); // whatever this host has; the move is what is tested
    const std::size_t n = a.size();
    rdma_asio::device_list b(std::move(a));
    CHECK(b.size() == n);
    CHECK(a.empty());
    CHECK(a.native_handle() == nullptr);
    a = std::move(b);
    CHECK(a.size() == n);
    CHECK(b.empty());
}

} // namespace device_list_test
