// The handler of one reactor wait on a dispatcher's fd: it wakes its owner when
// the fd is readable.
//
// Move-only: it stands for one reactor wait from its start until it has run, or
// until Asio destroys it unrun (its context shutting down), and tells its owner so
// once either way (wake_ended()). The owner keeps itself alive while any such wait
// is outstanding, instead of each wait holding a reference of its own: in a loop
// of waits one wait starts before the previous one has ended, so the count never
// drops to zero and no event pays for the two atomic reference count operations
// of a shared_ptr copy.
//
// Owner: `void on_wake(std::size_t index, const error_code&)` and
// `void wake_ended() noexcept`, which may destroy the owner.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <cstddef>
#include <utility>

namespace rdma_asio::detail {

template <class Owner>
class wake_handler {
public:
    wake_handler(Owner* owner, std::size_t index) noexcept : owner_(owner), index_(index) {}
    wake_handler(wake_handler&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)), index_(other.index_) {}
    wake_handler(const wake_handler&) = delete;
    wake_handler& operator=(const wake_handler&) = delete;
    wake_handler& operator=(wake_handler&&) = delete;
    ~wake_handler() {
        if (owner_ != nullptr)
            owner_->wake_ended();
    }

    /// The wait never started: Asio did not take this handler.
    void disown() noexcept { owner_ = nullptr; }

    void operator()(const error_code& ec) {
        // Ended after on_wake, even one that throws; wake_ended() may destroy *owner.
        struct end_when_done {
            Owner* owner;
            ~end_when_done() { owner->wake_ended(); }
        } ending{std::exchange(owner_, nullptr)};
        ending.owner->on_wake(index_, ec);
    }

private:
    Owner* owner_;
    std::size_t index_;
};

} // namespace rdma_asio::detail
