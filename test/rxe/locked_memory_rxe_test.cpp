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

// What locked_memory_child wrote, run with `first` (the limit in KiB, or a mode)
// on `port` with `ring_kib` (empty: the default options); the child's outcome
// in `child`.
std::map<std::string, std::string> run_child(const std::string& first, const char* port,
                                             const char* ring_kib, std::string& text,
                                             rdma_asio::test::exit_result& child) {
    char path[] = "/tmp/rdma_asio_locked_memory_XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    ::close(fd);
    const char* argv[] = {
        RDMA_ASIO_LOCKED_MEMORY_CHILD, first.c_str(), port, path, ring_kib, nullptr};
    const pid_t pid = rdma_asio::test::spawn(argv);
    REQUIRE(pid > 0);
    child = rdma_asio::test::wait_exit(pid, 240s);
    auto figures = read_figures(path, text);
    std::remove(path);
    return figures;
}

const std::size_t page_kib = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) / 1024;

// Runs the child under `limit_kib` (on `port`, with rings of `ring_kib` from the
// start, or the default options when null), whose pairs each pin `pair_kib`: as
// many open as the limit holds; the pair that did not fit has a first error that
// names the limit; once destroyed, nothing stays pinned, and a pair fits again.
void check_pairs_up_to_the_limit(std::size_t limit_kib, std::size_t pair_kib, const char* port,
                                 const char* ring_kib) {
    std::string text;
    rdma_asio::test::exit_result child;
    auto figures = run_child(std::to_string(limit_kib), port, ring_kib, text, child);
    INFO("locked_memory_child " << child.describe() << ", wrote:\n" << text);
    REQUIRE(child.ok());
    CHECK(figures["opened"] == std::to_string(limit_kib / pair_kib));
    CHECK(figures["error_category"] == "rdma_asio");
    CHECK(figures["error_value"] ==
          std::to_string(static_cast<int>(rdma_asio::errc::locked_memory_limit)));
    CHECK(figures["error_message"].find("ulimit -l") != std::string::npos);
    CHECK(figures["pinned_kib_closed"] == "0");
    CHECK(figures["reopened"] == "yes");
}

} // namespace

TEST_CASE("streams under a locked-memory limit: as many open as it holds, the next one ends "
          "with locked_memory_limit naming it, and none stays pinned once they are destroyed",
          "[stream][locked_memory]") {
    // Both ends of a pair in the child, with rings of 256 KiB from the start: four
    // rings (each end's own and its copy of the peer's) and four pages more
    // (docs/stream.md).
    check_pairs_up_to_the_limit(4096, 4 * 256 + 4 * page_kib, "18920", "256");
}

// Rings that start small: Linux's default limit for a user holds hundreds of
// streams (issue 70's target: at least 300 in one process).
TEST_CASE("streams with the default options under an 8 MiB locked-memory limit: each end holds "
          "four pages, and 512 ends open in one process",
          "[stream][locked_memory]") {
    // Each end: its 4 KiB ring, its copy of the peer's, and two pages more.
    check_pairs_up_to_the_limit(8192, 2 * (4 + 4 + 2 * page_kib), "18921", nullptr);
}

// The writer's side of a ring's growth at the limit: the reader registered a
// larger ring, the writer could not register its copy. The writer says so in
// its next record and the reader lets that ring go (before, it kept it for
// good); it tries again only after its next look.
TEST_CASE("a ring whose copy the peer's writer cannot register at the limit is let go, and every "
          "byte arrives through the ring before",
          "[stream][locked_memory]") {
    std::string text;
    rdma_asio::test::exit_result child;
    auto figures = run_child("refused-copy", "18922", nullptr, text, child);
    INFO("locked_memory_child " << child.describe() << ", wrote:\n" << text);
    REQUIRE(child.ok());
    CHECK(figures["intact"] == "yes");
    // The reader's ring of 8 KiB was registered (seen between reads), and its
    // copy was not: nothing of it stays.
    CHECK(figures["pinned_kib_most"] == std::to_string(std::stoul(figures["pinned_kib_open"]) + 8));
    CHECK(figures["pinned_kib_after"] == figures["pinned_kib_open"]);
}

} // namespace locked_memory_rxe_test
