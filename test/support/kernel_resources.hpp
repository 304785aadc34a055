// What the kernel holds for this process, as the rdma tool lists it: for tests that
// check that an object was really destroyed, not only forgotten.
#pragma once

#include <catch2/catch.hpp>

#include "rxe_counters.hpp"

#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <ostream>
#include <string>

namespace rdma_asio::test {

/// The objects of `kind` ("pd", "qp", ...) the kernel holds for this process on
/// any device (rdma-resource(8), one JSON object each, named by `key`).
inline int kernel_resources_of_this_process(const std::string& kind, const std::string& key) {
    std::string output;
    const int n = count_kernel_objects(kind, key, output);
    INFO("rdma -j resource show " << kind << ": " << output);
    REQUIRE(n >= 0);
    return n;
}

/// The protection domains the kernel holds for this process. A PD still in use
/// (by a QP, an SRQ, a region) cannot be deallocated, so its count also tells
/// whether what was made in it is gone.
inline int kernel_pds_of_this_process() {
    return kernel_resources_of_this_process("pd", "pdn");
}

/// The queue pairs the kernel holds for this process: destroyed ones are gone.
inline int kernel_qps_of_this_process() {
    return kernel_resources_of_this_process("qp", "lqpn");
}

/// Every kind of object a connection or a stream makes, as the kernel holds them
/// for this process: for tests that check that what a fault left is all given back.
struct kernel_objects {
    int qp = 0, cq = 0, mr = 0, pd = 0, cm_id = 0;
    bool operator==(const kernel_objects&) const = default;
};

inline kernel_objects kernel_objects_of_this_process() {
    return {kernel_qps_of_this_process(), kernel_resources_of_this_process("cq", "cqn"),
            kernel_resources_of_this_process("mr", "mrn"), kernel_pds_of_this_process(),
            kernel_resources_of_this_process("cm_id", "cm_idn")};
}

inline std::ostream& operator<<(std::ostream& out, const kernel_objects& o) {
    return out << "qp " << o.qp << ", cq " << o.cq << ", mr " << o.mr << ", pd " << o.pd
               << ", cm_id " << o.cm_id;
}

} // namespace rdma_asio::test
