// The state of an open stream: its connection, its registered memory (the ring
// the peer writes into, the copy of what this side writes, the control block
// where the peer's credit records land), the receives kept posted for the
// peer's notifications, the flow control (stream_machine.hpp), and the one read
// and the one write a program may have waiting. The notifications' handlers and
// the program's calls meet under one lock; handlers run after it is released.
//
// Copied writes are staged (stream_machine.hpp says when they go): a write is
// copied into the mirror of the peer's ring and finished for the program; the
// staged bytes are posted as one RDMA write by flush(), at once when no data
// write is unfinished, else when the one before is reported done.
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
#pragma once

#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/atomic_mutex.hpp"
#include "rdma_asio/detail/core/result_operation.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/stream/stream_buffers.hpp"
#include "rdma_asio/detail/stream/stream_hello.hpp"
#include "rdma_asio/detail/stream/stream_io_op.hpp"
#include "rdma_asio/detail/stream/stream_machine.hpp"
#include "rdma_asio/detail/stream/stream_work_request.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/queue_pair.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

namespace rdma_asio::detail {

template <class Executor>
class stream_core : public std::enable_shared_from_this<stream_core<Executor>> {
public:
    using connection_type = basic_connection<Executor>;
    using handler_type = stream_handler;
    using request = stream_work_request<stream_core>;

    stream_core(const Executor& ex, std::size_t ring_bytes, std::uint32_t notices,
                std::size_t zero_copy_from)
        : ex_(ex), zero_copy_from_(zero_copy_from), ring_(ring_bytes),
          reader_(stream_limits{ring_bytes, notices}),
          notices_(std::make_unique<request[]>(notices)), notice_count_(notices), conn_(ex) {
        reposts_.reserve(notices);
    }

    /// With the connection made, before it is accepted or connected: registers
    /// this side's memory and posts the receives (the hello's first).
    /// A failure (the memory could not be registered) is kept for start().
    void prepare(connection_type& conn) noexcept {
        try {
            prepare_or_throw(conn);
        } catch (const system_error& e) {
            prepare_failure_ = e.code();
        } catch (const std::bad_alloc&) {
            prepare_failure_ = errno_code(ENOMEM);
        }
    }

    /// The connection, established: says hello. The error of prepare(), if any.
    error_code start(connection_type conn) {
        if (prepare_failure_) {
            conn.close();
            return prepare_failure_;
        }
        say_hello(std::move(conn));
        return {};
    }

private:
    void prepare_or_throw(connection_type& conn) {
        pd_ = conn.pd(); // for the copy of the peer's ring, made when its hello comes
        const protection_domain& pd = pd_;
        ring_mr_ = memory_region(pd, asio::buffer(ring_),
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        control_mr_ = memory_region(pd, asio::buffer(control_),
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        hello_mr_ = memory_region(pd, asio::buffer(hellos_), IBV_ACCESS_LOCAL_WRITE);
        records_mr_ = memory_region(pd, asio::buffer(records_), IBV_ACCESS_LOCAL_WRITE);
        // Every receive posted at once, or the peer's writes may meet RNR.
        ibv_qp_attr attr{};
        ibv_qp_init_attr init{};
        if (conn.qp() == nullptr || ibv_query_qp(conn.qp(), &attr, IBV_QP_CAP, &init) != 0 ||
            init.cap.max_recv_wr < notice_count_ + 1)
            throw_error(asio::error::invalid_argument,
                        "rdma_asio::stream: the connection's receive queue holds fewer than "
                        "stream_options::notices + 1 receives");
        auto self = this->shared_from_this();
        qp_ = io_object_access::state(conn.queue_pair());
        hello_in_.role = stream_request_role::hello;
        hello_in_.start_receive(*qp_, self,
                                hello_mr_.at(sizeof(stream_hello), sizeof(stream_hello)));
        for (std::size_t i = 0; i < notice_count_; ++i) {
            notices_[i].index = i;
            notices_[i].start_receive(*qp_, self);
        }
    }

    void say_hello(connection_type conn) {
        std::lock_guard lock(mutex_);
        conn_ = std::move(conn);
        stream_hello mine;
        mine.ring_address = reinterpret_cast<std::uintptr_t>(ring_.data());
        mine.ring_rkey = ring_mr_.remote_at(0, ring_.size()).rkey;
        mine.ring_bytes = static_cast<std::uint32_t>(ring_.size());
        mine.control_address = reinterpret_cast<std::uintptr_t>(control_.data());
        mine.control_rkey = control_mr_.remote_at(0, sizeof control_).rkey;
        mine.notices = static_cast<std::uint32_t>(notice_count_);
        std::memcpy(hellos_.data(), &mine, sizeof mine);
        request& r = idle_write();
        r.role = stream_request_role::write;
        r.start_send(*qp_, this->shared_from_this(), hello_mr_.at(0, sizeof mine));
        ++posted_writes_; // its completion counts it down (write_completed)
        ready_list done;
        progress(done);
        // No read or write can wait yet: the stream is not the program's before this.
    }

public:
    const Executor& get_executor() const noexcept { return ex_; }
    connection_type& connection() noexcept { return conn_; }

    // A read or a write: done at once when it can be (its handler posted as it
    // is), else its handler erased and kept until it can.
    template <class Handler>
    void async_read_some(const stream_buffers<asio::mutable_buffer>& buffers, Handler handler,
                         const Executor& io_ex) {
        start_io(read_, pending_read{buffers, {}}, std::move(handler), io_ex, true);
    }

    template <class Handler>
    void async_write_some(const stream_buffers<asio::const_buffer>& buffers, Handler handler,
                          const Executor& io_ex) {
        start_io(write_, pending_write{buffers, {}}, std::move(handler), io_ex, false);
    }

    /// No data after what was written: the peer's reads end with eof once it has
    /// read everything before.
    void shutdown() {
        ready_list done;
        {
            std::lock_guard lock(mutex_);
            end_requested_ = !shut_down_;
            shut_down_ = true;
            progress(done);
        }
        complete(done);
    }

    /// No more reads: the waiting read and later ones end with eof; bytes that
    /// arrive are dropped, counted as read so that the peer's writes do not
    /// wait for room (as a TCP socket's shutdown(shutdown_receive) on Linux
    /// leaves the peer's writes going).
    void shutdown_receive() {
        ready_list done;
        {
            std::lock_guard lock(mutex_);
            receive_shut_ = true;
            progress(done);
        }
        complete(done);
    }

    /// The connection's address on this side, or the peer's: bad_descriptor once
    /// it has gone.
    asio::ip::tcp::endpoint endpoint(bool peer, error_code& ec) {
        std::lock_guard lock(mutex_);
        return peer ? conn_.remote_endpoint(ec) : conn_.local_endpoint(ec);
    }

    /// The bytes a read would take now without waiting.
    std::size_t available() {
        std::lock_guard lock(mutex_);
        return receive_shut_ ? 0 : static_cast<std::size_t>(reader_.unread());
    }

    void cancel() {
        ready_list done;
        {
            std::lock_guard lock(mutex_);
            take_read(done, asio::error::operation_aborted);
            take_write(done, asio::error::operation_aborted);
        }
        complete(done);
    }

    /// The waiting read and write end (operation_aborted); what the program
    /// wrote goes first, then the end, as a TCP socket's close() sends what it
    /// holds, then its FIN: the staged bytes and the end are posted now if the
    /// peer has a notification free for them, and the connection goes once
    /// every write posted has completed (a bound the transport's retries set),
    /// not waiting for the peer's credit. What could not be posted then is
    /// dropped.
    void close() {
        cancel();
        connection_type gone(ex_);
        {
            std::lock_guard lock(mutex_);
            bool linger = false;
            if (writer_ && !failure_ && conn_.is_open()) {
                end_requested_ = !shut_down_;
                shut_down_ = true;
                try {
                    flush(true);
                    ready_list done; // empty: the read and the write were taken above
                    progress(done);
                    linger = true;
                } catch (...) {
                    // A post that could not be made (its context shuts down, no
                    // memory): the connection goes now. close() runs in the
                    // stream's destructor, and throws nothing.
                }
            }
            // From here on nothing new is posted (progress), and the connection,
            // while it stays, goes with the last posted write (write_completed).
            closed_ = true;
            if (!linger || posted_writes_ == 0)
                gone = std::move(conn_);
        }
        gone.close(); // the receives end (operation_aborted)
    }

private:
    struct pending_read {
        stream_buffers<asio::mutable_buffer> buffers;
        handler_type handler;
    };
    struct pending_write {
        stream_buffers<asio::const_buffer> buffers;
        handler_type handler;
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
        void push_back(ready r) noexcept {
            assert(count_ < items_.size());
            items_[count_++] = std::move(r);
        }
        ready* begin() noexcept { return items_.data(); }
        ready* end() noexcept { return items_.data() + count_; }

    private:
        std::array<ready, 2> items_;
        std::size_t count_ = 0;
    };

    template <class Pending, class Handler>
    void start_io(std::optional<Pending>& slot, Pending pending, Handler handler,
                  const Executor& io_ex, bool read) {
        ready_list done;
        {
            std::unique_lock lock(mutex_);
            error_code refused;
            if (slot)
                refused = asio::error::already_started;
            else if (!read && shut_down_)
                refused = asio::error::broken_pipe;
            if (refused) {
                lock.unlock(); // posted after the lock, as every result
                post_result(std::move(handler), io_ex, refused, std::size_t{0});
                return;
            }
            slot.emplace(std::move(pending));
            progress(done); // ends this operation with an empty handler when it can
            if (slot) {
                slot->handler = handler_type(std::move(handler), io_ex);
                watch_cancel(slot->handler, read);
            }
        }
        for (ready& r : done) {
            if (r.handler)
                r.handler.complete(r.ec, r.n);
            else
                post_result(std::move(handler), io_ex, r.ec, r.n);
        }
    }

    void complete(ready_list& done, bool in_slot = false) {
        for (ready& r : done)
            r.handler.complete(r.ec, r.n, in_slot);
    }

    // A waiting read or write ends with operation_aborted when its slot says so.
    void watch_cancel(handler_type& handler, bool read) {
        auto slot = handler.slot();
        if (!slot.is_connected())
            return;
        std::weak_ptr<stream_core> weak = this->shared_from_this();
        slot.assign([weak, read](asio::cancellation_type type) {
            if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial |
                         asio::cancellation_type::total)) == asio::cancellation_type::none)
                return;
            auto self = weak.lock();
            if (!self)
                return;
            ready_list done;
            {
                std::lock_guard lock(self->mutex_);
                if (read)
                    self->take_read(done, asio::error::operation_aborted);
                else
                    self->take_write(done, asio::error::operation_aborted);
            }
            self->complete(done, true);
        });
    }

    void take_read(ready_list& done, error_code ec, std::size_t n = 0) {
        if (read_) {
            done.push_back({std::move(read_->handler), ec, n});
            read_.reset();
        }
    }
    // A write in flight from the caller's memory ends only by its completion.
    void take_write(ready_list& done, error_code ec, std::size_t n = 0) {
        if (write_ && write_->in_flight == 0) {
            done.push_back({std::move(write_->handler), ec, n});
            write_.reset();
        }
    }

    void on_hello(error_code ec, std::size_t n) {
        ready_list done;
        {
            std::lock_guard lock(mutex_);
            std::optional<stream_hello> peer;
            if (!ec && !(peer = read_stream_hello(hellos_.data() + sizeof(stream_hello), n)))
                ec = asio::error::invalid_argument; // not a stream's hello
            if (ec) {
                failed(ec, done);
            } else {
                try {
                    copies_.resize(peer->ring_bytes);
                    copies_mr_ = memory_region(pd_, asio::buffer(copies_), IBV_ACCESS_LOCAL_WRITE);
                    peer_ = *peer;
                    writer_.emplace(peer->limits());
                    progress(done);
                } catch (const system_error& e) {
                    failed(e.code(), done);
                } catch (const std::bad_alloc&) {
                    failed(errno_code(ENOMEM), done);
                }
            }
        }
        complete(done);
    }

    // `r`: the send's or write's request, idle again.
    void on_sent(error_code ec, request* r) {
        ready_list done;
        connection_type gone(ex_);
        {
            std::lock_guard lock(mutex_);
            release(r);
            if (ec)
                failed(ec, done);
            write_completed(gone);
        }
        gone.close();
        complete(done);
    }

    // Under the lock, as a posted write completes: after close(), the last one
    // lets the connection go (into `gone`, closed after the lock).
    void write_completed(connection_type& gone) noexcept {
        if (posted_writes_ > 0)
            --posted_writes_;
        if (closed_ && posted_writes_ == 0)
            gone = std::move(conn_); // empty already unless close() waits for its writes
    }

public:
    // One of the stream's work requests has ended (stream_work_request.hpp); a
    // notification receive with the peer's immediate data when it took one.
    void completed(request& r, error_code ec, std::optional<std::uint32_t> immediate) {
        switch (r.role) {
        case stream_request_role::notice:
            return on_notice(ec, immediate, r.index);
        case stream_request_role::hello:
            return on_hello(ec, r.wc.byte_len);
        case stream_request_role::write:
            return on_sent(ec, &r);
        case stream_request_role::data:
            return on_data_written(ec, &r);
        case stream_request_role::data_in_place:
            return on_written_in_place(ec, &r);
        }
    }

private:
    void on_notice(error_code ec, std::optional<std::uint32_t> immediate, std::size_t i) {
        ready_list done;
        {
            std::lock_guard lock(mutex_);
            if (ec || !immediate) {
                failed(ec ? ec : error_code(asio::error::invalid_argument), done);
            } else {
                const stream_notice notice = stream_notice::decode(*immediate);
                if (notice.kind == stream_notice_kind::credit ||
                    notice.kind == stream_notice_kind::ack) {
                    stream_credit_record record;
                    std::memcpy(&record,
                                control_.data() + (notice.value % stream_credit_slots) *
                                                      sizeof(stream_credit_record),
                                sizeof record);
                    if (writer_)
                        writer_->on_record(record);
                }
                reader_.on_notice(notice);
                // Posted again with others (stream_machine.hpp: repost_due),
                // also before the connection is handed over (say_hello) and
                // while close() waits for its writes; once the connection is
                // gone after close(), never.
                reposts_.push_back(&notices_[i]);
                if (reader_.repost_due())
                    repost();
                progress(done);
            }
        }
        complete(done);
    }

private:
    // The connection ended or failed: a waiting read gets what arrived first,
    // then eof after the peer's end, else the error; a waiting write the error.
    void failed(error_code ec, ready_list& done) {
        if (!failure_)
            failure_ = ec;
        progress(done);
    }

    // Does what can be done now: records the peer is owed, the waiting write, the
    // end, the waiting read.
    void progress(ready_list& done) {
        if (writer_ && !failure_ && conn_.is_open() && !closed_) {
            send_records();
            try_write(done);
            flush();
            if (end_requested_ && !write_ && writer_->may_end()) {
                writer_->end_posted();
                end_requested_ = false;
                post_write({}, {}, stream_notice{stream_notice_kind::end, 0});
            }
        }
        if (failure_)
            take_write(done, *failure_);
        try_read(done);
    }

    // The receives of the notifications reaped since the last time, posted
    // again in one call. Before every record: a record reports only these.
    void repost() {
        if (closed_ && !conn_.is_open()) {
            reposts_.clear();
            return;
        }
        if (reposts_.empty())
            return;
        auto self = this->shared_from_this();
        for (qp_operation* r : reposts_)
            static_cast<request*>(r)->prepare_receive(self);
        qp_->start(std::span<qp_operation* const>(reposts_));
        reader_.reposted(reposts_.size());
        reposts_.clear();
    }

    void send_records() {
        if (reader_.ack_due() && writer_->may_ack()) {
            repost();
            const stream_credit_record r = reader_.record(true);
            send_record(r, writer_->ack_posted(), stream_notice_kind::ack);
        }
        if (reader_.credit_due() && writer_->may_credit()) {
            repost();
            const stream_credit_record r = reader_.record(false);
            send_record(r, writer_->credit_posted(), stream_notice_kind::credit);
        }
    }

    void send_record(const stream_credit_record& r, std::uint32_t seq, stream_notice_kind kind) {
        const std::size_t source = seq % records_.size();
        records_[source] = r;
        const remote_buffer slot{peer_.control_address +
                                     (seq % stream_credit_slots) * sizeof(stream_credit_record),
                                 static_cast<std::uint32_t>(sizeof r), peer_.control_rkey};
        post_write(records_mr_.at(source * sizeof r, sizeof r), slot, stream_notice{kind, seq});
    }

    // A write with immediate (or, with `notice` empty, a plain one), whose
    // completion `role` says what to do with (by default: only report a failure).
    // Under the lock.
    void post_write(registered_buffer local, remote_buffer remote,
                    std::optional<stream_notice> notice,
                    stream_request_role role = stream_request_role::write) {
        request& r = idle_write();
        r.role = role;
        r.start_write(*qp_, this->shared_from_this(), local, remote,
                      notice ? std::optional<std::uint32_t>(notice->encode()) : std::nullopt);
        ++posted_writes_; // its completion counts it down (write_completed)
    }

    // A write's request from the idle ones; a new one when all are posted (their
    // number is bounded by the peer's notification receives, so this allocates
    // only while the stream warms up).
    request& idle_write() {
        if (request* r = free_writes_) {
            free_writes_ = r->next_free;
            return *r;
        }
        writes_.push_back(std::make_unique<request>());
        return *writes_.back();
    }
    void release(request* r) noexcept {
        if (r != nullptr) {
            r->next_free = free_writes_;
            free_writes_ = r;
        }
    }

    void try_write(ready_list& done) {
        if (!write_ || write_->in_flight != 0)
            return;
        const std::size_t wanted = asio::buffer_size(write_->buffers);
        if (wanted == 0)
            return take_write(done, {}, 0);
        if (writer_->ended())
            return take_write(done, asio::error::broken_pipe);
        // A large first buffer goes on its own, from the caller's memory when the
        // ring has room for that much of it, after what is staged; the rest is
        // gathered into the copy.
        const asio::const_buffer first = write_->buffers.front();
        if (first.size() >= zero_copy_from_) {
            flush(true);
            if (writer_->staged_bytes() != 0)
                return; // waits for the peer's record
            auto w = writer_->next_data(first.size(), copies_.size());
            if (!w)
                return;
            if (w->bytes() >= zero_copy_from_ && write_in_place(first, *w))
                return;
        }
        // Copied into the mirror of the peer's ring, where the bytes will land,
        // and finished for the program; flush() posts them.
        auto w = writer_->next_stage(wanted, copies_.size());
        if (!w)
            return; // waits for the peer's record
        asio::buffer_copy(
            std::array<asio::mutable_buffer, 2>{asio::buffer(copies_.data() + w->offset, w->first),
                                                asio::buffer(copies_.data(), w->second)},
            write_->buffers, w->bytes());
        writer_->staged(*w);
        take_write(done, {}, w->bytes());
    }

    // Posts the staged bytes as one write when the machine says they are to go
    // (`at_once`: whenever a notification is free, as before a write from the
    // caller's memory).
    void flush(bool at_once = false) {
        const std::optional<stream_ring_write> w = writer_->next_flush(at_once);
        if (!w)
            return;
        post_data(*w, copies_mr_.at(w->offset, w->first), copies_mr_.at(0, w->second),
                  stream_request_role::data);
    }

    // A copied data write is done (or failed, or ended with the queue pair):
    // what was staged behind it may go.
    void on_data_written(error_code ec, request* r) {
        ready_list done;
        connection_type gone(ex_);
        {
            std::lock_guard lock(mutex_);
            release(r);
            if (writer_)
                writer_->data_done();
            if (ec)
                failed(ec, done);
            else
                progress(done);
            write_completed(gone);
        }
        gone.close();
        complete(done);
    }

    // Registers `first`'s first w.bytes() for this write and posts it from there;
    // false (nothing posted) when the memory cannot be registered.
    bool write_in_place(asio::const_buffer first, const stream_ring_write& w) {
        error_code ec;
        in_place_mr_.open(pd_,
                          asio::mutable_buffer(const_cast<void*>(first.data()),
                                               static_cast<std::size_t>(w.bytes())),
                          0, ec);
        if (ec)
            return false;
        write_->in_flight = static_cast<std::size_t>(w.bytes());
        post_data(w, in_place_mr_.at(0, w.first), in_place_mr_.at(w.first, w.second),
                  stream_request_role::data_in_place);
        return true;
    }

    // The data of `w` from `first_part` and `second_part` into the peer's ring,
    // notified with its last write, whose completion's `role` says what is done.
    void post_data(const stream_ring_write& w, registered_buffer first_part,
                   registered_buffer second_part, stream_request_role last_done) {
        const auto at = [&](std::uint64_t offset, std::uint64_t n) {
            return remote_buffer{peer_.ring_address + offset, static_cast<std::uint32_t>(n),
                                 peer_.ring_rkey};
        };
        const stream_notice notice{stream_notice_kind::data, static_cast<std::uint32_t>(w.bytes())};
        if (w.second == 0) {
            post_write(first_part, at(w.offset, w.first), notice, last_done);
        } else {
            post_write(first_part, at(w.offset, w.first), std::nullopt);
            post_write(second_part, at(0, w.second), notice, last_done);
        }
        writer_->data_posted(w);
    }

    // The last RDMA write of a write from the caller's memory is done (or failed,
    // or ended with the queue pair): the device no longer reads that memory.
    void on_written_in_place(error_code ec, request* r) {
        ready_list done;
        connection_type gone(ex_);
        {
            std::lock_guard lock(mutex_);
            release(r);
            in_place_mr_.close();
            writer_->data_done();
            const std::size_t n = std::exchange(write_->in_flight, 0);
            if (ec) {
                failed(ec, done); // the write ends with the error
            } else {
                take_write(done, {}, n);
                progress(done);
            }
            write_completed(gone);
        }
        gone.close();
        complete(done);
    }

    void try_read(ready_list& done) {
        if (receive_shut_)
            drop_arrived();
        if (!read_)
            return;
        if (receive_shut_)
            return take_read(done, asio::error::eof);
        const std::size_t room = asio::buffer_size(read_->buffers);
        const std::size_t n = copy_out(read_->buffers);
        if (n > 0 || room == 0) {
            if (writer_ && !failure_ && conn_.is_open())
                send_records();
            return take_read(done, {}, n);
        }
        if (reader_.at_end())
            return take_read(done, asio::error::eof);
        if (failure_)
            return take_read(done, *failure_);
    }

    // After shutdown_receive: what arrived is read by nobody, and credited.
    void drop_arrived() {
        if (reader_.unread() == 0)
            return;
        reader_.read(reader_.unread());
        if (writer_ && !failure_ && conn_.is_open())
            send_records();
    }

    // Copies what has arrived into `buffers`, in order, as far as they go: the
    // number of bytes copied.
    std::size_t copy_out(const stream_buffers<asio::mutable_buffer>& buffers) {
        std::size_t n = 0;
        for (asio::mutable_buffer b : buffers) {
            while (b.size() > 0) {
                const auto span = reader_.readable();
                if (span.length == 0)
                    return n;
                const auto k =
                    static_cast<std::size_t>(std::min<std::uint64_t>(b.size(), span.length));
                std::memcpy(b.data(), ring_.data() + span.offset, k);
                reader_.read(k);
                n += k;
                b += k;
            }
        }
        return n;
    }

    Executor ex_;
    std::size_t zero_copy_from_;
    // The program's calls and the completions meet here: held for a few hundred
    // instructions, rarely contended; atomic_mutex costs an atomic instruction
    // each way where std::mutex cost about 45 instructions a pair.
    atomic_mutex mutex_;
    error_code prepare_failure_;
    std::vector<std::byte> ring_;   // the peer writes here
    std::vector<std::byte> copies_; // mirror of the peer's ring
    std::array<std::byte, stream_credit_slots * sizeof(stream_credit_record)> control_{};
    std::array<std::byte, 2 * sizeof(stream_hello)> hellos_{}; // mine, the peer's
    std::array<stream_credit_record, 8> records_{};            // sources of record writes
    memory_region ring_mr_, copies_mr_, control_mr_, hello_mr_, records_mr_;
    memory_region in_place_mr_; // the caller's memory, while a write from it is in flight
    stream_hello peer_;
    std::optional<stream_writer_machine> writer_; // after the peer's hello
    stream_reader_machine reader_;
    std::optional<pending_read> read_;
    std::optional<pending_write> write_;
    std::optional<error_code> failure_;
    protection_domain pd_; // the connection's, from prepare
    // The receives, and the queue pair they are posted on (from prepare; it
    // outlives the connection's close, refusing new receives then): the peer's
    // hello, then its notifications.
    request hello_in_;
    std::unique_ptr<request[]> notices_;
    std::size_t notice_count_;
    std::vector<qp_operation*> reposts_; // notices reaped, to be posted again (repost)
    std::shared_ptr<queue_pair_impl> qp_;
    // The stream's RDMA writes: every one made, and those not posted.
    std::vector<std::unique_ptr<request>> writes_;
    request* free_writes_ = nullptr;
    bool end_requested_ = false; // the end is to be sent after the waiting write
    bool shut_down_ = false;
    bool receive_shut_ = false; // shutdown_receive: reads end with eof, arrivals dropped
    bool closed_ = false;
    std::uint32_t posted_writes_ = 0; // sends and RDMA writes posted, not completed
    // Last: destroyed first, its QP before the memory it may write.
    connection_type conn_;
};

} // namespace rdma_asio::detail
