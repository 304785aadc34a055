// How rdma_asio turns a failed call into an error_code or an exception.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

namespace rdma_asio::detail {

/// errno value `e` in Asio's system category.
error_code errno_code(int e) noexcept;

/// The current errno in Asio's system category. Read it only right after a call
/// that reported failure: verbs calls may leave a stale errno behind on success.
error_code last_errno_code() noexcept;

/// Throws system_error(ec, what); `what` names the call that failed.
[[noreturn]] void throw_error(const error_code& ec, const char* what);

/// Throws when ec is an error.
inline void throw_if_error(const error_code& ec, const char* what) {
    if (ec)
        throw_error(ec, what);
}

} // namespace rdma_asio::detail
