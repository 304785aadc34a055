#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

namespace rdma_asio::test {

int run_catch_session(int argc, char* argv[], const std::function<int()>& before_tests) {
    Catch::Session session;
    if (int rc = session.applyCommandLine(argc, argv); rc != 0)
        return rc;
    const auto& cfg = session.configData();
    const bool listing =
        cfg.listTests || cfg.listTestNamesOnly || cfg.listTags || cfg.listReporters || cfg.showHelp;
    if (!listing && before_tests)
        if (int rc = before_tests(); rc != 0)
            return rc;
    return session.run();
}

} // namespace rdma_asio::test
