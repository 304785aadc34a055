// A UD queue pair's state (queue_pair_impl.hpp) beyond an RC one's: its
// datagram_support, multicast attachment, and the address handles its sends wait
// for, made on a blocking-call thread (address_wait.hpp).
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/blocking_call_thread.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/qp/datagram_support.hpp"
#include "rdma_asio/detail/qp/queue_pair_impl.hpp"

#include <cerrno>
#include <new>
#include <utility>

namespace rdma_asio::detail {

void queue_pair_impl::enable_datagrams(std::uint8_t port, std::uint8_t gid_index, error_code& ec) {
    try {
        datagram_ = datagram_support::create(qp_, port, gid_index,
                                             machine_.credits(work_queue::receive), ec);
    } catch (const std::bad_alloc&) {
        ec = asio::error::no_memory;
    }
}

datagram_endpoint queue_pair_impl::local_endpoint() const noexcept {
    return datagram_ ? datagram_->local() : datagram_endpoint{};
}

error_code queue_pair_impl::multicast(const datagram_endpoint& group, bool attach) noexcept {
    std::lock_guard lock(mutex_);
    if (closed_)
        return asio::error::bad_descriptor;
    if (!datagram_)
        return asio::error::operation_not_supported;
    return datagram_->multicast(qp_, group, attach);
}

bool queue_pair_impl::address_handle_made(const datagram_endpoint& to) const noexcept {
    std::lock_guard lock(mutex_);
    return datagram_ && datagram_->find(to) != nullptr;
}

bool queue_pair_impl::has_address_handle(const datagram_endpoint& to) const noexcept {
    if (!datagram_)
        return true;
    std::lock_guard lock(mutex_);
    // A closed QP refuses the send itself. A send to `to` that waited for the
    // handle and has not started yet goes first.
    return closed_ || datagram_->ready_for(to);
}

void queue_pair_impl::address_wait_done(const datagram_endpoint& to) noexcept {
    std::lock_guard lock(mutex_);
    if (datagram_)
        datagram_->waiting_send_done(to);
}

bool queue_pair_impl::wait_for_address_handle(const datagram_endpoint& to,
                                              const asio::any_io_executor& ex,
                                              std::function<void(error_code)> then) {
    {
        std::unique_lock lock(mutex_);
        if (!datagram_ || closed_)
            return false;
        if (datagram_->ready_for(to))
            return false;
        const bool made = datagram_->find(to) != nullptr;
        datagram_->waiting_send_added(to); // address_wait_done() takes it back
        if (made && !datagram_->handing_out(to)) {
            // Made, but sends that waited for it have not started yet: this one
            // ends its wait after theirs (their ends are posted already).
            lock.unlock();
            then(error_code{});
            return true;
        }
        // While the maker hands the outcome out, it ends this wait too, after
        // those it is ending: their ends may not be posted yet.
        if (!datagram_->add_waiter(to, std::move(then)))
            return true; // a send before it has the handle made
    }
    try {
        run_blocking_call(ex, [self = shared_from_this(), to] { self->make_address_handle(to); });
    } catch (...) {
        std::vector<datagram_support::address_waiter> dropped;
        {
            std::lock_guard lock(mutex_);
            dropped = datagram_->take_waiters(to);
            for (std::size_t i = 0; i < dropped.size(); ++i)
                datagram_->waiting_send_done(to);
        }
        throw;
    }
    return true;
}

void queue_pair_impl::make_address_handle(const datagram_endpoint& to) noexcept {
    error_code ec;
    ibv_ah_attr attr{};
    ibv_pd* pd = nullptr;
    std::shared_ptr<ibv_pd> keep; // the domain stays allocated while the handle is made
    {
        std::lock_guard lock(mutex_);
        if (!closed_) {
            attr = datagram_->attributes_for(to);
            pd = datagram_->pd();
            keep = pd_;
        }
    }
    ibv_ah* ah = nullptr;
    if (pd != nullptr) {
        // Outside the lock: the QP's other operations go on while the kernel
        // resolves the neighbour.
        errno = 0;
        ah = ibv_create_ah(pd, &attr);
        if (ah == nullptr)
            ec = last_errno_code();
    }
    std::vector<datagram_support::address_waiter> waiting;
    {
        std::lock_guard lock(mutex_);
        if (ah != nullptr) {
            if (closed_) // its handles went with the QP, or will not be needed
                ibv_destroy_ah(ah);
            else
                ec = datagram_->adopt(to, ah);
        }
        // Empty when close() or cancel() ended the waits already.
        waiting = datagram_->next_waiters(to);
    }
    // Outside the lock (each posts its send's start to the handler's executor).
    // A send started meanwhile sees the handle made, but the ends of those
    // before it are not all posted yet: it joins the waiters, handed out in the
    // next round, so that its start is posted after theirs.
    while (!waiting.empty()) {
        for (auto& then : waiting)
            then(ec);
        std::lock_guard lock(mutex_);
        waiting = datagram_->next_waiters(to);
    }
}

void queue_pair_impl::end_address_waits() noexcept {
    if (!datagram_)
        return;
    datagram_support::waiting_sends waiting;
    {
        std::lock_guard lock(mutex_);
        waiting = datagram_->take_all_waiters();
    }
    for (auto& [to, sends] : waiting)
        for (auto& then : sends.waiting)
            then(asio::error::operation_aborted);
}

} // namespace rdma_asio::detail
