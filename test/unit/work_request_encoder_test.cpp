// How an operation becomes its work request, without a device: each field as
// ibv_post_send(3) and ibv_post_recv(3) read it.
#include "rdma_asio/detail/qp/work_request_encoder.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>

#include <array>
#include <cstdint>

namespace work_request_encoder_test {

using rdma_asio::detail::fence_request;
using rdma_asio::detail::qp_operation;
using rdma_asio::detail::receive_request;
using rdma_asio::detail::send_posting;
using rdma_asio::detail::send_request;
using rdma_asio::detail::work_queue;

namespace {

// An operation with no handler: what the encoder reads of it.
struct bare_op final : qp_operation {
    explicit bare_op(work_queue q) : qp_operation(q) {
        wr_id = 0x1234;
        sges[0] = ibv_sge{0x1000, 64, 7};
        sges[1] = ibv_sge{0x2000, 32, 8};
        sge_count = 2;
        length = 96;
    }
    void complete(rdma_asio::detail::delivery) override {}
    void destroy() noexcept override {}
};

} // namespace

TEST_CASE("a send carries its operation's list, opcode and wr_id, signaled unless told",
          "[work_request_encoder]") {
    bare_op op(work_queue::send);
    op.opcode = IBV_WR_SEND;
    ibv_send_wr wr = send_request(op, send_posting{});
    CHECK(wr.wr_id == 0x1234);
    CHECK(wr.opcode == IBV_WR_SEND);
    CHECK(wr.sg_list == op.sges.data()); // the operation's own list, not a copy
    CHECK(wr.num_sge == 2);
    CHECK(wr.send_flags == IBV_SEND_SIGNALED);
    CHECK(wr.next == nullptr);

    wr = send_request(op, send_posting{false, false, nullptr});
    CHECK(wr.send_flags == 0); // unsignaled: ends with the next completion
    wr = send_request(op, send_posting{true, true, nullptr});
    CHECK(wr.send_flags == (IBV_SEND_SIGNALED | IBV_SEND_INLINE));
}

TEST_CASE("an immediate travels in network byte order", "[work_request_encoder]") {
    bare_op op(work_queue::send);
    op.opcode = IBV_WR_SEND_WITH_IMM;
    op.immediate = 0x01020304;
    const ibv_send_wr wr = send_request(op, send_posting{});
    CHECK(wr.imm_data == htonl(0x01020304));
    const auto* bytes = reinterpret_cast<const unsigned char*>(&wr.imm_data);
    CHECK(bytes[0] == 0x01); // big-endian in memory, whatever the host's order
    CHECK(bytes[3] == 0x04);
}

TEST_CASE("an RDMA operation names the remote memory and key", "[work_request_encoder]") {
    bare_op op(work_queue::send);
    op.opcode = IBV_WR_RDMA_WRITE;
    op.remote_address = 0xabcdef00;
    op.rkey = 99;
    const ibv_send_wr wr = send_request(op, send_posting{});
    CHECK(wr.opcode == IBV_WR_RDMA_WRITE);
    CHECK(wr.wr.rdma.remote_addr == 0xabcdef00);
    CHECK(wr.wr.rdma.rkey == 99);
}

TEST_CASE("an atomic carries its operands", "[work_request_encoder]") {
    bare_op op(work_queue::send);
    op.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    op.remote_address = 0x8000;
    op.rkey = 5;
    op.compare_add = 11;
    op.swap = 22;
    const ibv_send_wr wr = send_request(op, send_posting{});
    CHECK(wr.wr.atomic.remote_addr == 0x8000);
    CHECK(wr.wr.atomic.rkey == 5);
    CHECK(wr.wr.atomic.compare_add == 11);
    CHECK(wr.wr.atomic.swap == 22);
}

TEST_CASE("a UD send names its address handle, QP number and Q_Key", "[work_request_encoder]") {
    bare_op op(work_queue::send);
    op.opcode = IBV_WR_SEND;
    op.peer.qp_num = 0x42;
    op.peer.qkey = 0x11111111;
    op.remote_address = 0x8000; // an RC field: the union holds the UD ones instead
    auto* ah = reinterpret_cast<ibv_ah*>(std::uintptr_t{0x5000});
    const ibv_send_wr wr = send_request(op, send_posting{true, false, ah});
    CHECK(wr.wr.ud.ah == ah);
    CHECK(wr.wr.ud.remote_qpn == 0x42);
    CHECK(wr.wr.ud.remote_qkey == 0x11111111);
}

TEST_CASE("a receive takes the list it is given", "[work_request_encoder]") {
    bare_op op(work_queue::receive);
    ibv_recv_wr wr = receive_request(op, std::span(op.sges.data(), op.sge_count));
    CHECK(wr.wr_id == 0x1234);
    CHECK(wr.sg_list == op.sges.data());
    CHECK(wr.num_sge == 2);
    CHECK(wr.next == nullptr);
    // A UD receive: the GRH's slot in front of the operation's entries.
    std::array<ibv_sge, 3> with_grh{ibv_sge{0x9000, 40, 3}, op.sges[0], op.sges[1]};
    wr = receive_request(op, with_grh);
    CHECK(wr.sg_list == with_grh.data());
    CHECK(wr.num_sge == 3);
}

TEST_CASE("the fence is a signaled zero-length RDMA write", "[work_request_encoder]") {
    const ibv_send_wr wr = fence_request(77);
    CHECK(wr.wr_id == 77);
    CHECK(wr.opcode == IBV_WR_RDMA_WRITE);
    CHECK(wr.send_flags == IBV_SEND_SIGNALED);
    CHECK(wr.num_sge == 0);
    CHECK(wr.sg_list == nullptr);
}

} // namespace work_request_encoder_test
