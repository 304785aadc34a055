// Naming what is wrong when a umad call fails, from the CAs that exist (no I/O).
#include "rdma_asio/detail/subnet/umad_port_error.hpp"

#include <catch2/catch.hpp>

#include "rdma_asio/error.hpp"

#include "asio_alias.hpp"

#include <cerrno>

namespace umad_port_error_test {

using rdma_asio::errc;
using rdma_asio::detail::name_umad_error;
using rdma_asio::detail::umad_ca_ports;

namespace {

const rdma_asio::error_code eio(EIO, asio::error::get_system_category());
// Two CAs as a host with an HCA and soft-RoCE might have them.
const std::vector<umad_ca_ports> two_cas{{"mlx4_0", {1, 2}}, {"rxe0", {1}}};

} // namespace

TEST_CASE("a CA that does not exist is named as such, not EIO", "[umad_port_error]") {
    const std::vector<umad_ca_ports> none_called_that; // list_cas(name) of a missing CA
    CHECK(name_umad_error(eio, "NoSuchCa", 1, none_called_that) == errc::device_not_found);
    CHECK(name_umad_error(eio, "NoSuchCa", 9, none_called_that) == errc::device_not_found);
    CHECK(name_umad_error(eio, "NoSuchCa", 1, two_cas) == errc::device_not_found);
}

TEST_CASE("a port the CA does not have is named as such, not EIO", "[umad_port_error]") {
    CHECK(name_umad_error(eio, "rxe0", 2, two_cas) == errc::invalid_port);
    CHECK(name_umad_error(eio, "mlx4_0", 9, two_cas) == errc::invalid_port);
    // Without a name: no CA has the port.
    CHECK(name_umad_error(eio, "", 9, two_cas) == errc::invalid_port);
}

TEST_CASE("without a name and without any CA there is no device", "[umad_port_error]") {
    CHECK(name_umad_error(eio, "", 1, std::vector<umad_ca_ports>{}) == errc::no_device);
}

TEST_CASE("an error on a CA and port that exist stays what it was", "[umad_port_error]") {
    CHECK(name_umad_error(eio, "mlx4_0", 2, two_cas) == eio);
    CHECK(name_umad_error(eio, "", 2, two_cas) == eio); // mlx4_0 has port 2
    // Port 0 lets libibumad choose: never an invalid port.
    CHECK(name_umad_error(eio, "rxe0", 0, two_cas) == eio);
    CHECK(name_umad_error(eio, "", 0, two_cas) == eio);
    // The CAs could not be listed: nothing to say more.
    CHECK(name_umad_error(eio, "NoSuchCa", 1, std::nullopt) == eio);
    // No error: none is made up.
    CHECK_FALSE(name_umad_error({}, "NoSuchCa", 1, std::vector<umad_ca_ports>{}));
}

} // namespace umad_port_error_test
