#include "rdma_asio/queue_pair.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <arpa/inet.h>

#include <cerrno>

namespace rdma_asio::detail {

ibv_qp* create_rc_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, ibv_srq* srq,
                     const qp_options& options, error_code& ec) noexcept {
    ibv_qp_init_attr init{};
    init.send_cq = send_cq;
    init.recv_cq = recv_cq;
    init.srq = srq;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0; // each work request says (IBV_SEND_SIGNALED)
    init.cap.max_send_wr = options.send_depth;
    init.cap.max_send_sge = options.max_send_sge;
    init.cap.max_inline_data = options.max_inline;
    if (srq == nullptr) { // a QP on an SRQ has no receive queue of its own
        init.cap.max_recv_wr = options.receive_depth;
        init.cap.max_recv_sge = options.max_receive_sge;
    }
    ibv_qp* qp = ibv_create_qp(pd, &init);
    if (qp == nullptr)
        ec = last_errno_code();
    else
        ec.clear();
    return qp;
}

void fill_receive_info(receive_info& info, const ibv_wc& wc) noexcept {
    info.immediate.reset();
    if ((wc.wc_flags & IBV_WC_WITH_IMM) != 0)
        info.immediate = ntohl(wc.imm_data);
    info.written = wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM;
    info.source_qp = wc.src_qp;
    info.wc_flags = wc.wc_flags;
    info.qp_num = wc.qp_num;
}

} // namespace rdma_asio::detail
