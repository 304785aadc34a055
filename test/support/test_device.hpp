// What the tests share: which device the rxe tests use and how a test reports
// that it could not run.
#pragma once

#include <string>

namespace rdma_asio::test {

/// Exit status that ctest reports as "skipped" (SKIP_RETURN_CODE).
inline constexpr int skip_exit_code = 77;

/// The device the rxe tests use: $RDMA_ASIO_TEST_DEVICE, default "rxe0".
std::string test_device_name();

/// True when a missing device is a failure rather than a reason to skip: inside
/// the test VM, or when RDMA_ASIO_REQUIRE_DEVICE is set.
bool device_required();

/// The imitation sysfs layout this unit test process runs on ($RDMA_ASIO_FAKE_SYSFS:
/// "absent", "empty"), or "" for the real one.
std::string fake_sysfs_kind();

/// Exits the process with skip_exit_code after saying why on stderr.
[[noreturn]] void skip_process(const std::string& reason);

} // namespace rdma_asio::test
