// What the kernel holds for this process, as the rdma tool lists it: for tests that
// check that an object was really destroyed, not only forgotten.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <string>

namespace rdma_asio::test {

/// The protection domains the kernel holds for this process on any device
/// (rdma-resource(8), one JSON object per PD). A PD still in use (by a QP, an
/// SRQ, a region) cannot be deallocated, so its count also tells whether what was
/// made in it is gone.
inline int kernel_pds_of_this_process() {
    const std::string command =
        "rdma -j resource show pd pid " + std::to_string(::getpid()) + " 2>&1";
    FILE* out = ::popen(command.c_str(), "r");
    REQUIRE(out != nullptr);
    std::string text;
    std::array<char, 4096> chunk;
    while (std::size_t n = std::fread(chunk.data(), 1, chunk.size(), out))
        text.append(chunk.data(), n);
    const int status = ::pclose(out);
    INFO(command << ": " << text);
    REQUIRE(status == 0);
    int n = 0;
    for (auto at = text.find("\"pdn\""); at != std::string::npos; at = text.find("\"pdn\"", at + 1))
        ++n;
    return n;
}

} // namespace rdma_asio::test
