#include "rdma_asio/completion_channel.hpp"

#include <catch2/catch.hpp>

#include <asio/io_context.hpp>

#include <type_traits>

TEST_CASE("a completion channel is a move-only I/O object", "[completion_channel]") {
    using channel = rdma_asio::completion_channel;
    STATIC_REQUIRE(std::is_nothrow_move_constructible_v<channel>);
    STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<channel>);
    STATIC_REQUIRE(std::is_same_v<channel::executor_type, asio::any_io_executor>);
    STATIC_REQUIRE(std::is_constructible_v<channel, asio::io_context&, const rdma_asio::context&>);
}
