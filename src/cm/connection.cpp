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

namespace rdma_asio::detail {

ibv_context* connection_steps::device_of(rdma_cm_id* id) {
    if (id == nullptr)
        throw_error(errno_code(EBADF), "rdma_asio::connection: the cm_id is not open");
    if (id->verbs == nullptr)
        throw_error(errno_code(ENODEV),
                    "rdma_asio::connection: the cm_id has no device yet (resolve its "
                    "address first, or take it from async_get_request)");
    if (id->qp != nullptr)
        throw_error(errno_code(EEXIST), "rdma_asio::connection: the cm_id has a QP");
    return id->verbs;
}

void connection_steps::check_open(const protection_domain& pd) {
    if (!pd.is_open())
        throw_error(errno_code(EBADF), "rdma_asio::connection: the protection domain is not open");
}

void connection_steps::check(rdma_cm_id* id, ibv_comp_channel* channel, const ibv_pd* pd) {
    ibv_context* verbs = device_of(id);
    if (pd == nullptr || pd->context != verbs)
        throw_error(errno_code(EINVAL),
                    "rdma_asio::connection: the PD is null or on another device");
    if (channel == nullptr || channel->context != verbs)
        throw_error(errno_code(EINVAL), "rdma_asio::connection: the completion channel is not "
                                        "open or on another device");
}

void connection_steps::check_shared(rdma_cm_id* id, const protection_domain& pd, ibv_cq* send_cq,
                                    ibv_cq* recv_cq, ibv_srq* srq) {
    ibv_context* verbs = device_of(id);
    check_open(pd);
    if (pd.native_handle()->context != verbs)
        throw_error(errno_code(EINVAL), "rdma_asio::connection: the PD is on another device");
    if (send_cq == nullptr || recv_cq == nullptr)
        throw_error(errno_code(EBADF), "rdma_asio::connection: a completion queue is not open");
    if (srq == nullptr)
        throw_error(errno_code(EBADF),
                    "rdma_asio::connection: the shared receive queue is not open");
    if (send_cq->context != verbs || recv_cq->context != verbs || srq->context != verbs)
        throw_error(errno_code(EINVAL), "rdma_asio::connection: a completion queue or the shared "
                                        "receive queue is on another device");
    if (srq->pd != pd.native_handle())
        throw_error(errno_code(EINVAL), "rdma_asio::connection: the shared receive queue is in "
                                        "another protection domain");
}

void connection_steps::create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq,
                                 ibv_srq* srq, const connection_options& options) {
    ibv_qp_init_attr attr{};
    attr.send_cq = send_cq;
    attr.recv_cq = recv_cq;
    attr.srq = srq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = options.send_depth;
    attr.cap.max_send_sge = options.max_send_sge;
    if (srq == nullptr) { // a QP on an SRQ has no receive queue of its own
        attr.cap.max_recv_wr = options.receive_depth;
        attr.cap.max_recv_sge = options.max_receive_sge;
    }
    attr.cap.max_inline_data = options.max_inline;
    errno = 0;
    if (rdma_create_qp(id, pd, &attr) != 0)
        throw_error(last_errno_code(), "rdma_create_qp");
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
    std::weak_ptr<queue_pair_impl> qp;
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

// A wait on the channel's dispatcher itself, not a composed operation: its
// canceller sits in the signal's slot until the signal goes, so emitting the
// signal from any thread is safe while the wait completes on another (the
// dispatcher's lock orders the two).
std::shared_ptr<asio::cancellation_signal>
connection_steps::watch_end(const std::shared_ptr<cm_id_impl>& id,
                            const std::shared_ptr<queue_pair_impl>& qp,
                            const asio::any_io_executor& ex) {
    if (!id)
        return nullptr; // the id is closed: nothing to watch
    auto signal = std::make_shared<asio::cancellation_signal>();
    id->channel()->dispatcher->async_next(
        ex, connection_end_match{id->native_handle(), signal.get()}, disconnect_watch{qp, signal});
    // Should the id be closed by itself (id().close()), the queue pair goes first,
    // while the QP and the id it reads are still there, and the watch ends with
    // it (it is not one of the id's waits).
    id->close_queue_pair_first([qp = std::weak_ptr<queue_pair_impl>(qp),
                                watch = std::weak_ptr<asio::cancellation_signal>(signal)] {
        if (auto state = qp.lock())
            state->close();
        if (auto s = watch.lock())
            s->emit(asio::cancellation_type::terminal);
    });
    return signal;
}

void connection_watch_stop::operator()(cm_id_impl&) const noexcept {
    if (!qp)
        return;
    // The operations end with the reason, and the watch's own wait ends (aborted):
    // the id's other waits stay pending.
    qp->disconnected(false);
    if (watch)
        watch->emit(asio::cancellation_type::terminal);
}

} // namespace rdma_asio::detail
