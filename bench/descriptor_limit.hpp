// The benchmarks that open thousands of connections: each connected stream holds a
// descriptor (its rdma_cm event channel), so, as a service would, they raise the
// limit on descriptors above the soft 1 024.
#pragma once

#include <sys/resource.h>

namespace bench {

/// A million descriptors when the process may (root in the test VM), else the
/// hard limit.
inline void raise_descriptor_limit() {
    if (rlimit files{1 << 20, 1 << 20};
        ::setrlimit(RLIMIT_NOFILE, &files) != 0 && ::getrlimit(RLIMIT_NOFILE, &files) == 0) {
        files.rlim_cur = files.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &files);
    }
}

} // namespace bench
