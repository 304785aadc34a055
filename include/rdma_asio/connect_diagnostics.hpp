// What a connect tells beyond its error code: each address it tried, the step
// that address failed in, and the error.
//
// Why a separate object: an error_code is a number and a category, so its
// message() cannot name the address that failed, and over a host name's addresses
// the error is the last address's alone. A program that wants to say "10.0.0.99
// port 7000: resolving the address timed out ..." hands async_connect one of these
// through connect_options::diagnostics, as Boost.MySQL's operations take a
// diagnostics object beside their error_code.
#pragma once

#include "rdma_asio/connect_step.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace rdma_asio {

namespace detail {
struct connect_diagnostics_access;
} // namespace detail

/// What one async_connect tried and how each try failed (connect_options::diagnostics).
/// A connect empties it as it starts and writes it before it completes; read it
/// after the completion handler has been called, not while the connect runs.
class connect_diagnostics {
public:
    /// One address that failed, or the host name's lookup.
    struct failure {
        /// The address and port tried; for connect_step::resolve_host, none.
        asio::ip::tcp::endpoint endpoint;
        connect_step step = connect_step::resolve_address;
        error_code error;
    };

    /// Every failure of the last connect, in the order the addresses were tried.
    /// A connect that succeeded keeps those of the addresses it tried before.
    const std::vector<failure>& failures() const noexcept { return failures_; }

    /// The host and service of a connect by host name; empty for one by endpoint.
    const std::string& host() const noexcept { return host_; }
    const std::string& service() const noexcept { return service_; }

    /// One line per failure: the address and port, the step (unless the error's
    /// message names it already, as the step's own errc values do) and the error's
    /// message: "10.0.0.99 port 7000: resolving the address timed out
    /// (rdma_resolve_addr): ...", "10.0.0.1 port 7000: making the connection: Cannot
    /// allocate memory"; "looking up the host kvhost, service 7000: ..." for a host
    /// name that did not resolve. Empty when nothing failed.
    std::string message() const;

    /// Forgets everything: what a connect does as it starts.
    void clear() noexcept;

private:
    friend struct detail::connect_diagnostics_access; // the connect writes here

    void add(connect_step step, const asio::ip::tcp::endpoint& endpoint, const error_code& error);
    void looking_up(std::string_view host, std::string_view service);

    std::vector<failure> failures_;
    std::string host_;
    std::string service_;
};

} // namespace rdma_asio
