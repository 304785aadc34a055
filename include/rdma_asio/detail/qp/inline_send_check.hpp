// Whether a queue pair may post a work request with IBV_SEND_INLINE: a decision
// with no I/O, made for every small send, and unit-tested (inline_send_check_test).
//
// Why it is a decision of its own: inline, the bytes are copied into the work
// request as it is posted (ibv_post_send(3)); the device then reads no memory for
// it and checks no lkey. The protection domain and a region's bounds are security
// boundaries of RDMA, so a shortcut that skips the device's check may only be taken
// where the library has made that check itself: every entry within a region
// registered through memory_region in the QP's own protection domain, under the
// entry's own lkey (region_registry.hpp). Anything else (past a region's end,
// another domain's region, a made-up lkey, memory never registered, a region
// registered with ibv_reg_mr by hand) is posted for the device to check, and ends
// with its protection error. Only sends and RDMA writes carry data this way: an
// RDMA read or an atomic writes into its buffer.
//
// One request goes inline without a region: the bytes a program hands a stream
// to write (allows_copy). Those are the program's to give, as a TCP socket's send
// takes them; the post copies them, as the stream would otherwise copy them into
// its registered memory, and the device reads nothing for the request, so no
// lkey is owed. The peer's ring, its rkey and its bounds are still checked by the
// peer's device. Such a request is posted inline or not at all: never handed to
// the device to read through an lkey it does not have.
#pragma once

#include "rdma_asio/detail/device/region_registry.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

namespace rdma_asio::detail {

class inline_send_check {
public:
    /// `max_inline`: the QP's ibv_qp_cap::max_inline_data. `regions`: the
    /// registry of the QP's own protection domain; null when the domain is not
    /// known (a QP made in a domain this library did not allocate), and then
    /// nothing goes inline.
    inline_send_check(std::uint32_t max_inline, std::shared_ptr<region_registry> regions) noexcept
        : max_inline_(max_inline), regions_(std::move(regions)) {}

    /// Whether a request of `opcode` over `sges`, `length` bytes in all, may go
    /// inline. Used by one thread at a time (the queue pair's lock): it keeps the
    /// last region that vouched, so that the next send from it is checked
    /// without the registry's lock.
    bool allows(ibv_wr_opcode opcode, std::span<const ibv_sge> sges, std::size_t length) noexcept {
        return length != 0 && length <= max_inline_ && carries_data(opcode) && regions_ &&
               regions_->covers(sges, last_);
    }

    /// Whether a request of `opcode`, `length` bytes of the program's own
    /// (qp_operation::copy_at_post), fits the QP's inline room.
    bool allows_copy(ibv_wr_opcode opcode, std::size_t length) const noexcept {
        return length != 0 && length <= max_inline_ && carries_data(opcode);
    }

private:
    static bool carries_data(ibv_wr_opcode opcode) noexcept {
        return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM ||
               opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    }

    std::uint32_t max_inline_;
    std::shared_ptr<region_registry> regions_;
    region_registry::last_region last_;
};

} // namespace rdma_asio::detail
