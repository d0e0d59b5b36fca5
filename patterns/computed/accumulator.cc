#include "patterns/computed/accumulator.h"

namespace remold {

Doc GroupAccumulator(const MaintainedField& field) {
  using Op = MaintainedField::Op;
  Doc accumulator;
  switch (field.op) {
    case Op::kCount:
      BSON_APPEND_INT32(accumulator.mut(), "$sum", 1);
      return accumulator;
    case Op::kSum:
      AppendString(accumulator.mut(), "$sum", "$" + field.of);
      return accumulator;
    case Op::kMin:
      AppendString(accumulator.mut(), "$min", "$" + field.of);
      return accumulator;
    case Op::kMax:
      AppendString(accumulator.mut(), "$max", "$" + field.of);
      return accumulator;
    case Op::kLatest:
      break;
  }
  AppendString(accumulator.mut(), "$first", "$" + field.of);
  return accumulator;
}

}  // namespace remold
