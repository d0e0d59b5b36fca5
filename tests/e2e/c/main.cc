// Entry point of e2e_cdriver: initialises libmongoc, installs the server
// harness (backend + remold) as a gtest global environment, runs the tests.

#include <gtest/gtest.h>
#include <mongoc/mongoc.h>

#include "harness.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  mongoc_init();
  harness::Install();
  int result = RUN_ALL_TESTS();
  mongoc_cleanup();
  return result;
}
