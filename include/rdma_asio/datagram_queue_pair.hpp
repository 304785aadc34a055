// Unreliable datagrams as Asio operations: a UD queue pair that sends to and
// receives from any other UD queue pair (or multicast group) by address, as an
// ip::udp::socket does.
#pragma once

#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/datagram_endpoint.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/qp/address_wait.hpp"
#include "rdma_asio/detail/qp/qp_handler_op.hpp"
#include "rdma_asio/detail/qp/qp_request.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/queue_pair.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>
#include <type_traits>

namespace rdma_asio {

/// How a datagram_queue_pair creates its QP (ibv_create_qp(3), IBV_QPT_UD) and
/// addresses its datagrams.
struct datagram_options {
    /// Send queue depth: async_send_to beyond it waits, in the order started.
    std::uint32_t send_depth = 64;
    /// Receive queue depth: likewise for async_receive and async_receive_from.
    std::uint32_t receive_depth = 64;
    /// Buffers one async_send_to may take (at most 4).
    std::uint32_t max_send_sge = 4;
    /// Buffers one receive may take (at most 4); the QP is made with one more,
    /// for the room the device keeps for the Global Routing Header.
    std::uint32_t max_receive_sge = 4;
    /// Bytes a datagram may carry inline (see qp_options::max_inline).
    std::uint32_t max_inline = 64;
    /// The device's port the QP uses.
    std::uint8_t port = 1;
    /// The GID index of that port the datagrams are sent from (the source GID of
    /// their address handles). On RoCE choose the GID of the address family and
    /// RoCE version the peers use (`ibv_devinfo -v` lists them; rdma_cm picks it
    /// from an IP address). Not used on InfiniBand without a global route.
    std::uint8_t gid_index = 0;
    /// The Q_Key: a datagram is taken only when it carries this key (and sent
    /// with the destination's). rdma_cm's multicast groups use default_qkey.
    std::uint32_t qkey = default_qkey;
};

template <class Executor = asio::any_io_executor>
class basic_datagram_queue_pair;

namespace detail {
/// ibv_create_qp of a UD QP on `pd` with these CQs, moved through INIT
/// (options.port, P_Key index 0, options.qkey), RTR and RTS; null with `ec` and
/// `failed` ("rdma_asio::datagram_queue_pair: " and the call that failed) on
/// failure.
ibv_qp* create_ud_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, const datagram_options& options,
                     error_code& ec, const char*& failed) noexcept;
} // namespace detail

/// A UD queue pair whose sends and receives are Asio operations: each
/// async_send_to and async_receive posts one work request and completes when its
/// own completion arrives.
///
/// Datagrams: each is one message of at most the path MTU (ibv_query_port(3):
/// active_mtu, 1024 bytes on rxe by default), to any UD queue pair or multicast
/// group, with no connection, no acknowledgement and no order between senders. A
/// datagram that finds no receive posted, or a Q_Key that differs, is dropped by
/// the receiving device: post receives before the peers send, and keep them
/// posted.
///
/// Addresses: a datagram_endpoint names a port (GID, LID), a queue pair number and
/// a Q_Key. local_endpoint() is this queue pair's own, to hand to peers;
/// async_receive_from gives the sender's, to reply to. The address handle a send
/// needs (ibv_create_ah(3)) is made once per destination, on its first send, and
/// kept until the queue pair is destroyed. It is made off the caller's thread (on
/// RoCE the kernel may wait a second for the neighbour): the first send to a
/// destination, and those to it after, wait for it in the order they started.
///
/// Receives: the device writes each datagram 40 bytes into the receive's memory,
/// after room for the Global Routing Header (ibv_post_recv(3)); the queue pair
/// keeps that room itself, so a receive's buffers hold the datagram alone and its
/// length is the datagram's.
///
/// Multicast: attach_multicast(group) lets the queue pair receive what is sent to
/// a group's endpoint (ibv_attach_mcast(3)); join the group first, with
/// cm_id::async_join_multicast on RoCE and InfiniBand alike, which also gives the
/// group's endpoint to send to.
///
/// Completion queues, handlers, memory, shutdown, errors and cancellation: as for
/// queue_pair (its class comment). A UD QP moves to the error state only on a
/// local error; a datagram lost on the way completes its send successfully all
/// the same.
template <class Executor>
class basic_datagram_queue_pair
    : public detail::io_object<basic_datagram_queue_pair, Executor, detail::queue_pair_impl> {
    using base = detail::io_object<basic_datagram_queue_pair, Executor, detail::queue_pair_impl>;
    using impl_type = detail::queue_pair_impl;

public:
    using typename base::executor_type;
    /// The ibv_qp.
    using typename base::native_handle_type;

    /// A queue pair that is not open.
    explicit basic_datagram_queue_pair(const detail::executor_or_context<Executor>& ex)
        : base(ex) {}

    /// Creates a UD QP on `pd` whose sends complete on `send_cq` and receives on
    /// `recv_cq` (they may be the same CQ), with the send CQ's executor, ready to
    /// send and receive. Throws system_error naming the call that failed
    /// (ibv_create_qp, ibv_modify_qp, ibv_query_gid, ibv_reg_mr, ...).
    template <class Executor1, class Executor2>
    requires std::is_convertible_v<const Executor1&, Executor> basic_datagram_queue_pair(
        const protection_domain& pd, const basic_completion_queue<Executor1>& send_cq,
        const basic_completion_queue<Executor2>& recv_cq, const datagram_options& options = {})
        : base(send_cq.get_executor()) {
        error_code ec;
        const char* failed = "rdma_asio::datagram_queue_pair";
        open_on(pd, this->state_of(send_cq), this->state_of(recv_cq), options, ec, failed);
        detail::throw_if_error(ec, failed);
    }

    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // calls close().
    using base::base;
    using base::operator=;

    /// Creates the QP (see the constructor). Errors: already_open; bad_descriptor
    /// for a closed protection domain or CQ; errc::completion_queue_in_use; the
    /// errno of the call that failed.
    template <class Executor1, class Executor2>
    void open(const protection_domain& pd, const basic_completion_queue<Executor1>& send_cq,
              const basic_completion_queue<Executor2>& recv_cq, const datagram_options& options,
              error_code& ec) {
        const char* failed = nullptr;
        open_on(pd, this->state_of(send_cq), this->state_of(recv_cq), options, ec, failed);
    }
    /// As open(..., ec), throwing system_error.
    template <class Executor1, class Executor2>
    void open(const protection_domain& pd, const basic_completion_queue<Executor1>& send_cq,
              const basic_completion_queue<Executor2>& recv_cq,
              const datagram_options& options = {}) {
        this->open_or_throw("rdma_asio::datagram_queue_pair::open", pd, send_cq, recv_cq, options);
    }

    /// This queue pair's address: its port's GID at datagram_options::gid_index,
    /// its LID, its QP number and its Q_Key. Throws system_error (bad_descriptor)
    /// when not open.
    datagram_endpoint local_endpoint() const {
        return this->checked("rdma_asio::datagram_queue_pair::local_endpoint").local_endpoint();
    }

    /// Receives what is sent to the multicast group `group` (the endpoint
    /// cm_id::async_join_multicast completed with) from now on
    /// (ibv_attach_mcast(3)). Errors: bad_descriptor when not open; the errno of
    /// ibv_attach_mcast.
    void attach_multicast(const datagram_endpoint& group, error_code& ec) {
        ec = this->is_open() ? this->impl_->multicast(group, true)
                             : error_code(asio::error::bad_descriptor);
    }
    void attach_multicast(const datagram_endpoint& group) {
        error_code ec;
        attach_multicast(group, ec);
        detail::throw_if_error(ec, "rdma_asio::datagram_queue_pair::attach_multicast: "
                                   "ibv_attach_mcast");
    }
    /// Stops receiving what is sent to `group` (ibv_detach_mcast(3)). Errors as
    /// attach_multicast's.
    void detach_multicast(const datagram_endpoint& group, error_code& ec) {
        ec = this->is_open() ? this->impl_->multicast(group, false)
                             : error_code(asio::error::bad_descriptor);
    }
    void detach_multicast(const datagram_endpoint& group) {
        error_code ec;
        detach_multicast(group, ec);
        detail::throw_if_error(ec, "rdma_asio::datagram_queue_pair::detach_multicast: "
                                   "ibv_detach_mcast");
    }

    /// Sends `buffer` (one registered_buffer or a contiguous range of them, as
    /// for queue_pair::async_send) as one datagram to `to`. Signature:
    /// void(error_code, std::size_t bytes sent). It completes when the device has
    /// sent it, whether or not anyone received it. Errors besides queue_pair's:
    /// the errno of ibv_create_ah for a destination the device cannot reach.
    /// Per-operation cancellation (any type) ends it at once while it waits for
    /// its destination's address handle; once posted, as queue_pair's sends.
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_send_to(const Buffers& buffer, const datagram_endpoint& to,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        detail::qp_request r = detail::qp_request::send(buffer, IBV_WR_SEND);
        r.destination = to;
        return start_send(std::forward<CompletionToken>(token), r);
    }
    /// The same with immediate data (IBV_WR_SEND_WITH_IMM), which the receiver
    /// gets in receive_info::immediate.
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_send_to(const Buffers& buffer, const datagram_endpoint& to, immediate_data imm,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        detail::qp_request r = detail::qp_request::send(buffer, IBV_WR_SEND_WITH_IMM);
        r.destination = to;
        r.immediate = imm.value;
        return start_send(std::forward<CompletionToken>(token), r);
    }

    /// Receives the next datagram into `buffer`. Signature: void(error_code,
    /// std::size_t bytes received). A datagram longer than the buffer fails with
    /// wc_errc::local_length_error.
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_receive(const Buffers& buffer,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_op("rdma_asio::datagram_queue_pair::async_receive",
                        std::forward<CompletionToken>(token), detail::qp_request::receive(buffer));
    }
    /// The same, filling `info` (immediate data, source QP) on success; `info`
    /// must stay valid until the handler runs.
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_receive(const Buffers& buffer, receive_info& info,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_op("rdma_asio::datagram_queue_pair::async_receive",
                        std::forward<CompletionToken>(token),
                        detail::qp_request::receive(buffer, &info));
    }
    /// Receives the next datagram into `buffer` and its sender's address into
    /// `sender` (to reply with async_send_to), on success; `sender` must stay
    /// valid until the handler runs. Its Q_Key is this queue pair's, which the
    /// datagram carried. Signature: void(error_code, std::size_t bytes received).
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_receive_from(
        const Buffers& buffer, datagram_endpoint& sender,
        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        detail::qp_request r = detail::qp_request::receive(buffer);
        r.sender = &sender;
        return start_op("rdma_asio::datagram_queue_pair::async_receive_from",
                        std::forward<CompletionToken>(token), r);
    }

    // cancel(): terminal cancellation of every operation (the QP goes to the
    // error state if any was posted). close(): the QP is destroyed, its operations
    // end with operation_aborted, and its address handles go with it.

private:
    void open_on(const protection_domain& pd,
                 const std::shared_ptr<detail::completion_queue_impl>& send,
                 const std::shared_ptr<detail::completion_queue_impl>& recv,
                 const datagram_options& options, error_code& ec, const char*& failed) {
        if (this->is_open()) {
            ec = asio::error::already_open;
            return;
        }
        if (!pd.is_open() || !send || !recv) {
            ec = asio::error::bad_descriptor;
            return;
        }
        ibv_qp* qp = detail::create_ud_qp(pd.native_handle(), send->native_handle(),
                                          recv->native_handle(), options, ec, failed);
        if (qp == nullptr)
            return;
        auto& context = asio::query(this->get_executor(), asio::execution::context);
        auto impl = impl_type::open(context, qp, IBV_QPT_UD, detail::qp_owner::verbs, nullptr,
                                    pd.share(), send, recv, ec);
        if (impl) {
            impl->enable_datagrams(options.port, options.gid_index, ec);
            if (ec) {
                failed = "rdma_asio::datagram_queue_pair: ibv_query_port, ibv_query_gid or "
                         "ibv_reg_mr";
                impl->close(); // destroys the QP
                return;
            }
            this->adopt(std::move(impl));
            return;
        }
        ibv_destroy_qp(qp);
    }

    template <class CompletionToken>
    auto start_send(CompletionToken&& token, const detail::qp_request& r) {
        return this->template initiate<void(error_code, std::size_t), detail::start_datagram_send>(
            "rdma_asio::datagram_queue_pair::async_send_to", std::forward<CompletionToken>(token),
            r);
    }

    template <class CompletionToken>
    auto start_op(const char* what, CompletionToken&& token, const detail::qp_request& r) {
        return this->template initiate<void(error_code, std::size_t),
                                       detail::start_qp_request<std::size_t>>(
            what, std::forward<CompletionToken>(token), r);
    }
};

/// A datagram queue pair on any I/O executor.
using datagram_queue_pair = basic_datagram_queue_pair<>;

} // namespace rdma_asio
