// Catch2's runner for the service's rxe tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
