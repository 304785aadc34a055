// Why a registration failed (locked_memory.hpp).
#include "rdma_asio/detail/device/locked_memory.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace rdma_asio::detail {
namespace {

// Whether the process may lock memory past its limit (CAP_IPC_LOCK in its
// effective set, capabilities(7)); false when the kernel does not say.
bool may_lock_without_limit() noexcept {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (::syscall(SYS_capget, &header, data) != 0)
        return false;
    return (data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

} // namespace

error_code registration_error(error_code ec) noexcept {
    if (ec != asio::error::no_memory)
        return ec;
    rlimit limit{};
    if (::getrlimit(RLIMIT_MEMLOCK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
        may_lock_without_limit())
        return ec;
    return errc::locked_memory_limit;
}

} // namespace rdma_asio::detail
