#include "rdma_asio/context.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"
#include "verbs_resources.hpp"

#include "asio_alias.hpp"

#include <array>
#include <cerrno>
#include <cstddef>

namespace protection_domain_rxe_test {

using rdma_asio::test::test_device_name;

TEST_CASE("a protection_domain allocates an ibv_pd on the device", "[protection_domain]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::protection_domain pd(ctx);
    REQUIRE(pd.is_open());
    CHECK(pd.native_handle()->context == ctx.native_handle());

    rdma_asio::error_code ec;
    pd.open(ctx, ec);
    CHECK(ec == asio::error::already_open);

    rdma_asio::protection_domain moved(std::move(pd));
    CHECK(moved.is_open());
    CHECK_FALSE(pd.is_open());
    moved.close(ec);
    CHECK_FALSE(ec);
    CHECK_FALSE(moved.is_open());
}

TEST_CASE("a protection_domain keeps its device open after the context closes",
          "[protection_domain]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::protection_domain pd(ctx);
    ctx.close();
    // The device is still open: a CQ and a memory region can be made on it.
    rdma_asio::test::cq_ptr cq = rdma_asio::test::make_cq(pd.native_handle()->context, 4);
    CHECK(cq != nullptr);
    std::array<std::byte, 256> bytes{};
    rdma_asio::memory_region mr(pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE);
    CHECK(mr.is_open());
}

TEST_CASE("a protection_domain on a device it did not open", "[protection_domain]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::protection_domain pd(ctx.native_handle());
    CHECK(pd.is_open());
    CHECK(pd.native_handle()->context == ctx.native_handle());
}

TEST_CASE("close(ec) reports a protection domain still used by a QP and keeps it open",
          "[protection_domain]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::protection_domain pd(ctx);
    rdma_asio::test::cq_ptr cq = rdma_asio::test::make_cq(ctx.native_handle(), 4);
    rdma_asio::test::qp_ptr qp =
        rdma_asio::test::make_rc_qp(pd.native_handle(), cq.get(), cq.get());

    rdma_asio::error_code ec;
    pd.close(ec);
    CHECK(ec == rdma_asio::error_code(EBUSY, asio::error::get_system_category()));
    CHECK(pd.is_open());

    qp.reset();
    pd.close(ec);
    CHECK_FALSE(ec);
    CHECK_FALSE(pd.is_open());
}

TEST_CASE("memory regions keep their protection domain allocated", "[protection_domain]") {
    rdma_asio::context ctx(test_device_name());
    rdma_asio::protection_domain pd(ctx);
    std::array<std::byte, 256> bytes{};
    rdma_asio::memory_region mr(pd, asio::buffer(bytes), IBV_ACCESS_LOCAL_WRITE);
    ibv_pd* raw = pd.native_handle();

    rdma_asio::error_code ec;
    pd.close(ec); // shared with mr: lets go without deallocating
    CHECK_FALSE(ec);
    CHECK_FALSE(pd.is_open());
    // Still allocated: a QP can be made on it.
    rdma_asio::test::cq_ptr cq = rdma_asio::test::make_cq(ctx.native_handle(), 4);
    rdma_asio::test::qp_ptr qp = rdma_asio::test::make_rc_qp(raw, cq.get(), cq.get());
    CHECK(qp != nullptr);
    qp.reset();
    mr.close(ec); // the last user: deregisters, then deallocates the PD
    CHECK_FALSE(ec);
}

} // namespace protection_domain_rxe_test
