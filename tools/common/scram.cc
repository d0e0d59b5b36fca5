#include "tools/common/scram.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>
#include <map>
#include <vector>

namespace remold {
namespace {

const EVP_MD* Hash(AuthMechanism mechanism) {
  return mechanism == AuthMechanism::kScramSha1 ? EVP_sha1() : EVP_sha256();
}

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(n);
  return out;
}

std::optional<std::string> FromBase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  size_t padding = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) ++padding;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

std::string Hmac(const EVP_MD* md, std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(md, key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
       out, &length);
  return std::string(reinterpret_cast<char*>(out), length);
}

std::string Digest(const EVP_MD* md, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), out, &length, md, nullptr);
  return std::string(reinterpret_cast<char*>(out), length);
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// "n=..." and "r=...", as in a user name: '=' and ',' escaped.
std::string Escaped(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '=') out += "=3D";
    else if (c == ',') out += "=2C";
    else out += c;
  }
  return out;
}

// The attributes of a server message: "r=..,s=..,i=.." -> {r, s, i}.
std::map<char, std::string> Attributes(std::string_view message) {
  std::map<char, std::string> attributes;
  while (!message.empty()) {
    const size_t comma = message.find(',');
    std::string_view part = message.substr(0, comma);
    if (part.size() >= 2 && part[1] == '=') attributes.emplace(part[0], std::string(part.substr(2)));
    message = comma == std::string_view::npos ? std::string_view() : message.substr(comma + 1);
  }
  return attributes;
}

}  // namespace

ScramConversation::ScramConversation(AuthMechanism mechanism, std::string user, std::string password,
                                     std::string nonce)
    : mechanism_(mechanism), user_(std::move(user)), nonce_(std::move(nonce)) {
  for (unsigned char c : password)
    if (c < 0x20 || c > 0x7e) problem_ = "a password with characters outside printable ASCII is not supported";
  // MongoDB's SCRAM-SHA-1 hashes a digest of the user and password (its
  // MONGODB-CR legacy); SCRAM-SHA-256 the password itself.
  password_ = mechanism_ == AuthMechanism::kScramSha1 ? Hex(Digest(EVP_md5(), user_ + ":mongo:" + password))
                                                      : std::move(password);
  if (nonce_.empty()) {
    unsigned char random[24];
    RAND_bytes(random, sizeof random);
    nonce_ = Base64(std::string_view(reinterpret_cast<char*>(random), sizeof random));
  }
}

std::string ScramConversation::ClientFirst() const { return "n,,n=" + Escaped(user_) + ",r=" + nonce_; }

std::optional<std::string> ScramConversation::ClientFinal(std::string_view server_first, std::string& error) {
  std::map<char, std::string> attributes = Attributes(server_first);
  if (attributes.count('m')) {
    error = "the server asks for a SCRAM extension";
    return std::nullopt;
  }
  const std::string& combined = attributes['r'];
  if (combined.size() <= nonce_.size() || combined.compare(0, nonce_.size(), nonce_) != 0) {
    error = "the server's nonce does not extend the client's";
    return std::nullopt;
  }
  std::optional<std::string> salt = FromBase64(attributes['s']);
  int iterations = 0;
  try {
    iterations = std::stoi(attributes['i']);
  } catch (const std::exception&) {
    iterations = 0;
  }
  if (!salt || salt->empty() || iterations < 1) {
    error = "the server's salt or iteration count is not valid";
    return std::nullopt;
  }
  const EVP_MD* md = Hash(mechanism_);
  std::string salted(EVP_MD_size(md), '\0');
  PKCS5_PBKDF2_HMAC(password_.data(), static_cast<int>(password_.size()),
                    reinterpret_cast<const unsigned char*>(salt->data()), static_cast<int>(salt->size()), iterations,
                    md, static_cast<int>(salted.size()), reinterpret_cast<unsigned char*>(salted.data()));
  const std::string client_key = Hmac(md, salted, "Client Key");
  const std::string stored_key = Digest(md, client_key);
  const std::string final_bare = "c=biws,r=" + combined;
  auth_message_ = ClientFirst().substr(3) + "," + std::string(server_first) + "," + final_bare;
  std::string proof = Hmac(md, stored_key, auth_message_);
  for (size_t i = 0; i < proof.size(); ++i) proof[i] = static_cast<char>(proof[i] ^ client_key[i]);
  server_key_ = Hmac(md, salted, "Server Key");
  return final_bare + ",p=" + Base64(proof);
}

bool ScramConversation::ServerFinalValid(std::string_view server_final, std::string& error) const {
  std::map<char, std::string> attributes = Attributes(server_final);
  if (attributes.count('e')) {
    error = "the server refused: " + attributes['e'];
    return false;
  }
  if (server_key_.empty() || attributes['v'] != Base64(Hmac(Hash(mechanism_), server_key_, auth_message_))) {
    error = "the server's signature is wrong: it does not know the password";
    return false;
  }
  return true;
}

}  // namespace remold
