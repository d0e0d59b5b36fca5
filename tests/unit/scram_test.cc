// The SCRAM client of remold's own connections (tools/common/scram.h)
// against published conversations: RFC 7677's SCRAM-SHA-256 example, and
// the SCRAM-SHA-1 example of MongoDB's authentication specification (whose
// password is MongoDB's digest of user and password).
#include <gtest/gtest.h>

#include "tools/common/scram.h"

namespace remold {
namespace {

TEST(ScramTest, Rfc7677Sha256Conversation) {
  ScramConversation scram(AuthMechanism::kScramSha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
  EXPECT_EQ(scram.ClientFirst(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
  std::string error;
  std::optional<std::string> final_message = scram.ClientFinal(
      "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", error);
  ASSERT_TRUE(final_message) << error;
  EXPECT_EQ(*final_message,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
  EXPECT_TRUE(scram.ServerFinalValid("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", error)) << error;
  EXPECT_FALSE(scram.ServerFinalValid("v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", error));
  EXPECT_EQ(error, "the server's signature is wrong: it does not know the password");
}

TEST(ScramTest, MongoDbSha1ConversationDigestsThePassword) {
  ScramConversation scram(AuthMechanism::kScramSha1, "user", "pencil", "fyko+d2lbbFgONRv9qkxdawL");
  std::string error;
  std::optional<std::string> final_message = scram.ClientFinal(
      "r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000", error);
  ASSERT_TRUE(final_message) << error;
  EXPECT_EQ(*final_message,
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,p=MC2T8BvbmWRckDw8oWl5IVghwCY=");
  EXPECT_TRUE(scram.ServerFinalValid("v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=", error)) << error;
}

TEST(ScramTest, AnySaltLengthIsAccepted) {
  // DocumentDB's SCRAM-SHA-256 salts are 16 bytes (mongod's are 28): the
  // RFC sets no length, and libmongoc's refusal of them is why remold does
  // its own SCRAM.
  ScramConversation scram(AuthMechanism::kScramSha256, "remold", "pw", "abc");
  std::string error;
  EXPECT_TRUE(scram.ClientFinal("r=abcdef,s=AAAAAAAAAAAAAAAAAAAAAA==,i=4096", error)) << error;
}

TEST(ScramTest, ServerMessagesItCannotAnswer) {
  std::string error;
  ScramConversation other_nonce(AuthMechanism::kScramSha256, "u", "p", "abc");
  EXPECT_FALSE(other_nonce.ClientFinal("r=xyz123,s=QSXCR+Q6sek8bf92,i=4096", error));
  EXPECT_EQ(error, "the server's nonce does not extend the client's");
  ScramConversation no_iterations(AuthMechanism::kScramSha256, "u", "p", "abc");
  EXPECT_FALSE(no_iterations.ClientFinal("r=abcdef,s=QSXCR+Q6sek8bf92,i=0", error));
  EXPECT_EQ(error, "the server's salt or iteration count is not valid");
  ScramConversation refused(AuthMechanism::kScramSha256, "u", "p", "abc");
  ASSERT_TRUE(refused.ClientFinal("r=abcdef,s=QSXCR+Q6sek8bf92,i=4096", error));
  EXPECT_FALSE(refused.ServerFinalValid("e=invalid-proof", error));
  EXPECT_EQ(error, "the server refused: invalid-proof");
}

TEST(ScramTest, UserNamesAreEscapedAndOddPasswordsRefused) {
  EXPECT_EQ(ScramConversation(AuthMechanism::kScramSha256, "a=b,c", "p", "n").ClientFirst(), "n,,n=a=3Db=2Cc,r=n");
  EXPECT_EQ(ScramConversation(AuthMechanism::kScramSha256, "u", "p\xc3\xa4", "n").problem(),
            "a password with characters outside printable ASCII is not supported");
  EXPECT_EQ(ScramConversation(AuthMechanism::kScramSha256, "u", "p w!", "n").problem(), "");
}

}  // namespace
}  // namespace remold
