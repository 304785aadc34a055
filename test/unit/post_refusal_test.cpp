// Why a refused post failed (post_refusal.hpp): EINVAL from a QP whose state
// cannot take the request is "not connected yet"; every other refusal keeps its
// errno. What rxe answers for each state is in error_messages_rxe_test.cpp.
#include "rdma_asio/detail/qp/post_refusal.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include <cerrno>

namespace post_refusal_test {

using rdma_asio::errc;
using rdma_asio::detail::post_refusal;
using rdma_asio::detail::work_queue;

TEST_CASE("a send refused before RTS is not connected yet", "[post_refusal]") {
    for (ibv_qp_state s : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR}) {
        CAPTURE(s);
        CHECK(post_refusal(EINVAL, work_queue::send, s) == errc::queue_pair_not_connected);
    }
    // In RTS the refusal is the request's own.
    CHECK(post_refusal(EINVAL, work_queue::send, IBV_QPS_RTS) == asio::error::invalid_argument);
    CHECK(post_refusal(EINVAL, work_queue::send, IBV_QPS_ERR) == asio::error::invalid_argument);
}

TEST_CASE("a receive refused in RESET is not connected yet, and from INIT on it is the request's",
          "[post_refusal]") {
    CHECK(post_refusal(EINVAL, work_queue::receive, IBV_QPS_RESET) ==
          errc::queue_pair_not_connected);
    for (ibv_qp_state s : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
        CAPTURE(s);
        CHECK(post_refusal(EINVAL, work_queue::receive, s) == asio::error::invalid_argument);
    }
}

TEST_CASE("other errnos, and a state that could not be read, keep the errno", "[post_refusal]") {
    CHECK(post_refusal(ENOMEM, work_queue::send, IBV_QPS_RESET) == asio::error::no_memory);
    CHECK(post_refusal(EINVAL, work_queue::send, std::nullopt) == asio::error::invalid_argument);
    CHECK_FALSE(rdma_asio::detail::state_may_explain(ENOMEM));
    CHECK(rdma_asio::detail::state_may_explain(EINVAL));
}

} // namespace post_refusal_test
