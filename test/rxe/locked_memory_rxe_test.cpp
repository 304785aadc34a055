// Streams under a locked-memory limit. The tests run as root in the test VM, and
// root's CAP_IPC_LOCK lifts the limit, so the streams are opened by a program of
// their own (locked_memory_child.cpp) that gives the capability up and sets
// RLIMIT_MEMLOCK, as a user's process or a service under systemd's LimitMEMLOCK
// has them. Every wait, the child's included, is bounded.
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "child_process.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace locked_memory_rxe_test {

using namespace std::chrono_literals;

namespace {

// The key=value lines of `path`, and the whole text.
std::map<std::string, std::string> read_figures(const std::string& path, std::string& text) {
    std::ifstream in(path);
    std::map<std::string, std::string> figures;
    std::ostringstream all;
    for (std::string line; std::getline(in, line);) {
        all << line << "\n";
        const auto eq = line.find('=');
        if (eq != std::string::npos)
            figures[line.substr(0, eq)] = line.substr(eq + 1);
    }
    text = all.str();
    return figures;
}

} // namespace

TEST_CASE("streams under a locked-memory limit: as many open as it holds, the next one ends "
          "with locked_memory_limit naming it, and none stays pinned once they are destroyed",
          "[stream][locked_memory]") {
    const std::size_t page_kib = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) / 1024;
    // Both ends of a pair in the child, with the default options: four 256 KiB rings
    // (each end's own and its copy of the peer's) and four pages more (docs/stream.md).
    const std::size_t pair_kib = 4 * 256 + 4 * page_kib;
    const std::size_t limit_kib = 4096;
    char path[] = "/tmp/rdma_asio_locked_memory_XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    ::close(fd);
    const std::string limit = std::to_string(limit_kib);
    const char* argv[] = {RDMA_ASIO_LOCKED_MEMORY_CHILD, limit.c_str(), "18920", path, nullptr};
    const pid_t pid = rdma_asio::test::spawn(argv);
    REQUIRE(pid > 0);
    const rdma_asio::test::exit_result child = rdma_asio::test::wait_exit(pid, 240s);
    std::string text;
    auto figures = read_figures(path, text);
    std::remove(path);
    INFO("locked_memory_child " << child.describe() << ", wrote:\n" << text);
    REQUIRE(child.ok());
    CHECK(figures["opened"] == std::to_string(limit_kib / pair_kib));
    // The pair that did not fit: its first error names the limit.
    CHECK(figures["error_category"] == "rdma_asio");
    CHECK(figures["error_value"] ==
          std::to_string(static_cast<int>(rdma_asio::errc::locked_memory_limit)));
    CHECK(figures["error_message"].find("ulimit -l") != std::string::npos);
    // Destroyed: nothing stays pinned, and a pair fits again.
    CHECK(figures["pinned_kib_closed"] == "0");
    CHECK(figures["reopened"] == "yes");
}

} // namespace locked_memory_rxe_test
