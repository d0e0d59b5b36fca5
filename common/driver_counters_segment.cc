// Linked into every remold executable that loads libmongoc: removes the
// driver's shared-memory counters file as soon as the process starts, so
// that no way of ending the process leaves it behind.
//
// Debian's libmongoc initialises itself from a shared-library constructor,
// before main() runs. Unless MONGOC_DISABLE_SHM is set in the environment
// the process started with, it creates /dev/shm/mongoc-<pid> (O_EXCL) and
// removes it only in its exit-time destructor, which a killed process never
// runs. The files pile up, and a later process that gets a recycled pid
// finds its name taken and prints "Falling back to malloc for counters." on
// stderr, before main().
//
// An executable's constructors run after those of the shared libraries it
// loads, so the file exists by then. Removing the name keeps the mapping
// (the counters stay usable in this process); only external readers of
// the counters, which remold does not document, lose them. A file of the
// same name left by a dead process with this pid is removed too.
#include <sys/mman.h>
#include <unistd.h>

#include <string>

namespace {

[[gnu::constructor]] void RemoveDriverCountersFile() {
  shm_unlink(("/mongoc-" + std::to_string(getpid())).c_str());
}

}  // namespace
