#include "rdma_asio/datagram_queue_pair.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <cerrno>

namespace rdma_asio::detail {

ibv_qp* create_ud_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, const datagram_options& options,
                     error_code& ec, const char*& failed) noexcept {
    ibv_qp_init_attr init{};
    init.send_cq = send_cq;
    init.recv_cq = recv_cq;
    init.qp_type = IBV_QPT_UD;
    init.sq_sig_all = 1;
    init.cap.max_send_wr = options.send_depth;
    init.cap.max_send_sge = options.max_send_sge;
    init.cap.max_inline_data = options.max_inline;
    init.cap.max_recv_wr = options.receive_depth;
    init.cap.max_recv_sge = options.max_receive_sge + 1; // the GRH's room first
    ibv_qp* qp = ibv_create_qp(pd, &init);
    if (qp == nullptr) {
        ec = last_errno_code();
        failed = "rdma_asio::datagram_queue_pair: ibv_create_qp";
        return nullptr;
    }
    // A UD QP needs no peer: INIT (port, P_Key, Q_Key), RTR, RTS, one after the
    // other (ibv_modify_qp(3)).
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = options.port;
    attr.qkey = options.qkey;
    int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (rc == 0) {
        attr = {};
        attr.qp_state = IBV_QPS_RTR;
        rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
    }
    if (rc == 0) {
        attr = {};
        attr.qp_state = IBV_QPS_RTS;
        attr.sq_psn = 0;
        rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
    if (rc != 0) {
        ec = errno_code(rc > 0 ? rc : errno);
        failed = "rdma_asio::datagram_queue_pair: ibv_modify_qp";
        ibv_destroy_qp(qp);
        return nullptr;
    }
    ec.clear();
    return qp;
}

} // namespace rdma_asio::detail
