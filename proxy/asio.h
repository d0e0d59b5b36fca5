// The one place remold includes Boost.Asio, with the names it uses.
#pragma once

#include <utility>  // Boost 1.74's awaitable.hpp needs std::exchange first.

#include <boost/asio.hpp>

namespace remold {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;

}  // namespace remold
