// The project's tests run their coroutines with the installed helper
// (rdma_asio/testing/run.hpp): a missed deadline throws, which fails the test.
#pragma once

#include "rdma_asio/testing/run.hpp"

namespace rdma_asio::test {

using rdma_asio::testing::run_coroutine;

} // namespace rdma_asio::test
