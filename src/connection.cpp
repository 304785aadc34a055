#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/throw_error.hpp"

namespace rdma_asio {
namespace {

// librdmacm's rdma_create_qp reads the id's device and the PD without checking
// them; a bad one must fail here, before the CQs exist.
cm_id checked(cm_id id, const completion_channel& channel, const ibv_pd* pd) {
    if (!id.is_open())
        detail::throw_error(detail::errno_code(EBADF),
                            "rdma_asio::connection: the cm_id is not open");
    ibv_context* verbs = id.native_handle()->verbs;
    if (verbs == nullptr)
        detail::throw_error(detail::errno_code(ENODEV),
                            "rdma_asio::connection: the cm_id has no device yet (resolve its "
                            "address first, or take it from async_get_request)");
    if (id.native_handle()->qp != nullptr)
        detail::throw_error(detail::errno_code(EEXIST),
                            "rdma_asio::connection: the cm_id has a QP");
    if (pd == nullptr || pd->context != verbs)
        detail::throw_error(detail::errno_code(EINVAL),
                            "rdma_asio::connection: the PD is null or on another device");
    if (channel.native_handle() == nullptr || channel.native_handle()->context != verbs)
        detail::throw_error(detail::errno_code(EINVAL),
                            "rdma_asio::connection: the completion channel is not open or on "
                            "another device");
    return id;
}

} // namespace

connection::connection(cm_id id, completion_channel& channel, ibv_pd* pd,
                       const connection_options& options)
    : connection(checked(std::move(id), channel, pd), channel, pd, options, checked_tag{}) {}

connection::connection(cm_id id, completion_channel& channel, ibv_pd* pd,
                       const connection_options& options, checked_tag)
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
