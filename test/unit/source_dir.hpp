// The repository's top directory, for the tests that compare a figure a page of the
// docs states with the code's. Defined in main.cpp, the one file compiled with the
// path (RDMA_ASIO_SOURCE_DIR): in the files compiled as one, a path that differs from
// clone to clone would keep the compiler cache from reusing their compilation.
#pragma once

namespace rdma_asio::test {

const char* source_dir() noexcept;

} // namespace rdma_asio::test
