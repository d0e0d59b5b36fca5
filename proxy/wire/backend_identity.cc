#include "proxy/wire/backend_identity.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace remold {
namespace {

constexpr std::array<std::pair<AuthMechanism, std::string_view>, 3> kNames = {{
    {AuthMechanism::kScramSha256, "SCRAM-SHA-256"},
    {AuthMechanism::kScramSha1, "SCRAM-SHA-1"},
    {AuthMechanism::kX509, "MONGODB-X509"},
}};

bool SameLetters(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::string_view MechanismName(AuthMechanism mechanism) {
  for (const auto& [value, name] : kNames)
    if (value == mechanism) return name;
  return "?";
}

std::optional<AuthMechanism> ParseMechanism(std::string_view name) {
  for (const auto& [value, known] : kNames)
    if (SameLetters(name, known)) return value;
  return std::nullopt;
}

std::string Describe(const BackendIdentity& identity) {
  if (!identity.enabled) return "none";
  std::string text(MechanismName(identity.mechanism));
  if (!identity.username.empty()) text += " as '" + identity.username + "'";
  else text += " as the certificate's subject";
  return text + " (" + identity.source + ")";
}

}  // namespace remold
