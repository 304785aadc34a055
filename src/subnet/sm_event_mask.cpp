#include "rdma_asio/sm_event_mask.hpp"

#include <utility>

namespace rdma_asio {

std::string to_string(sm_event_mask mask) {
    static constexpr std::pair<sm_event_mask, const char*> names[] = {
        {sm_event_mask::mgid, "IBV_SM_EVENT_MGID"},
        {sm_event_mask::ugid, "IBV_SM_EVENT_UGID"},
        {sm_event_mask::ugid_all, "IBV_SM_EVENT_UGID_ALL"},
        {sm_event_mask::mgid_all, "IBV_SM_EVENT_MGID_ALL"},
        {sm_event_mask::all, "IBV_SM_EVENT_ALL"},
    };
    std::string out;
    unsigned rest = static_cast<unsigned>(mask);
    for (const auto& [flag, name] : names) {
        if (has_any(mask, flag)) {
            out += out.empty() ? "" : "|";
            out += name;
            rest &= ~static_cast<unsigned>(flag);
        }
    }
    if (rest != 0)
        out += (out.empty() ? "" : "|") + std::to_string(rest);
    return out.empty() ? "0" : out;
}

} // namespace rdma_asio
