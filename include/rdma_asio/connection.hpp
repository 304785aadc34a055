// An RC connection made with rdma_cm: its id, QP and CQs, torn down in the
// order verbs requires.
#pragma once

#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/cm/cm_steps.hpp"
#include "rdma_asio/detail/cm/tcp_endpoint.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/queue_pair.hpp"
#include "rdma_asio/shared_receive_queue.hpp"

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace rdma_asio {

struct connection_options {
    std::uint32_t send_depth = 64;
    /// Receive queue depth, as qp_options::receive_depth.
    std::uint32_t receive_depth = 64;
    /// Bytes a send or RDMA write of queue_pair() may carry inline, as
    /// qp_options::max_inline: one of at most this many bytes from
    /// memory_regions of the connection's pd() goes inline. A connection made
    /// with an ibv_pd given by pointer sends nothing inline (no memory_region
    /// vouches for its buffers).
    std::uint32_t max_inline = 64;
    /// Scatter/gather entries per send-queue and per receive work request (see
    /// queue_pair's operations on a list of buffers).
    std::uint32_t max_send_sge = 4;
    std::uint32_t max_receive_sge = 4;
    cq_options cq{};
};

namespace detail {

// The steps of a connection that do not depend on its executor type
// (src/cm/connection.cpp). Each check throws system_error naming
// rdma_asio::connection and the problem, before anything is created: librdmacm's
// rdma_create_qp reads the id's device and the PD without checking them.
struct connection_steps {
    /// The device of `id`, which must be open (EBADF), on a device (ENODEV) and
    /// without a QP (EEXIST).
    static ibv_context* device_of(rdma_cm_id* id);
    /// EBADF for a protection domain that is not open.
    static void check_open(const protection_domain& pd);
    /// `id` as device_of, and `pd` and `channel` on its device (EINVAL).
    static void check(rdma_cm_id* id, ibv_comp_channel* channel, const ibv_pd* pd);
    /// `id` as device_of, and the shared CQs and SRQ open (EBADF), on its device
    /// and, for the SRQ, in `pd` (EINVAL).
    static void check_shared(rdma_cm_id* id, const protection_domain& pd, ibv_cq* send_cq,
                             ibv_cq* recv_cq, ibv_srq* srq);
    /// rdma_create_qp(3) of an RC QP with `options`' capabilities.
    static void create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq,
                          ibv_srq* srq, const connection_options& options);
    /// Starts waiting for the id's DISCONNECTED or DEVICE_REMOVAL on behalf of
    /// the queue pair `qp`, on `ex`, and has the id close the queue pair (and end
    /// the wait) before itself should it be closed alone. Returns the wait's own
    /// cancellation signal; null when the id is closed.
    static std::shared_ptr<asio::cancellation_signal>
    watch_end(const std::shared_ptr<cm_id_impl>& id, const std::shared_ptr<queue_pair_impl>& qp,
              const asio::any_io_executor& ex);
};

/// Chooses the constructor of basic_connection whose CQs take the id's executor.
struct cqs_on_id_executor_t {};
/// Chooses the constructor of basic_connection on a CQ connections share
/// (cq_pool.hpp), for a stream's accept and connect.
struct on_shared_cq_t {};

// Stops a connection's watch: the queue pair's operations end with
// errc::disconnected and the watch's own wait ends, the id's other waits stay.
// Holds what it needs (either may be null: nothing to do), so that
// async_disconnect runs it when launched (on an open id: closing the id ends the
// watch), whatever became of the connection.
struct connection_watch_stop {
    std::shared_ptr<queue_pair_impl> qp;
    std::shared_ptr<asio::cancellation_signal> watch;
    void operator()(cm_id_impl&) const noexcept;
};

} // namespace detail

template <class Executor = asio::any_io_executor>
class basic_connection;

/// A connection on the default executor type, as Asio's tcp::socket.
using connection = basic_connection<>;

/// A cm_id with an RC QP (rdma_create_qp) whose send and receive CQs are
/// completion_queue objects on a shared completion_channel (one per device is
/// enough for any number of connections).
///
/// Destruction order: the id first (its QP with it, then the id, acking its
/// events), then the CQs (flushing their acks), then its share of the protection
/// domain, so nothing is destroyed while something created on it lives. A
/// connection made from a protection_domain shares its ownership, as memory
/// regions do: the protection_domain object may be closed or destroyed first. Its
/// CQs share the completion channel likewise (completion_channel): the channel
/// object may go first too. An ibv_pd given by pointer must outlive the
/// connection. Move-only; moves, also into a connection of another
/// executor type to which this one's converts, as Asio's objects do.
///
/// The connection's executor is its id's (get_executor()); its CQs take the
/// channel's, and its queue pair the send CQ's.
template <class Executor>
class basic_connection {
public:
    using executor_type = Executor;
    using cm_id_type = basic_cm_id<Executor>;
    using completion_queue_type = basic_completion_queue<Executor>;
    using queue_pair_type = basic_queue_pair<Executor>;

    /// The connection type when rebound to another executor.
    template <class Executor1>
    struct rebind_executor {
        using other = basic_connection<Executor1>;
    };

    /// A connection that is not open, without an executor (e.g. to move one
    /// into, or as a coroutine's result).
    basic_connection() requires std::default_initializable<Executor>
        : basic_connection(Executor()) {}
    /// A connection that is not open, on `ex` (an executor, or an execution
    /// context whose executor is taken), to move one into later. Its operations
    /// complete with bad_descriptor, as those of every closed object.
    explicit basic_connection(const detail::executor_or_context<Executor>& ex)
        : send_cq_(ex), recv_cq_(ex), id_(ex), queue_pair_(ex) {}

    /// Creates the CQs on `channel` and the QP on `id` in `pd`, and keeps `pd`'s
    /// ibv_pd allocated while the connection lives (it shares its ownership), so
    /// the protection_domain may be closed or destroyed before the connection. The
    /// id must know its device (after address resolution, or a connection
    /// request). Throws system_error naming the call that failed, before creating
    /// anything: EBADF for an id or a protection domain that is not open, ENODEV
    /// for an id without a device yet, EEXIST for an id that has a QP, EINVAL for a
    /// closed channel, or a protection domain or channel on another device than the
    /// id's.
    template <class Executor1>
    basic_connection(cm_id_type id, const basic_completion_channel<Executor1>& channel,
                     const protection_domain& pd, const connection_options& options = {})
        : basic_connection(checked(std::move(id), channel.native_handle(), pd), channel,
                           pd.native_handle(), pd.share(), options, channel.get_executor()) {}

    /// The same with an ibv_pd this library did not allocate (ibv_alloc_pd(3)
    /// called by the program or by another library). The connection does not own
    /// it: deallocate it only after the connection is gone (ibv_dealloc_pd(3)
    /// fails with EBUSY while the QP uses it). EINVAL for a null `pd`.
    template <class Executor1>
    basic_connection(cm_id_type id, const basic_completion_channel<Executor1>& channel, ibv_pd* pd,
                     const connection_options& options = {})
        : basic_connection(checked(std::move(id), channel.native_handle(), pd), channel, pd,
                           nullptr, options, channel.get_executor()) {}

    /// The same on a channel of any executor type, for the acceptor and
    /// async_connect, which keep one channel for connections of several types:
    /// the CQs take the id's executor instead of the channel's.
    template <class Executor1>
    basic_connection(detail::cqs_on_id_executor_t, cm_id_type id,
                     const basic_completion_channel<Executor1>& channel,
                     const protection_domain& pd, const connection_options& options)
        : basic_connection(checked(std::move(id), channel.native_handle(), pd), channel,
                           pd.native_handle(), pd.share(), options, id.get_executor()) {}

    /// A connection of a service at scale: its QP completes on `send_cq` and
    /// `recv_cq` and receives from `srq`, all three shared with other connections
    /// and owned by the caller, who keeps them open until every connection on them
    /// is gone. The connection makes no CQ; `options`' receive fields and `cq` do
    /// not apply. Receive with `srq.async_receive`; receive_info::qp_num equals
    /// qp()->qp_num of the connection a message came on. The queue pair
    /// (queue_pair()) is in use from the start, watching for the peer's
    /// disconnect, since the SRQ's receives reach their operations through it;
    /// it sends, writes and reads as on any connection, and its own
    /// async_receive ends with errc::receive_on_shared_queue. Throws system_error
    /// before creating anything: as the other constructors, and EBADF for a CQ or
    /// SRQ that is not open, EINVAL for one on another device, or an SRQ made in
    /// another protection domain than `pd`.
    basic_connection(cm_id_type id, const protection_domain& pd, completion_queue_type& send_cq,
                     completion_queue_type& recv_cq, basic_shared_receive_queue<Executor>& srq,
                     const connection_options& options = {})
        : pd_(pd.share()), send_cq_(send_cq.get_executor()), recv_cq_(send_cq.get_executor()),
          id_(std::move(id)),
          queue_pair_(send_cq.get_executor()), shared_{&send_cq, &recv_cq, &srq} {
        // The channel check of the other constructors does not apply: the
        // connection makes no CQ. Its own are left closed.
        detail::connection_steps::check_shared(id_.native_handle(), pd, send_cq.native_handle(),
                                               recv_cq.native_handle(), srq.native_handle());
        detail::connection_steps::create_qp(id_.native_handle(), pd.native_handle(),
                                            send_cq.native_handle(), recv_cq.native_handle(),
                                            srq.native_handle(), options);
        // The queue pair now, not at the first queue_pair(): the SRQ's receives
        // reach their operations through it, from the connection's first message.
        queue_pair();
    }

    /// For a stream's accept and connect: the QP, in `pd`, completes both ways on
    /// `cq`, a CQ connections share (detail::cq_pool). The connection holds its
    /// share of `cq` until close(), which lets it go after the QP is destroyed;
    /// its own CQs stay closed. Throws system_error as the constructors above,
    /// before creating anything.
    basic_connection(detail::on_shared_cq_t, cm_id_type id, const protection_domain& pd,
                     std::shared_ptr<completion_queue> cq, const connection_options& options)
        : pd_(pd.share()), send_cq_(id.get_executor()), recv_cq_(id.get_executor()),
          shared_cq_(std::move(cq)),
          id_(checked(std::move(id), shared_cq_->native_handle()->channel, pd)),
          queue_pair_(id_.get_executor()) {
        detail::connection_steps::create_qp(id_.native_handle(), pd.native_handle(),
                                            shared_cq_->native_handle(),
                                            shared_cq_->native_handle(), nullptr, options);
    }

    /// The moved-from connection is closed.
    basic_connection(basic_connection&& other) noexcept
        : pd_(std::move(other.pd_)), send_cq_(std::move(other.send_cq_)),
          recv_cq_(std::move(other.recv_cq_)), shared_cq_(std::move(other.shared_cq_)),
          id_(std::move(other.id_)), queue_pair_(std::move(other.queue_pair_)),
          watch_(std::move(other.watch_)), shared_(std::exchange(other.shared_, {})) {}
    /// The same from a connection of another executor type that converts to this
    /// one's. A connection made on shared CQs and an SRQ stays on that
    /// connection's type: its parts are the caller's.
    /// Throws system_error (invalid_argument), moving nothing, for such a one.
    template <class Executor1>
    requires std::is_convertible_v<Executor1, Executor>
    basic_connection(basic_connection<Executor1>&& other)
        : pd_((own_parts(other), std::move(other.pd_))), send_cq_(std::move(other.send_cq_)),
          recv_cq_(std::move(other.recv_cq_)), shared_cq_(std::move(other.shared_cq_)),
          id_(std::move(other.id_)), queue_pair_(std::move(other.queue_pair_)),
          watch_(std::move(other.watch_)) {}
    /// Tears this connection down (as close() does) before taking `other`'s.
    basic_connection& operator=(basic_connection&& other) noexcept {
        close();
        queue_pair_ = std::move(other.queue_pair_);
        id_ = std::move(other.id_);
        recv_cq_ = std::move(other.recv_cq_);
        send_cq_ = std::move(other.send_cq_);
        pd_ = std::move(other.pd_);
        watch_ = std::move(other.watch_);
        shared_ = std::exchange(other.shared_, {});
        shared_cq_ = std::move(other.shared_cq_);
        return *this;
    }
    /// The id's executor: where the id's handlers run by default.
    executor_type get_executor() const noexcept { return id_.get_executor(); }

    /// Whether the connection has its id (false once closed or moved from).
    bool is_open() const noexcept { return id_.is_open(); }

    using endpoint_type = asio::ip::tcp::endpoint;
    /// This side's address and port (rdma_get_local_addr(3)). Errors:
    /// bad_descriptor when not open; address_family_not_supported when rdma_cm
    /// names it by no IP address (AF_IB).
    endpoint_type local_endpoint(error_code& ec) const { return endpoint_of(false, ec); }
    /// The same; throws system_error naming the call.
    endpoint_type local_endpoint() const {
        return detail::endpoint_or_throw([this](error_code& ec) { return local_endpoint(ec); },
                                         "rdma_asio::connection::local_endpoint");
    }
    /// The peer's address and port (rdma_get_peer_addr(3)); errors as
    /// local_endpoint's.
    endpoint_type remote_endpoint(error_code& ec) const { return endpoint_of(true, ec); }
    /// The same; throws system_error naming the call.
    endpoint_type remote_endpoint() const {
        return detail::endpoint_or_throw([this](error_code& ec) { return remote_endpoint(ec); },
                                         "rdma_asio::connection::remote_endpoint");
    }

    /// Cancels every operation started on the connection or on its parts, as
    /// each part's own cancel() does: the id's waits (async_disconnect included,
    /// and id().async_next), the CQs' waits, and the queue pair's operations. The
    /// last is what queue_pair::cancel() is: an operation whose work request was
    /// posted cannot be withdrawn, so the QP moves to the error state and the
    /// connection carries no more messages. Each cancelled operation ends with
    /// operation_aborted. The watch for the peer's disconnect (queue_pair()) goes
    /// on.
    void cancel() noexcept {
        id_.cancel(); // not the watch: it is the connection's, and goes on
        send_cq_.cancel();
        recv_cq_.cancel();
        queue_pair_.cancel();
    }

    /// Tears the connection down now, in the destructor's order: the queue pair
    /// (its operations end with operation_aborted), the QP and the id (acking
    /// its events; the id's waits end with operation_aborted), the CQs, then its
    /// share of the protection domain. It does not disconnect first: the peer
    /// sees the connection end as a QP that stopped answering, or, once rdma_cm
    /// notices, a DISCONNECTED. Idempotent; the connection is then not open.
    void close() noexcept {
        queue_pair_.close(); // destroys the QP (rdma_destroy_qp) before the id
        id_.close();         // ends the watch's wait with the id's others
        watch_.reset();
        recv_cq_.close(); // the connection's own: shared ones are the caller's
        send_cq_.close();
        shared_cq_.reset(); // its QP is gone: the last share destroys the CQ
        pd_.reset();
    }

    cm_id_type& id() noexcept { return id_; }
    ibv_qp* qp() const noexcept { return id_.native_handle() ? id_.native_handle()->qp : nullptr; }
    /// The protection domain the connection's QP is in, to register memory in
    /// (memory_region) for its work requests: a protection_domain that shares
    /// the connection's ibv_pd, which stays allocated while either lives (closing
    /// the result ends its share only). Not open when the connection is closed, or
    /// was made with an ibv_pd given by pointer (use that one).
    protection_domain pd() const noexcept { return protection_domain(pd_); }
    /// The CQs: the connection's own, or those it was given to share.
    completion_queue_type& send_cq() noexcept {
        return shared_.send_cq ? *shared_.send_cq : send_cq_;
    }
    completion_queue_type& recv_cq() noexcept {
        return shared_.recv_cq ? *shared_.recv_cq : recv_cq_;
    }

    /// The connection's QP as a queue_pair, for sends, receives, RDMA writes and
    /// reads as Asio operations (docs/work-requests.md). The first call gives the
    /// CQs to it (async_poll on them is refused from then on; a CQ that was
    /// already polled makes this throw errc::completion_queue_in_use) and starts
    /// watching the id's events for the peer's disconnect: when DISCONNECTED
    /// comes, this side disconnects too (rdma_disconnect flushes the QP), and every
    /// operation, pending and later, ends with errc::disconnected, as a closed TCP
    /// peer ends an Asio read; on DEVICE_REMOVAL they end with
    /// errc::device_removed. The id's other events still go to id().async_next.
    /// Disconnect with this connection's async_disconnect, not
    /// id().async_disconnect (whose DISCONNECTED the watch would take). The queue
    /// pair goes with the connection (before its id); closing id() by itself
    /// closes the queue pair first too (its operations end with
    /// operation_aborted, later ones with bad_descriptor). Throws system_error
    /// when the connection has no QP (EBADF; also once closed).
    queue_pair_type& queue_pair() {
        if (queue_pair_.is_open())
            return queue_pair_;
        if (qp() == nullptr)
            detail::throw_error(asio::error::bad_descriptor,
                                "rdma_asio::connection::queue_pair: the connection has no QP");
        error_code ec;
        // Named with the domain the QP was made in, so that its regions vouch for
        // inline sends (connection_options::max_inline). A connection made with an
        // ibv_pd given by pointer has no registry of regions: nothing goes inline.
        if (shared_.srq != nullptr && pd_)
            queue_pair_.assign(id_.native_handle(), pd(), send_cq(), recv_cq(), *shared_.srq, ec);
        else if (shared_.srq != nullptr)
            queue_pair_.assign(id_.native_handle(), send_cq(), recv_cq(), *shared_.srq, ec);
        else if (shared_cq_ && pd_)
            queue_pair_.assign(id_.native_handle(), pd(), *shared_cq_, *shared_cq_, ec);
        else if (pd_)
            queue_pair_.assign(id_.native_handle(), pd(), send_cq_, recv_cq_, ec);
        else
            queue_pair_.assign(id_.native_handle(), send_cq_, recv_cq_, ec);
        detail::throw_if_error(ec, "rdma_asio::connection::queue_pair");
        watch_ = detail::connection_steps::watch_end(detail::io_object_access::state(id_),
                                                     detail::io_object_access::state(queue_pair_),
                                                     id_.get_executor());
        return queue_pair_;
    }

    /// Disconnects (rdma_disconnect, then the DISCONNECTED event, as
    /// cm_id::async_disconnect). When queue_pair() is in use, the watch for the
    /// peer's disconnect is stopped first (the id's other waits stay pending), and
    /// the queue pair's operations end with errc::disconnected.
    /// Signature: void(error_code).
    /// The watch stops as the operation starts: made with asio::deferred and
    /// never launched, it changes nothing.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_disconnect(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        const auto& id = detail::io_object_access::state(id_);
        return detail::initiate_operation<void(error_code), detail::cm_start<void(error_code)>>(
            id ? id->channel() : nullptr, id_.get_executor(),
            "rdma_asio::connection::async_disconnect", std::forward<CompletionToken>(token),
            detail::cm_step<void, detail::connection_watch_stop>{
                {id},
                detail::cm_call::disconnect(),
                RDMA_CM_EVENT_DISCONNECTED,
                {detail::io_object_access::state(queue_pair_), watch_}});
    }

private:
    template <class>
    friend class basic_connection;

    template <class Executor1>
    static void own_parts(const basic_connection<Executor1>& other) {
        if (other.shared_.srq != nullptr)
            detail::throw_error(asio::error::invalid_argument,
                                "rdma_asio::connection: a connection on shared CQs keeps its "
                                "executor type");
    }

    static cm_id_type checked(cm_id_type id, ibv_comp_channel* channel,
                              const protection_domain& pd) {
        // Closed (or moved from): its ibv_pd may be gone already, so it is not read.
        detail::connection_steps::check_open(pd);
        detail::connection_steps::check(id.native_handle(), channel, pd.native_handle());
        return id;
    }
    static cm_id_type checked(cm_id_type id, ibv_comp_channel* channel, const ibv_pd* pd) {
        detail::connection_steps::check(id.native_handle(), channel, pd);
        return id;
    }
    // `owner` (empty for an ibv_pd given by pointer) keeps `pd` allocated. The
    // CQs' handlers run on `cq_ex` by default.
    template <class Executor1>
    basic_connection(cm_id_type id, const basic_completion_channel<Executor1>& channel, ibv_pd* pd,
                     std::shared_ptr<ibv_pd> owner, const connection_options& options,
                     const executor_type& cq_ex)
        : pd_(std::move(owner)), send_cq_(cq_on(cq_ex, channel, options.send_depth, options.cq)),
          recv_cq_(cq_on(cq_ex, channel, options.receive_depth, options.cq)), id_(std::move(id)),
          queue_pair_(send_cq_.get_executor()) {
        detail::connection_steps::create_qp(id_.native_handle(), pd, send_cq_.native_handle(),
                                            recv_cq_.native_handle(), nullptr, options);
    }

    endpoint_type endpoint_of(bool peer, error_code& ec) const {
        rdma_cm_id* id = id_.native_handle();
        if (id == nullptr) {
            ec = asio::error::bad_descriptor;
            return {};
        }
        endpoint_type endpoint;
        if (!detail::tcp_endpoint_of(peer ? rdma_get_peer_addr(id) : rdma_get_local_addr(id),
                                     endpoint)) {
            ec = asio::error::address_family_not_supported;
            return {};
        }
        ec.clear();
        return endpoint;
    }

    // A CQ on `channel` whose handlers run on `ex` by default.
    template <class Executor1>
    static completion_queue_type cq_on(const executor_type& ex,
                                       const basic_completion_channel<Executor1>& channel,
                                       std::uint32_t depth, const cq_options& options) {
        completion_queue_type cq(ex);
        cq.open(channel, static_cast<int>(depth), options);
        return cq;
    }

    // The caller's CQs and SRQ, for a connection made on shared ones (all null
    // otherwise, when the connection owns its CQs).
    struct shared_parts {
        completion_queue_type* send_cq = nullptr;
        completion_queue_type* recv_cq = nullptr;
        basic_shared_receive_queue<Executor>* srq = nullptr;
    };

    // Declared so that they are destroyed queue pair first (it destroys the QP),
    // then the id, then the CQs (a shared one's share too: the last one destroys
    // it, which ibv_destroy_cq refuses while the QP exists), and the protection
    // domain last: ibv_dealloc_pd fails while the QP exists.
    std::shared_ptr<ibv_pd> pd_;
    completion_queue_type send_cq_;
    completion_queue_type recv_cq_;
    std::shared_ptr<completion_queue> shared_cq_; // on_shared_cq_t's share, or null
    cm_id_type id_;
    queue_pair_type queue_pair_;
    // The cancellation signal of the watch's wait, shared with that wait (which
    // may end after the connection): stopping the watch cancels that wait alone,
    // not the id's other waits. Null when not watching.
    std::shared_ptr<asio::cancellation_signal> watch_;
    shared_parts shared_;
};

} // namespace rdma_asio
