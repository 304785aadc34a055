#include "rdma_asio/wc_error.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>

namespace wc_error_test {

using rdma_asio::wc_errc;

TEST_CASE("a work completion's status is its error code", "[wc_error]") {
    CHECK_FALSE(rdma_asio::wc_error(IBV_WC_SUCCESS));
    rdma_asio::error_code ec = rdma_asio::wc_error(IBV_WC_REM_ACCESS_ERR);
    CHECK(ec == wc_errc::remote_access_error);
    CHECK(ec.category() == rdma_asio::get_wc_category());
    CHECK(std::string(ec.category().name()) == "rdma_asio.wc");
    CHECK(ec.value() == IBV_WC_REM_ACCESS_ERR);
    // libibverbs' words, the constant, then the likely cause and what to do.
    CHECK(ec.message().starts_with("remote access error (IBV_WC_REM_ACCESS_ERR): the peer's "
                                   "memory region does not allow this access"));
    CHECK(rdma_asio::wc_error(IBV_WC_WR_FLUSH_ERR) == wc_errc::flushed);
}

TEST_CASE("every failed status names itself and its constant", "[wc_error]") {
    std::set<std::string> seen;
    for (int status = IBV_WC_LOC_LEN_ERR; status <= IBV_WC_TM_RNDV_INCOMPLETE; ++status) {
        std::string text = rdma_asio::wc_error(static_cast<ibv_wc_status>(status)).message();
        CAPTURE(status, text);
        CHECK(text.find("(IBV_WC_") != std::string::npos);
        CHECK(seen.insert(text).second);
    }
    // A status this library does not know yet still gets a message.
    rdma_asio::error_code future(1000, rdma_asio::get_wc_category());
    CHECK(future.message() == "work completion status 1000");
}

TEST_CASE("the statuses a program's mistakes cause name the likely cause", "[wc_error]") {
    const auto message = [](ibv_wc_status s) { return rdma_asio::wc_error(s).message(); };
    using Catch::Matchers::Contains;
    CHECK_THAT(message(IBV_WC_LOC_LEN_ERR), Contains("longer than the receive buffer"));
    CHECK_THAT(message(IBV_WC_LOC_QP_OP_ERR), Contains("a message longer than the buffer"));
    CHECK_THAT(message(IBV_WC_LOC_PROT_ERR), Contains("IBV_ACCESS_LOCAL_WRITE"));
    CHECK_THAT(message(IBV_WC_REM_OP_ERR), Contains("its receive buffer was shorter"));
    CHECK_THAT(message(IBV_WC_REM_ACCESS_ERR), Contains("IBV_ACCESS_REMOTE_ATOMIC"));
    CHECK_THAT(message(IBV_WC_RNR_RETRY_EXC_ERR), Contains("no receive posted"));
    CHECK_THAT(message(IBV_WC_WR_FLUSH_ERR), Contains("an earlier one failed"));
    // A rare status keeps libibverbs' words alone.
    CHECK(message(IBV_WC_INV_EECN_ERR) ==
          std::string(ibv_wc_status_str(IBV_WC_INV_EECN_ERR)) + " (IBV_WC_INV_EECN_ERR)");
}

TEST_CASE("wc_errc values compare with portable conditions", "[wc_error]") {
    CHECK(rdma_asio::error_code(wc_errc::flushed) == std::errc::operation_canceled);
    CHECK(rdma_asio::error_code(wc_errc::remote_access_error) == std::errc::permission_denied);
    CHECK(rdma_asio::error_code(wc_errc::retry_exceeded) == std::errc::timed_out);
    CHECK(rdma_asio::error_code(wc_errc::rnr_retry_exceeded) == std::errc::connection_refused);
    CHECK(rdma_asio::error_code(wc_errc::general_error) == std::errc::io_error);
}

} // namespace wc_error_test
