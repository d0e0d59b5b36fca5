#include "rewrite/bson_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace remold {
namespace {

int CanonicalRank(bson_type_t type) {
  switch (type) {
    case BSON_TYPE_MINKEY: return 0;
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_NULL: return 1;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: return 2;
    case BSON_TYPE_SYMBOL:
    case BSON_TYPE_UTF8: return 3;
    case BSON_TYPE_DOCUMENT: return 4;
    case BSON_TYPE_ARRAY: return 5;
    case BSON_TYPE_BINARY: return 6;
    case BSON_TYPE_OID: return 7;
    case BSON_TYPE_BOOL: return 8;
    case BSON_TYPE_DATE_TIME: return 9;
    case BSON_TYPE_TIMESTAMP: return 10;
    case BSON_TYPE_REGEX: return 11;
    case BSON_TYPE_MAXKEY: return 13;
    default: return 12;
  }
}

template <class T>
int Sign(T a, T b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

int CompareNumbers(const bson_iter_t& a, const bson_iter_t& b) {
  bool a_int = !BSON_ITER_HOLDS_DOUBLE(&a), b_int = !BSON_ITER_HOLDS_DOUBLE(&b);
  if (a_int && b_int) return Sign(bson_iter_as_int64(&a), bson_iter_as_int64(&b));
  double x = bson_iter_as_double(&a), y = bson_iter_as_double(&b);
  if (std::isnan(x) || std::isnan(y)) return Sign(!std::isnan(x), !std::isnan(y));  // NaN first
  return Sign(x, y);
}

int CompareBytes(const uint8_t* a, size_t a_len, const uint8_t* b, size_t b_len) {
  int c = std::memcmp(a, b, std::min(a_len, b_len));
  if (c != 0) return c < 0 ? -1 : 1;
  return Sign(a_len, b_len);
}

}  // namespace

int CompareBsonValues(const bson_iter_t& a, const bson_iter_t& b) {
  bson_type_t ta = bson_iter_type(&a), tb = bson_iter_type(&b);
  if (int c = Sign(CanonicalRank(ta), CanonicalRank(tb))) return c;
  switch (CanonicalRank(ta)) {
    case 2:
      return CompareNumbers(a, b);
    case 3: {
      uint32_t la = 0, lb = 0;
      const char* sa = ta == BSON_TYPE_UTF8 ? bson_iter_utf8(&a, &la) : bson_iter_symbol(&a, &la);
      const char* sb = tb == BSON_TYPE_UTF8 ? bson_iter_utf8(&b, &lb) : bson_iter_symbol(&b, &lb);
      return CompareBytes(reinterpret_cast<const uint8_t*>(sa), la,
                          reinterpret_cast<const uint8_t*>(sb), lb);
    }
    case 7:
      return Sign(bson_oid_compare(bson_iter_oid(&a), bson_iter_oid(&b)), 0);
    case 8:
      return Sign(bson_iter_bool(&a), bson_iter_bool(&b));
    case 9:
      return Sign(bson_iter_date_time(&a), bson_iter_date_time(&b));
    case 10: {
      uint32_t at = 0, ai = 0, bt = 0, bi = 0;
      bson_iter_timestamp(&a, &at, &ai);
      bson_iter_timestamp(&b, &bt, &bi);
      return at != bt ? Sign(at, bt) : Sign(ai, bi);
    }
    default: {
      // Documents, arrays, binary, regex: by their bytes (a stable order,
      // not MongoDB's element-wise one).
      const bson_value_t* va = bson_iter_value(const_cast<bson_iter_t*>(&a));
      const bson_value_t* vb = bson_iter_value(const_cast<bson_iter_t*>(&b));
      if (ta == BSON_TYPE_DOCUMENT || ta == BSON_TYPE_ARRAY) {
        uint32_t la = 0, lb = 0;
        const uint8_t *da = nullptr, *db = nullptr;
        if (ta == BSON_TYPE_DOCUMENT) bson_iter_document(&a, &la, &da); else bson_iter_array(&a, &la, &da);
        if (tb == BSON_TYPE_DOCUMENT) bson_iter_document(&b, &lb, &db); else bson_iter_array(&b, &lb, &db);
        return CompareBytes(da, la, db, lb);
      }
      if (ta == BSON_TYPE_BINARY && tb == BSON_TYPE_BINARY)
        return CompareBytes(va->value.v_binary.data, va->value.v_binary.data_len,
                            vb->value.v_binary.data, vb->value.v_binary.data_len);
      return 0;
    }
  }
}

}  // namespace remold
