#include "proxy/routing/connection_pins.h"

#include <array>

#include "common/bson_walk.h"

namespace remold {
namespace {

constexpr std::array<std::string_view, static_cast<size_t>(PinReason::kCount)> kReasonNames = {
    "cursor", "transaction", "authentication", "exhaust", "connection"};

// Commands whose effect or answer belongs to the connection they run on.
constexpr std::array<std::string_view, 11> kConnectionCommands = {
    "getLastError", "getlasterror", "getPrevError", "getpreverror", "resetError", "reseterror",
    "currentOp",    "killOp",       "logout",       "forceerror",   "whatsmyuri"};

}  // namespace

std::string_view PinReasonName(PinReason reason) { return kReasonNames[static_cast<size_t>(reason)]; }

bool IsConnectionScoped(const wire::Request& request) {
  const std::string_view command = request.command;
  for (std::string_view name : kConnectionCommands)
    if (command == name) return true;
  if (command != "aggregate" || request.is_legacy()) return false;
  // {aggregate: 1} on admin: $currentOp, $listLocalSessions.
  bool numeric = false;
  bool admin = false;
  WalkTopLevel(request.command_document, [&](const BsonElement& element) {
    if (element.key == "aggregate") numeric = element.type != 0x02;  // not a collection name
    if (element.key == "$db") admin = element.type == 0x02 && element.value.size() == 10 &&
                                      std::string_view(reinterpret_cast<const char*>(element.value.data()) + 4, 5) == "admin";
    return true;
  });
  return numeric && admin;
}

bool EndsTransaction(const wire::Request& request) {
  return request.command == "commitTransaction" || request.command == "abortTransaction";
}

}  // namespace remold
