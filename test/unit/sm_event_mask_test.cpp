#include "rdma_asio/sm_event_mask.hpp"
#include "rdma_asio/subnet_event_client_counters.hpp"

#include <catch2/catch.hpp>

#include <type_traits>

namespace sm_event_mask_test {

using rdma_asio::sm_event_mask;

// The former names still compile (with a deprecation warning, silenced here).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static_assert(std::is_same_v<rdma_asio::sm_event, sm_event_mask>);
static_assert(rdma_asio::sm_event::all == sm_event_mask::all);
static_assert(
    std::is_same_v<rdma_asio::sm_event_counters, rdma_asio::subnet_event_client_counters>);
#pragma GCC diagnostic pop

TEST_CASE("sm_event_mask flags combine and print with the names of ibv_register_sm_events(3)",
          "[sm_event_mask]") {
    const sm_event_mask mask = sm_event_mask::mgid | sm_event_mask::ugid_all;
    CHECK(has_any(mask, sm_event_mask::mgid));
    CHECK(has_any(mask, sm_event_mask::ugid_all));
    CHECK_FALSE(has_any(mask, sm_event_mask::ugid));
    CHECK_FALSE(has_any(mask, sm_event_mask::all));
    CHECK((mask & sm_event_mask::mgid) == sm_event_mask::mgid);
    CHECK(to_string(mask) == "IBV_SM_EVENT_MGID|IBV_SM_EVENT_UGID_ALL");
    CHECK(to_string(sm_event_mask::all) == "IBV_SM_EVENT_ALL");
    CHECK(to_string(sm_event_mask{}) == "0");
    CHECK(to_string(static_cast<sm_event_mask>(1u << 7)) == "128");
}

} // namespace sm_event_mask_test
