#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/throw_error.hpp"

namespace rdma_asio {

connection::connection(cm_id id, completion_channel& channel, ibv_pd* pd,
                       const connection_options& options)
    : send_cq_(channel, static_cast<int>(options.send_depth), options.cq),
      recv_cq_(channel, static_cast<int>(options.recv_depth), options.cq), id_(std::move(id)) {
    ibv_qp_init_attr attr{};
    attr.send_cq = send_cq_.native_handle();
    attr.recv_cq = recv_cq_.native_handle();
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = options.send_depth;
    attr.cap.max_recv_wr = options.recv_depth;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.cap.max_inline_data = options.max_inline;
    errno = 0;
    if (rdma_create_qp(id_.native_handle(), pd, &attr) != 0)
        detail::throw_error(detail::last_errno_code(), "rdma_create_qp");
}

} // namespace rdma_asio
