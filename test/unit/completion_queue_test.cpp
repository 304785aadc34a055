#include "rdma_asio/completion_queue.hpp"

#include <catch2/catch.hpp>

#include <asio/error.hpp>
#include <asio/io_context.hpp>

TEST_CASE("cq_options default to batched acks and no spinning", "[completion_queue]") {
    rdma_asio::cq_options options;
    CHECK(options.ack_batch == 64);
    CHECK_FALSE(options.solicited_only);
    CHECK(options.spin.mode == rdma_asio::spin_budget::kind::off);
}

TEST_CASE("a channel needs an open context", "[completion_queue]") {
    asio::io_context ioc;
    rdma_asio::context closed;
    try {
        rdma_asio::completion_channel channel(ioc, closed);
        FAIL("a channel opened on a closed context");
    } catch (const std::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("completion_channel") != std::string::npos);
    }
}

TEST_CASE("counters of a closed CQ and channel are zero", "[completion_queue]") {
    rdma_asio::cq_counters c;
    CHECK(c.events == 0);
    CHECK(c.ack_calls == 0);
    rdma_asio::channel_counters cc;
    CHECK(cc.events == 0);
}
