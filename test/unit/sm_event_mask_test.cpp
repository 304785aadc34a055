#include "rdma_asio/sm_event_mask.hpp"
#include "rdma_asio/subnet_event_client_counters.hpp"

#include <catch2/catch.hpp>

namespace sm_event_mask_test {

using rdma_asio::sm_event_mask;

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
