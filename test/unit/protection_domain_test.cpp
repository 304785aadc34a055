#include "rdma_asio/context.hpp"
#include "rdma_asio/protection_domain.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include <string>
#include <utility>

namespace protection_domain_test {

// Opening one needs a device: test/rxe/protection_domain_rxe_test.cpp.

TEST_CASE("a default protection_domain is closed", "[protection_domain]") {
    rdma_asio::protection_domain pd;
    CHECK_FALSE(pd.is_open());
    CHECK(pd.native_handle() == nullptr);
    CHECK(pd.share() == nullptr);
    pd.close(); // harmless
    rdma_asio::error_code ec = asio::error::eof;
    pd.close(ec);
    CHECK_FALSE(ec);
    rdma_asio::protection_domain moved(std::move(pd));
    CHECK_FALSE(moved.is_open());
}

TEST_CASE("a protection_domain on a closed context or a null device is refused",
          "[protection_domain]") {
    rdma_asio::context closed;
    rdma_asio::protection_domain pd;
    rdma_asio::error_code ec;
    pd.open(closed, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(pd.is_open());
    pd.open(static_cast<ibv_context*>(nullptr), ec);
    CHECK(ec == asio::error::invalid_argument);
    CHECK_FALSE(pd.is_open());
    try {
        rdma_asio::protection_domain thrown(closed);
        FAIL("a protection_domain on a closed context did not throw");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("ibv_alloc_pd") != std::string::npos);
    }
}

} // namespace protection_domain_test
