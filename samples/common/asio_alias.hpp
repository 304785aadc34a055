// The samples, tests and benchmarks build with the Asio flavour rdma_asio was built
// for, standalone or Boost (docs/index.md#asio-flavours-and-backends): they write
// `asio::` and `rdma_asio::error_code`, and under Boost.Asio `asio` names boost::asio.
// A program of your own that uses one flavour includes its Asio as usual instead.
#pragma once

#include <rdma_asio/asio.hpp>

#if RDMA_ASIO_USE_BOOST_ASIO
namespace asio = boost::asio;
#endif
