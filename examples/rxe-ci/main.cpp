// Catch2's runner for the service's rxe tests.
// snippet-begin: rxe-ci-main
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
// snippet-end
