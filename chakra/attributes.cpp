#include "chakra/attributes.hpp"

#include <cmath>
#include <limits>

#include "common/errors.hpp"

namespace paradyse::chakra {
namespace {

pb::AttributeProto& add(Attributes& attrs, std::string_view name) {
  pb::AttributeProto& attribute = *attrs.Add();
  attribute.set_name(std::string(name));
  return attribute;
}

std::string type_name(const pb::AttributeProto& a) {
  const google::protobuf::FieldDescriptor* field =
      a.GetDescriptor()->FindFieldByNumber(static_cast<int>(a.value_case()));
  return field == nullptr ? "no value" : "a " + field->name();
}

}  // namespace

void add_int(Attributes& attrs, std::string_view name, int64_t value) {
  add(attrs, name).set_int64_val(value);
}
void add_double(Attributes& attrs, std::string_view name, double value) {
  add(attrs, name).set_double_val(value);
}
void add_bool(Attributes& attrs, std::string_view name, bool value) {
  add(attrs, name).set_bool_val(value);
}
void add_string(Attributes& attrs, std::string_view name, std::string_view value) {
  add(attrs, name).set_string_val(std::string(value));
}
void add_ints(Attributes& attrs, std::string_view name, const std::vector<int64_t>& values) {
  pb::Int64List& list = *add(attrs, name).mutable_int64_list();
  list.mutable_values()->Add(values.begin(), values.end());
}

AttributeReader::AttributeReader(const Attributes& attrs, const std::string& source, std::string where)
    : attrs_(attrs), source_(source), where_(std::move(where)) {}

const pb::AttributeProto* AttributeReader::find(std::string_view name) const {
  for (const pb::AttributeProto& a : attrs_)
    if (a.name() == name) return &a;
  return nullptr;
}

void AttributeReader::fail(std::string_view name, const std::string& expected_but_got) const {
  throw InputError(source_, 0, where_ + "." + std::string(name), expected_but_got);
}

std::optional<int64_t> AttributeReader::integer(std::string_view name) const {
  const pb::AttributeProto* a = find(name);
  if (a == nullptr) return std::nullopt;
  using A = pb::AttributeProto;
  switch (a->value_case()) {
    case A::kInt32Val:
      return a->int32_val();
    case A::kInt64Val:
      return a->int64_val();
    case A::kUint32Val:
      return a->uint32_val();
    case A::kSint32Val:
      return a->sint32_val();
    case A::kSint64Val:
      return a->sint64_val();
    case A::kFixed32Val:
      return a->fixed32_val();
    case A::kSfixed32Val:
      return a->sfixed32_val();
    case A::kSfixed64Val:
      return a->sfixed64_val();
    case A::kUint64Val:
    case A::kFixed64Val: {
      const uint64_t value = a->value_case() == A::kUint64Val ? a->uint64_val() : a->fixed64_val();
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(name, "expected a whole number below 2^63, got " + std::to_string(value));
      return static_cast<int64_t>(value);
    }
    default:
      fail(name, "expected a whole number, got " + type_name(*a));
  }
}

std::optional<double> AttributeReader::number(std::string_view name) const {
  const pb::AttributeProto* a = find(name);
  if (a == nullptr) return std::nullopt;
  double value = 0;
  if (a->value_case() == pb::AttributeProto::kDoubleVal)
    value = a->double_val();
  else if (a->value_case() == pb::AttributeProto::kFloatVal)
    value = a->float_val();
  else
    value = static_cast<double>(*integer(name));
  if (!std::isfinite(value)) fail(name, "expected a finite number, got " + std::to_string(value));
  return value;
}

std::optional<bool> AttributeReader::flag(std::string_view name) const {
  const pb::AttributeProto* a = find(name);
  if (a == nullptr) return std::nullopt;
  if (a->value_case() != pb::AttributeProto::kBoolVal) fail(name, "expected a bool, got " + type_name(*a));
  return a->bool_val();
}

std::optional<std::string> AttributeReader::text(std::string_view name) const {
  const pb::AttributeProto* a = find(name);
  if (a == nullptr) return std::nullopt;
  if (a->value_case() != pb::AttributeProto::kStringVal)
    fail(name, "expected a string, got " + type_name(*a));
  return a->string_val();
}

std::vector<int64_t> AttributeReader::integers(std::string_view name) const {
  const pb::AttributeProto* a = find(name);
  if (a == nullptr) return {};
  if (a->value_case() == pb::AttributeProto::kInt64List)
    return {a->int64_list().values().begin(), a->int64_list().values().end()};
  if (a->value_case() == pb::AttributeProto::kInt32List)
    return {a->int32_list().values().begin(), a->int32_list().values().end()};
  fail(name, "expected a list of whole numbers, got " + type_name(*a));
}

}  // namespace paradyse::chakra
