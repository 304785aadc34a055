// The one place where rdma_asio meets a particular Asio: standalone Asio or
// Boost.Asio (rdma_asio/config.hpp says which). Everything else in the library
// includes this header instead of Asio's and writes `asio::` and `error_code`,
// which resolve inside namespace rdma_asio to the chosen flavour.
#pragma once

// Every header of the library comes here first. Before C++20 nothing of it compiles
// (coroutines, concepts, std::atomic waits): one error that says what to do, then a
// stop, rather than a hundred errors that do not.
#if __cplusplus < 202002L
#error                                                                                             \
    "rdma_asio needs C++20: compile with -std=c++20 (in CMake, linking rdma_asio::rdma_asio sets it)"
#include <rdma_asio: stopped here, see the error above>
#endif

#include <rdma_asio/config.hpp>

#if RDMA_ASIO_USE_BOOST_ASIO

#if defined(BOOST_ASIO_HAS_IO_URING) && defined(BOOST_ASIO_DISABLE_EPOLL)
#define RDMA_ASIO_DETAIL_COMPILED_FOR_IO_URING 1
#else
#define RDMA_ASIO_DETAIL_COMPILED_FOR_IO_URING 0
#endif

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/detail/concurrency_hint.hpp>
#include <boost/asio/detail/scheduler.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/recycling_allocator.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/version.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#define RDMA_ASIO_DETAIL_ASIO_VERSION BOOST_ASIO_VERSION

namespace rdma_asio {
namespace asio = ::boost::asio;
/// The error code of completion signatures and of the overloads that report
/// through an error code: boost::system::error_code under Boost.Asio,
/// std::error_code under standalone Asio. Either converts to the other.
using error_code = ::boost::system::error_code;
/// What rdma_asio throws: boost::system::system_error under Boost.Asio (as
/// Boost.Asio does), std::system_error under standalone Asio.
using system_error = ::boost::system::system_error;
/// The category type of rdma_asio's own errors (errc, wc_errc) and its conditions.
using error_category = ::boost::system::error_category;
using error_condition = ::boost::system::error_condition;
namespace detail {
using generic_errc = ::boost::system::errc::errc_t;
} // namespace detail
} // namespace rdma_asio

/// Makes `Enum` an error code enum of this flavour (its make_error_code returns
/// rdma_asio::error_code).
#define RDMA_ASIO_DETAIL_ERROR_CODE_ENUM(Enum)                                                     \
    template <>                                                                                    \
    struct boost::system::is_error_code_enum<Enum> : std::true_type {}

#define RDMA_ASIO_DETAIL_CONCURRENCY_HINT_IS_LOCKING(facility, hint)                               \
    BOOST_ASIO_CONCURRENCY_HINT_IS_LOCKING(facility, hint)
#if defined(BOOST_ASIO_NO_TYPEID)
#define RDMA_ASIO_DETAIL_NO_TYPEID 1
#endif

#else // standalone Asio

#if defined(ASIO_HAS_IO_URING) && defined(ASIO_DISABLE_EPOLL)
#define RDMA_ASIO_DETAIL_COMPILED_FOR_IO_URING 1
#else
#define RDMA_ASIO_DETAIL_COMPILED_FOR_IO_URING 0
#endif

#include <asio/any_io_executor.hpp>
#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/associator.hpp>
#include <asio/async_result.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/buffer.hpp>
#include <asio/cancellation_state.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/compose.hpp>
#include <asio/detail/concurrency_hint.hpp>
#include <asio/detail/scheduler.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/execution/context.hpp>
#include <asio/execution_context.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/query.hpp>
#include <asio/recycling_allocator.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/version.hpp>
#include <system_error>

namespace rdma_asio {
namespace asio = ::asio;
/// The error code of completion signatures and of the overloads that report
/// through an error code: std::error_code under standalone Asio,
/// boost::system::error_code under Boost.Asio.
using error_code = std::error_code;
/// What rdma_asio throws: std::system_error under standalone Asio,
/// boost::system::system_error under Boost.Asio.
using system_error = std::system_error;
/// The category type of rdma_asio's own errors (errc, wc_errc) and its conditions.
using error_category = std::error_category;
using error_condition = std::error_condition;
namespace detail {
using generic_errc = std::errc;
} // namespace detail
} // namespace rdma_asio

/// Makes `Enum` an error code enum of this flavour (its make_error_code returns
/// rdma_asio::error_code).
#define RDMA_ASIO_DETAIL_ERROR_CODE_ENUM(Enum)                                                     \
    template <>                                                                                    \
    struct std::is_error_code_enum<Enum> : std::true_type {}

#define RDMA_ASIO_DETAIL_CONCURRENCY_HINT_IS_LOCKING(facility, hint)                               \
    ASIO_CONCURRENCY_HINT_IS_LOCKING(facility, hint)
#define RDMA_ASIO_DETAIL_ASIO_VERSION ASIO_VERSION
#if defined(ASIO_NO_TYPEID)
#define RDMA_ASIO_DETAIL_NO_TYPEID 1
#endif

#endif

namespace rdma_asio::detail {

/// Whether the scheduler of `context` locks: an io_context made for one thread
/// with ASIO_CONCURRENCY_HINT_UNSAFE locks nothing, and the event dispatchers on it
/// then lock nothing either. True for an execution context without Asio's
/// scheduler. The library's one use of Asio's internals (asio::detail), here so
/// that no other file depends on them.
inline bool scheduler_locks(asio::execution_context& context) {
    if (!asio::has_service<asio::detail::scheduler>(context))
        return true;
    return RDMA_ASIO_DETAIL_CONCURRENCY_HINT_IS_LOCKING(
        SCHEDULER, asio::use_service<asio::detail::scheduler>(context).concurrency_hint());
}

} // namespace rdma_asio::detail

// clang-format off
// The backend changes what an io_context is made of, so the library and every
// file of the program must agree on it: a mismatch would not fail to link, it
// would corrupt memory at run time.
#if RDMA_ASIO_USE_IO_URING && !RDMA_ASIO_DETAIL_COMPILED_FOR_IO_URING
#error "rdma_asio was built for Asio's io_uring backend: compile every file with ASIO_HAS_IO_URING and ASIO_DISABLE_EPOLL (BOOST_ASIO_... for Boost.Asio); the CMake package and rdma_asio.pc set them"
#elif !RDMA_ASIO_USE_IO_URING && RDMA_ASIO_DETAIL_COMPILED_FOR_IO_URING
#error "rdma_asio was built for Asio's epoll backend, but this file is compiled for io_uring (ASIO_HAS_IO_URING and ASIO_DISABLE_EPOLL): rebuild rdma_asio with -DRDMA_ASIO_IO_URING=ON"
#endif

// Asio's io_uring backend before 1.28.1 sends cancel requests with stale user data
// and reuses descriptors whose wait the kernel still holds (see the io_uring
// section of docs/index.md); the library cancels waits all the time.
#if RDMA_ASIO_DETAIL_COMPILED_FOR_IO_URING && RDMA_ASIO_DETAIL_ASIO_VERSION < 102801
#error "Asio's io_uring backend needs Asio 1.28.1 or later (Boost 1.83) for rdma_asio: build with Asio's epoll backend"
#endif
// clang-format on
