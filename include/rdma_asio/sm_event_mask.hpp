// What ibv_register_sm_events(3) (Oracle Solaris) registers for: the event mask.
#pragma once

#include <string>

namespace rdma_asio {

/// The `event` argument of ibv_register_sm_events / ibv_unregister_sm_events: which
/// subnet events a registration asks for, as flags to combine with `|`. The events
/// themselves are async_event values (gid_avail, gid_unavail, mcg_created,
/// mcg_deleted).
///
/// - mgid: multicast-group events (mcg_created, mcg_deleted) for the multicast
///   GIDs of the list (first byte 0xff);
/// - ugid: GID events (gid_avail, gid_unavail) for the unicast GIDs of the list;
/// - mgid_all / ugid_all: the same for every group / every port GID;
/// - all: mgid_all | ugid_all; unregistering `all` also drops the per-GID entries.
enum class sm_event_mask : unsigned {
    mgid = 1u << 0,
    ugid = 1u << 1,
    ugid_all = 1u << 2,
    mgid_all = 1u << 3,
    all = 1u << 4,
};

constexpr sm_event_mask operator|(sm_event_mask a, sm_event_mask b) noexcept {
    return static_cast<sm_event_mask>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr sm_event_mask operator&(sm_event_mask a, sm_event_mask b) noexcept {
    return static_cast<sm_event_mask>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}
/// True when `mask` contains any flag of `flags`.
constexpr bool has_any(sm_event_mask mask, sm_event_mask flags) noexcept {
    return (static_cast<unsigned>(mask) & static_cast<unsigned>(flags)) != 0;
}

/// "IBV_SM_EVENT_MGID|IBV_SM_EVENT_UGID_ALL", ...; "0" for an empty mask.
std::string to_string(sm_event_mask mask);

} // namespace rdma_asio
