// rxe0's port counters (/sys/class/infiniband/rxe0/ports/1/hw_counters), read
// after the counters' lifespan has passed, so that they include what just
// happened: e.g. send_rnr_err, the RNR NAKs rxe0 answered a message that found
// no receive posted. And the process's pinned memory, which memory registrations
// on rxe0 hold.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

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

} // namespace rdma_asio::test
