// The one place remold includes Boost.Asio, with the names it uses.
//
// Every coroutine and I/O object of remold runs on an io_context, so they
// name its executor type (Executor) rather than Asio's type-erased
// any_io_executor: a completion then runs its coroutine inline, without
// type-erased prefer/execute calls and an allocated executor_function per
// operation. Use Socket, Acceptor, Resolver and SteadyTimer, and
// awaitable<T>, never asio's defaults: a mix does not compile.
#pragma once

#include <utility>  // Boost 1.74's awaitable.hpp needs std::exchange first.

#include <chrono>

#include <boost/asio.hpp>

namespace remold {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

using Executor = asio::io_context::executor_type;
template <typename T = void>
using awaitable = asio::awaitable<T, Executor>;
inline constexpr asio::use_awaitable_t<Executor> use_awaitable;

using Socket = asio::basic_stream_socket<tcp, Executor>;
using Acceptor = asio::basic_socket_acceptor<tcp, Executor>;
using Resolver = asio::ip::basic_resolver<tcp, Executor>;
using SteadyTimer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                               asio::wait_traits<std::chrono::steady_clock>, Executor>;

}  // namespace remold
