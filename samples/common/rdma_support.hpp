// What every sample that needs an RDMA device says when the kernel has no RDMA
// support at all, rather than the error of whichever call it made first
// ("rdma_create_event_channel: No such device", ...).
#pragma once

#include <string>
#include <string_view>

namespace sample {

/// Whether the running kernel has RDMA support as libibverbs sees it: the uverbs
/// ABI in sysfs (/sys/class/infiniband_verbs, made by the ib_uverbs module).
/// rdma_asio::device_list answers errc::no_kernel_support without it.
bool kernel_has_rdma();

/// "PROGRAM: this kernel has no RDMA support ...", with what to do about it.
std::string no_rdma_message(std::string_view program);

/// True when the kernel has RDMA support; otherwise prints no_rdma_message on
/// stderr and returns false, and the sample exits with status 1. Called after the
/// command line is parsed, so that --help and usage errors do not need RDMA.
bool require_rdma(std::string_view program);

} // namespace sample
