// rxe0's port counters (/sys/class/infiniband/rxe0/ports/1/hw_counters), read
// after the counters' lifespan has passed, so that they include what just
// happened: e.g. send_rnr_err, the RNR NAKs rxe0 answered a message that found
// no receive posted. And the process's pinned memory, which memory registrations
// on rxe0 hold, and its objects as the kernel lists them (rdma-resource(8)).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <unistd.h>

namespace rdma_asio::test {

inline std::uint64_t rxe0_counter(const std::string& name) {
    const std::string dir = "/sys/class/infiniband/rxe0/ports/1/hw_counters/";
    long lifespan_ms = 10;
    if (std::ifstream lifespan(dir + "lifespan"); lifespan)
        lifespan >> lifespan_ms;
    std::this_thread::sleep_for(std::chrono::milliseconds(lifespan_ms + 1));
    std::ifstream in(dir + name);
    std::uint64_t value = 0;
    if (!(in >> value))
        throw std::runtime_error("cannot read rxe0's counter " + dir + name);
    return value;
}

// The kernel's count of this process's pinned memory (VmPin in /proc/self/status),
// in KiB: rxe pins the pages of each memory registration.
inline std::size_t pinned_kib() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmPin:", 0) == 0)
            return std::stoul(line.substr(6));
    throw std::runtime_error("no VmPin line in /proc/self/status");
}

/// The objects of `kind` ("pd", "qp", ...) the kernel holds for this process on
/// any device (`rdma -j resource show KIND pid PID`, one JSON object each, named
/// by `key`); -1 when the tool fails, with what it printed in `output`.
inline int count_kernel_objects(const std::string& kind, const std::string& key,
                                std::string& output) {
    const std::string command =
        "rdma -j resource show " + kind + " pid " + std::to_string(::getpid()) + " 2>&1";
    output.clear();
    FILE* out = ::popen(command.c_str(), "r");
    if (out == nullptr)
        return -1;
    std::array<char, 4096> chunk;
    while (std::size_t n = std::fread(chunk.data(), 1, chunk.size(), out))
        output.append(chunk.data(), n);
    if (::pclose(out) != 0)
        return -1;
    const std::string quoted = "\"" + key + "\"";
    int n = 0;
    for (auto at = output.find(quoted); at != std::string::npos; at = output.find(quoted, at + 1))
        ++n;
    return n;
}

} // namespace rdma_asio::test
