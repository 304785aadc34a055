// The former name of async_event_stream_ref.hpp: includes it, for programs written
// before the rename.
#pragma once

#include "rdma_asio/async_event_stream_ref.hpp"
