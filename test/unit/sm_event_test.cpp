#include "rdma_asio/sm_event.hpp"

#include <catch2/catch.hpp>

using rdma_asio::sm_event;

TEST_CASE("sm_event flags combine and print with the seed's names", "[sm_event]") {
    const sm_event mask = sm_event::mgid | sm_event::ugid_all;
    CHECK(has_any(mask, sm_event::mgid));
    CHECK(has_any(mask, sm_event::ugid_all));
    CHECK_FALSE(has_any(mask, sm_event::ugid));
    CHECK_FALSE(has_any(mask, sm_event::all));
    CHECK((mask & sm_event::mgid) == sm_event::mgid);
    CHECK(to_string(mask) == "IBV_SM_EVENT_MGID|IBV_SM_EVENT_UGID_ALL");
    CHECK(to_string(sm_event::all) == "IBV_SM_EVENT_ALL");
    CHECK(to_string(sm_event{}) == "0");
    CHECK(to_string(static_cast<sm_event>(1u << 7)) == "128");
}
