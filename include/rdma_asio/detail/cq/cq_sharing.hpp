// How many connections one completion queue takes, and how deep it is, when the
// connections of streams share CQs (cq_pool.hpp). No I/O: unit-tested.
//
// Why share: a connection with CQs of its own costs the device two CQs, each a
// ring the kernel allocates and maps, armed and woken on its own; a device has a
// bounded number (ibv_query_device(3)'s max_cq, shared by every process). Streams
// sharing a CQ cost one ring, and one poll takes the completions of many.
//
// The rule that keeps a shared CQ from overflowing. A CQ that overflows fails
// every connection on it (IBV_EVENT_CQ_ERR, ibv_create_cq(3)), so it must always
// have room for every completion that can be in it at once:
//   - a connection's own: at most its send depth plus its receive depth, since each
//     work request it has outstanding completes there once; that is its need;
//   - those of connections that went: a destroyed QP's completions stay in the CQ
//     until they are read (rxe leaves them there; ibv_destroy_qp(3) does not take
//     them out). The CQ's reader takes them at its next wake-up, which comes soon:
//     each connection on it keeps receives posted, so the CQ stays armed.
// So a CQ takes connections while their needs fill at most half of it, the other
// half for what connections that went left behind. A CQ no connection uses any
// more is not handed out again: it is destroyed, with whatever was left in it.
//
// Bounds: at most `most_per_cq` connections on one CQ (a poll of a deep CQ costs
// nothing more, but one CQ's reader serialises its connections' completions), and
// a connection whose need does not fit twice in the device's largest CQ gets no
// share (zero): it has CQs of its own, as without sharing.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rdma_asio::detail {

struct cq_sharing {
    static constexpr std::uint32_t most_per_cq = 256;

    std::uint32_t connections = 0; // taken by one CQ at most; 0: none shares
    std::uint32_t depth = 0;       // the CQ's entries (ibv_create_cq's cqe)

    /// For connections needing `need` entries each, on a device whose CQs hold at
    /// most `max_cqe` (ibv_query_device(3)).
    static constexpr cq_sharing for_need(std::uint32_t need, std::uint32_t max_cqe) noexcept {
        if (need == 0 || max_cqe / 2 < need)
            return {};
        const std::uint32_t n = std::min(max_cqe / 2 / need, most_per_cq);
        return {n, 2 * n * need};
    }
};

} // namespace rdma_asio::detail
