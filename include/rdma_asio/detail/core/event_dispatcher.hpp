// The one mechanism behind every rdma_asio event source.
//
// A Source owns up to two borrowed fds and knows how to read its events from
// them. The dispatcher wakes on those fds through Asio, has the Source drain them
// until EAGAIN, and hands each event to exactly one waiter, first come first
// served, or keeps it for the next waiter that accepts it. For every event source,
// waking, draining, dispatching, cancelling and shutting down happen here and
// nowhere else. (A queue pair's work requests are not waits for a source's events:
// queue_pair_impl cancels them and stops them at shutdown itself.)
//
// Source requirements:
//   using value_type = ...;            // movable, default-constructible value
//   std::size_t fd_count() const;      // 1 or 2
//   int native_handle(std::size_t i) const;
//   template <class Sink> void drain(std::size_t i, Sink& sink) noexcept;
//       // reads fd i until EAGAIN or until sink.more() is false; calls
//       // sink.push(value_type&&) per event and sink.fail(error_code) when the fd
//       // failed for good (read_loop.hpp's read_until_would_block is that loop:
//       // a source supplies one read, the loop the rest)
//   void close() noexcept;             // release what the source owns
//   bool drain_on_arm(std::size_t i) const noexcept;
//       // optional (default true): whether fd i is read as soon as its reactor
//       // wait starts, rather than only when the wait reports it (see Waking)
//   static bool concerns(const value_type& ev, const void* object) noexcept;
//       // optional: whether `ev` is an event of `object` (a CQ, a QP, an rdma_cm
//       // id...); needed for cancel(object) and retire(object)
//   static void discard(value_type&& ev, const void* object) noexcept;
//       // optional: drops an event of a retired object, or (object null) an
//       // event left when the dispatcher closes (default: destroys it, which
//       // acks it)
//   static constexpr bool hold_taken_events = true;
//       // optional: events handed to a waiter stay reachable until its handler
//       // runs (see "Retiring an object")
//   bool refuses_keeping(const value_type& ev, const std::deque<value_type>& kept)
//       const noexcept;
//       // optional: whether an event no waiter took is dropped (discard, with
//       // no object) instead of kept: a listener's connection request beyond
//       // its backlog (cm_event_source.hpp)
//
// A Matcher says which events its wait accepts, and may offer more: the object
// the wait belongs to, completing on a wake-up without a read, refusing or using
// up an event, restoring a cancelled result. wait_matcher.hpp lists each with its
// reason; the dispatcher calls only the functions there.
//
// Waits of many objects on one source (CQs on a shared channel) are indexed by
// object when the Source names each event's object (waiter_index.hpp).
//
// Cancellation: a wait still pending when its cancellation slot fires completes
// with operation_aborted. A wait that had already taken an event when the signal
// came (its handler was queued but had not run) gives the event back: it goes to
// the next matching waiter or to the front of the queue, and the handler gets
// operation_aborted (wait_canceller.hpp). So no idiom that cancels the loser of
// a race (`||`, parallel groups, timeouts) can lose an event.
//
// Retiring an object: before an object with events (a CQ, a QP, an rdma_cm id) is
// destroyed, retire(object) ends its waits, reads what the kernel holds, takes the
// object's queued events out and from then on drops its events as they are read,
// all under one lock, so that the destroy call never waits for an ack it cannot
// get. end_retirement(object) after the destroy.
//
// An event already handed to a waiter whose handler has not run yet would escape
// that sweep; a Source whose events carry acks that a destroy call waits for has
// the dispatcher keep such events until their handlers run (held_events.hpp).
//
// Waking: each fd has at most one reactor wait (wake_handler.hpp), started when
// a waiter arrives and none is outstanding, and cancelled when no waiter is left,
// so that an idle source never keeps io_context::run() from returning. Asio's
// reactors report an fd that is readable when its wait starts (epoll_ctl(2)'s
// EPOLL_CTL_MOD re-arms the edge; io_uring's poll checks at once), so reading an
// fd right after its wait started is a shortcut, not a need: it hands over what
// is there without a trip through the reactor. A Source turns it off for an fd
// where it would cost reads that find nothing (a device's removal watch, whose
// events are rare; a completion channel, whose wait starts just after its CQ
// was polled empty): that fd is read (until EAGAIN) when its wait reports it.
//
// Shutdown: every dispatcher registers with its execution context's
// shutdown_registry; when the context shuts down (io_context destruction), pending
// handlers are destroyed without being invoked, as Asio does with its own
// operations, so that handlers which own the dispatcher's owner are freed.
//
// Threading: all state is behind one mutex (atomic_mutex.hpp); Source::drain runs
// under it, so the verbs read calls of one source are serialised ("only one
// thread receives an event"). On an io_context constructed with
// ASIO_CONCURRENCY_HINT_UNSAFE (one thread, no locking in Asio's scheduler
// either) the mutex is not taken.
// Completion handlers never run under the mutex, never inside the initiating
// call, and always on their associated executor.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/atomic_mutex.hpp"
#include "rdma_asio/detail/core/borrowed_descriptor.hpp"
#include "rdma_asio/detail/core/handler_operation.hpp"
#include "rdma_asio/detail/core/held_events.hpp"
#include "rdma_asio/detail/core/io_context_executor.hpp"
#include "rdma_asio/detail/core/operation.hpp"
#include "rdma_asio/detail/core/shutdown_registry.hpp"
#include "rdma_asio/detail/core/wait_canceller.hpp"
#include "rdma_asio/detail/core/wait_matcher.hpp"
#include "rdma_asio/detail/core/waiter_index.hpp"
#include "rdma_asio/detail/core/wake_handler.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

namespace rdma_asio::detail {

// final: destroyed as itself (shared_ptr), never through shutdown_participant, whose
// destructor is protected and not virtual (clang's -Wdelete-non-abstract-non-virtual-dtor).
template <class Source>
class event_dispatcher final : public std::enable_shared_from_this<event_dispatcher<Source>>,
                               public shutdown_participant {
public:
    using value_type = typename Source::value_type;
    using executor_type = asio::any_io_executor;
    using signature = void(error_code, value_type);
    static constexpr std::size_t max_fds = 2;

    template <class... Args>
    explicit event_dispatcher(const executor_type& ex, Args&&... source_args)
        : ex_(ex), source_(std::forward<Args>(source_args)...) {
        // Created now, before any descriptor of ours reaches the reactor, so that
        // the registry is shut down after the reactor (services go in reverse
        // order of creation) and finds no reactor wait left to race with.
        auto& context = asio::query(ex_, asio::execution::context);
        registry_ = &asio::use_service<shutdown_registry>(context);
        // An io_context made for one thread with ASIO_CONCURRENCY_HINT_UNSAFE locks
        // nothing in its scheduler; the dispatcher then locks nothing either.
        mutex_.enabled = scheduler_locks(context);
    }

    event_dispatcher(const event_dispatcher&) = delete;
    event_dispatcher& operator=(const event_dispatcher&) = delete;
    ~event_dispatcher() { close(); }

    /// Registers the source's fds with the reactor.
    void open(error_code& ec) {
        register_for_shutdown();
        std::lock_guard lock(mutex_);
        for (std::size_t i = 0; i < source_.fd_count(); ++i) {
            descriptors_[i].emplace(ex_, source_.native_handle(i), ec);
            if (ec) {
                for (auto& d : descriptors_)
                    d.reset();
                return;
            }
        }
    }

    const executor_type& get_executor() const noexcept { return ex_; }

    /// Waits for the next event that `matcher` accepts; completes with
    /// void(error_code, value_type). The handler runs on its associated
    /// executor, by default `io_ex` (the I/O object's executor, of any type).
    template <class IoExecutor, class Matcher, class CompletionToken>
    auto async_next(const IoExecutor& io_ex, Matcher matcher, CompletionToken&& token) {
        return asio::async_initiate<CompletionToken, signature>(initiation<IoExecutor>{this, io_ex},
                                                                token, std::move(matcher));
    }

    /// The same, with the dispatcher's own executor as the default.
    template <class Matcher, class CompletionToken>
    auto async_next(Matcher matcher, CompletionToken&& token) {
        return async_next(ex_, std::move(matcher), std::forward<CompletionToken>(token));
    }

    /// Completes `handler` with `ec` and `ev` without waiting, posted (never inside
    /// this call) to its associated executor, by default `io_ex`, exactly as a wait
    /// that took `ev`: if its cancellation slot fires before it runs, `ev` goes back
    /// (Matcher::give_back, else to the queue) and it gets operation_aborted. For an
    /// operation that found its result before it had to wait (a CQ poll that found
    /// completions), so that a race it loses (`||`) loses nothing either.
    template <class IoExecutor, class Matcher, class Handler>
    void complete_at_once(const IoExecutor& io_ex, Matcher matcher, Handler&& handler,
                          const error_code& ec, value_type ev) {
        waiter* w = make_waiter(std::forward<Handler>(handler), std::move(matcher), io_ex);
        w->ec = ec;
        w->result = std::move(ev);
        if constexpr (holds_taken_events) {
            std::lock_guard lock(mutex_);
            hold_locked(*w);
        }
        ready_list ready;
        ready.push_back(*w);
        complete_all(ready, delivery::post);
    }

    /// Completes every pending wait with asio::error::operation_aborted. Queued
    /// events stay queued.
    void cancel() {
        ready_list ready;
        {
            std::lock_guard lock(mutex_);
            while (waiter* w = waiters_.front())
                abort_locked(w, ready);
            disarm_locked();
        }
        complete_all(ready, delivery::post);
    }

    /// Completes with operation_aborted the pending waits of `object` (those whose
    /// matcher's key() is `object`, e.g. the waits of one CQ on a shared channel).
    void cancel(const void* object) {
        ready_list ready;
        {
            std::lock_guard lock(mutex_);
            abort_waiters_of_locked(object, ready);
        }
        complete_all(ready, delivery::post);
    }

    /// What retire() did: whether the object is retired (false only when
    /// `last_step` failed), and how many of its queued events were dropped.
    struct retirement {
        bool retired = false;
        std::size_t discarded = 0;
    };

    /// Retires `object` before it is destroyed, under one lock: its pending waits
    /// complete with operation_aborted; the fds are read now, so that what the
    /// kernel queued for it is in hand; `last_step()`, if given, runs (e.g. the
    /// destroy call, when no read may slip in before it); then the object's queued
    /// events leave the queue, dropped (Source::discard) after the lock, and from
    /// now on its events are dropped as they are read. When `last_step` returns
    /// false, the object stays as it was, with its queued events, and only its
    /// waits were cancelled. Once the object is destroyed, end_retirement(object)
    /// (its address may be reused by a new object).
    template <class LastStep>
    retirement retire(const void* object, LastStep&& last_step) {
        ready_list ready;
        std::deque<value_type> dropped;
        retirement result;
        {
            std::lock_guard lock(mutex_);
            abort_waiters_of_locked(object, ready);
            waiters_.forget(object); // its list is empty now
            if (!closed_)
                drain_all_locked(ready);
            if (std::forward<LastStep>(last_step)()) {
                result.retired = true;
                retired_.push_back(object);
                for (auto it = queue_.begin(); it != queue_.end();) {
                    if (Source::concerns(*it, object)) {
                        dropped.push_back(std::move(*it));
                        it = queue_.erase(it);
                    } else {
                        ++it;
                    }
                }
                held_.drop(object, dropped);
                result.discarded = dropped.size();
            }
            if (waiters_.empty())
                disarm_locked();
        }
        for (value_type& ev : dropped)
            discard(std::move(ev), object);
        complete_all(ready, delivery::post);
        return result;
    }

    retirement retire(const void* object) {
        return retire(object, [] { return true; });
    }

    /// The object retired is destroyed: events of a new object at its address are
    /// events again.
    void end_retirement(const void* object) noexcept {
        std::lock_guard lock(mutex_);
        auto it = std::find(retired_.begin(), retired_.end(), object);
        if (it != retired_.end())
            retired_.erase(it);
    }

    /// Cancels every wait, unregisters the fds (never closing them), closes the
    /// source and drops the queued events (whose destructors ack them). Later waits
    /// fail with operation_aborted. Idempotent.
    void close() noexcept {
        ready_list ready;
        std::deque<value_type> dropped;
        {
            std::lock_guard lock(mutex_);
            if (!close_locked(ready, dropped))
                return;
        }
        for (value_type& ev : dropped)
            discard(std::move(ev), nullptr);
        complete_all(ready, delivery::post);
    }

    /// The execution context is shutting down: what close() does, except that
    /// pending handlers are destroyed, not invoked (see shutdown_registry).
    void shutdown() noexcept override {
        ready_list pending;
        std::deque<value_type> dropped;
        {
            std::lock_guard lock(mutex_);
            if (!close_locked(pending, dropped))
                return;
        }
        for (value_type& ev : dropped)
            discard(std::move(ev), nullptr);
        destroy_all(pending);
    }

    /// Returns an event that a cancelled wait had already taken: the next matching
    /// waiter gets it, or it goes to the front of the queue. Once closed, or when
    /// its object has been retired meanwhile, the event is dropped (acked).
    void give_back(value_type ev) {
        ready_list ready;
        {
            std::lock_guard lock(mutex_);
            if (closed_)
                return; // ev acks on its way out, after the lock
            // An event of an object retired since its wait took it: retire()'s sweep
            // has passed, and the destroy call (rdma_destroy_id) may be waiting for
            // this very ack. Dropped as if read after the retirement, under the lock.
            if (!retired_.empty()) {
                if (const void* object = retired_object_of(ev)) {
                    discard(std::move(ev), object);
                    return;
                }
            }
            if (!offer_locked(ev, ready))
                queue_.push_front(std::move(ev));
            if (waiters_.empty())
                disarm_locked();
        }
        complete_all(ready, delivery::post);
    }

    /// Hands an event that did not come from the source's fds (e.g. a subnet event
    /// decoded by another source, or a removal the connection manager saw) to its
    /// waiter or the queue, exactly like a drained one. With `then_fail`, every
    /// other pending and later wait then fails with it, as when a drain calls
    /// sink.fail(). Returns false, dropping the event, once the dispatcher is
    /// closed or has failed.
    bool inject(value_type ev, const error_code& then_fail = {}) {
        ready_list ready;
        {
            std::lock_guard lock(mutex_);
            if (closed_ || error_)
                return false;
            deliver_locked(std::move(ev), ready);
            if (then_fail)
                fail_locked(then_fail, ready);
            if (waiters_.empty())
                disarm_locked();
        }
        complete_all(ready, delivery::post);
        return true;
    }

    /// Fails every pending and later wait with `ec` (after the queued events are
    /// taken), as a drain's sink.fail() does. Does nothing once closed.
    void fail(const error_code& ec) {
        ready_list ready;
        {
            std::lock_guard lock(mutex_);
            if (!closed_)
                fail_locked(ec, ready);
        }
        complete_all(ready, delivery::post);
    }

    /// Runs f(source) under the dispatcher's lock, to read state the source keeps
    /// up to date while draining (a port's state) or to add an observer of it. f
    /// must not call back into the dispatcher.
    template <class F>
    decltype(auto) with_source(F&& f) {
        std::lock_guard lock(mutex_);
        return std::forward<F>(f)(source_);
    }

    std::size_t queued() {
        std::lock_guard lock(mutex_);
        return queue_.size();
    }

private:
    friend class wait_canceller<event_dispatcher>;
    friend class wake_handler<event_dispatcher>;
    struct waiter;
    using canceller_type = wait_canceller<event_dispatcher>;
    using held_type = held_events<Source>;
    static constexpr bool holds_taken_events = held_type::enabled;
    using held_ptr = typename held_type::handle;

    // Under the lock, as the waiter takes its result.
    void hold_locked(waiter& w) { held_.hold(w.result, w.held); }

    // The handler runs: takes its event out of the dispatcher's keeping. False
    // when retire() or close() dropped it.
    static bool release_held(const std::weak_ptr<event_dispatcher>& owner, const held_ptr& held,
                             value_type& out) {
        if (auto d = owner.lock()) {
            std::lock_guard lock(d->mutex_);
            return d->held_.release(held, out);
        }
        return held_type::take(held, out);
    }

    // A wait, as the dispatcher keeps it (waiter_impl holds its handler).
    struct waiter : operation {
        // Links: of the index while pending, then of a ready_list.
        waiter* prev = nullptr;
        waiter* next = nullptr;
        // In its object's list (an only_own_events wait, see waiter_index), else null.
        void* object_waits = nullptr;
        waiter* object_prev = nullptr;
        waiter* object_next = nullptr;
        canceller_type* canceller = nullptr; // in the handler's slot, if any
        error_code ec;
        value_type result{};
        held_ptr held; // hold_taken_events: where `result` went

        // The object this wait belongs to, or nullptr.
        virtual const void* key() const noexcept = 0;
        // Whether it accepts only events whose Source::object_of is key().
        virtual bool only_own_events() const noexcept = 0;
        // wait_matcher::offer for this wait's matcher, into `result` and `ec`.
        virtual acceptance offer(value_type& ev) = 0;
        // On a wake-up, before reading: may fill `result` and complete without an event.
        virtual bool on_wake() = 0;
        // complete(): hands ec/result to the handler; destroy(): at shutdown.

    protected:
        ~waiter() = default;
    };

public:
    /// A wait its owner keeps as a member and starts again for each wait, for an
    /// owner that is not an Asio operation (the CQ reader of the queue pairs):
    /// nothing is allocated, no handler wrapped and no work counted per wait. The
    /// owner derives from it and says in complete(how) what the wait's end does
    /// (posted, or here when `how` allows and the owner's executor runs on this
    /// thread) and in destroy() what a shutdown drops; error() and value() hold the
    /// result until the next start. Nothing cancels it through a slot: the
    /// object's cancel(object), close() and shutdown end it. Started this way
    /// only on a source whose taken events are not held (no ack waits for its
    /// owner). (async_next's waits are member waits with a handler: waiter_impl.)
    template <class Matcher>
    class member_wait : public waiter {
    public:
        explicit member_wait(Matcher m) : matcher(std::move(m)) {}
        member_wait(const member_wait&) = delete;
        member_wait& operator=(const member_wait&) = delete;

        const error_code& error() const noexcept { return this->ec; }
        value_type& value() noexcept { return this->result; }

        const void* key() const noexcept final { return wait_matcher::key(matcher); }
        bool only_own_events() const noexcept final {
            return index_type::indexes_waits && wait_matcher::only_own_events<Matcher>();
        }
        acceptance offer(value_type& ev) final {
            return wait_matcher::offer(matcher, ev, this->result, this->ec);
        }
        bool on_wake() final { return wait_matcher::on_wake(matcher, this->result); }

    protected:
        ~member_wait() = default;

        Matcher matcher;
    };

    /// Starts `w`, which must not be pending: as async_next, except that its end
    /// is w.complete(how) (delivery::post when it ends inside this call).
    template <class Matcher>
    /// `returning`: the waiter said will_return(), and this is its return; it is
    /// settled in the same locked section as the wait's start, since from the
    /// lock's release another thread may end the wait and run its owner on.
    void start_member_wait(member_wait<Matcher>& w, bool returning = false) {
        static_assert(!holds_taken_events, "a member wait cannot hold its event");
        w.ec.clear();
        w.result = value_type{};
        register_for_shutdown();
        start_waiter(w, returning);
    }

    /// A waiter that a wake-up ended will wait again from a handler it posted
    /// (a CQ's reader yields before it arms): until it calls returned(), a
    /// wake-up queues no idle check (disarm_soon), which would only find it
    /// waiting again. It calls returned() once it waits, or once it will not.
    void will_return() noexcept {
        std::lock_guard lock(mutex_);
        ++returns_pending_;
    }
    /// The waiter that called will_return() waits again, or will not: if
    /// nobody waits now, the idle check goes as after a wake-up.
    void returned() noexcept {
        std::lock_guard lock(mutex_);
        returned_locked();
    }

private:
    using index_type = waiter_index<waiter, Source>;
    // Waiters taken off the index under the lock, to complete after it is released.
    using ready_list = typename index_type::list;

    // With delivery::post nothing runs here and nothing throws. With
    // may_run_here a handler runs inside the call and may throw, as any Asio
    // handler may: the waits after it are posted, so that none is lost, and the
    // exception goes on out of io_context::run().
    static void complete_all(ready_list& ready, delivery how) {
        try {
            while (waiter* w = ready.pop_front())
                w->complete(how);
        } catch (...) {
            while (waiter* w = ready.pop_front())
                w->complete(delivery::post);
            throw;
        }
    }
    static void destroy_all(ready_list& ready) noexcept {
        while (waiter* w = ready.pop_front())
            w->destroy();
    }

    // A wait with its handler: handler_operation holds the handler (memory, work,
    // delivery); this adds the matcher and what happens as the handler runs.
    // The matcher's part is a member wait's; what the wait's end does is the
    // handler's.
    template <class Handler, class Matcher, class IoExecutor>
    struct waiter_impl final : handler_operation<waiter_impl<Handler, Matcher, IoExecutor>,
                                                 member_wait<Matcher>, Handler, IoExecutor> {
        using base = handler_operation<waiter_impl, member_wait<Matcher>, Handler, IoExecutor>;
        using typename base::ptr;

        waiter_impl(Handler&& h, const IoExecutor& io_ex, Matcher&& m)
            : base(std::move(h), io_ex, std::move(m)) {}

        // The handler runs: the waiter is freed first (so that the handler may
        // start the next wait in its memory), then what the wait ended with is
        // settled.
        static void invoke(ptr self) {
            Handler h(std::move(self->handler_));
            Matcher m(std::move(self->matcher));
            std::weak_ptr<event_dispatcher> d = std::move(self->owner);
            const canceller_type* canceller = self->canceller;
            error_code ec = self->ec;
            value_type ev = std::move(self->result);
            held_ptr held = std::move(self->held);
            self.reset();
            // A held event comes out of the dispatcher's keeping now, unless
            // retire() or close() dropped it meanwhile.
            if constexpr (holds_taken_events) {
                if (held && !release_held(d, held, ev))
                    ec = asio::error::operation_aborted;
            }
            // Cancelled after the event was taken, before this ran: the event goes
            // back, and the wait reports the cancellation. (The canceller is still
            // in the handler's slot: nothing else can use the slot before the
            // handler has run.)
            if (!ec && canceller != nullptr && canceller->requested()) {
                give_back_result(canceller->dispatcher, m, std::move(ev));
                ev = value_type{};
                ec = asio::error::operation_aborted;
            }
            std::move(h)(ec, std::move(ev));
        }

        std::weak_ptr<event_dispatcher> owner; // set only when events are held
    };

    template <class Matcher>
    static void give_back_result(const std::weak_ptr<event_dispatcher>& owner, Matcher& matcher,
                                 value_type&& ev) {
        if (wait_matcher::give_back(matcher, ev))
            return;
        if (auto d = owner.lock())
            d->give_back(std::move(ev));
    }

    // Holds the dispatcher by plain pointer, as Asio's own initiations hold their
    // I/O object: every caller (an I/O object's state, an operation) keeps the
    // dispatcher alive while it starts a wait, and a reference count here cost two
    // atomic operations per wait.
    template <class IoExecutor>
    struct initiation {
        event_dispatcher* self;
        IoExecutor io_ex;
        using executor_type = IoExecutor;
        executor_type get_executor() const noexcept { return io_ex; }

        template <class Handler, class Matcher>
        void operator()(Handler&& handler, Matcher matcher) const {
            self->start(std::forward<Handler>(handler), std::move(matcher), io_ex);
        }
    };

    // What Source::drain sees. A drain that may stop early (on a wake-up) stops
    // once nobody waits: what it leaves unread is read by the next wait, which
    // drains after arming anyway. That saves an EAGAIN read per event.
    struct sink {
        event_dispatcher& d;
        ready_list& ready;
        bool may_stop_early = false;
        bool more() const noexcept { return !may_stop_early || !d.waiters_.empty(); }
        void push(value_type&& ev) { d.deliver_locked(std::move(ev), ready); }
        void fail(const error_code& ec) { d.fail_locked(ec, ready); }
    };

    template <class Handler, class Matcher, class IoExecutor>
    void start(Handler&& handler, Matcher matcher, const IoExecutor& io_ex) {
        waiter* w = make_waiter(std::forward<Handler>(handler), std::move(matcher), io_ex);
        try {
            start_waiter(*w);
        } catch (...) {
            w->destroy(); // never started: the initiation throws, the handler goes
            throw;
        }
    }

    // A wait, made: it completes at once from the queue or the dispatcher's end,
    // or waits, armed. Throws only when the reactor wait could not be allocated,
    // with `w` taken out again.
    void start_waiter(waiter& w, bool returning = false) {
        ready_list ready;
        {
            std::lock_guard lock(mutex_);
            if (closed_) {
                w.ec = asio::error::operation_aborted;
                ready.push_back(w);
            } else if (!queue_.empty() && take_queued_locked(w)) {
                ready.push_back(w);
            } else if (error_) {
                w.ec = error_;
                ready.push_back(w);
            } else {
                add_waiter_locked(&w);
                try {
                    arm_locked(ready);
                } catch (...) {
                    remove_waiter_locked(&w);
                    throw;
                }
            }
            if (returning)
                returned_locked();
        }
        complete_all(ready, delivery::post);
    }

    void returned_locked() noexcept {
        if (returns_pending_ > 0)
            --returns_pending_;
        disarm_soon_locked();
    }

    template <class Handler, class Matcher, class IoExecutor>
    waiter* make_waiter(Handler&& handler, Matcher matcher, const IoExecutor& io_ex) {
        using impl = waiter_impl<std::decay_t<Handler>, Matcher, IoExecutor>;
        // A copy of a handler passed as an lvalue.
        impl* w = impl::create(std::decay_t<Handler>(std::forward<Handler>(handler)), io_ex,
                               std::move(matcher))
                      .release();

        // Only a cancellable wait can give an event back, and only a held event
        // must come out of the dispatcher's keeping: only they pay for a link to
        // the dispatcher (the canceller's, in the slot, serves the wait too).
        auto slot = w->cancellation_slot();
        if (slot.is_connected())
            w->canceller = &slot.template emplace<canceller_type>(this->weak_from_this());
        if constexpr (holds_taken_events)
            w->owner = this->weak_from_this();
        register_for_shutdown();
        return w;
    }

    // A new waiter looks at the queue first: true when it completes from it.
    bool take_queued_locked(waiter& w) {
        for (auto it = queue_.begin(); it != queue_.end();) {
            switch (w.offer(*it)) {
            case acceptance::declined:
                ++it;
                break;
            case acceptance::refused:
                return true; // completes with its error; the event stays
            case acceptance::taken:
                queue_.erase(it);
                hold_locked(w);
                return true;
            case acceptance::consumed:
                queue_.erase(it);
                return true;
            case acceptance::absorbed:
                it = queue_.erase(it);
                break;
            }
        }
        return false;
    }

    void add_waiter_locked(waiter* w) { waiters_.add(*w); }
    void remove_waiter_locked(waiter* w) noexcept { waiters_.remove(*w); }

    // Starts a reactor wait on every fd that has none, then drains those: whatever
    // arrived before their wait was registered would raise no new edge. An fd
    // whose wait is already outstanding is not read: that wait reports what
    // comes (a read there found nothing but cost a system call per wait).
    void arm_locked(ready_list& ready) {
        std::array<bool, max_fds> armed_now{};
        bool armed_any = false;
        for (std::size_t i = 0; i < max_fds; ++i) {
            if (descriptors_[i] && !armed_[i]) {
                arm_one_locked(i);
                armed_now[i] = armed_any = true;
            }
        }
        for (std::size_t i = 0; armed_any && i < max_fds && !error_; ++i)
            if (armed_now[i] && drains_on_arm(i))
                drain_one_locked(i, ready);
        if (waiters_.empty())
            disarm_locked();
    }

    bool drains_on_arm(std::size_t i) const noexcept {
        if constexpr (requires(const Source& s) { s.drain_on_arm(i); })
            return source_.drain_on_arm(i);
        else
            return true;
    }

    void arm_one_locked(std::size_t i) {
        if (outstanding_wakes_.fetch_add(1, std::memory_order_relaxed) == 0)
            keep_alive_ = this->shared_from_this();
        wake_handler<event_dispatcher> h(this, i);
        try {
            descriptors_[i]->async_wait_readable(std::move(h));
        } catch (...) {
            // Asio could not allocate the wait and never took the handler: undo
            // the count here, under the lock that wake_ended() would take.
            h.disown();
            if (outstanding_wakes_.fetch_sub(1, std::memory_order_relaxed) == 1)
                keep_alive_.reset(); // a caller holds *this: not the last reference
            throw;
        }
        armed_[i] = true;
    }

    // A reactor wait has ended (its handler ran, or was destroyed unrun). The last
    // one lets the dispatcher go; a wait started meanwhile (the count back above
    // zero, under the lock) has taken the reference over.
    void wake_ended() noexcept {
        if (outstanding_wakes_.fetch_sub(1, std::memory_order_acq_rel) != 1)
            return;
        std::shared_ptr<event_dispatcher> last;
        {
            std::lock_guard lock(mutex_);
            if (outstanding_wakes_.load(std::memory_order_relaxed) == 0)
                last = std::move(keep_alive_);
        }
        // `last` may be the final reference: *this ends here, after the lock.
    }

    void drain_all_locked(ready_list& ready) {
        for (std::size_t i = 0; i < max_fds && !error_; ++i)
            if (descriptors_[i])
                drain_one_locked(i, ready);
    }
    void drain_one_locked(std::size_t i, ready_list& ready) {
        sink s{*this, ready};
        source_.drain(i, s);
    }

    // Without waiters, no reactor wait may stay outstanding: it would keep
    // io_context::run() from returning.
    void disarm_locked() {
        for (std::size_t i = 0; i < max_fds; ++i)
            if (descriptors_[i] && armed_[i])
                descriptors_[i]->cancel();
    }

    void on_wake(std::size_t i, const error_code& ec) {
        ready_list ready;
        bool other_armed = false;
        {
            std::lock_guard lock(mutex_);
            armed_[i] = false;
            if (closed_ || error_ || !descriptors_[i])
                return;
            for (std::size_t j = 0; j < max_fds; ++j)
                other_armed = other_armed || (j != i && armed_[j]);
            if (ec && ec != asio::error::operation_aborted) {
                fail_locked(ec, ready);
            } else {
                if (!ec)
                    offer_wake_locked(ready);
                if (!waiters_.empty()) {
                    sink s{*this, ready, true};
                    // A wait this dispatcher cancelled itself reported nothing.
                    if (!ec || drains_on_arm(i))
                        source_.drain(i, s);
                    // Waiters left (so the drain went to EAGAIN): wait again, then
                    // drain once more, for what came before the new registration.
                    if (!waiters_.empty() && !error_) {
                        arm_one_locked(i);
                        if (drains_on_arm(i))
                            source_.drain(i, s);
                    }
                }
            }
            if (waiters_.empty() && ready.empty())
                disarm_locked();
        }
        if (ready.empty())
            return;
        // The handlers ran here if they could (dispatch), and a handler that waits
        // again has armed already. Only if none did, the other fds' waits go
        // (disarm_soon), also when a handler threw. With no other fd armed (a
        // source of one fd) there is nothing to disarm: a wait started meanwhile
        // armed for a waiter of its own.
        struct disarm_when_idle {
            event_dispatcher* self;
            ~disarm_when_idle() {
                if (self != nullptr)
                    self->disarm_soon();
            }
        } idle{other_armed ? this : nullptr};
        complete_all(ready, delivery::may_run_here);
    }

    // Nobody waits after a wake-up's handlers ran: the other fds' waits go once
    // the handlers queued by then have run, unless one of those waits again. A
    // CQ's reader waits again from a handler it posts (it yields before it
    // arms); cancelling the other waits at once and arming them again for it
    // cost every event a cancelled reactor wait, its completion and an
    // epoll_ctl. One check is queued at a time; when none can be queued (no
    // memory), they go now.
    void disarm_soon() noexcept {
        std::lock_guard lock(mutex_);
        disarm_soon_locked();
    }
    void disarm_soon_locked() noexcept {
        // With no reactor wait armed there is nothing to withdraw: a CQ's reader
        // whose yield found its completion says returned() without having waited
        // (queue_pair operations at one in flight, every message), and a check
        // queued then cost a posted handler per message.
        if (!waiters_.empty() || idle_check_queued_ || returns_pending_ > 0 ||
            std::none_of(armed_.begin(), armed_.end(), [](bool a) { return a; }))
            return;
        try {
            post_to(ex_, [weak = this->weak_from_this()] {
                if (auto self = weak.lock()) {
                    std::lock_guard lock(self->mutex_);
                    self->idle_check_queued_ = false;
                    if (self->waiters_.empty())
                        self->disarm_locked();
                }
            });
            idle_check_queued_ = true;
        } catch (...) {
            disarm_locked();
        }
    }

    // The only waiter may complete on the wake-up alone, before any read. With
    // more, the events are read first, to look only at the objects they name.
    void offer_wake_locked(ready_list& ready) {
        waiter* w = waiters_.front();
        if (waiters_.single() && w->on_wake()) {
            remove_waiter_locked(w);
            ready.push_back(*w);
        }
    }

    void deliver_locked(value_type&& ev, ready_list& ready) {
        if (!retired_.empty()) {
            if (const void* object = retired_object_of(ev)) {
                discard(std::move(ev), object); // under the lock, so it acks before a destroy
                return;
            }
        }
        if (offer_locked(ev, ready))
            return;
        if constexpr (requires { source_.refuses_keeping(ev, queue_); }) {
            if (source_.refuses_keeping(ev, queue_)) {
                discard(std::move(ev), nullptr);
                return;
            }
        }
        queue_.push_back(std::move(ev));
    }

    const void* retired_object_of(const value_type& ev) const noexcept {
        if constexpr (requires { Source::concerns(ev, nullptr); }) {
            for (const void* object : retired_)
                if (Source::concerns(ev, object))
                    return object;
        }
        return nullptr;
    }

    static void discard(value_type&& ev, const void* object) noexcept {
        if constexpr (requires { Source::discard(std::move(ev), object); })
            Source::discard(std::move(ev), object);
        else [[maybe_unused]]
            value_type dropped(std::move(ev)); // its destructor acks it
    }

    void abort_waiters_of_locked(const void* object, ready_list& ready) {
        if (object == nullptr)
            return; // the key of waits that belong to no object
        for (waiter* w = waiters_.front(); w != nullptr;) {
            waiter* next = index_type::next(*w);
            if (w->key() == object)
                abort_locked(w, ready);
            w = next;
        }
        if (waiters_.empty())
            disarm_locked();
    }

    // Hands `ev` to the first waiter that takes or uses it up; false when none
    // does. Waiters that refuse it complete with their error on the way.
    bool offer_locked(value_type& ev, ready_list& ready) {
        return waiters_.for_candidates(
            ev, [&](auto& list) { return offer_to_locked(list, ev, ready); });
    }

    template <class List>
    bool offer_to_locked(List& list, value_type& ev, ready_list& ready) {
        for (waiter* w = list.front(); w != nullptr;) {
            waiter* next = List::next(*w);
            switch (w->offer(ev)) {
            case acceptance::declined:
                break;
            case acceptance::refused:
                remove_waiter_locked(w);
                ready.push_back(*w);
                break;
            case acceptance::taken:
                remove_waiter_locked(w);
                ready.push_back(*w);
                hold_locked(*w);
                return true;
            case acceptance::consumed:
                remove_waiter_locked(w);
                ready.push_back(*w);
                return true;
            case acceptance::absorbed:
                return true;
            }
            w = next;
        }
        return false;
    }

    // Marks the dispatcher closed and takes everything out: the waiters (into
    // `taken`, with operation_aborted), the fds (unregistered, never closed) and
    // the queued events (into `dropped`, acked when the caller destroys them
    // after the lock). False when it was closed already.
    bool close_locked(ready_list& taken, std::deque<value_type>& dropped) noexcept {
        if (closed_)
            return false;
        closed_ = true;
        while (waiter* w = waiters_.front())
            abort_locked(w, taken);
        for (auto& d : descriptors_)
            d.reset();
        dropped.swap(queue_);
        held_.drop(nullptr, dropped);
        source_.close();
        return true;
    }

    // Once per dispatcher; every later wait pays a plain load.
    void register_for_shutdown() {
        if (registered_.load(std::memory_order_relaxed) || registered_.exchange(true))
            return;
        registry_->add(this->weak_from_this());
    }

    void fail_locked(const error_code& ec, ready_list& ready) {
        if (!error_)
            error_ = ec;
        while (waiter* w = waiters_.front()) {
            remove_waiter_locked(w);
            w->ec = error_;
            ready.push_back(*w);
        }
        disarm_locked();
    }

    void abort_locked(waiter* w, ready_list& ready) {
        remove_waiter_locked(w);
        w->ec = asio::error::operation_aborted;
        ready.push_back(*w);
    }

    void cancel_waiter(const canceller_type* key) {
        ready_list ready;
        {
            std::lock_guard lock(mutex_);
            for (waiter* w = waiters_.front(); w != nullptr; w = index_type::next(*w)) {
                if (w->canceller == key) {
                    abort_locked(w, ready);
                    break;
                }
            }
            if (waiters_.empty())
                disarm_locked();
        }
        complete_all(ready, delivery::post);
    }

    executor_type ex_;
    shutdown_registry* registry_ = nullptr; // used only while registering
    std::atomic<bool> registered_{false};
    // A type of each dispatcher's own (as when it was declared in here): GCC then
    // inlines each lock_guard's unlock into its dispatcher's hot path, where one
    // type shared by every dispatcher got an out-of-line unlock, 16 instructions
    // more per event (bench/dispatcher_throughput under callgrind).
    struct mutex_type : optional_atomic_mutex {};
    mutex_type mutex_;
    Source source_;
    std::array<std::optional<borrowed_descriptor>, max_fds> descriptors_;
    std::array<bool, max_fds> armed_{};
    // Reactor waits started and not yet ended, and the reference to *this that
    // they share (see wake_handler). Written under the lock, except the decrement.
    std::atomic<std::size_t> outstanding_wakes_{0};
    std::shared_ptr<event_dispatcher> keep_alive_;
    index_type waiters_; // the pending waits
    std::deque<value_type> queue_;
    std::vector<const void*> retired_; // objects whose events are dropped as read
    held_type held_;                   // hold_taken_events only
    error_code error_;
    bool closed_ = false;
    bool idle_check_queued_ = false;  // disarm_soon's check, posted and not run
    std::size_t returns_pending_ = 0; // will_return() without returned() yet
};

} // namespace rdma_asio::detail
