// A queue_pair without a device: the I/O object's shape and its refusals. Its
// work requests on a device: test/rxe/queue_pair_rxe_test.cpp.
#include "rdma_asio/detail/core/op_block_cache.hpp"
#include "rdma_asio/queue_pair.hpp"
#include "rdma_asio/shared_receive_queue.hpp"

#include <catch2/catch.hpp>

#include "each_token.hpp"

#include "asio_alias.hpp"

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <type_traits>

namespace queue_pair_test {

using rdma_asio::test::each_token;

static_assert(!std::is_copy_constructible_v<rdma_asio::queue_pair>);
static_assert(std::is_nothrow_move_constructible_v<rdma_asio::queue_pair>);
static_assert(
    std::is_same_v<rdma_asio::queue_pair::rebind_executor<asio::io_context::executor_type>::other,
                   rdma_asio::basic_queue_pair<asio::io_context::executor_type>>);

namespace {

// A callback that keeps a pointer to its owner, as most do.
struct owner_callback {
    void* owner;
    void operator()(rdma_asio::error_code, std::size_t) const {}
};

template <class Handler, class Value = std::size_t>
constexpr std::size_t operation_size =
    sizeof(rdma_asio::detail::qp_handler_op<Handler, asio::any_io_executor, Value>);

} // namespace

TEST_CASE("a queue pair's operation fits a block of the operation cache, with a callback and "
          "with a coroutine's handler",
          "[queue_pair]") {
    // An operation larger than a block bypasses the cache: an operator new and an
    // operator delete per operation (as happened once operations grew past 512
    // bytes, unnoticed: about 430 instructions per operation in qp_throughput).
    using awaitable_handler =
        asio::async_result<asio::use_awaitable_t<>,
                           void(rdma_asio::error_code, std::size_t)>::handler_type;
    using awaitable_atomic_handler =
        asio::async_result<asio::use_awaitable_t<>,
                           void(rdma_asio::error_code, std::uint64_t)>::handler_type;
    constexpr std::size_t block = rdma_asio::detail::op_block_cache::block_size;
    CHECK(operation_size<owner_callback> <= block);
    CHECK(operation_size<awaitable_handler> <= block);
    CHECK(operation_size<awaitable_atomic_handler, std::uint64_t> <= block);
}

TEST_CASE("a queue_pair that is not open refuses its operations with bad_descriptor",
          "[queue_pair]") {
    asio::io_context ioc;
    rdma_asio::queue_pair qp(ioc.get_executor());
    CHECK_FALSE(qp.is_open());
    CHECK(qp.native_handle() == nullptr);
    std::array<std::byte, 16> bytes{};
    rdma_asio::registered_buffer buffer{bytes.data(), bytes.size(), 0};
    SECTION("async_send") {
        each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return qp.async_send(buffer, std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    SECTION("async_receive with receive_info") {
        rdma_asio::receive_info info;
        each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return qp.async_receive(buffer, info, std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    SECTION("async_write and async_read") {
        each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return qp.async_write(buffer, rdma_asio::remote_buffer{},
                                      std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    SECTION("async_write with immediate data") {
        each_token<std::size_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return qp.async_write(buffer, rdma_asio::remote_buffer{},
                                      rdma_asio::immediate_data{1},
                                      std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    SECTION("async_fetch_add") {
        each_token<std::uint64_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return qp.async_fetch_add(buffer, rdma_asio::remote_buffer{}, 1,
                                          std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    SECTION("async_compare_swap") {
        each_token<std::uint64_t>::fails_at_once(
            ioc,
            [&](auto&& token) {
                return qp.async_compare_swap(buffer, rdma_asio::remote_buffer{}, 1, 2,
                                             std::forward<decltype(token)>(token));
            },
            asio::error::bad_descriptor);
    }
    qp.cancel(); // harmless
    qp.close();
}

// What an operation carries to its post, and what it refuses before posting: an
// atomic needs 8-byte alignment on both sides and 8 bytes for its result.
TEST_CASE("an atomic request is refused unless both addresses are 8-byte aligned and its result "
          "fits",
          "[queue_pair][atomic]") {
    alignas(8) std::array<std::byte, 24> bytes{};
    auto request = [&](std::size_t offset, std::size_t size, std::uint64_t remote) {
        rdma_asio::detail::qp_request r;
        r.set_buffers(rdma_asio::registered_buffer{bytes.data() + offset, size, 0x11});
        r.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        r.remote = rdma_asio::remote_buffer{remote, 8, 0x22};
        r.compare_add = 3;
        return r;
    };
    const rdma_asio::error_code misaligned = rdma_asio::errc::misaligned_atomic;
    CHECK_FALSE(request(0, 16, 0x1000).refusal());
    CHECK(request(0, 16, 0x1004).refusal() == misaligned); // the remote address
    CHECK(request(4, 16, 0x1000).refusal() == misaligned); // the result buffer
    CHECK(request(8, 4, 0x1000).refusal() == misaligned);  // a result buffer too short
    rdma_asio::detail::qp_request swap = request(8, 8, 0x1008);
    swap.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    CHECK_FALSE(swap.refusal());
    swap.remote.address = 0x1001;
    CHECK(swap.refusal() == misaligned);
    // Other verbs have no such rule: a write may start anywhere.
    rdma_asio::detail::qp_request write = request(4, 5, 0x1003);
    write.opcode = IBV_WR_RDMA_WRITE;
    CHECK_FALSE(write.refusal());

    // The result takes the first 8 bytes of a longer buffer.
    struct operation final : rdma_asio::detail::qp_operation {
        operation() : qp_operation(rdma_asio::detail::work_queue::send) {}
        void complete(rdma_asio::detail::delivery) override {}
        void destroy() noexcept override {}
    } op;
    request(0, 16, 0x1000).fill(op);
    CHECK(op.is_atomic());
    CHECK(op.sge_count == 1);
    CHECK(op.sges[0].length == 8);
    CHECK(op.length == 8);
    CHECK(op.sges[0].lkey == 0x11);
    CHECK(op.remote_address == 0x1000);
    CHECK(op.rkey == 0x22);
    CHECK(op.compare_add == 3);
}

TEST_CASE("a queue_pair refuses a null QP and CQs that are not open", "[queue_pair]") {
    asio::io_context ioc;
    rdma_asio::queue_pair qp(ioc.get_executor());
    rdma_asio::completion_queue cq(ioc.get_executor());
    rdma_asio::error_code ec;
    qp.assign(static_cast<ibv_qp*>(nullptr), cq, cq, ec);
    CHECK(ec == asio::error::invalid_argument);
    CHECK_FALSE(qp.is_open());
    qp.assign(static_cast<rdma_cm_id*>(nullptr), cq, cq, ec);
    CHECK(ec == asio::error::invalid_argument);
    CHECK_FALSE(qp.is_open());
    rdma_asio::protection_domain pd;
    qp.open(pd, cq, cq, {}, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(qp.is_open());
    // The throwing overloads name the call, with the same code.
    auto throws = [](auto&& call, rdma_asio::error_code expected, const char* name) {
        try {
            call();
            FAIL("no exception");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == expected);
            CHECK(std::string(e.what()).find(name) != std::string::npos);
        }
    };
    throws([&] { qp.assign(static_cast<ibv_qp*>(nullptr), cq, cq); }, asio::error::invalid_argument,
           "rdma_asio::queue_pair::assign");
    throws([&] { qp.assign(static_cast<rdma_cm_id*>(nullptr), cq, cq); },
           asio::error::invalid_argument, "rdma_asio::queue_pair::assign");
    throws([&] { qp.open(pd, cq, cq); }, asio::error::bad_descriptor, "ibv_create_qp");
    // The shared receive queue's assign has its throwing twin too: a closed SRQ.
    rdma_asio::shared_receive_queue srq(ioc.get_executor());
    qp.assign(static_cast<rdma_cm_id*>(nullptr), cq, cq, srq, ec);
    CHECK(ec == asio::error::bad_descriptor);
    throws([&] { qp.assign(static_cast<rdma_cm_id*>(nullptr), cq, cq, srq); },
           asio::error::bad_descriptor, "rdma_asio::queue_pair::assign");
    CHECK_FALSE(qp.is_open());
}

TEST_CASE("a queue_pair moves between executor types as Asio's objects do", "[queue_pair]") {
    asio::io_context ioc;
    rdma_asio::basic_queue_pair<asio::io_context::executor_type> typed(ioc.get_executor());
    rdma_asio::queue_pair erased(std::move(typed));
    CHECK(erased.get_executor() == asio::any_io_executor(ioc.get_executor()));
    auto strand = asio::make_strand(ioc);
    rdma_asio::basic_queue_pair<decltype(strand)> on_strand(strand);
    CHECK(on_strand.get_executor() == strand);
}

TEST_CASE("a list of buffers becomes one work request's scatter/gather list, empty ones left out",
          "[queue_pair][sge]") {
    std::array<std::byte, 64> bytes{};
    auto at = [&](std::size_t offset, std::size_t size) {
        return rdma_asio::registered_buffer{bytes.data() + offset, size,
                                            static_cast<std::uint32_t>(offset)};
    };
    struct operation final : rdma_asio::detail::qp_operation {
        operation() : qp_operation(rdma_asio::detail::work_queue::send) {}
        void complete(rdma_asio::detail::delivery) override {}
        void destroy() noexcept override {}
    } op;
    const std::array list{at(0, 5), at(8, 0), at(16, 7), at(32, 9)};
    rdma_asio::detail::qp_request r;
    r.set_buffers(list);
    CHECK_FALSE(r.refusal());
    r.fill(op);
    REQUIRE(op.sge_count == 3);
    CHECK(op.sges[0].lkey == 0);
    CHECK(op.sges[1].lkey == 16);
    CHECK(op.sges[2].lkey == 32);
    CHECK(op.sges[2].length == 9);
    CHECK(op.length == 21);

    // More than an operation carries: refused before posting.
    const std::array five{at(0, 1), at(1, 1), at(2, 1), at(3, 1), at(4, 1)};
    r.set_buffers(five);
    CHECK(r.refusal() ==
          rdma_asio::detail::errno_code(E2BIG)); // as every errno the library reports
    // An empty buffer: a work request without data.
    rdma_asio::detail::qp_request none;
    none.set_buffers(at(0, 0));
    CHECK_FALSE(none.refusal());
    none.fill(op);
    CHECK(op.sge_count == 0);
    CHECK(op.length == 0);
}

} // namespace queue_pair_test
