// Test helpers for code built on rdma_asio, for tests on rxe (soft-RoCE) or on real
// hardware: run asynchronous code with a deadline, collect a device's events with
// a bound, connect two QPs of one device to each other, and make a RoCE port raise
// events from inside a test. No test framework is needed; link rdma_asio::testing.
// See docs/testing-your-code.md.
#pragma once

#include "rdma_asio/testing/collect_events.hpp"
#include "rdma_asio/testing/loopback.hpp"
#include "rdma_asio/testing/netdev.hpp"
#include "rdma_asio/testing/run.hpp"
