// Work requests as Asio operations: a queue pair whose sends, receives, RDMA
// writes and reads complete handlers when their own work completions arrive.
#pragma once

#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/qp/qp_close_op.hpp"
#include "rdma_asio/detail/qp/qp_handler_op.hpp"
#include "rdma_asio/detail/qp/qp_request.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"
#include "rdma_asio/detail/qp/shared_receive_queue_impl.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/wc_error.hpp"

#include <infiniband/verbs.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <system_error>
#include <type_traits>

namespace rdma_asio {

/// What a completed receive says besides its length.
struct receive_info {
    /// The sender's immediate data (a send or an RDMA write with
    /// immediate_data), in host byte order; empty for a plain send.
    std::optional<std::uint32_t> immediate;
    /// The message was an RDMA write with immediate data
    /// (IBV_WC_RECV_RDMA_WITH_IMM): its bytes went to the memory the writer
    /// named, the receive's buffer is untouched, and the length is the write's.
    bool written = false;
    /// The sending QP's number: meaningful on UD only (rxe reports 0 on RC).
    std::uint32_t source_qp = 0;
    /// ibv_wc::wc_flags of the completion (IBV_WC_GRH, IBV_WC_WITH_IMM, ...).
    unsigned int wc_flags = 0;
    /// The number of the local queue pair that took the message (ibv_wc::qp_num):
    /// on a shared_receive_queue, which of its queue pairs it arrived on.
    std::uint32_t qp_num = 0;
};

/// Immediate data to send with a message (IBV_WR_SEND_WITH_IMM) or an RDMA write
/// (IBV_WR_RDMA_WRITE_WITH_IMM): 32 bits the receiver gets in
/// receive_info::immediate. In host byte order.
struct immediate_data {
    std::uint32_t value = 0;
};

/// How a queue_pair creates its QP (ibv_create_qp(3)): an RC QP whose work
/// requests say whether they are signaled (sq_sig_all 0; see docs/work-requests.md,
/// "Unsignaled sends").
struct qp_options {
    /// Send queue depth: async_send, async_write and async_read beyond it wait, in
    /// the order started, for an earlier one to complete.
    std::uint32_t send_depth = 64;
    /// Receive queue depth: likewise for async_receive.
    std::uint32_t receive_depth = 64;
    /// Scatter/gather entries per send-queue work request: the most buffers one
    /// async_send, async_write or async_read may take (at most 4, what an
    /// operation carries).
    std::uint32_t max_send_sge = 4;
    /// The same for async_receive.
    std::uint32_t max_receive_sge = 4;
    /// Bytes a send or an RDMA write may carry inline, as asked of the device
    /// (ibv_qp_cap::max_inline_data). The device may allow more (rxe sizes a work
    /// request for the larger of this and max_send_sge entries, and allows both
    /// to fill it: 64 bytes inline for 4 entries, 4 entries for 64 bytes); a
    /// send or write whose
    /// buffers hold at most what it allows, each within a memory_region of the
    /// QP's own protection domain, is posted with IBV_SEND_INLINE, its bytes
    /// copied into the work request, and the device reads no memory for it. Other
    /// buffers go to the device, which checks their key and bounds.
    std::uint32_t max_inline = 64;
};

template <class Executor = asio::any_io_executor>
class basic_queue_pair;
template <class Executor>
class basic_shared_receive_queue;

/// What a queue_pair operation's memory may be: one registered_buffer, or a
/// contiguous range of them (one work request's scatter/gather list).
template <class T>
concept registered_buffers = std::same_as<T, registered_buffer> ||
    (std::ranges::contiguous_range<const T&>&& std::ranges::sized_range<const T&>&&
         std::same_as<std::ranges::range_value_t<const T&>, registered_buffer>);

namespace detail {
/// ibv_create_qp of an RC QP on `pd` with these CQs, on `srq` unless it is null
/// (then options.receive_depth and max_receive_sge do not apply); null with `ec`
/// on failure.
ibv_qp* create_rc_qp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, ibv_srq* srq,
                     const qp_options& options, error_code& ec) noexcept;
} // namespace detail

/// A queue pair whose work requests are Asio operations: each async_send,
/// async_receive, async_write, async_read, async_fetch_add and
/// async_compare_swap posts one work request and completes when that work
/// request's own completion arrives. async_wait_error posts none: it waits for
/// the queue pair to leave service.
///
/// Its CQs are rdma_asio completion_queues whose completions go to queue pairs
/// only: the library owns every wr_id, polls each CQ (arm, poll, wait, batched
/// acks, as async_poll does) only while an operation is outstanding on it, and
/// routes each work completion to its operation by QP number and wr_id. Several
/// queue pairs may share CQs; a CQ used by a queue_pair refuses async_poll and
/// async_wait (errc::completion_queue_in_use), and a CQ its owner has polled
/// cannot be given to a queue_pair. Post nothing on native_handle() yourself:
/// the library counts the queues' room.
///
/// Room in the queues: an operation started while its queue is full waits, in the
/// order started, for room, instead of failing with ENOMEM.
///
/// Handlers: never run inside the initiating call. A completion read on the
/// handler's own io_context thread runs its handler there (as asio::dispatch
/// would); a handler bound to any other executor (a strand, another io_context)
/// is posted to it.
///
/// Memory: an operation's state comes from its handler's associated allocator
/// (by default a per-thread cache of blocks, which batches of operations keep
/// reusing) and goes back before the handler runs.
///
/// Buffers: the buffer of an operation must stay valid until its handler runs;
/// the handler runs only after the device is done with it (after its completion,
/// a flush included, or after the QP is destroyed or the device gone).
///
/// Shutdown: destroying the execution context (the io_context) with operations
/// pending destroys their handlers without invoking them, and with them what they
/// own (a coroutine frame, the queue_pair itself), as Asio does with its own
/// operations. The QP is destroyed first (moved to the error state when it was
/// assigned from elsewhere), so that the device is done with the buffers.
///
/// A queue pair made in a protection_domain keeps its ibv_pd allocated until the
/// QP is destroyed, as memory regions do: the protection_domain object may go
/// first.
///
/// Errors of every operation: a failed completion's status in wc_errc's category
/// (wc_errc::remote_access_error, wc_errc::rnr_retry_exceeded, ...);
/// wc_errc::flushed when the QP went to the error state before the work request
/// ran (then every later operation ends with it too, without being posted);
/// operation_aborted after cancellation or close(); bad_descriptor on a closed
/// object; the errno of ibv_post_send or ibv_post_recv (EINVAL for a QP not yet
/// ready to send, ...); the CQ's error (errc::device_removed once the device is
/// gone); with watch_errors(), the device's error events (errc::queue_pair_fatal,
/// errc::completion_queue_overrun, ...). Never reported inside the initiating
/// call.
///
/// Per-operation cancellation: an operation still waiting for room supports
/// terminal, partial and total cancellation and was never posted. A posted work
/// request cannot be withdrawn, so a posted operation supports terminal
/// cancellation only, and at a price: the QP is moved to the error state, the
/// operation ends with operation_aborted when its flush completion arrives (or
/// with success if it completed first), and every other operation of the QP ends
/// with wc_errc::flushed. `op || timer` emits terminal cancellation: when the timer
/// wins, the QP is unusable afterwards.
template <class Executor>
class basic_queue_pair
    : public detail::io_object<basic_queue_pair, Executor, detail::queue_pair_impl> {
    using base = detail::io_object<basic_queue_pair, Executor, detail::queue_pair_impl>;
    using impl_type = detail::queue_pair_impl;

public:
    using typename base::executor_type;
    /// The ibv_qp.
    using typename base::native_handle_type;

    /// A queue pair that is not open.
    explicit basic_queue_pair(const detail::executor_or_context<Executor>& ex) : base(ex) {}

    /// Creates an RC QP on `pd` whose sends complete on `send_cq` and receives on
    /// `recv_cq` (they may be the same CQ), with the send CQ's executor. The QP
    /// starts in the RESET state: connect it (ibv_modify_qp through INIT, RTR,
    /// RTS) before sending. Throws system_error naming ibv_create_qp.
    template <class Executor1, class Executor2>
    requires std::is_convertible_v<const Executor1&, Executor>
    basic_queue_pair(const protection_domain& pd, const basic_completion_queue<Executor1>& send_cq,
                     const basic_completion_queue<Executor2>& recv_cq,
                     const qp_options& options = {})
        : base(send_cq.get_executor()) {
        error_code ec;
        open(pd, send_cq, recv_cq, options, ec);
        detail::throw_if_error(ec, "rdma_asio::queue_pair: ibv_create_qp");
    }

    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // calls close().
    using base::base;
    using base::operator=;

    /// Creates the QP (see the constructor). Errors: already_open; bad_descriptor
    /// for a closed protection domain or CQ; errc::completion_queue_in_use; the
    /// errno of ibv_create_qp.
    template <class Executor1, class Executor2>
    void open(const protection_domain& pd, const basic_completion_queue<Executor1>& send_cq,
              const basic_completion_queue<Executor2>& recv_cq, const qp_options& options,
              error_code& ec) {
        open_on(pd, this->state_of(send_cq), this->state_of(recv_cq), nullptr, false, options, ec);
    }

    /// Creates an RC QP on `pd` whose receives are `srq`'s: the QP has no receive
    /// queue of its own (its async_receive ends with errc::receive_on_shared_queue), and
    /// the messages it receives complete the SRQ's async_receive, through
    /// `recv_cq`. Otherwise as the constructor without one. Throws system_error
    /// naming ibv_create_qp.
    template <class Executor1, class Executor2, class Executor3>
    requires std::is_convertible_v<const Executor1&, Executor>
    basic_queue_pair(const protection_domain& pd, const basic_completion_queue<Executor1>& send_cq,
                     const basic_completion_queue<Executor2>& recv_cq,
                     const basic_shared_receive_queue<Executor3>& srq,
                     const qp_options& options = {})
        : base(send_cq.get_executor()) {
        error_code ec;
        open(pd, send_cq, recv_cq, srq, options, ec);
        detail::throw_if_error(ec, "rdma_asio::queue_pair: ibv_create_qp");
    }

    /// Creates the QP on `srq` (see that constructor). Errors as the other
    /// open's; bad_descriptor for a closed SRQ; invalid_argument for an SRQ made in
    /// another protection domain than `pd`.
    template <class Executor1, class Executor2, class Executor3>
    void open(const protection_domain& pd, const basic_completion_queue<Executor1>& send_cq,
              const basic_completion_queue<Executor2>& recv_cq,
              const basic_shared_receive_queue<Executor3>& srq, const qp_options& options,
              error_code& ec) {
        open_on(pd, this->state_of(send_cq), this->state_of(recv_cq), this->state_of(srq), true,
                options, ec);
    }

    /// As open(pd, send_cq, recv_cq, srq, options, ec), throwing system_error.
    template <class Executor1, class Executor2, class Executor3>
    void open(const protection_domain& pd, const basic_completion_queue<Executor1>& send_cq,
              const basic_completion_queue<Executor2>& recv_cq,
              const basic_shared_receive_queue<Executor3>& srq, const qp_options& options = {}) {
        this->open_or_throw("rdma_asio::queue_pair::open: ibv_create_qp", pd, send_cq, recv_cq, srq,
                            options);
    }

    /// As open(..., ec), throwing system_error that names ibv_create_qp.
    template <class Executor1, class Executor2>
    void open(const protection_domain& pd, const basic_completion_queue<Executor1>& send_cq,
              const basic_completion_queue<Executor2>& recv_cq, const qp_options& options = {}) {
        this->open_or_throw("rdma_asio::queue_pair::open: ibv_create_qp", pd, send_cq, recv_cq,
                            options);
    }

    /// Serves a QP made elsewhere (by rdma_cm, or by hand) whose CQs are
    /// `send_cq` and `recv_cq`; it is not destroyed by this object, whose close()
    /// moves it to the error state and lets its posted operations end with their
    /// flush completions. Errors: already_open; invalid_argument for a null QP, a
    /// QP that is not reliable connected (IBV_QPT_RC: a UD QP belongs to a
    /// datagram_queue_pair) or CQs that are not the QP's;
    /// errc::completion_queue_in_use; the errno of ibv_query_qp.
    template <class Executor1, class Executor2>
    void assign(ibv_qp* qp, const basic_completion_queue<Executor1>& send_cq,
                const basic_completion_queue<Executor2>& recv_cq, error_code& ec) {
        if (this->is_open()) {
            ec = asio::error::already_open;
            return;
        }
        this->adopt(impl_type::open(context(), qp, IBV_QPT_RC, detail::qp_owner::borrowed, nullptr,
                                    nullptr, this->state_of(send_cq), this->state_of(recv_cq), ec));
    }

    /// As assign(qp, send_cq, recv_cq, ec), throwing system_error.
    template <class Executor1, class Executor2>
    void assign(ibv_qp* qp, const basic_completion_queue<Executor1>& send_cq,
                const basic_completion_queue<Executor2>& recv_cq) {
        error_code ec;
        assign(qp, send_cq, recv_cq, ec);
        detail::throw_if_error(ec, "rdma_asio::queue_pair::assign");
    }

    /// Serves the QP that rdma_create_qp(3) made on `id`, whose CQs are `send_cq`
    /// and `recv_cq`; close() destroys it (rdma_destroy_qp), so close this object
    /// before the id. (`connection::queue_pair()` does this for a connection.)
    /// Errors as the other assign's; invalid_argument for an id without a QP.
    /// Nothing goes inline: see the overload with the protection domain.
    template <class Executor1, class Executor2>
    void assign(rdma_cm_id* id, const basic_completion_queue<Executor1>& send_cq,
                const basic_completion_queue<Executor2>& recv_cq, error_code& ec) {
        assign_cm(id, nullptr, this->state_of(send_cq), this->state_of(recv_cq), nullptr, false,
                  ec);
    }

    /// As assign(id, send_cq, recv_cq, ec), naming `pd`, the protection domain
    /// the QP was made in (rdma_create_qp(3)'s `pd`): sends and RDMA writes of at
    /// most the QP's max_inline_data bytes from memory_regions of `pd` then go
    /// inline, as on a queue_pair this library created (see async_send).
    /// Errors as that assign's; bad_descriptor for a closed `pd`;
    /// invalid_argument when the QP is not in `pd`.
    template <class Executor1, class Executor2>
    void assign(rdma_cm_id* id, const protection_domain& pd,
                const basic_completion_queue<Executor1>& send_cq,
                const basic_completion_queue<Executor2>& recv_cq, error_code& ec) {
        assign_cm(id, pd.share(), this->state_of(send_cq), this->state_of(recv_cq), nullptr, true,
                  ec);
    }

    /// As assign(id, send_cq, recv_cq, ec), throwing system_error.
    template <class Executor1, class Executor2>
    void assign(rdma_cm_id* id, const basic_completion_queue<Executor1>& send_cq,
                const basic_completion_queue<Executor2>& recv_cq) {
        error_code ec;
        assign(id, send_cq, recv_cq, ec);
        detail::throw_if_error(ec, "rdma_asio::queue_pair::assign");
    }

    /// As assign(id, send_cq, recv_cq, ec) for a QP that rdma_create_qp(3) made on
    /// `srq` (ibv_qp_init_attr::srq): its receives complete `srq`'s async_receive.
    /// Errors as that assign's; bad_descriptor for a closed SRQ, invalid_argument
    /// when the QP is not on `srq`.
    template <class Executor1, class Executor2, class Executor3>
    void assign(rdma_cm_id* id, const basic_completion_queue<Executor1>& send_cq,
                const basic_completion_queue<Executor2>& recv_cq,
                const basic_shared_receive_queue<Executor3>& srq, error_code& ec) {
        assign_srq(id, nullptr, false, send_cq, recv_cq, srq, ec);
    }

    /// The same, naming the protection domain the QP was made in, as
    /// assign(id, pd, send_cq, recv_cq, ec).
    template <class Executor1, class Executor2, class Executor3>
    void assign(rdma_cm_id* id, const protection_domain& pd,
                const basic_completion_queue<Executor1>& send_cq,
                const basic_completion_queue<Executor2>& recv_cq,
                const basic_shared_receive_queue<Executor3>& srq, error_code& ec) {
        assign_srq(id, pd.share(), true, send_cq, recv_cq, srq, ec);
    }

    /// As assign(id, send_cq, recv_cq, srq, ec), throwing system_error.
    template <class Executor1, class Executor2, class Executor3>
    void assign(rdma_cm_id* id, const basic_completion_queue<Executor1>& send_cq,
                const basic_completion_queue<Executor2>& recv_cq,
                const basic_shared_receive_queue<Executor3>& srq) {
        error_code ec;
        assign(id, send_cq, recv_cq, srq, ec);
        detail::throw_if_error(ec, "rdma_asio::queue_pair::assign");
    }

    /// Lets the device's error events reach this queue pair's operations, as
    /// soon as `events` (an async_event_stream of the QP's device) reads them:
    /// - IBV_EVENT_QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR of the QP: waiting and
    ///   later operations end at once, posted ones with their flush completions,
    ///   all with errc::queue_pair_fatal, queue_pair_request_error or
    ///   queue_pair_access_error instead of wc_errc::flushed;
    /// - IBV_EVENT_CQ_ERR of one of its CQs (an overrun, which loses
    ///   completions): the QP is moved to the error state and every operation
    ///   ends now with errc::completion_queue_overrun, since its completion may
    ///   never come.
    /// The events still reach the stream's own waiters; the stream reads only
    /// while one of its waits is pending, so keep one pending (a loop that logs
    /// the device's events does). Without watch_errors, the operations end by
    /// their flush completions (wc_errc::flushed). Errors: bad_descriptor when
    /// this object or the stream is not open.
    template <class Executor1>
    void watch_errors(const basic_async_event_stream<Executor1>& events, error_code& ec) {
        if (!this->is_open() || !events.is_open()) {
            ec = asio::error::bad_descriptor;
            return;
        }
        this->impl_->watch_errors(events.ref(), asio::any_io_executor(this->get_executor()), ec);
    }
    /// As watch_errors(events, ec), throwing system_error.
    template <class Executor1>
    void watch_errors(const basic_async_event_stream<Executor1>& events) {
        error_code ec;
        watch_errors(events, ec);
        detail::throw_if_error(ec, "rdma_asio::queue_pair::watch_errors");
    }

    /// Sends `buffer` (IBV_WR_SEND); the peer's next receive gets it.
    /// Signature: void(error_code, std::size_t bytes sent).
    ///
    /// `buffer`, here and in async_receive and async_write: one registered_buffer,
    /// or several (a contiguous range of them: std::array, std::vector,
    /// std::span), which go into one work request's scatter/gather list, in order,
    /// empty ones left out. An operation carries up to 4 entries, and the QP takes
    /// at most qp_options::max_send_sge (max_receive_sge for a receive): more than
    /// 4 end with E2BIG (an errno, in Asio's system category like the others)
    /// without being posted; more than the QP's limit, with the EINVAL of
    /// ibv_post_send (unless the send goes inline: rxe takes an inline list of
    /// any length). The list is copied as the operation starts.
    ///
    /// Inline: a send or RDMA write of at most the QP's max_inline_data bytes (see
    /// qp_options::max_inline), whose buffers lie within memory_regions of the
    /// QP's own protection domain, is posted with IBV_SEND_INLINE; its bytes are
    /// copied as it is posted. Its handler still runs at its completion. Any
    /// other buffer is checked by the device (its key, domain and bounds), inline
    /// size or not.
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_send(const Buffers& buffer,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_op<std::size_t>("rdma_asio::queue_pair::async_send",
                                     std::forward<CompletionToken>(token),
                                     detail::qp_request::send(buffer, IBV_WR_SEND));
    }
    /// Sends `buffer` with immediate data (IBV_WR_SEND_WITH_IMM).
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_send(const Buffers& buffer, immediate_data imm,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        detail::qp_request r = detail::qp_request::send(buffer, IBV_WR_SEND_WITH_IMM);
        r.immediate = imm.value;
        return start_op<std::size_t>("rdma_asio::queue_pair::async_send",
                                     std::forward<CompletionToken>(token), r);
    }

    /// Receives the next message into `buffer` (IBV post_recv). Signature:
    /// void(error_code, std::size_t bytes received); a message longer than
    /// the buffer fails with wc_errc::local_length_error (and the QP with it).
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_receive(const Buffers& buffer,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_op<std::size_t>("rdma_asio::queue_pair::async_receive",
                                     std::forward<CompletionToken>(token),
                                     detail::qp_request::receive(buffer));
    }
    /// The same, filling `info` (immediate data, source QP, whether it came with an
    /// RDMA write) on success; `info` must stay valid until the handler runs.
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_receive(const Buffers& buffer, receive_info& info,
                  CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_op<std::size_t>("rdma_asio::queue_pair::async_receive",
                                     std::forward<CompletionToken>(token),
                                     detail::qp_request::receive(buffer, &info));
    }

    /// Writes `local` into the peer's memory at `remote` (IBV_WR_RDMA_WRITE); the
    /// peer's CPU does nothing. Signature: void(error_code, std::size_t).
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_write(const Buffers& local, remote_buffer remote,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_op<std::size_t>("rdma_asio::queue_pair::async_write",
                                     std::forward<CompletionToken>(token),
                                     detail::qp_request::send(local, IBV_WR_RDMA_WRITE, remote));
    }
    /// Writes `local` into the peer's memory at `remote` and tells the peer
    /// (IBV_WR_RDMA_WRITE_WITH_IMM): the write takes one of the peer's receives,
    /// whose async_receive completes with the number of bytes written and
    /// receive_info::immediate and receive_info::written set; nothing lands in that
    /// receive's buffer, so an empty one (registered_buffer{}) will do. One
    /// message instead of a write and a send saying "done". Signature:
    /// void(error_code, std::size_t bytes written).
    template <registered_buffers Buffers = registered_buffer,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_write(const Buffers& local, remote_buffer remote, immediate_data imm,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        detail::qp_request r = detail::qp_request::send(local, IBV_WR_RDMA_WRITE_WITH_IMM, remote);
        r.immediate = imm.value;
        return start_op<std::size_t>("rdma_asio::queue_pair::async_write",
                                     std::forward<CompletionToken>(token), r);
    }
    /// Reads the peer's memory at `remote` into `local` (IBV_WR_RDMA_READ).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_read(registered_buffer local, remote_buffer remote,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_op<std::size_t>("rdma_asio::queue_pair::async_read",
                                     std::forward<CompletionToken>(token),
                                     detail::qp_request::send(local, IBV_WR_RDMA_READ, remote));
    }

    /// Adds `add` to the 64-bit value in the peer's memory at `remote`, atomically
    /// with respect to every other atomic operation on it
    /// (IBV_WR_ATOMIC_FETCH_AND_ADD), and completes with the value it held
    /// before, which the device also writes to the first 8 bytes of `result`.
    /// `remote` must be 8-byte aligned in a region registered with
    /// IBV_ACCESS_REMOTE_ATOMIC, and the peer's QP must allow remote atomics;
    /// `result` must be 8-byte aligned and at least 8 bytes long, or the operation
    /// ends with errc::misaligned_atomic without being posted. The value comes as
    /// the device returns it (host byte order on rxe). Signature:
    /// void(error_code, std::uint64_t before).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_fetch_add(registered_buffer result, remote_buffer remote, std::uint64_t add,
                    CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        detail::qp_request r =
            detail::qp_request::send(result, IBV_WR_ATOMIC_FETCH_AND_ADD, remote);
        r.compare_add = add;
        return start_op<std::uint64_t>("rdma_asio::queue_pair::async_fetch_add",
                                       std::forward<CompletionToken>(token), r);
    }
    /// Stores `desired` in the 64-bit value in the peer's memory at `remote` if it
    /// equals `expected`, atomically (IBV_WR_ATOMIC_CMP_AND_SWP), and completes
    /// with the value it held before: equal to `expected` exactly when the swap
    /// took place. Requirements and errors as async_fetch_add. Signature:
    /// void(error_code, std::uint64_t before).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_compare_swap(
        registered_buffer result, remote_buffer remote, std::uint64_t expected,
        std::uint64_t desired,
        CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        detail::qp_request r = detail::qp_request::send(result, IBV_WR_ATOMIC_CMP_AND_SWP, remote);
        r.compare_add = expected;
        r.swap = desired;
        return start_op<std::uint64_t>("rdma_asio::queue_pair::async_compare_swap",
                                       std::forward<CompletionToken>(token), r);
    }

    /// Waits until the queue pair leaves service: it enters the error state,
    /// whatever the reason, and carries no more messages. The counterpart of
    /// Asio's socket.async_wait(wait_error); it posts no work request and holds
    /// no room. Completes with the reason, as the operations waiting for room
    /// end: errc::disconnected (a connection's peer disconnected, or
    /// async_disconnect), the device's error event with watch_errors()
    /// (errc::queue_pair_fatal, ...), errc::device_removed, wc_errc::flushed when
    /// a failed work request moved the QP to the error state (that operation
    /// ends with the failure itself), operation_aborted on close(), cancel() or
    /// async_close; at once (posted) when the QP is in the error state already.
    /// bad_descriptor on a closed object. Never completes with success.
    /// Signature: void(error_code).
    ///
    /// On a shared receive queue, where a connection has no receive of its own
    /// that the peer's disconnect would end, this is how a server learns that a
    /// client went away.
    ///
    /// Cancellation: terminal, partial and total; the queue pair is not touched.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_wait_error(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return start_op<void>("rdma_asio::queue_pair::async_wait_error",
                              std::forward<CompletionToken>(token),
                              detail::qp_request::error_watch());
    }

    // cancel(): terminal cancellation of every operation (see above: the QP goes
    // to the error state if any was posted).
    // close(): a QP the object created (or took from an rdma_cm id) is destroyed
    // and its operations end with operation_aborted; one assigned from elsewhere
    // is moved to the error state and its posted operations end by their flush.

    /// Closes the queue pair as close() does, except that a queue pair this
    /// object destroys, made on a shared receive queue, is moved to the error
    /// state first and destroyed only once the device reports
    /// IBV_EVENT_QP_LAST_WQE_REACHED for it (ibv_get_async_event(3)), read by
    /// `events`, an async_event_stream of its device, and its receive CQ has
    /// been read until empty. From that event on the device takes no more of the
    /// SRQ's receives for it, so each receive it took ends by its own completion
    /// (with its message, or flushed), even where ibv_destroy_qp drops a QP's
    /// completions from its CQ (mlx5), rather than when the SRQ is destroyed.
    /// Signature: void(error_code).
    ///
    /// As the operation is launched (with a callback or use_awaitable, in this
    /// call; with asio::deferred, when the deferred operation is started) the
    /// object closes: is_open() is false, later operations end with
    /// bad_descriptor, waiting ones with operation_aborted, posted ones by their
    /// flush completions (operation_aborted). An operation never launched changes
    /// nothing.
    ///
    /// Completes with success once the QP is destroyed after the event; at once
    /// (posted) for any other queue pair, closed as by close(). Errors:
    /// bad_descriptor when this object is not open at the launch; the stream's errors
    /// (bad_descriptor for a closed stream, errc::device_removed), after which the
    /// QP is destroyed without the event.
    ///
    /// Cancellation: terminal, partial and total, of the wait for the event (the
    /// stream's async_next): the QP is destroyed at once and the operation ends
    /// with operation_aborted. Once the event has come, the CQ is read to its end
    /// and a cancellation is ignored (the operation then succeeds). rxe
    /// raises the event from Linux 6.5 on; on Debian 12's 6.1 it never comes, so
    /// bound the wait (a timer with `||`, or a cancellation slot). The event goes
    /// to the first pending wait of `events` that accepts it: a wait of yours
    /// that accepts this QP's events and is pending when the device raises it
    /// takes it instead, and this operation then waits until cancelled. If the
    /// operation is destroyed without completing (its execution context shuts
    /// down), the QP is destroyed then. close(), or the destruction of this
    /// object, while it waits for the event destroys the QP at once, and so does
    /// a connection's close for the connection's queue pair: the kernel drops the
    /// event with the QP, and this then ends with operation_aborted. Let it
    /// complete first.
    template <class Executor1,
              class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_close(basic_async_event_stream<Executor1>& events,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate<void(error_code), detail::start_qp_close>(
            "rdma_asio::queue_pair::async_close", std::forward<CompletionToken>(token),
            detail::device_event_wait_of(events));
    }

private:
    // The rdma_cm assigns. `pd`: the domain the caller named (`named_pd`), whose
    // regions vouch for inline sends; null when none was named, and then nothing
    // goes inline.
    void assign_cm(rdma_cm_id* id, std::shared_ptr<ibv_pd> pd,
                   const std::shared_ptr<detail::completion_queue_impl>& send,
                   const std::shared_ptr<detail::completion_queue_impl>& recv,
                   const std::shared_ptr<detail::shared_receive_queue_impl>& srq, bool named_pd,
                   error_code& ec) {
        if (this->is_open()) {
            ec = asio::error::already_open;
            return;
        }
        ibv_qp* qp = id != nullptr ? id->qp : nullptr;
        if (named_pd && !pd) {
            ec = asio::error::bad_descriptor;
            return;
        }
        if (named_pd && qp != nullptr && qp->pd != pd.get()) {
            ec = asio::error::invalid_argument;
            return;
        }
        this->adopt(impl_type::open(context(), qp, IBV_QPT_RC, detail::qp_owner::rdma_cm, id,
                                    std::move(pd), send, recv, ec, srq));
    }
    template <class Executor1, class Executor2, class Executor3>
    void assign_srq(rdma_cm_id* id, std::shared_ptr<ibv_pd> pd, bool named_pd,
                    const basic_completion_queue<Executor1>& send_cq,
                    const basic_completion_queue<Executor2>& recv_cq,
                    const basic_shared_receive_queue<Executor3>& srq, error_code& ec) {
        const auto& srq_state = this->state_of(srq);
        if (!srq_state && !this->is_open()) {
            ec = asio::error::bad_descriptor;
            return;
        }
        assign_cm(id, std::move(pd), this->state_of(send_cq), this->state_of(recv_cq), srq_state,
                  named_pd, ec);
    }

    // Every open(): `with_srq` says one was given (then `srq` is its state, null
    // when that object is closed).
    void open_on(const protection_domain& pd,
                 const std::shared_ptr<detail::completion_queue_impl>& send,
                 const std::shared_ptr<detail::completion_queue_impl>& recv,
                 const std::shared_ptr<detail::shared_receive_queue_impl>& srq, bool with_srq,
                 const qp_options& options, error_code& ec) {
        if (this->is_open()) {
            ec = asio::error::already_open;
            return;
        }
        if (!pd.is_open() || !send || !recv || (with_srq && !srq)) {
            ec = asio::error::bad_descriptor;
            return;
        }
        // One protection domain for the QP and its SRQ: a receive's buffer is then
        // valid whichever of the SRQ's queue pairs takes it.
        if (srq && srq->native_handle()->pd != pd.native_handle()) {
            ec = asio::error::invalid_argument;
            return;
        }
        ibv_qp* qp =
            detail::create_rc_qp(pd.native_handle(), send->native_handle(), recv->native_handle(),
                                 srq ? srq->native_handle() : nullptr, options, ec);
        if (qp == nullptr)
            return;
        auto impl = impl_type::open(context(), qp, IBV_QPT_RC, detail::qp_owner::verbs, nullptr,
                                    pd.share(), send, recv, ec, srq);
        if (!impl) {
            ibv_destroy_qp(qp);
            return;
        }
        this->adopt(std::move(impl));
    }

    // The execution context whose shutdown destroys this object's pending operations.
    asio::execution_context& context() const noexcept {
        return asio::query(this->get_executor(), asio::execution::context);
    }

    template <class Value, class CompletionToken>
    auto start_op(const char* what, CompletionToken&& token, const detail::qp_request& r) {
        return this->template initiate<typename detail::qp_signature<Value>::type,
                                       detail::start_qp_request<Value>>(
            what, std::forward<CompletionToken>(token), r);
    }
};

/// A queue pair on any I/O executor.
using queue_pair = basic_queue_pair<>;

} // namespace rdma_asio
