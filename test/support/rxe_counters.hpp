// rxe0's port counters (/sys/class/infiniband/rxe0/ports/1/hw_counters), read
// after the counters' lifespan has passed, so that they include what just
// happened: e.g. send_rnr_err, the RNR NAKs rxe0 answered a message that found
// no receive posted.
#pragma once

#include <chrono>
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

} // namespace rdma_asio::test
