// What a failed connect attempt reports: the step it failed in, as the error's
// own value, so that ec.message() tells a user where to look.
//
// rdma_cm reports the same cause differently at each step, and the same errno
// for causes at different steps: ETIMEDOUT comes from an address resolution that
// no neighbour answered (RDMA_CM_EVENT_ADDR_ERROR with status -ETIMEDOUT, the
// ARP or neighbour discovery on the device's network), from a route resolution,
// and from a connection request the peer never answered (after rdma_cm's
// retries). A user shown "Connection timed out" cannot tell "no host has that
// address" from "a host that does not answer RDMA"; one shown "Network is
// unreachable" (rdma_resolve_addr(3) failing at once: the kernel's route to the
// address leaves by an interface no RDMA device is on) cannot tell it from a TCP
// error. So async_connect gives each step's network failures one errc value of
// that step, whose message names the call and the likely cause:
//
//   resolving the address: a timeout is address_timeout; no device reaching the
//     address (ADDR_ERROR, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, ENODEV) is
//     address_error;
//   resolving the route: route_error, whatever the cause;
//   connecting: a timeout or UNREACHABLE is connect_timeout; REJECTED stays
//     connection_rejected (nobody listens, or the listener refused).
//
// The host name's lookup is Asio's resolver's, whose errors (host_not_found,
// service_not_found) say what they say already.
//
// Anything else (operation_aborted, ENOMEM, EMFILE, EINVAL, a queue the device
// refused while the connection was made) says what it says already and is kept.
// The portable conditions stay those a TCP user tests: timed_out for both
// timeouts, host_unreachable for a route, address_not_available for an address.
#pragma once

#include "rdma_asio/connect_step.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

namespace rdma_asio::detail {

/// The error async_connect reports for `ec`, an attempt's failure at `step`.
error_code connect_step_error(connect_step step, error_code ec) noexcept;

/// Whether `ec` is one of the errors above that name their step in their own
/// message (connection_rejected among them), so that a line of
/// connect_diagnostics need not name the step again.
bool names_its_step(const error_code& ec) noexcept;

} // namespace rdma_asio::detail
