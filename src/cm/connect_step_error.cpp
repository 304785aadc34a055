#include "rdma_asio/detail/cm/connect_step_error.hpp"

#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/error.hpp"

#include <cerrno>

namespace rdma_asio::detail {

namespace {

bool is_errno(const error_code& ec, int value) noexcept {
    return ec == errno_code(value);
}

bool is_timeout(const error_code& ec) noexcept {
    return is_errno(ec, ETIMEDOUT);
}

bool no_device_reaches(const error_code& ec) noexcept {
    return ec == make_error_code(errc::address_error) || is_errno(ec, ENETUNREACH) ||
           is_errno(ec, EHOSTUNREACH) || is_errno(ec, EADDRNOTAVAIL) || is_errno(ec, ENODEV);
}

} // namespace

error_code connect_step_error(connect_step step, error_code ec) noexcept {
    switch (step) {
    case connect_step::resolve_address:
        if (is_timeout(ec))
            return make_error_code(errc::address_timeout);
        if (no_device_reaches(ec))
            return make_error_code(errc::address_error);
        break;
    case connect_step::resolve_route:
        if (is_timeout(ec) || no_device_reaches(ec) || ec == make_error_code(errc::route_error))
            return make_error_code(errc::route_error);
        break;
    case connect_step::connect:
        if (is_timeout(ec) || ec == make_error_code(errc::peer_unreachable))
            return make_error_code(errc::connect_timeout);
        break;
    case connect_step::resolve_host:
    case connect_step::make_connection:
        break;
    }
    return ec;
}

bool names_its_step(const error_code& ec) noexcept {
    for (errc e : {errc::address_error, errc::address_timeout, errc::route_error,
                   errc::connect_timeout, errc::connection_rejected})
        if (ec == make_error_code(e))
            return true;
    return false;
}

} // namespace rdma_asio::detail
