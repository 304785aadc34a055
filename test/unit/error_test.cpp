#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include <cerrno>
#include <cstring>

namespace error_test {

using rdma_asio::errc;

TEST_CASE("errc values convert to error_code in rdma_asio's category", "[error]") {
    rdma_asio::error_code ec = errc::no_device;
    CHECK(ec.category() == rdma_asio::get_error_category());
    CHECK(std::string(ec.category().name()) == "rdma_asio");
    CHECK(ec.value() == static_cast<int>(errc::no_device));
    CHECK(ec == errc::no_device);
    CHECK(ec != errc::device_not_found);
    CHECK(static_cast<bool>(ec));
}

TEST_CASE("every errc has its own message", "[error]") {
    const errc all[] = {errc::no_kernel_support,
                        errc::no_device,
                        errc::device_not_found,
                        errc::invalid_port,
                        errc::device_removed,
                        errc::no_subnet_manager,
                        errc::sa_request_refused,
                        errc::malformed_mad,
                        errc::events_lost,
                        errc::connection_rejected,
                        errc::peer_unreachable,
                        errc::address_error,
                        errc::route_error,
                        errc::connect_error,
                        errc::disconnected,
                        errc::unexpected_cm_event,
                        errc::completion_queue_in_use,
                        errc::queue_pair_fatal,
                        errc::queue_pair_request_error,
                        errc::queue_pair_access_error,
                        errc::completion_queue_overrun,
                        errc::misaligned_atomic,
                        errc::queue_pair_not_connected,
                        errc::receive_on_shared_queue,
                        errc::address_timeout,
                        errc::connect_timeout,
                        errc::locked_memory_limit};
    std::vector<std::string> seen;
    for (errc e : all) {
        std::string m = make_error_code(e).message();
        CAPTURE(static_cast<int>(e), m);
        CHECK_FALSE(m.empty());
        CHECK(m.find("unknown") == std::string::npos);
        CHECK(std::find(seen.begin(), seen.end(), m) == seen.end());
        seen.push_back(m);
    }
    CHECK(rdma_asio::error_code(999, rdma_asio::get_error_category()).message().find("999") !=
          std::string::npos);
}

TEST_CASE("errc maps to portable conditions", "[error]") {
    CHECK(make_error_code(errc::no_kernel_support) == std::errc::function_not_supported);
    CHECK(make_error_code(errc::no_device) == std::errc::no_such_device);
    CHECK(make_error_code(errc::device_not_found) == std::errc::no_such_device);
    CHECK(make_error_code(errc::invalid_port) == std::errc::invalid_argument);
    CHECK(make_error_code(errc::device_removed) == std::errc::no_such_device);
    CHECK(make_error_code(errc::no_subnet_manager) == std::errc::network_unreachable);
    CHECK(make_error_code(errc::sa_request_refused) == std::errc::permission_denied);
    CHECK(make_error_code(errc::malformed_mad) == std::errc::bad_message);
    CHECK(make_error_code(errc::locked_memory_limit) == std::errc::not_enough_memory);
    CHECK(make_error_code(errc::events_lost) == std::errc::value_too_large);
    CHECK(make_error_code(errc::connection_rejected) == std::errc::connection_refused);
    CHECK(make_error_code(errc::peer_unreachable) == std::errc::host_unreachable);
    CHECK(make_error_code(errc::queue_pair_fatal) == std::errc::io_error);
    CHECK(make_error_code(errc::queue_pair_request_error) == std::errc::io_error);
    CHECK(make_error_code(errc::queue_pair_access_error) == std::errc::permission_denied);
    CHECK(make_error_code(errc::completion_queue_overrun) == std::errc::value_too_large);
    CHECK(make_error_code(errc::misaligned_atomic) == std::errc::invalid_argument);
    CHECK(make_error_code(errc::queue_pair_not_connected) == std::errc::not_connected);
    CHECK(make_error_code(errc::receive_on_shared_queue) == std::errc::operation_not_supported);
}

TEST_CASE("errno codes live in Asio's system category", "[error]") {
    rdma_asio::error_code ec = rdma_asio::detail::errno_code(EAGAIN);
    CHECK(ec.category() == asio::error::get_system_category());
    CHECK(ec == asio::error::would_block);
    // Asio 1.22's system category maps no errno to std::errc conditions: compare
    // errno codes with asio::error values (docs/errors.md).
    CHECK(ec == asio::error::try_again);
    CHECK(rdma_asio::detail::errno_code(ECANCELED) == asio::error::operation_aborted);
    CHECK(ec.message() == std::strerror(EAGAIN));
}

TEST_CASE("last_errno_code never reports success", "[error]") {
    errno = 0;
    CHECK(rdma_asio::detail::last_errno_code() == rdma_asio::detail::errno_code(EIO));
    errno = ENODEV;
    CHECK(rdma_asio::detail::last_errno_code() == asio::error::no_such_device);
}

TEST_CASE("throw_error names the failed call", "[error]") {
    try {
        rdma_asio::detail::throw_error(errc::device_not_found, "ibv_open_device");
        FAIL("throw_error returned");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == errc::device_not_found);
        CHECK(std::string(e.what()).find("ibv_open_device") != std::string::npos);
    }
    CHECK_NOTHROW(rdma_asio::detail::throw_if_error({}, "unused"));
}

} // namespace error_test
