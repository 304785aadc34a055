#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/cm/cm_channel_impl.hpp"
#include "rdma_asio/detail/cm/cm_id_impl.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/error.hpp"

#include <memory>
#include <utility>

namespace rdma_asio {
namespace {

// librdmacm's rdma_create_qp reads the id's device and the PD without checking
// them; a bad one must fail here, before the CQs exist.
// The id every constructor needs: open, on a device, without a QP. Its device.
ibv_context* checked_device(const cm_id& id) {
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
    return verbs;
}

cm_id checked(cm_id id, const completion_channel& channel, const ibv_pd* pd) {
    ibv_context* verbs = checked_device(id);
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

// The shared CQs and SRQ of a connection at scale, against the id's device and
// `pd`, before anything is created.
void check_shared(const cm_id& id, const protection_domain& pd, const completion_queue& send_cq,
                  const completion_queue& recv_cq, const shared_receive_queue& srq) {
    ibv_context* verbs = id.native_handle()->verbs;
    if (!send_cq.is_open() || !recv_cq.is_open())
        detail::throw_error(detail::errno_code(EBADF),
                            "rdma_asio::connection: a completion queue is not open");
    if (!srq.is_open())
        detail::throw_error(detail::errno_code(EBADF),
                            "rdma_asio::connection: the shared receive queue is not open");
    if (send_cq.native_handle()->context != verbs || recv_cq.native_handle()->context != verbs ||
        srq.native_handle()->context != verbs)
        detail::throw_error(detail::errno_code(EINVAL),
                            "rdma_asio::connection: a completion queue or the shared receive "
                            "queue is on another device");
    if (srq.native_handle()->pd != pd.native_handle())
        detail::throw_error(detail::errno_code(EINVAL),
                            "rdma_asio::connection: the shared receive queue is in another "
                            "protection domain");
}

void create_qp(cm_id& id, ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, ibv_srq* srq,
               const connection_options& options) {
    ibv_qp_init_attr attr{};
    attr.send_cq = send_cq;
    attr.recv_cq = recv_cq;
    attr.srq = srq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = options.send_depth;
    attr.cap.max_send_sge = options.max_send_sge;
    if (srq == nullptr) { // a QP on an SRQ has no receive queue of its own
        attr.cap.max_recv_wr = options.recv_depth;
        attr.cap.max_recv_sge = options.max_receive_sge;
    }
    attr.cap.max_inline_data = options.max_inline;
    errno = 0;
    if (rdma_create_qp(id.native_handle(), pd, &attr) != 0)
        detail::throw_error(detail::last_errno_code(), "rdma_create_qp");
}

} // namespace

connection::connection(cm_id id, const protection_domain& pd, completion_queue& send_cq,
                       completion_queue& recv_cq, shared_receive_queue& srq,
                       const connection_options& options)
    : pd_(pd.share()), send_cq_(send_cq.get_executor()), recv_cq_(send_cq.get_executor()),
      id_(std::move(id)), queue_pair_(send_cq.get_executor()), shared_{&send_cq, &recv_cq, &srq} {
    // The channel check of the other constructors does not apply: the connection
    // makes no CQ. Its own are left closed.
    ibv_context* verbs = checked_device(id_);
    if (!pd.is_open())
        detail::throw_error(detail::errno_code(EBADF),
                            "rdma_asio::connection: the protection domain is not open");
    if (pd.native_handle()->context != verbs)
        detail::throw_error(detail::errno_code(EINVAL),
                            "rdma_asio::connection: the PD is on another device");
    check_shared(id_, pd, send_cq, recv_cq, srq);
    create_qp(id_, pd.native_handle(), send_cq.native_handle(), recv_cq.native_handle(),
              srq.native_handle(), options);
    // The queue pair now, not at the first queue_pair(): the SRQ's receives reach
    // their operations through it, from the connection's first message.
    queue_pair();
}

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
    create_qp(id_, pd, send_cq_.native_handle(), recv_cq_.native_handle(), nullptr, options);
}

namespace {

// The events that end a connection's queue pair; the id's other events
// (ESTABLISHED, ...) are left to its other waits. Keyed by the watch's own signal,
// not by the id: the id's cancel() (conn.id().cancel()) ends the id's waits, and
// this one is the connection's, which only the connection ends (async_disconnect, and
// the id's close through close_queue_pair_first). Keyed by the id, it ended with
// the id's cancel() and nothing restarted it: the peer's disconnect then went
// unanswered.
struct connection_end_match {
    const rdma_cm_id* id;
    const void* watch;
    bool operator()(const cm_event& ev) const noexcept {
        return ev.id() == id && (ev.type() == RDMA_CM_EVENT_DISCONNECTED ||
                                 ev.type() == RDMA_CM_EVENT_DEVICE_REMOVAL);
    }
    const void* key() const noexcept { return watch; }
};

// Waits for the end of the connection on behalf of its queue pair: on
// DISCONNECTED the queue pair disconnects too, on DEVICE_REMOVAL its operations
// fail. It names the id by its rdma_cm_id (the connection may move; the id's
// close cancels the wait) and holds the queue pair's state weakly: a closed queue
// pair ignores it. It holds its cancellation signal too, which must live as long
// as the wait whose slot it serves.
struct disconnect_watch {
    std::weak_ptr<detail::queue_pair_impl> qp;
    std::shared_ptr<asio::cancellation_signal> signal;

    using cancellation_slot_type = asio::cancellation_slot;
    cancellation_slot_type get_cancellation_slot() const noexcept { return signal->slot(); }

    void operator()(error_code ec, cm_event ev) {
        if (ec)
            return; // stopped (async_disconnect, the id closed) or the channel failed
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

queue_pair& connection::queue_pair() {
    if (queue_pair_.is_open())
        return queue_pair_;
    if (qp() == nullptr)
        detail::throw_error(detail::errno_code(EBADF),
                            "rdma_asio::connection::queue_pair: the connection has no QP");
    error_code ec;
    if (shared_.srq != nullptr)
        queue_pair_.assign(id_.native_handle(), send_cq(), recv_cq(), *shared_.srq, ec);
    else
        queue_pair_.assign(id_.native_handle(), send_cq_, recv_cq_, ec);
    detail::throw_if_error(ec, "rdma_asio::connection::queue_pair");
    start_watching();
    // Should the id be closed by itself (id().close()), the queue pair goes first,
    // while the QP and the id it reads are still there, and the watch ends with
    // it (it is not one of the id's waits).
    if (const auto& id_state = detail::io_object_access::state(id_))
        id_state->close_queue_pair_first(
            [qp = std::weak_ptr<detail::queue_pair_impl>(
                 detail::io_object_access::state(queue_pair_)),
             watch = std::weak_ptr<asio::cancellation_signal>(watch_)] {
                if (auto state = qp.lock())
                    state->close();
                if (auto signal = watch.lock())
                    signal->emit(asio::cancellation_type::terminal);
            });
    return queue_pair_;
}

// A wait on the channel's dispatcher itself, not a composed operation: its
// canceller sits in the signal's slot until the signal goes, so emitting the
// signal from any thread is safe while the wait completes on another (the
// dispatcher's lock orders the two).
void connection::start_watching() {
    const auto& id_state = detail::io_object_access::state(id_);
    if (!id_state)
        return; // the id is closed: nothing to watch
    auto signal = std::make_shared<asio::cancellation_signal>();
    id_state->channel()->dispatcher->async_next(
        id_.get_executor(), connection_end_match{id_.native_handle(), signal.get()},
        disconnect_watch{detail::io_object_access::state(queue_pair_), signal});
    watch_ = std::move(signal);
}

void connection::watch_stop::operator()(detail::cm_id_impl&) const noexcept {
    if (!qp)
        return;
    // The operations end with the reason, and the watch's own wait ends (aborted):
    // the id's other waits stay pending.
    qp->disconnected(false);
    if (watch)
        watch->emit(asio::cancellation_type::terminal);
}

void connection::cancel() noexcept {
    id_.cancel(); // not the watch: it is the connection's, and goes on
    send_cq_.cancel();
    recv_cq_.cancel();
    queue_pair_.cancel();
}

void connection::close() noexcept {
    queue_pair_.close(); // destroys the QP (rdma_destroy_qp) before the id
    id_.close();         // ends the watch's wait with the id's others
    watch_.reset();
    recv_cq_.close(); // the connection's own: shared ones are the caller's
    send_cq_.close();
    pd_.reset();
}

} // namespace rdma_asio
