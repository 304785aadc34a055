// The whole Asio that rdma_asio was built for: standalone Asio or Boost.Asio, as
// rdma_asio/config.hpp records. For programs that build with either flavour
// (rdma_asio's own samples and tests do): include this instead of Asio's headers
// and write rdma_asio::asio and rdma_asio::error_code, or alias them.
//
//   #include <rdma_asio/asio.hpp>
//   #if RDMA_ASIO_USE_BOOST_ASIO
//   namespace asio = boost::asio;
//   #endif
//
// A program written for one flavour needs none of this: it includes its Asio as it
// always does, and rdma_asio's completion signatures carry that flavour's
// error_code.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

// This header brings Asio's coroutines (asio::awaitable, use_awaitable, the
// awaitable operators): one error naming the flag when this Asio has not enabled
// them, rather than many in Asio's headers.
#if RDMA_ASIO_USE_BOOST_ASIO ? !defined(BOOST_ASIO_HAS_CO_AWAIT) : !defined(ASIO_HAS_CO_AWAIT)
#error                                                                                             \
    "rdma_asio/asio.hpp needs Asio's coroutine support, which is off: with clang and Asio 1.22 add -DASIO_HAS_CO_AWAIT=1 (Boost.Asio: -DBOOST_ASIO_HAS_CO_AWAIT=1); with g++ compile with -std=c++20"
#include <rdma_asio: stopped here, see the error above>
#endif

#if RDMA_ASIO_USE_BOOST_ASIO
#include <boost/asio.hpp>
#include <boost/asio/experimental/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/experimental/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#else
#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/channel.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#endif
