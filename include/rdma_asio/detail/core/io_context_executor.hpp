// Whether a type-erased executor is an io_context's own executor.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <utility>

#if !defined(RDMA_ASIO_DETAIL_NO_TYPEID)
#include <typeinfo>
#endif

namespace rdma_asio::detail {

/// The io_context::executor_type that `ex` holds, or null when it holds an
/// executor of any other type (a strand, a thread pool's, the system executor,
/// an io_context executor with other properties...), or nothing.
///
/// Not ex.target<io_context::executor_type>() alone: in Asio 1.22,
/// any_executor::target<T>() does not compare the target's type with T, it casts
/// whatever the executor holds. A strand over an io_context then reads as the
/// io_context's executor underneath it (its first member: the handler would run
/// off the strand), and a system executor as garbage.
inline const asio::io_context::executor_type*
io_context_executor_of(const asio::any_io_executor& ex) noexcept {
#if !defined(RDMA_ASIO_DETAIL_NO_TYPEID)
    if (ex && ex.target_type() == typeid(asio::io_context::executor_type))
        return ex.target<asio::io_context::executor_type>();
#endif
    return nullptr; // without RTTI the type cannot be checked: no shortcut
}

/// `ex` without its strand when it is a strand of an io_context's executor (the
/// type is checked, as above); `ex` itself otherwise.
inline asio::any_io_executor unstranded(const asio::any_io_executor& ex) {
#if !defined(RDMA_ASIO_DETAIL_NO_TYPEID)
    using io_strand = asio::strand<asio::io_context::executor_type>;
    if (ex && ex.target_type() == typeid(io_strand))
        return ex.target<io_strand>()->get_inner_executor();
#endif
    return ex;
}

/// Posts `f` to `ex`, through the io_context's own executor when that is what
/// `ex` holds: type-erased, each post costs a few hundred instructions more.
template <class F>
void post_to(const asio::any_io_executor& ex, F&& f) {
    if (const auto* io_ex = io_context_executor_of(ex))
        asio::post(*io_ex, std::forward<F>(f));
    else
        asio::post(ex, std::forward<F>(f));
}

} // namespace rdma_asio::detail
