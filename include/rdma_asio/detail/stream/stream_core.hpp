// The state of an open stream: its connection, its registered memory
// (stream_memory.hpp), the receives kept posted for the peer's notifications,
// the flow control (stream_machine.hpp), and the one read and the one write a
// program may have waiting. The notifications' handlers and
// the program's calls meet under one lock; handlers run after it is released.
//
// Copied writes are staged (stream_machine.hpp says when they go): a write is
// copied into the mirror of the peer's ring and finished for the program; the
// staged bytes are posted as one RDMA write by flush(), at once when no data
// write is unfinished, else when the one before is reported done. A data write
// of at most the QP's inline size is finished once posted (the device copied
// its bytes then), and neither it nor a credit record needs a completion of its
// own: they may go unsignaled (work_request_machine.hpp) and end with a later
// one, which saves the device a completion and the CQ's reader a read per
// message. The mirror's memory does not depend on those completions either:
// a part of it is written again only after the peer's credit returned it, and
// the peer credits bytes only after its program read them.
//
// Small writes (at most the inline size, in one buffer, nothing staged or
// unfinished before them, so that a copy would be posted at once anyway) skip
// the mirror: the RDMA write is posted inline from the caller's memory, which the
// post copies into the work request (qp_operation::copy_at_post), and is done
// then. Only when the queue pair can post it in that call: one that would wait
// for room in the send queue is copied instead, as the write is finished for
// the program, and its memory given back, as soon as it is taken.
//
// Large writes (when the program sets zero_copy_from; off by default): a write
// whose first buffer holds at least `zero_copy_from` bytes is written from the
// caller's memory, registered for that write with no access flag (local reads
// only: the peer gets no key to it, so the protection domain lends the peer
// nothing it did not have), instead of being copied into the
// mirror of the peer's ring. Such a write completes when the device reports the
// RDMA write done, not when it is posted, since until then the device reads the
// caller's memory; for the same reason neither cancellation nor a failure ends it
// early: only its own completion does (after close(), the queue pair's
// destruction or its flush). When the memory cannot be registered (the
// locked-memory limit, memory the kernel will not pin), the write is copied.
//
// The hello (stream_hello.hpp): its receive is posted first of all, before the
// connection is accepted or connected (prepare); nothing else is sent before the
// peer's hello arrived.
//
// Rings that follow traffic (stream_machine.hpp says how they are replaced,
// stream_ring_policy.hpp when and with what size): the ring starts at
// stream_options::initial_receive_ring; when the peer's writer has filled it,
// the stream registers one twice as large (up to receive_ring) and announces it
// in its next credit (maybe_grow); a timer, armed only while the ring is above
// the first size or a registration was refused, looks once per
// shrink_after_idle and announces a ring of the first size when nothing arrived
// since the look before (look_at_ring). A ring that cannot be registered (the
// locked-memory limit) is tried again only after the next look: the stream
// keeps the size it has meanwhile. As a writer, the stream moves to the ring
// its peer announced before it posts its next record (move_to_announced_ring),
// with a copy of that ring registered for it; when that copy cannot be
// registered, it stays on the old ring and its record says so, and the peer
// lets the announced ring go (ring_refused) and tries no other before its next
// look.
#pragma once

#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/atomic_mutex.hpp"
#include "rdma_asio/detail/core/result_operation.hpp"
#include "rdma_asio/detail/stream/stream_buffers.hpp"
#include "rdma_asio/detail/stream/stream_hello.hpp"
#include "rdma_asio/detail/stream/stream_io_op.hpp"
#include "rdma_asio/detail/stream/stream_machine.hpp"
#include "rdma_asio/detail/stream/stream_memory.hpp"
#include "rdma_asio/detail/stream/stream_receives.hpp"
#include "rdma_asio/detail/stream/stream_ring_policy.hpp"
#include "rdma_asio/detail/stream/stream_work_request.hpp"
#include "rdma_asio/detail/stream/stream_write_requests.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/stream_options.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

namespace rdma_asio::detail {

// Not a template: a stream of any executor type holds this one type (so that a
// stream converts to another executor type, as Asio's sockets do), and its code is
// compiled once, in the library (src/stream/stream_core.cpp), not in every program
// that uses a stream. Only what touches the program's handler is a template here.
class stream_core : public std::enable_shared_from_this<stream_core> {
public:
    using connection_type = basic_connection<asio::any_io_executor>;
    using handler_type = stream_handler;

    using request = stream_work_request<stream_core>;

    /// With `options` checked (basic_stream::checked).
    stream_core(const asio::any_io_executor& ex, const stream_options& options);
    ~stream_core();
    stream_core(const stream_core&) = delete;
    stream_core& operator=(const stream_core&) = delete;

    /// With the connection made, before it is accepted or connected: registers
    /// this side's memory and posts the receives (the hello's first).
    /// A failure (the memory could not be registered) is kept for start().
    template <class Connection>
    void prepare(Connection& conn) noexcept {
        prepare(conn.pd(), io_object_access::state(conn.queue_pair()));
    }

    /// The connection, established: says hello. The error of prepare(), if any.
    error_code start(connection_type conn);

    /// Where the stream's own completions run when they cannot run where they are
    /// reported (stream_work_request.hpp).
    const asio::any_io_executor& get_executor() const noexcept { return ex_; }

    // A read or a write: done at once when it can be (its handler posted as it
    // is), else its handler erased and kept until it can.
    template <class Handler, class IoExecutor>
    void async_read_some(const stream_buffers<asio::mutable_buffer>& buffers, Handler handler,
                         const IoExecutor& io_ex) {
        maker_for<Handler, IoExecutor> maker(handler, io_ex);
        if (const io_result r = start_read(buffers, maker); !r.waits)
            post_result(std::move(handler), io_ex, r.ec, r.n);
    }

    template <class Handler, class IoExecutor>
    void async_write_some(const stream_buffers<asio::const_buffer>& buffers, Handler handler,
                          const IoExecutor& io_ex) {
        maker_for<Handler, IoExecutor> maker(handler, io_ex);
        if (const io_result r = start_write(buffers, maker); !r.waits)
            post_result(std::move(handler), io_ex, r.ec, r.n);
    }

    /// No data after what was written: the peer's reads end with eof once it has
    /// read everything before.
    void shutdown();

    /// No more reads: the waiting read and later ones end with eof; bytes that
    /// arrive are dropped, counted as read so that the peer's writes do not
    /// wait for room (as a TCP socket's shutdown(shutdown_receive) on Linux
    /// leaves the peer's writes going).
    void shutdown_receive();

    /// The connection's address on this side, or the peer's: bad_descriptor once
    /// it has gone.
    asio::ip::tcp::endpoint endpoint(bool peer, error_code& ec);

    /// The bytes a read would take now without waiting.
    std::size_t available();

    void cancel();

    /// The waiting read and write end (operation_aborted); what the program
    /// wrote goes first, then the end, as a TCP socket's close() sends what it
    /// holds, then its FIN: the staged bytes and the end are posted now if the
    /// peer has a notification free for them, and the connection goes once
    /// every write posted has completed (a bound the transport's retries set),
    /// not waiting for the peer's credit. What could not be posted then is
    /// dropped.
    void close();

    // One of the stream's work requests has ended (stream_work_request.hpp); a
    // notification receive with the peer's immediate data when it took one.
    void completed(request& r, error_code ec, std::optional<std::uint32_t> immediate);

private:
    // The erased handler of a read or write that waits, made under the lock only
    // then (one that completes at once is posted as it is, unerased).
    class handler_maker {
    public:
        virtual handler_type make() = 0;

    protected:
        ~handler_maker() = default;
    };
    template <class Handler, class IoExecutor>
    class maker_for final : public handler_maker {
    public:
        maker_for(Handler& handler, const IoExecutor& io_ex) : handler_(handler), io_ex_(io_ex) {}
        handler_type make() override { return handler_type(std::move(handler_), io_ex_); }

    private:
        Handler& handler_;
        const IoExecutor& io_ex_;
    };
    // How a read or write started: it waits (its handler made and kept), or it
    // is done with (ec, n), for the caller to post with its handler.
    struct io_result {
        bool waits = false;
        error_code ec;
        std::size_t n = 0;
    };

    struct pending_read {
        stream_buffers<asio::mutable_buffer> buffers;
        handler_type handler;
        std::uint64_t id = 0; // which wait this is, for its canceller (watch_cancel)
    };
    struct pending_write {
        stream_buffers<asio::const_buffer> buffers;
        handler_type handler;
        std::uint64_t id = 0;
        std::size_t in_flight = 0; // bytes written from the caller's memory, not yet done
    };
    struct ready {
        handler_type handler;
        error_code ec;
        std::size_t n = 0;
    };
    // The handlers one step completes, after the lock: at most the read's and the
    // write's, as each is taken once.
    class ready_list {
    public:
        void push_back(ready r) noexcept;
        ready* begin() noexcept { return items_.data(); }
        ready* end() noexcept { return items_.data() + count_; }

    private:
        std::array<ready, 2> items_;
        std::size_t count_ = 0;
    };

    void prepare(protection_domain pd, std::shared_ptr<queue_pair_impl> qp) noexcept;
    void prepare_or_throw(protection_domain pd, std::shared_ptr<queue_pair_impl> qp);
    void say_hello(connection_type conn);

    io_result start_read(const stream_buffers<asio::mutable_buffer>& buffers, handler_maker& maker);
    io_result start_write(const stream_buffers<asio::const_buffer>& buffers, handler_maker& maker);
    template <class Pending>
    io_result start_io(std::optional<Pending>& slot, Pending pending, handler_maker& maker,
                       bool read);
    void complete(ready_list& done);
    /// From a completion of the stream's own work requests, never inside a call
    /// of the program's: each handler runs in this call when its executor
    /// allows (as a socket's read runs from the reactor's wake-up), else is
    /// posted. One that throws leaves those after it posted, and its exception
    /// goes on.
    void complete_here(ready_list& done);
    void watch_cancel(handler_type& handler, bool read, std::uint64_t id);
    void take_read(ready_list& done, error_code ec, std::size_t n = 0);
    void take_write(ready_list& done, error_code ec, std::size_t n = 0);

    void on_hello(error_code ec, std::size_t n);
    template <class Step>
    void after_write(request* r, Step step);
    void on_sent(error_code ec, request* r);
    void write_completed(connection_type& gone) noexcept;
    void on_notice(error_code ec, std::optional<std::uint32_t> immediate, std::size_t i);
    void failed(error_code ec, ready_list& done);
    void progress(ready_list& done);
    void repost();
    void send_records();
    void send_record(stream_notice_kind kind);
    void post_write(registered_buffer local, remote_buffer remote,
                    std::optional<stream_notice> notice,
                    stream_request_role role = stream_request_role::write,
                    bool signal_optional = false);
    void try_write(ready_list& done);
    void flush(bool at_once = false);
    void on_data_written(error_code ec, request* r);
    bool write_inline(asio::const_buffer bytes);
    remote_buffer peer_ring_at(std::uint64_t offset, std::uint64_t n) const noexcept;
    bool write_in_place(asio::const_buffer first, const stream_ring_write& w);
    void post_data(const stream_ring_write& w, registered_buffer first_part,
                   registered_buffer second_part, stream_request_role last_done);
    void on_written_in_place(error_code ec, request* r);
    void data_done() noexcept;
    void maybe_grow() noexcept;
    void replace_ring(std::uint64_t bytes) noexcept;
    void ring_refused() noexcept;
    void arm_ring_timer() noexcept;
    void look_at_ring();
    void move_to_announced_ring();
    void post_without_notice(const stream_ring_write& w);
    void ring_read() noexcept { memory_.ring_moved_to(reader_.reading_generation()); }
    void try_read(ready_list& done);
    void drop_arrived();
    std::size_t copy_out(const stream_buffers<asio::mutable_buffer>& buffers);

    asio::any_io_executor ex_;
    std::size_t zero_copy_from_;
    stream_ring_policy ring_policy_;
    // The ring's looks (stream_ring_policy.hpp), every shrink_after_idle while
    // ring_policy_.look_due(); zero: none. Used under the lock only.
    std::chrono::milliseconds look_period_;
    asio::steady_timer ring_timer_;
    bool ring_timer_armed_ = false;
    // The bytes a send of the connection's QP carries inline (its
    // max_inline_data, from prepare): a copied write of at most this many is
    // done once posted, the device having copied it then.
    std::uint32_t max_inline_ = 0;
    // The program's calls and the completions meet here: held for a few hundred
    // instructions, rarely contended; atomic_mutex costs an atomic instruction
    // each way where std::mutex cost about 45 instructions a pair.
    atomic_mutex mutex_;
    error_code prepare_failure_;
    stream_memory memory_;
    stream_hello peer_;
    std::optional<stream_writer_machine> writer_; // after the peer's hello
    stream_reader_machine reader_;
    std::optional<pending_read> read_;
    std::optional<pending_write> write_;
    std::uint64_t waits_ = 0; // reads and writes that waited: each one's id
    std::optional<error_code> failure_;
    // The receives, and the queue pair they and the writes are posted on (from
    // prepare; it outlives the connection's close, refusing new requests then).
    stream_receives<stream_core> receives_;
    std::shared_ptr<queue_pair_impl> qp_;
    stream_write_requests<stream_core> writes_;
    bool end_requested_ = false; // the end is to be sent after the waiting write
    bool shut_down_ = false;
    bool receive_shut_ = false; // shutdown_receive: reads end with eof, arrivals dropped
    bool closed_ = false;
    // Last: destroyed first, its QP before the memory it may write.
    connection_type conn_;
};

} // namespace rdma_asio::detail
