// What a failed registration's ENOMEM means. The kernel pins the pages of every
// registration and refuses one (ibv_reg_mr(3): ENOMEM) that would take the
// process's pinned pages past RLIMIT_MEMLOCK, unless the process may lock memory
// without limit (CAP_IPC_LOCK). Under a finite limit that is by far the likely
// cause, and the errno alone ("Cannot allocate memory") does not name it; with
// no limit, or with CAP_IPC_LOCK, it cannot be, and the errno stays.
#pragma once

#include "rdma_asio/error.hpp"

namespace rdma_asio::detail {

/// errc::locked_memory_limit for ENOMEM while RLIMIT_MEMLOCK is finite and the
/// process lacks CAP_IPC_LOCK, else `ec`.
error_code registration_error(error_code ec) noexcept;

} // namespace rdma_asio::detail
