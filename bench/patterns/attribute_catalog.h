// attribute_catalog: the product catalog attribute_bench loads and queries:
// a few fixed fields and up to 20 sparse attributes, each present only in
// the categories it makes sense for.
//
// Contract:
//   - make_product(i) is a pure function of i, so the first N products of a
//     bigger load are exactly the N-product load.
//   - product_bson() is the product as the application writes it: _id and
//     the fixed fields (name, price, category) first, then the attributes as
//     plain fields in the product's order. remold folds the attributes into
//     its array and unfolds them back after the fixed fields, so this order
//     round-trips byte for byte.
//   - mix() is splitmix64's finalizer, for hashing.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace attribute_bench {

using Value = std::variant<int64_t, double, std::string, bool>;

struct Product {
  int64_t id;
  std::string name;
  double price;
  std::string category;
  std::vector<std::pair<std::string, Value>> attrs;  // in document order

  const Value* get(const std::string& attr) const;
  std::optional<double> num(const std::string& attr) const;
  std::optional<std::string> str(const std::string& attr) const;
};

// Every attribute a product may have, the most common first.
extern const std::vector<std::string> kAttributeNames;

Product make_product(int64_t i);
bson_t* product_bson(const Product& p);
uint64_t mix(uint64_t x);

}  // namespace attribute_bench
