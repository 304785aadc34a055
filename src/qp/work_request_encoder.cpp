#include "rdma_asio/detail/qp/work_request_encoder.hpp"

#include <arpa/inet.h>

namespace rdma_asio::detail {

ibv_send_wr send_request(qp_operation& op, const send_posting& how) noexcept {
    ibv_send_wr wr{};
    wr.wr_id = op.wr_id;
    wr.sg_list = op.sges.data();
    wr.num_sge = static_cast<int>(op.sge_count);
    wr.opcode = op.opcode;
    wr.send_flags = how.signaled ? IBV_SEND_SIGNALED : 0;
    if (how.inline_data)
        wr.send_flags |= IBV_SEND_INLINE;
    if (op.immediate)
        wr.imm_data = htonl(*op.immediate);
    if (how.address_handle != nullptr) {
        wr.wr.ud.ah = how.address_handle;
        wr.wr.ud.remote_qpn = op.peer.qp_num;
        wr.wr.ud.remote_qkey = op.peer.qkey;
    } else if (op.is_atomic()) {
        wr.wr.atomic.remote_addr = op.remote_address;
        wr.wr.atomic.compare_add = op.compare_add;
        wr.wr.atomic.swap = op.swap;
        wr.wr.atomic.rkey = op.rkey;
    } else {
        wr.wr.rdma.remote_addr = op.remote_address;
        wr.wr.rdma.rkey = op.rkey;
    }
    return wr;
}

ibv_recv_wr receive_request(const qp_operation& op, std::span<ibv_sge> list) noexcept {
    ibv_recv_wr wr{};
    wr.wr_id = op.wr_id;
    wr.sg_list = list.data();
    wr.num_sge = static_cast<int>(list.size());
    return wr;
}

ibv_send_wr fence_request(std::uint64_t wr_id) noexcept {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    return wr;
}

} // namespace rdma_asio::detail
