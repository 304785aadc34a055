#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <new>

namespace rdma_asio {
namespace detail {

std::shared_ptr<completion_queue_impl>
completion_queue_impl::open(std::shared_ptr<completion_channel_impl> channel, int entries,
                            unsigned ack_batch, bool solicited_only, const spin_budget& spin,
                            error_code& ec) {
    if (!channel) {
        ec = asio::error::bad_descriptor;
        return nullptr;
    }
    auto impl = std::make_shared<completion_queue_impl>(ack_batch, solicited_only, spin);
    impl->executor_ = channel->dispatcher->get_executor();
    ibv_comp_channel* comp_channel = channel->channel;
    impl->channel_ = std::move(channel);
    errno = 0;
    ibv_cq* cq = ibv_create_cq(comp_channel->context, entries, &impl->cq_context_, comp_channel, 0);
    if (cq == nullptr) {
        ec = last_errno_code();
        return nullptr;
    }
    impl->cq_context_.cq = cq;
    ec.clear();
    return impl;
}

error_code completion_queue_impl::try_close() noexcept {
    closed_ = true;
    ibv_cq* cq = cq_context_.cq;
    // Flush and destroy under the channel's lock: no read may count another event
    // of this CQ in between.
    int rc = 0;
    auto& d = dispatcher();
    d.retire(cq, [&] {
        cq_context_.flush();
        rc = ibv_destroy_cq(cq);
        return rc == 0;
    });
    d.end_retirement(cq); // destroyed, or open and usable again
    if (rc != 0) {
        // EBUSY: a QP still uses the CQ. It stays open and usable; only its
        // pending wait was cancelled.
        closed_ = false;
        return errno_code(rc > 0 ? rc : EBUSY);
    }
    return {};
}

error_code completion_queue_impl::close() noexcept {
    const error_code busy = try_close();
    if (!busy)
        return {};
    // The CQ could not be destroyed (a QP still uses it) and may still raise
    // events that point at this state: the channel keeps the state, without its
    // link back to the channel, until the channel itself goes. Nothing may use
    // the CQ from here on: a step of an operation still in flight sees closed().
    std::shared_ptr<completion_channel_impl> kept_by;
    {
        // A reader's target (cq_reader.hpp) cancels and starts its reads from its
        // users' threads (excluding_close): it sees either an open CQ with its
        // channel or a closed one.
        std::lock_guard lock(reader_mutex_);
        closed_ = true;
        kept_by = std::move(channel_);
    }
    try {
        kept_by->keep_until_destroyed(shared_from_this());
    } catch (...) {
        // Out of memory: leaking the state is the only safe choice left.
        new (std::nothrow) std::shared_ptr<completion_queue_impl>(shared_from_this());
    }
    return busy;
}

bool completion_queue_impl::destroy_now() noexcept {
    cq_context_.flush();
    return ibv_destroy_cq(cq_context_.cq) == 0;
}

completion_queue_impl::~completion_queue_impl() {
    // The channel went first, and a QP used the CQ then (destroy_when_gone); the
    // last holder, a queue pair on it, has destroyed its QP by now. remnant_, the
    // channel's remains, goes after this (a member): the channel after the CQ.
    if (remnant_)
        destroy_now();
}

std::shared_ptr<completion_queue_impl>
open_completion_queue(std::shared_ptr<completion_channel_impl> channel, int entries,
                      const cq_options& options, error_code& ec) {
    return completion_queue_impl::open(std::move(channel), entries, options.ack_batch,
                                       options.solicited_only, options.spin, ec);
}

} // namespace detail
} // namespace rdma_asio
