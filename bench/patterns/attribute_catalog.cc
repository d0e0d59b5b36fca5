// The generated product catalog: see attribute_catalog.h.
#include "attribute_catalog.h"

#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>

namespace attribute_bench {

const Value* Product::get(const std::string& attr) const {
  for (const auto& [k, v] : attrs)
    if (k == attr) return &v;
  return nullptr;
}

std::optional<double> Product::num(const std::string& attr) const {
  const Value* v = get(attr);
  if (!v) return std::nullopt;
  if (auto i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  if (auto d = std::get_if<double>(v)) return *d;
  return std::nullopt;
}

std::optional<std::string> Product::str(const std::string& attr) const {
  const Value* v = get(attr);
  if (!v) return std::nullopt;
  if (auto s = std::get_if<std::string>(v)) return *s;
  return std::nullopt;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {

// Uniform in [0, 1), a pure function of (product, salt).
double uniform(int64_t i, int salt) {
  return static_cast<double>(mix(static_cast<uint64_t>(i) * 0x100000001b3ULL ^
                                 mix(static_cast<uint64_t>(salt))) >> 11) *
         0x1.0p-53;
}

template <typename T>
const T& pick(int64_t i, int salt, const std::vector<T>& items) {
  return items[static_cast<size_t>(uniform(i, salt) * static_cast<double>(items.size()))];
}

// Weighted pick: weights need not sum to 1.
template <typename T>
const T& pick_weighted(int64_t i, int salt, const std::vector<std::pair<T, double>>& items) {
  double total = 0;
  for (const auto& [_, w] : items) total += w;
  double u = uniform(i, salt) * total;
  for (const auto& [item, w] : items) {
    if (u < w) return item;
    u -= w;
  }
  return items.back().first;
}

const std::vector<std::pair<std::string, double>> kCategories = {
    {"laptop", 12}, {"phone", 14},  {"tv", 8},     {"monitor", 8}, {"headphones", 12},
    {"camera", 4},  {"fridge", 4},  {"shirt", 22}, {"shoes", 16}};

}  // namespace

const std::vector<std::string> kAttributeNames = {
    "brand",      "color",       "weight_kg",  "warranty_years", "screen_in",
    "ram_gb",     "storage_gb",  "cpu",        "battery_mah",    "resolution",
    "refresh_hz", "hdmi_ports",  "wireless",   "noise_cancelling", "megapixels",
    "capacity_l", "energy_class", "material",  "size",           "water_resistance"};

Product make_product(int64_t i) {
  Product p;
  p.id = i;
  char name[32];
  std::snprintf(name, sizeof name, "product-%07lld", static_cast<long long>(i));
  p.name = name;
  p.category = pick_weighted(i, 1, kCategories);
  const std::string& c = p.category;
  auto is = [&](std::initializer_list<const char*> cats) {
    for (const char* x : cats)
      if (c == x) return true;
    return false;
  };
  auto present = [&](int salt, double prob) { return uniform(i, salt) < prob; };
  auto add = [&](const char* k, Value v) { p.attrs.emplace_back(k, std::move(v)); };
  auto cents = [](double v) { return std::round(v * 100.0) / 100.0; };

  // price: a per-category range, to the cent
  static const std::map<std::string, std::pair<double, double>> kPrice = {
      {"laptop", {400, 3000}}, {"phone", {150, 1500}},  {"tv", {250, 4000}},
      {"monitor", {120, 1500}}, {"headphones", {20, 450}}, {"camera", {300, 4000}},
      {"fridge", {350, 3000}}, {"shirt", {10, 120}},     {"shoes", {30, 250}}};
  const auto [lo, hi] = kPrice.at(c);
  p.price = cents(lo + (hi - lo) * uniform(i, 2) * uniform(i, 3));  // skewed to cheap

  const bool electronics = !is({"shirt", "shoes"});
  if (present(10, 0.95))
    add("brand", pick(i, 11, std::vector<std::string>{
                                 "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark",
                                 "Wayne", "Tyrell", "Cyberdyne", "Soylent", "Wonka", "Vandelay",
                                 "Gringotts", "Monarch", "Aperture", "Nakatomi"}));
  {
    double prob = is({"shirt", "shoes"}) ? 0.95 : is({"phone", "headphones"}) ? 0.85
                : is({"laptop", "fridge"}) ? 0.55 : 0.0;
    if (present(12, prob))
      add("color", pick(i, 13, std::vector<std::string>{"black", "white", "silver", "grey", "red",
                                                       "blue", "green", "yellow", "pink",
                                                       "purple", "brown", "orange"}));
  }
  if (c != "shirt" && present(14, 0.85)) {
    static const std::map<std::string, std::pair<double, double>> kWeight = {
        {"laptop", {0.9, 3.2}}, {"phone", {0.13, 0.24}}, {"tv", {6, 45}},
        {"monitor", {2.5, 9}},  {"headphones", {0.02, 0.4}}, {"camera", {0.3, 1.6}},
        {"fridge", {45, 120}},  {"shoes", {0.4, 1.4}}};
    const auto [wl, wh] = kWeight.at(c);
    add("weight_kg", cents(wl + (wh - wl) * uniform(i, 15)));
  }
  if (electronics && present(16, 0.6))
    add("warranty_years", pick_weighted<int64_t>(i, 17, {{1, 0.45}, {2, 0.35}, {3, 0.12},
                                                          {5, 0.08}}));
  {
    std::vector<double> sizes;
    if (c == "laptop") sizes = {13.3, 14.0, 15.6, 16.0, 17.3};
    else if (c == "phone") sizes = {5.8, 6.1, 6.4, 6.7, 6.9};
    else if (c == "tv") sizes = {32, 43, 50, 55, 65, 75, 85};
    else if (c == "monitor") sizes = {21.5, 24, 27, 32, 34};
    else if (c == "camera") sizes = {3.0, 3.2};
    if (!sizes.empty() && present(18, c == "camera" ? 0.7 : 0.98))
      add("screen_in", pick(i, 19, sizes));
  }
  if (c == "laptop" && present(20, 0.95))
    add("ram_gb", pick_weighted<int64_t>(i, 21, {{8, 0.3}, {16, 0.35}, {32, 0.25}, {64, 0.1}}));
  if (c == "phone" && present(20, 0.8))
    add("ram_gb", pick_weighted<int64_t>(i, 21, {{4, 0.2}, {6, 0.25}, {8, 0.3}, {12, 0.15},
                                                 {16, 0.1}}));
  if (c == "laptop" && present(22, 0.95))
    add("storage_gb", pick<int64_t>(i, 23, {256, 512, 1024, 2048}));
  if (c == "phone" && present(22, 0.9))
    add("storage_gb", pick<int64_t>(i, 23, {64, 128, 256, 512, 1024}));
  if (c == "camera" && present(22, 0.3))
    add("storage_gb", pick<int64_t>(i, 23, {32, 64, 128}));
  if (c == "laptop" && present(24, 0.9))
    add("cpu", pick(i, 25, std::vector<std::string>{"i5-1335U", "i7-1360P", "i9-13900H",
                                                    "Ryzen 5 7530U", "Ryzen 7 7840U", "M3",
                                                    "M3 Pro"}));
  if ((c == "phone" && present(26, 0.9)) || (c == "headphones" && present(26, 0.5)))
    add("battery_mah", c == "phone" ? static_cast<int64_t>(3000 + 100 * std::floor(uniform(i, 27) * 21))
                                    : static_cast<int64_t>(300 + 50 * std::floor(uniform(i, 27) * 11)));
  if ((is({"tv", "monitor"}) && present(28, 0.95)) || (c == "camera" && present(28, 0.5)))
    add("resolution", pick_weighted<std::string>(
                          i, 29, c == "tv" ? std::vector<std::pair<std::string, double>>{
                                                 {"1080p", 0.3}, {"4k", 0.6}, {"8k", 0.1}}
                                           : std::vector<std::pair<std::string, double>>{
                                                 {"1080p", 0.45}, {"1440p", 0.35}, {"4k", 0.2}}));
  if (c == "monitor" && present(30, 0.8))
    add("refresh_hz", pick_weighted<int64_t>(i, 31, {{60, 0.35}, {75, 0.15}, {144, 0.3},
                                                      {165, 0.12}, {240, 0.08}}));
  if (c == "tv" && present(30, 0.5)) add("refresh_hz", pick<int64_t>(i, 31, {60, 120}));
  if ((c == "tv" && present(32, 0.9)) || (c == "monitor" && present(32, 0.7)))
    add("hdmi_ports", c == "tv" ? pick<int64_t>(i, 33, {2, 3, 4}) : pick<int64_t>(i, 33, {1, 2}));
  if ((c == "headphones" && present(34, 0.95)) || (c == "tv" && present(34, 0.3)))
    add("wireless", c == "tv" ? true : uniform(i, 35) < 0.7);
  if (c == "headphones" && present(36, 0.6)) add("noise_cancelling", uniform(i, 37) < 0.45);
  if ((c == "camera" && present(38, 0.95)) || (c == "phone" && present(38, 0.7)))
    add("megapixels", c == "camera" ? pick<int64_t>(i, 39, {20, 24, 33, 45, 61})
                                    : pick<int64_t>(i, 39, {12, 48, 50, 108, 200}));
  if (c == "fridge" && present(40, 0.95))
    add("capacity_l", pick<int64_t>(i, 41, {200, 250, 300, 350, 400, 450, 500, 600}));
  if ((c == "fridge" && present(42, 0.9)) || (c == "tv" && present(42, 0.7)) ||
      (c == "monitor" && present(42, 0.4)))
    add("energy_class", pick(i, 43, std::vector<std::string>{"A+++", "A++", "A+", "A", "B", "C"}));
  if (c == "shirt" && present(44, 0.9))
    add("material", pick(i, 45, std::vector<std::string>{"cotton", "linen", "polyester", "wool", "silk"}));
  if (c == "shoes" && present(44, 0.85))
    add("material", pick(i, 45, std::vector<std::string>{"leather", "canvas", "mesh", "suede"}));
  if (c == "shirt" && present(46, 0.98))
    add("size", pick(i, 47, std::vector<std::string>{"XS", "S", "M", "L", "XL", "XXL"}));
  if (c == "shoes" && present(46, 0.98))  // sizes are numbers here: one attribute, two types
    add("size", static_cast<int64_t>(36 + std::floor(uniform(i, 47) * 11)));
  if (c == "phone" && present(48, 0.6))
    add("water_resistance", pick(i, 49, std::vector<std::string>{"IP67", "IP68"}));
  if (c == "headphones" && present(48, 0.3))
    add("water_resistance", pick(i, 49, std::vector<std::string>{"IPX4", "IPX5"}));
  if (c == "camera" && present(48, 0.2)) add("water_resistance", std::string("IPX7"));
  return p;
}

bson_t* product_bson(const Product& p) {
  bson_t* doc = bson_new();
  BSON_APPEND_INT64(doc, "_id", p.id);
  BSON_APPEND_UTF8(doc, "name", p.name.c_str());
  BSON_APPEND_DOUBLE(doc, "price", p.price);
  BSON_APPEND_UTF8(doc, "category", p.category.c_str());
  for (const auto& [k, v] : p.attrs) {
    if (auto i = std::get_if<int64_t>(&v)) BSON_APPEND_INT64(doc, k.c_str(), *i);
    else if (auto d = std::get_if<double>(&v)) BSON_APPEND_DOUBLE(doc, k.c_str(), *d);
    else if (auto s = std::get_if<std::string>(&v)) BSON_APPEND_UTF8(doc, k.c_str(), s->c_str());
    else BSON_APPEND_BOOL(doc, k.c_str(), std::get<bool>(v));
  }
  return doc;
}

}  // namespace attribute_bench
