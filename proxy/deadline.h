// A one-shot timer that runs an action unless it is cancelled first: the
// way a coroutine bounds an operation it awaits ("close the socket if the
// handshake has not finished in 10 s").
//
// Single-threaded: create, cancel and destroy it on the executor it runs on.
// The action never runs after Cancel() or destruction, even when the timer
// had already expired and its handler was queued.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "proxy/asio.h"

namespace remold {

class Deadline {
 public:
  template <typename Executor>
  Deadline(const Executor& executor, std::chrono::steady_clock::duration timeout,
           std::function<void()> on_expiry)
      : state_(std::make_shared<State>(executor)) {
    state_->on_expiry = std::move(on_expiry);
    state_->timer.expires_after(timeout);
    // The handler holds no ownership: destroying the Deadline destroys the
    // timer, and a handler already queued finds nothing to run.
    state_->timer.async_wait([weak = std::weak_ptr<State>(state_)](boost::system::error_code ec) {
      std::shared_ptr<State> state = weak.lock();
      if (ec || !state || !state->on_expiry) return;
      state->expired = true;
      std::function<void()> action = std::move(state->on_expiry);
      state->on_expiry = nullptr;
      action();
    });
  }
  ~Deadline() { Cancel(); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  void Cancel() {
    state_->on_expiry = nullptr;
    state_->timer.cancel();
  }
  // True once the action has run.
  bool expired() const { return state_->expired; }

 private:
  struct State {
    template <typename Executor>
    explicit State(const Executor& executor) : timer(executor) {}
    SteadyTimer timer;
    std::function<void()> on_expiry;
    bool expired = false;
  };
  std::shared_ptr<State> state_;
};

}  // namespace remold
