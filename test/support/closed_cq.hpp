// A closed completion_queue's operations through every kind of completion token:
// each completes once, posted, with bad_descriptor (and no completions). Shared by
// the unit test (a CQ never opened) and the rxe test (a CQ closed after use).
#pragma once

#include "each_token.hpp"

#include "asio_alias.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <utility>

namespace rdma_asio::test {

template <class CompletionQueue>
void check_closed_cq_operations(asio::io_context& ioc, CompletionQueue& cq) {
    std::array<ibv_wc, 4> wcs{};
    SECTION("async_poll") {
        each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) { return cq.async_poll(wcs, std::forward<decltype(token)>(token)); },
            asio::error::bad_descriptor);
    }
    SECTION("async_wait") {
        each_token<>::fails_at_once(
            ioc, [&](auto&& token) { return cq.async_wait(std::forward<decltype(token)>(token)); },
            asio::error::bad_descriptor);
    }
}

} // namespace rdma_asio::test
