// Work on a message too large for an I/O thread: folding or unfolding a
// document of many thousands of attributes costs tens to hundreds of
// milliseconds of CPU, during which every other session of the thread
// would wait. Such work runs on a small pool of threads of its own, and
// the coroutine that asked for it resumes on its own thread (where its
// sockets are used) once it is done; the other sessions go on meanwhile.
#pragma once

#include <cstddef>
#include <exception>
#include <utility>

#include "proxy/asio.h"

namespace remold {

// A message (a request, a backend reply) of at least this many bytes has
// its rewriting run on the pool.
inline constexpr size_t kHeavyWorkBytes = 256 * 1024;

// co_await RunOn(pool, [&] { ... }): runs the work on `pool`, then resumes
// on the coroutine's executor; an exception of the work is thrown there.
template <typename Work>
auto RunOn(asio::thread_pool& pool, Work work) {
  return asio::async_initiate<const asio::use_awaitable_t<Executor>&, void(std::exception_ptr)>(
      [&pool](auto handler, Work work) {
        auto resume_on = asio::get_associated_executor(handler);
        asio::post(pool, [work = std::move(work), handler = std::move(handler), resume_on]() mutable {
          std::exception_ptr thrown;
          try {
            work();
          } catch (...) {
            thrown = std::current_exception();
          }
          asio::post(resume_on, [handler = std::move(handler), thrown]() mutable { std::move(handler)(thrown); });
        });
      },
      use_awaitable, std::move(work));
}

}  // namespace remold
