#pragma once

// What StoreServer (acc/rendezvous/store_server.h) is made of, and what its event loops share:
// the options, the listeners, the state and its mutex, every loop's wake-up eventfd, and the
// loops' threads. StoreServer::Impl is one; its methods are in store_server.cc.

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "acc/rendezvous/store_server.h"
#include "store_event_loop.h"
#include "store_listener.h"
#include "store_state.h"

namespace acc::rendezvous::detail {

struct Server {
  // Binds and listens (throws as StoreServer's constructor); serves nothing yet.
  explicit Server(StoreServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // In the table of the thread that made the server (the loops close their own copies).
  void close_descriptors();
  // Makes loop `index` (> 0) and its thread, and waits until it serves. Under control_mutex.
  // Returns an empty string, or what failed (its thread has ended then, or is ending: stop()
  // joins it).
  std::string start_loop(unsigned index);
  // Starts loop 0 for start() and run(): its descriptors here (throwing what fails), its loop on
  // a thread of its own, without waiting for it.
  void start_first_loop();
  // From loop `index`'s thread, out of descriptors: starts the next loop. False if there is
  // none to start (the last, stopping, or it failed before).
  bool start_loop_after(unsigned index);
  // A loop's thread, at its end.
  void loop_ended();
  // Wakes every loop to close everything and end; once. Under control_mutex.
  void ask_loops_to_stop();
  void stop();

  StoreServerOptions options;
  StoreState state;        // under state_mutex
  std::mutex state_mutex;  // the state, and every loop's inbox
  Listeners listeners;
  std::array<int, kMaxLoops> wake_fds{};
  std::atomic<bool> stop_requested{false};
  std::atomic<std::size_t> num_connections{0};
  // Written once each, under control_mutex, before the loop's thread starts; read by other
  // loops (a reply to one of its connections) only after that.
  std::array<std::unique_ptr<EventLoop>, kMaxLoops> loops;

  std::mutex control_mutex;  // guards running, stopped, threads, running_loops
  bool running = false;
  bool stopped = false;
  std::array<std::thread, kMaxLoops> threads;
  int running_loops = 0;
  std::condition_variable ended;  // running_loops went down
};

}  // namespace acc::rendezvous::detail
