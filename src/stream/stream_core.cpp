// The stream's state and its steps (stream_core.hpp says what they are and why
// they meet under one lock). Compiled once, in the library: nothing here depends
// on a program's executor or handler types.
#include "rdma_asio/detail/stream/stream_core.hpp"

#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/queue_pair.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <mutex>
#include <new>
#include <span>

namespace rdma_asio::detail {
namespace {

// The ring a stream starts with: initial_receive_ring, or receive_ring when that
// is smaller.
std::size_t first_ring_bytes(const stream_options& options) noexcept {
    return std::min(options.initial_receive_ring, options.receive_ring);
}

} // namespace

stream_core::stream_core(const asio::any_io_executor& ex, const stream_options& options)
    : ex_(ex), zero_copy_from_(options.zero_copy_from),
      ring_policy_(first_ring_bytes(options), options.receive_ring),
      look_period_(options.shrink_after_idle), ring_timer_(ex), memory_(first_ring_bytes(options)),
      reader_(stream_limits{first_ring_bytes(options), options.notices}),
      receives_(options.notices), conn_(ex) {}

stream_core::~stream_core() = default;

void stream_core::ready_list::push_back(ready r) noexcept {
    assert(count_ < items_.size());
    items_[count_++] = std::move(r);
}

void stream_core::prepare(protection_domain pd, std::shared_ptr<queue_pair_impl> qp) noexcept {
    try {
        prepare_or_throw(std::move(pd), std::move(qp));
    } catch (const system_error& e) {
        prepare_failure_ = e.code();
    } catch (const std::bad_alloc&) {
        prepare_failure_ = errno_code(ENOMEM);
    }
}

error_code stream_core::start(connection_type conn) {
    if (prepare_failure_) {
        conn.close();
        return prepare_failure_;
    }
    say_hello(std::move(conn));
    return {};
}

void stream_core::prepare_or_throw(protection_domain pd, std::shared_ptr<queue_pair_impl> qp) {
    memory_.register_own(std::move(pd));
    // Every receive posted at once, or the peer's writes may meet RNR.
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (!qp || qp->native_handle() == nullptr ||
        ibv_query_qp(qp->native_handle(), &attr, IBV_QP_CAP, &init) != 0 ||
        init.cap.max_recv_wr < receives_.count() + 1)
        throw_error(asio::error::invalid_argument,
                    "rdma_asio::stream: the connection's receive queue holds fewer than "
                    "stream_options::notices + 1 receives");
    max_inline_ = init.cap.max_inline_data;
    qp_ = std::move(qp);
    receives_.post_all(*qp_, shared_from_this(), memory_.peer_hello_buffer());
}

void stream_core::say_hello(connection_type conn) {
    std::lock_guard lock(mutex_);
    conn_ = std::move(conn);
    const registered_buffer hello =
        memory_.own_hello(static_cast<std::uint32_t>(receives_.count()));
    request& r = writes_.idle();
    r.role = stream_request_role::write;
    r.start_send(*qp_, shared_from_this(), hello);
    writes_.posted(); // its completion counts it down (after_write)
    ready_list done;
    progress(done);
    // No read or write can wait yet: the stream is not the program's before this.
}

stream_core::io_result stream_core::start_read(const stream_buffers<asio::mutable_buffer>& buffers,
                                               handler_maker& maker) {
    return start_io(read_, pending_read{buffers, {}, 0}, maker, true);
}

stream_core::io_result stream_core::start_write(const stream_buffers<asio::const_buffer>& buffers,
                                                handler_maker& maker) {
    return start_io(write_, pending_write{buffers, {}, 0, 0}, maker, false);
}

// The operation's own result, when it does not wait, is returned for the caller
// to post with its handler, after the other handlers this step completed.
template <class Pending>
stream_core::io_result stream_core::start_io(std::optional<Pending>& slot, Pending pending,
                                             handler_maker& maker, bool read) {
    ready_list done;
    io_result own{true, {}, 0};
    {
        std::lock_guard lock(mutex_);
        if (slot)
            return {false, asio::error::already_started, 0};
        if (!read && shut_down_)
            return {false, asio::error::broken_pipe, 0};
        slot.emplace(std::move(pending));
        progress(done); // ends this operation with an empty handler when it can
        if (slot) {
            try {
                slot->handler = maker.make();
            } catch (...) {
                slot.reset(); // no memory for the handler: nothing waits
                throw;
            }
            slot->id = ++waits_;
            watch_cancel(slot->handler, read, slot->id);
        }
    }
    for (ready& r : done) {
        if (r.handler)
            r.handler.complete(r.ec, r.n);
        else
            own = {false, r.ec, r.n};
    }
    return own;
}

void stream_core::shutdown() {
    ready_list done;
    {
        std::lock_guard lock(mutex_);
        end_requested_ = !shut_down_;
        shut_down_ = true;
        progress(done);
    }
    complete(done);
}

void stream_core::shutdown_receive() {
    ready_list done;
    {
        std::lock_guard lock(mutex_);
        receive_shut_ = true;
        progress(done);
    }
    complete(done);
}

asio::ip::tcp::endpoint stream_core::endpoint(bool peer, error_code& ec) {
    std::lock_guard lock(mutex_);
    return peer ? conn_.remote_endpoint(ec) : conn_.local_endpoint(ec);
}

std::size_t stream_core::available() {
    std::lock_guard lock(mutex_);
    return receive_shut_ ? 0 : static_cast<std::size_t>(reader_.unread());
}

void stream_core::cancel() {
    ready_list done;
    {
        std::lock_guard lock(mutex_);
        take_read(done, asio::error::operation_aborted);
        take_write(done, asio::error::operation_aborted);
    }
    complete(done);
}

void stream_core::close() {
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
        // while it stays, goes with the last posted write (after_write).
        closed_ = true;
        ring_timer_.cancel();
        if (!linger || writes_.in_flight() == 0)
            gone = std::move(conn_);
        else
            qp_->end_unsignaled(); // the writes not followed by a signaled one end
    }
    gone.close(); // the receives end (operation_aborted)
}

void stream_core::complete(ready_list& done) {
    for (ready& r : done)
        r.handler.complete(r.ec, r.n);
}

void stream_core::complete_here(ready_list& done) {
    // As the channel's wake-up completes its waits (event_dispatcher::complete_all).
    ready* next = done.begin();
    try {
        for (; next != done.end(); ++next)
            next->handler.complete(next->ec, next->n, delivery::may_run_here);
    } catch (...) {
        while (++next != done.end())
            next->handler.complete(next->ec, next->n);
        throw;
    }
}

// A waiting read or write ends with operation_aborted when its slot says so.
// The slot keeps this function until the handler runs (stream_io_op::invoke
// clears it there, on the handler's executor): a signal emitted after the wait
// ended, before its handler ran (the other branch of `||` won meanwhile), finds
// another wait or none, and leaves it alone.
void stream_core::watch_cancel(handler_type& handler, bool read, std::uint64_t id) {
    auto slot = handler.slot();
    if (!slot.is_connected())
        return;
    std::weak_ptr<stream_core> weak = shared_from_this();
    slot.assign([weak, read, id](asio::cancellation_type type) {
        if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial |
                     asio::cancellation_type::total)) == asio::cancellation_type::none)
            return;
        auto self = weak.lock();
        if (!self)
            return;
        ready_list done;
        {
            std::lock_guard lock(self->mutex_);
            if (read && self->read_ && self->read_->id == id)
                self->take_read(done, asio::error::operation_aborted);
            else if (!read && self->write_ && self->write_->id == id)
                self->take_write(done, asio::error::operation_aborted);
        }
        self->complete(done);
    });
}

void stream_core::take_read(ready_list& done, error_code ec, std::size_t n) {
    if (read_) {
        done.push_back({std::move(read_->handler), ec, n});
        read_.reset();
    }
}
// A write in flight from the caller's memory ends only by its completion.
void stream_core::take_write(ready_list& done, error_code ec, std::size_t n) {
    if (write_ && write_->in_flight == 0) {
        done.push_back({std::move(write_->handler), ec, n});
        write_.reset();
    }
}

void stream_core::on_hello(error_code ec, std::size_t n) {
    ready_list done;
    {
        std::lock_guard lock(mutex_);
        std::optional<stream_hello> peer;
        if (!ec && !(peer = memory_.peer_hello(n)))
            ec = asio::error::invalid_argument; // not a stream's hello
        if (ec) {
            failed(ec, done);
        } else {
            try {
                memory_.register_copies(peer->ring_bytes);
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
    complete_here(done);
}

// One of the stream's sends or RDMA writes has completed: under the lock its
// request `r` is idle again, `step(done)` takes in what the completion means, and the
// write is counted done; after the lock, a connection that went with it (after
// close()) is closed and the handlers `step` took are completed.
template <class Step>
void stream_core::after_write(request* r, Step step) {
    ready_list done;
    // A connection to hold the one that goes exists only after close(): this runs
    // for every write the stream posts, and making and destroying an empty
    // connection cost about 150 instructions of a 64-byte round trip's.
    std::optional<connection_type> gone;
    {
        std::lock_guard lock(mutex_);
        writes_.release(r);
        step(done);
        writes_.completed();
        if (closed_)
            write_completed(gone.emplace(ex_));
    }
    if (gone)
        gone->close();
    complete_here(done);
}

void stream_core::on_sent(error_code ec, request* r) {
    after_write(r, [&](ready_list& done) {
        if (ec)
            failed(ec, done);
    });
}

// Under the lock, after close(), as a posted write has completed and been counted
// (after_write): the last one lets the connection go (into `gone`, closed after
// the lock).
void stream_core::write_completed(connection_type& gone) noexcept {
    if (writes_.in_flight() == 0)
        gone = std::move(conn_); // empty already unless close() waits for its writes
    else if (conn_.is_open())
        qp_->end_unsignaled(); // close() found the send queue full: again now
}

// One of the stream's work requests has ended (stream_work_request.hpp); a
// notification receive with the peer's immediate data when it took one.
void stream_core::completed(request& r, error_code ec, std::optional<std::uint32_t> immediate) {
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

void stream_core::on_notice(error_code ec, std::optional<std::uint32_t> immediate, std::size_t i) {
    ready_list done;
    {
        std::lock_guard lock(mutex_);
        if (ec || !immediate) {
            failed(ec ? ec : error_code(asio::error::invalid_argument), done);
        } else {
            const stream_notice notice = stream_notice::decode(*immediate);
            reader_.on_notice(notice);
            if (notice.kind == stream_notice_kind::credit ||
                notice.kind == stream_notice_kind::ack) {
                const stream_credit_record record = memory_.landed_record(notice.value);
                if (writer_)
                    writer_->on_record(record);
                if (reader_.on_record(record))
                    ring_refused();
                ring_read(); // nothing left unread in the old ring: it goes
                maybe_grow();
            }
            // Posted again with others (stream_machine.hpp: repost_due),
            // also before the connection is handed over (say_hello) and
            // while close() waits for its writes; once the connection is
            // gone after close(), never.
            receives_.reaped(i);
            if (reader_.repost_due())
                repost();
            progress(done);
        }
    }
    complete_here(done);
}

// The connection ended or failed: a waiting read gets what arrived first,
// then eof after the peer's end, else the error; a waiting write the error.
void stream_core::failed(error_code ec, ready_list& done) {
    if (!failure_) {
        failure_ = ec;
        ring_timer_.cancel(); // a failed stream's ring stays as it is
    }
    progress(done);
}

// Does what can be done now: records the peer is owed, the waiting write, the
// end, the waiting read.
void stream_core::progress(ready_list& done) {
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
void stream_core::repost() {
    if (closed_ && !conn_.is_open())
        return receives_.drop();
    if (receives_.kept() != 0)
        reader_.reposted(receives_.repost(*qp_, shared_from_this()));
}

// The peer's writer filled this side's ring: a ring twice as large (up to
// receive_ring) is registered and announced in the next credit.
void stream_core::maybe_grow() noexcept {
    if (const std::uint64_t bytes = ring_policy_.grow_to(reader_))
        replace_ring(bytes);
}

// A ring of `bytes` registered and announced (the next record says it); when it
// cannot be (the locked-memory limit, most likely), the stream keeps its ring
// until the next look. The timer is armed when a look is due.
void stream_core::replace_ring(std::uint64_t bytes) noexcept {
    const std::optional<stream_ring_ref> next =
        memory_.try_register_next_ring(static_cast<std::size_t>(bytes));
    if (next)
        reader_.announce(next->address, next->rkey, next->bytes);
    else
        ring_policy_.refused();
    arm_ring_timer();
}

// The peer's writer could not register its copy of the ring announced: that
// ring goes, and none is tried before the next look.
void stream_core::ring_refused() noexcept {
    memory_.drop_next_ring();
    ring_policy_.refused();
    arm_ring_timer();
}

void stream_core::arm_ring_timer() noexcept {
    if (ring_timer_armed_ || look_period_.count() == 0 || closed_ ||
        !ring_policy_.look_due(reader_))
        return;
    try {
        ring_timer_.expires_after(look_period_);
        ring_timer_.async_wait([weak = weak_from_this()](error_code ec) {
            if (auto self = weak.lock(); self && !ec)
                self->look_at_ring();
        });
    } catch (...) {
        // No memory for the wait: the ring keeps its size, which is all a
        // look would change.
        return;
    }
    ring_timer_armed_ = true;
    ring_policy_.armed(reader_);
}

// A period after the timer was armed: a ring that nothing arrived in since
// then, with nothing unread, goes back to the first size (announced in a
// credit now); a refusal is forgotten. The timer goes on while a look is due.
void stream_core::look_at_ring() {
    ready_list done;
    {
        std::lock_guard lock(mutex_);
        ring_timer_armed_ = false;
        if (closed_ || failure_ || !writer_)
            return;
        if (const std::uint64_t bytes = ring_policy_.look(reader_))
            replace_ring(bytes);
        else
            arm_ring_timer();
        progress(done);
    }
    complete_here(done);
}

// Before a record: the peer announced a ring, so this side writes into it from
// now on, its staged bytes posted into the old one first (without a
// notification: the record after them says where the old ring ends).
void stream_core::move_to_announced_ring() {
    if (!writer_->switch_due())
        return;
    const stream_ring_ref next = *writer_->announced();
    if (!memory_.try_register_next_copies(next.bytes)) {
        writer_->refuse_announced(); // stays on the old ring; the record says so
        return;
    }
    if (const std::optional<stream_ring_write> w = writer_->switch_flush())
        post_without_notice(*w);
    memory_.replace_copies(writer_->switch_ring());
    // The old copy goes now when no data write reads it (a peer's shrink
    // after idle), else once they are done (data_done).
    memory_.release_copies(writer_->data_writes_done());
    peer_.ring_address = next.address;
    peer_.ring_rkey = next.rkey;
}

// The staged bytes of `w` into the peer's ring, as RDMA writes without
// immediate data; the last one's completion is a data write's.
void stream_core::post_without_notice(const stream_ring_write& w) {
    if (w.second == 0) {
        post_write(memory_.registered_copies(w.offset, w.first), peer_ring_at(w.offset, w.first),
                   std::nullopt, stream_request_role::data);
        return;
    }
    post_write(memory_.registered_copies(w.offset, w.first), peer_ring_at(w.offset, w.first),
               std::nullopt, stream_request_role::write);
    post_write(memory_.registered_copies(0, w.second), peer_ring_at(0, w.second), std::nullopt,
               stream_request_role::data);
}

// A data write is done: a copy of an old ring of the peer's that no write
// still reads goes.
void stream_core::data_done() noexcept {
    writer_->data_done();
    memory_.release_copies(writer_->data_writes_done());
}

void stream_core::send_records() {
    if (reader_.ack_due() && writer_->may_ack())
        send_record(stream_notice_kind::ack);
    if (reader_.credit_due() && writer_->may_credit())
        send_record(stream_notice_kind::credit);
}

// A credit or an acknowledgement: the pending receives posted first (a record
// reports only those), and this side moved to a ring the peer announced (the
// record says where it writes).
void stream_core::send_record(stream_notice_kind kind) {
    repost();
    move_to_announced_ring();
    const bool ack = kind == stream_notice_kind::ack;
    const stream_credit_record r = stream_record(reader_, *writer_, ack);
    const std::uint32_t seq = ack ? writer_->ack_posted() : writer_->credit_posted();
    const remote_buffer slot{peer_.control_address +
                                 (seq % stream_credit_slots) * sizeof(stream_credit_record),
                             static_cast<std::uint32_t>(sizeof r), peer_.control_rkey};
    // No completion needed: the source is written again only eight records
    // later, after the peer reported this one reaped.
    post_write(memory_.record_source(seq, r), slot, stream_notice{kind, seq},
               stream_request_role::write, true);
}

// A write with immediate (or, with `notice` empty, a plain one), whose
// completion `role` says what to do with (by default: only report a failure).
// Under the lock.
void stream_core::post_write(registered_buffer local, remote_buffer remote,
                             std::optional<stream_notice> notice, stream_request_role role,
                             bool signal_optional) {
    request& r = writes_.idle();
    r.role = role;
    r.start_write(*qp_, shared_from_this(), local, remote,
                  notice ? std::optional<std::uint32_t>(notice->encode()) : std::nullopt,
                  signal_optional);
    writes_.posted(); // its completion counts it down (after_write)
}

void stream_core::try_write(ready_list& done) {
    if (!write_ || write_->in_flight != 0)
        return;
    const std::size_t wanted = asio::buffer_size(write_->buffers);
    if (wanted == 0)
        return take_write(done, {}, 0);
    if (writer_->ended())
        return take_write(done, asio::error::broken_pipe);
    const asio::const_buffer first = write_->buffers.front();
    // Small, in one buffer, with nothing staged or unfinished before it (a copy
    // would be posted at once too): posted inline from the caller's memory,
    // copied once, by the post, and done then.
    if (wanted <= max_inline_ && first.size() == wanted && writer_->staged_bytes() == 0 &&
        writer_->unfinished() == 0 && write_inline(first))
        return take_write(done, {}, wanted);
    // A large first buffer goes on its own, from the caller's memory when the
    // ring has room for that much of it, after what is staged; the rest is
    // gathered into the copy.
    if (first.size() >= zero_copy_from_) {
        flush(true);
        if (writer_->staged_bytes() != 0)
            return; // waits for the peer's record
        auto w = writer_->next_data(first.size(), memory_.copies_size());
        if (!w) {
            writer_->note_wait();
            return;
        }
        if (w->bytes() >= zero_copy_from_ && write_in_place(first, *w))
            return;
    }
    // Copied into the mirror of the peer's ring, where the bytes will land,
    // and finished for the program; flush() posts them.
    auto w = writer_->next_stage(wanted, memory_.copies_size());
    if (!w) {
        writer_->note_wait(); // for the peer's record, which may grow the ring
        return;
    }
    asio::buffer_copy(memory_.copies_at(w->offset, w->first, w->second), write_->buffers,
                      w->bytes());
    writer_->staged(*w);
    take_write(done, {}, w->bytes());
}

// Posts the staged bytes as one write when the machine says they are to go
// (`at_once`: whenever a notification is free, as before a write from the
// caller's memory).
void stream_core::flush(bool at_once) {
    const std::optional<stream_ring_write> w = writer_->next_flush(at_once);
    if (!w)
        return;
    post_data(*w, memory_.registered_copies(w->offset, w->first),
              memory_.registered_copies(0, w->second), stream_request_role::data);
}

// A copied data write is done (or failed, or ended with the queue pair):
// what was staged behind it may go.
void stream_core::on_data_written(error_code ec, request* r) {
    after_write(r, [&](ready_list& done) {
        if (writer_)
            data_done();
        if (ec)
            failed(ec, done);
        else
            progress(done);
    });
}

// Posts `bytes` (at most max_inline_) as one notified write straight from the
// caller's memory; false, nothing posted, when they would wrap at the ring's end,
// when a notification or the ring's room is missing (the copy then stages them),
// or when the queue pair has no room to post them now (the write is finished
// for the program once this returns true, and its memory given back).
bool stream_core::write_inline(asio::const_buffer bytes) {
    const std::optional<stream_ring_write> w =
        writer_->next_data(bytes.size(), memory_.copies_size());
    if (!w || w->second != 0 || w->bytes() != bytes.size())
        return false;
    request& r = writes_.idle();
    r.role = stream_request_role::write;
    const stream_notice notice{stream_notice_kind::data, static_cast<std::uint32_t>(w->bytes())};
    if (!r.start_inline_write(*qp_, shared_from_this(), bytes, peer_ring_at(w->offset, w->first),
                              notice.encode())) {
        writes_.release(&r);
        return false;
    }
    writes_.posted(); // its completion, or a later one, counts it down (after_write)
    writer_->data_posted(*w);
    data_done();
    return true;
}

remote_buffer stream_core::peer_ring_at(std::uint64_t offset, std::uint64_t n) const noexcept {
    return {peer_.ring_address + offset, static_cast<std::uint32_t>(n), peer_.ring_rkey};
}

// Registers `first`'s first w.bytes() for this write and posts it from there;
// false (nothing posted) when the memory cannot be registered.
bool stream_core::write_in_place(asio::const_buffer first, const stream_ring_write& w) {
    if (!memory_.register_in_place(asio::buffer(first, static_cast<std::size_t>(w.bytes()))))
        return false;
    write_->in_flight = static_cast<std::size_t>(w.bytes());
    post_data(w, memory_.in_place_at(0, w.first), memory_.in_place_at(w.first, w.second),
              stream_request_role::data_in_place);
    return true;
}

// The data of `w` from `first_part` and `second_part` into the peer's ring,
// notified with its last write, whose completion's `role` says what is done.
void stream_core::post_data(const stream_ring_write& w, registered_buffer first_part,
                            registered_buffer second_part, stream_request_role last_done) {
    const stream_notice notice{stream_notice_kind::data, static_cast<std::uint32_t>(w.bytes())};
    // Copied and small enough to go inline: done once posted.
    const bool inline_copy =
        last_done == stream_request_role::data && w.bytes() <= std::uint64_t{max_inline_};
    if (inline_copy)
        last_done = stream_request_role::write;
    if (w.second == 0) {
        post_write(first_part, peer_ring_at(w.offset, w.first), notice, last_done, inline_copy);
    } else {
        post_write(first_part, peer_ring_at(w.offset, w.first), std::nullopt,
                   stream_request_role::write, inline_copy);
        post_write(second_part, peer_ring_at(0, w.second), notice, last_done, inline_copy);
    }
    writer_->data_posted(w);
    if (inline_copy)
        data_done();
}

// The last RDMA write of a write from the caller's memory is done (or failed,
// or ended with the queue pair): the device no longer reads that memory.
void stream_core::on_written_in_place(error_code ec, request* r) {
    after_write(r, [&](ready_list& done) {
        memory_.release_in_place();
        data_done();
        const std::size_t n = std::exchange(write_->in_flight, 0);
        if (ec) {
            failed(ec, done); // the write ends with the error
        } else {
            take_write(done, {}, n);
            progress(done);
        }
    });
}

void stream_core::try_read(ready_list& done) {
    if (receive_shut_)
        drop_arrived();
    if (!read_)
        return;
    if (receive_shut_)
        return take_read(done, asio::error::eof);
    const std::size_t room = asio::buffer_size(read_->buffers);
    const std::size_t n = copy_out(read_->buffers);
    ring_read(); // a ring read to its end, with a newer one begun, goes
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
void stream_core::drop_arrived() {
    if (reader_.unread() == 0)
        return;
    reader_.read(reader_.unread());
    ring_read();
    if (writer_ && !failure_ && conn_.is_open())
        send_records();
}

// Copies what has arrived into `buffers`, in order, as far as they go: the
// number of bytes copied.
std::size_t stream_core::copy_out(const stream_buffers<asio::mutable_buffer>& buffers) {
    std::size_t n = 0;
    for (asio::mutable_buffer b : buffers) {
        while (b.size() > 0) {
            const auto span = reader_.readable();
            if (span.length == 0)
                return n;
            const auto k = static_cast<std::size_t>(std::min<std::uint64_t>(b.size(), span.length));
            std::memcpy(b.data(), memory_.ring_at(span.generation, span.offset), k);
            reader_.read(k);
            n += k;
            b += k;
        }
    }
    return n;
}

} // namespace rdma_asio::detail
