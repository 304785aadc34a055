// The state of an I/O object that one event_dispatcher serves alone: the handle
// it wraps and the dispatcher, shared with the operations in flight. What
// io_object asks of its state (native_handle, no_handle, cancel) comes from here;
// the object's own state adds open, close and its queries.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/event_dispatcher.hpp"

#include <memory>
#include <utility>

namespace rdma_asio::detail {

template <class Source, class Handle, Handle NoHandle>
class dispatcher_state {
public:
    using native_handle_type = Handle;
    static constexpr native_handle_type no_handle = NoHandle;
    using dispatcher_type = event_dispatcher<Source>;

    native_handle_type native_handle() const noexcept { return handle_; }
    dispatcher_type& dispatcher() noexcept { return *dispatcher_; }
    const std::shared_ptr<dispatcher_type>& shared_dispatcher() const noexcept {
        return dispatcher_;
    }
    /// Completes every pending wait with operation_aborted.
    void cancel() noexcept { dispatcher_->cancel(); }

protected:
    /// `handle`: what native_handle() returns; `source_args` make the Source.
    template <class... SourceArgs>
    dispatcher_state(Handle handle, const asio::any_io_executor& ex, SourceArgs&&... source_args)
        : handle_(handle), dispatcher_(std::make_shared<dispatcher_type>(
                               ex, std::forward<SourceArgs>(source_args)...)) {}
    dispatcher_state(const dispatcher_state&) = delete;
    dispatcher_state& operator=(const dispatcher_state&) = delete;
    ~dispatcher_state() = default;

    Handle handle_;
    std::shared_ptr<dispatcher_type> dispatcher_;
};

} // namespace rdma_asio::detail
