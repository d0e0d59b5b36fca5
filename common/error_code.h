// The MongoDB error codes remold answers with: one table of {code, codeName}
// pairs (values and names from MongoDB's error_codes.yml), used by the wire
// codec, the rewrites and the metrics alike.
//
// Refusals use the codes mongod uses for comparable refusals on views and
// time-series collections (72 InvalidOptions, 115 CommandNotSupported, 166
// CommandNotSupportedOnView, 2 BadValue), never 20 IllegalOperation: the
// Node.js driver and mongosh replace a code-20 write error with a message
// about retryable writes, so the application would never see remold's.
#pragma once

#include <cstdint>
#include <string_view>

namespace remold {

struct ErrorCode {
  int32_t value = 0;
  std::string_view name;

  bool operator==(const ErrorCode&) const = default;
};

namespace error_codes {
inline constexpr ErrorCode kBadValue{2, "BadValue"};
inline constexpr ErrorCode kHostUnreachable{6, "HostUnreachable"};
inline constexpr ErrorCode kUnknownError{8, "UnknownError"};
inline constexpr ErrorCode kFailedToParse{9, "FailedToParse"};
inline constexpr ErrorCode kTypeMismatch{14, "TypeMismatch"};
inline constexpr ErrorCode kOverflow{15, "Overflow"};
inline constexpr ErrorCode kInvalidLength{16, "InvalidLength"};
inline constexpr ErrorCode kProtocolError{17, "ProtocolError"};
inline constexpr ErrorCode kInvalidBSON{22, "InvalidBSON"};
inline constexpr ErrorCode kIndexNotFound{27, "IndexNotFound"};
inline constexpr ErrorCode kCommandNotFound{59, "CommandNotFound"};
inline constexpr ErrorCode kImmutableField{66, "ImmutableField"};
inline constexpr ErrorCode kCannotCreateIndex{67, "CannotCreateIndex"};
inline constexpr ErrorCode kInvalidOptions{72, "InvalidOptions"};
inline constexpr ErrorCode kWriteConflict{112, "WriteConflict"};
inline constexpr ErrorCode kCommandNotSupported{115, "CommandNotSupported"};
// A collection whose migration into its rule's form is not done (a bucket
// rule's readings written before it): try again once it is.
inline constexpr ErrorCode kConflictingOperationInProgress{117, "ConflictingOperationInProgress"};
inline constexpr ErrorCode kDocumentValidationFailure{121, "DocumentValidationFailure"};
inline constexpr ErrorCode kCommandNotSupportedOnView{166, "CommandNotSupportedOnView"};
inline constexpr ErrorCode kUnsupportedOpQueryCommand{352, "UnsupportedOpQueryCommand"};
inline constexpr ErrorCode kBSONObjectTooLarge{10334, "BSONObjectTooLarge"};
}  // namespace error_codes

}  // namespace remold
