#include "rdma_asio/detail/cq/cq_reader.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_context_executor.hpp"
#include "rdma_asio/detail/cq/completion_queue_impl.hpp"
#include "rdma_asio/detail/cq/cq_wait_match.hpp"

#include <utility>

namespace rdma_asio::detail {

namespace {
// Whether `ex` is an io_context's executor that runs on this thread, where the
// read may carry on inside the wake-up that ended its wait.
bool runs_here(const asio::any_io_executor& ex) noexcept {
    const auto* io_ex = io_context_executor_of(ex);
    return io_ex != nullptr && io_ex->running_in_this_thread();
}
} // namespace

// The posted handlers hold the target, and through it the reader (a member of the
// target, which outlives its reads): a pointer to the reader is enough.

// The wait's end reached elsewhere than on the CQ's thread, or where nothing may
// run inside the call (a cancel(), a close, a wait that ended as it started).
struct cq_reader::wait_end_handler {
    cq_reader* self;
    std::shared_ptr<cq_read_target> target;
    error_code ec;
    cq_event ev;
    void operator()() { self->run(self->after_wait(ec, ev), target, false); }
};

void cq_reader::wait::complete(delivery how) {
    std::shared_ptr<cq_read_target> t = std::move(target);
    const error_code ec = error();
    const cq_event ev = value();
    // The read may start the wait again from here on: only locals are used.
    if (how == delivery::may_run_here && runs_here(reader.cq_->executor())) {
        reader.run(reader.after_wait(ec, ev), t, false);
        return;
    }
    try {
        post_to(reader.cq_->executor(), wait_end_handler{&reader, std::move(t), ec, ev});
    } catch (...) {
        // No memory to queue the read's end: as for any operation whose handler
        // cannot be queued, it is dropped (here, the target it held).
    }
}

void cq_reader::wait::destroy() noexcept {
    // The context shuts down: the target goes (it may own the reader, and so
    // this wait: nothing of *this is used after).
    std::shared_ptr<cq_read_target> t = std::move(target);
}

cq_poll_machine::step cq_reader::after_wait(const error_code& ec, const cq_event& ev) {
    return cq_->machine().event(ec, cq_->closed(), ev.polled);
}

// The next round of spinning.
struct cq_reader::resume_handler {
    cq_reader* self;
    std::shared_ptr<cq_read_target> target;
    void operator()() {
        auto& cq = *self->cq_;
        auto& m = cq.machine();
        // The clock only for a spin: a yield before arming needs no time.
        const auto now =
            m.reads_clock() ? cq_poll_machine::clock::now() : cq_poll_machine::clock::time_point{};
        self->run(m.resumed(cq.stopped_since(self->cancellations_at_start_), now), target, false);
    }
};

// What a read found inside start(), handed over outside it.
struct cq_reader::found_handler {
    std::shared_ptr<cq_read_target> target;
    error_code ec;
    std::size_t n;
    void operator()() { target->read(ec, n); }
};

cq_reader::cq_reader(std::shared_ptr<completion_queue_impl> cq) noexcept
    : cq_(std::move(cq)), wait_(*this, cq_poll_match{cq_.get(), wcs_}) {}

void cq_reader::start(std::shared_ptr<cq_read_target> target) {
    if (cq_->closed()) {
        post_to(cq_->executor(), found_handler{std::move(target), asio::error::bad_descriptor, 0});
        return;
    }
    cancellations_at_start_ = cq_->cancellations();
    // Yield once before arming: the handlers of what the last read handed on
    // post the next work requests, whose completions are often there at once.
    run(cq_->machine().start(batch, cq_->spin_budget_now(), true), target, true);
}

void cq_reader::run(cq_poll_machine::step s, std::shared_ptr<cq_read_target>& target,
                    bool in_start) {
    s = cq_->advance(wcs_, s); // the polls and the arm, at once
    switch (s.what) {
    case cq_poll_machine::action::wait: {
        // Once the wait has started, another thread may end it and carry the read
        // on: nothing of the reader is touched after, and a return owed is
        // settled by the dispatcher as the wait starts.
        wait_.target = std::move(target);
        const bool owed = std::exchange(owes_return_, false);
        try {
            cq_->dispatcher().start_member_wait(wait_, owed);
        } catch (...) {
            target = std::move(wait_.target); // not started: the caller keeps it
            owes_return_ = owed;
            settle_return();
            throw;
        }
        return;
    }
    case cq_poll_machine::action::yield:
        // Let others run. The wake-up that ended the last wait (if this runs in
        // it) need not queue its idle check: this read waits again, or says so.
        // Said before the post, after which the resume may run on another thread.
        if (!owes_return_) {
            owes_return_ = true;
            cq_->dispatcher().will_return();
        }
        try {
            post_to(cq_->executor(), resume_handler{this, std::move(target)});
        } catch (...) {
            settle_return(); // it will not return
            throw;
        }
        return;
    case cq_poll_machine::action::complete:
        settle_return();
        if (in_start) {
            post_to(cq_->executor(), found_handler{std::move(target), s.ec, s.n});
            return;
        }
        std::move(target)->read(s.ec, s.n);
        return;
    case cq_poll_machine::action::poll:
    case cq_poll_machine::action::arm:
        return; // advance() carried these out
    }
}

void cq_reader::settle_return() noexcept {
    if (std::exchange(owes_return_, false))
        cq_->dispatcher().returned();
}

} // namespace rdma_asio::detail
