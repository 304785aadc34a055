#include "rdma_asio/device_list.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"

#include <algorithm>

namespace device_list_rxe_test {

using rdma_asio::test::test_device_name;

TEST_CASE("device_list lists the rxe device", "[device_list]") {
    rdma_asio::device_list devices;
    REQUIRE_FALSE(devices.empty());
    ibv_device* dev = devices.find(test_device_name());
    REQUIRE(dev != nullptr);

    auto it = std::find_if(devices.begin(), devices.end(),
                           [&](rdma_asio::device d) { return d.name() == test_device_name(); });
    REQUIRE(it != devices.end());
    CHECK((*it).native_handle() == dev);
    CHECK((*it).guid() != 0);
    std::size_t counted = 0;
    for (rdma_asio::device d : devices) {
        CHECK_FALSE(d.name().empty());
        ++counted;
    }
    CHECK(counted == devices.size());
}

} // namespace device_list_rxe_test
