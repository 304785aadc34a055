// What ibv_register_sm_events(3) (Oracle Solaris) registers for: the event mask.
#pragma once

#include <cstdint>
#include <string>

namespace rdma_asio {

/// The `event` argument of ibv_register_sm_events / ibv_unregister_sm_events, as
/// flags to combine with `|`.
///
/// - mgid: multicast-group events (mcg_created, mcg_deleted) for the multicast
///   GIDs of the list (first byte 0xff);
/// - ugid: GID events (gid_avail, gid_unavail) for the unicast GIDs of the list;
/// - mgid_all / ugid_all: the same for every group / every port GID;
/// - all: mgid_all | ugid_all; unregistering `all` also drops the per-GID entries.
enum class sm_event : unsigned {
    mgid = 1u << 0,
    ugid = 1u << 1,
    ugid_all = 1u << 2,
    mgid_all = 1u << 3,
    all = 1u << 4,
};

constexpr sm_event operator|(sm_event a, sm_event b) noexcept {
    return static_cast<sm_event>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr sm_event operator&(sm_event a, sm_event b) noexcept {
    return static_cast<sm_event>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}
/// True when `mask` contains any flag of `flags`.
constexpr bool has_any(sm_event mask, sm_event flags) noexcept {
    return (static_cast<unsigned>(mask) & static_cast<unsigned>(flags)) != 0;
}
/// What a subnet_event_client did, readable from any thread.
struct sm_event_counters {
    std::uint64_t requests = 0;          ///< InformInfo Sets sent, first tries
    std::uint64_t retries = 0;           ///< the same Sets sent again after a timeout
    std::uint64_t timeouts = 0;          ///< requests given up after the last retry
    std::uint64_t refusals = 0;          ///< answers with a non-zero MAD status
    std::uint64_t reports = 0;           ///< Reports received and answered
    std::uint64_t duplicate_reports = 0; ///< Reports with a TID seen before (SA retries)
    std::uint64_t events = 0;            ///< subnet events delivered
    std::uint64_t filtered = 0;          ///< Reports about GIDs nobody registered
    std::uint64_t malformed = 0;         ///< MADs that could not be decoded
    std::uint64_t resubscriptions = 0;   ///< re-subscriptions (SM change, reregister)
};

/// "IBV_SM_EVENT_MGID|IBV_SM_EVENT_UGID_ALL", ...; "0" for an empty mask.
std::string to_string(sm_event mask);

} // namespace rdma_asio
