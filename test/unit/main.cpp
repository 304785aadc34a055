// Unit test runner. With RDMA_ASIO_FAKE_SYSFS=absent|empty it first points
// libibverbs at an imitation sysfs (SYSFS_PATH), so the no-device paths can be
// tested on any host:
//   absent: no class/infiniband_verbs at all, as on a kernel without RDMA;
//   empty:  the uverbs ABI version file but no device.
// libibverbs reads SYSFS_PATH once per process, hence one process per layout.
#include "catch_session.hpp"
#include "source_dir.hpp"
#include "test_device.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

bool host_has_uverbs_devices() {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/sys/class/infiniband_verbs", ec))
        if (entry.path().filename().string().starts_with("uverbs"))
            return true;
    return false;
}

fs::path make_fake_sysfs(const std::string& kind) {
    std::string pattern = (fs::temp_directory_path() / "rdma_asio-sysfs.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
        throw std::runtime_error("mkdtemp failed");
    fs::path root = pattern;
    if (kind == "empty") {
        // rdma-core enumerates through netlink first; a host with real devices
        // would list them whatever SYSFS_PATH says.
        if (host_has_uverbs_devices()) {
            fs::remove_all(root);
            rdma_asio::test::skip_process(
                "this host has RDMA devices, so an empty device list cannot be imitated");
        }
        fs::create_directories(root / "class/infiniband_verbs");
        std::ofstream(root / "class/infiniband_verbs/abi_version") << "6\n";
    } else if (kind != "absent") {
        throw std::runtime_error("RDMA_ASIO_FAKE_SYSFS must be 'absent' or 'empty'");
    }
    return root;
}

} // namespace

const char* rdma_asio::test::source_dir() noexcept {
    return RDMA_ASIO_SOURCE_DIR;
}

int main(int argc, char* argv[]) {
    fs::path fake;
    if (const char* kind = std::getenv("RDMA_ASIO_FAKE_SYSFS")) {
        fake = make_fake_sysfs(kind);
        setenv("SYSFS_PATH", fake.c_str(), 1);
    }
    int rc = rdma_asio::test::run_catch_session(argc, argv);
    if (!fake.empty())
        fs::remove_all(fake);
    return rc;
}
