#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/cm/cm_id_impl.hpp"
#include "rdma_asio/detail/cm/cm_steps.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/error.hpp"

#include <memory>

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

cm_id checked(cm_id id, const completion_channel& channel, const protection_domain& pd) {
    // Closed (or moved from): its ibv_pd may be gone already, so it is not read.
    if (!pd.is_open())
        detail::throw_error(detail::errno_code(EBADF),
                            "rdma_asio::connection: the protection domain is not open");
    return checked(std::move(id), channel, pd.native_handle());
}

} // namespace

connection::connection(cm_id id, completion_channel& channel, const protection_domain& pd,
                       const connection_options& options)
    : connection(checked(std::move(id), channel, pd), channel, pd.native_handle(), pd.share(),
                 options, checked_tag{}) {}

connection::connection(cm_id id, completion_channel& channel, ibv_pd* pd,
                       const connection_options& options)
    : connection(checked(std::move(id), channel, pd), channel, pd, nullptr, options,
                 checked_tag{}) {}

connection::connection(cm_id id, completion_channel& channel, ibv_pd* pd,
                       std::shared_ptr<ibv_pd> owner, const connection_options& options,
                       checked_tag)
    : pd_(std::move(owner)), send_cq_(channel, static_cast<int>(options.send_depth), options.cq),
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

namespace {

// The events that end a connection's queue pair. Keyed by the id, as the id's own
// waits, so that closing or cancelling the id ends this wait too; the id's other
// events (ESTABLISHED, ...) are left to its other waits.
struct connection_end_match {
    const rdma_cm_id* id;
    bool operator()(const cm_event& ev) const noexcept {
        return ev.id() == id && (ev.type() == RDMA_CM_EVENT_DISCONNECTED ||
                                 ev.type() == RDMA_CM_EVENT_DEVICE_REMOVAL);
    }
    const void* key() const noexcept { return id; }
};

// Waits for the end of the connection on behalf of its queue pair: on
// DISCONNECTED the queue pair disconnects too, on DEVICE_REMOVAL its operations
// fail. It names the id by its rdma_cm_id (the connection may move; the id's
// close cancels the wait) and holds the queue pair's state weakly: a closed queue
// pair ignores it.
struct disconnect_watch {
    std::shared_ptr<detail::cm_channel_impl> channel;
    asio::any_io_executor ex;
    rdma_cm_id* id;
    std::weak_ptr<detail::queue_pair_impl> qp;

    static void start(disconnect_watch watch) {
        auto channel = watch.channel;
        const asio::any_io_executor ex = watch.ex;
        rdma_cm_id* id = watch.id;
        detail::async_cm<void(error_code, cm_event)>(
            std::move(channel), ex, "rdma_asio::connection: watching for DISCONNECTED",
            detail::cm_next<connection_end_match>{{id}}, std::move(watch));
    }

    void operator()(error_code ec, cm_event ev) {
        if (ec)
            return; // cancelled (stop_watching, the id closed) or the channel failed
        auto state = qp.lock();
        if (!state)
            return;
        if (ev.type() == RDMA_CM_EVENT_DISCONNECTED)
            state->disconnected(true); // the peer flushed only its own QP: flush this one too
        else
            state->failed(errc::device_removed);
    }
};

} // namespace

queue_pair& connection::work_requests() {
    if (work_requests_.is_open())
        return work_requests_;
    if (qp() == nullptr)
        detail::throw_error(detail::errno_code(EBADF),
                            "rdma_asio::connection::work_requests: the connection has no QP");
    error_code ec;
    work_requests_.assign(id_.native_handle(), send_cq_, recv_cq_, ec);
    detail::throw_if_error(ec, "rdma_asio::connection::work_requests");
    disconnect_watch::start({detail::io_object_access::state(id_)->channel(), id_.get_executor(),
                             id_.native_handle(), detail::io_object_access::state(work_requests_)});
    return work_requests_;
}

void connection::stop_watching() noexcept {
    const auto& state = detail::io_object_access::state(work_requests_);
    if (!state)
        return;
    // The operations end with the reason, and the watch's wait ends (aborted).
    state->disconnected(false);
    id_.cancel();
}

} // namespace rdma_asio
