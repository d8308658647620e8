// pybind11 bindings of the params structs, generated from their field lists (params_fields.h);
// shared by sinkops._C, sinkops._sycl and the CUDA emulator module. Included only by binding TUs.
// For every params struct S the module gets
//   S()                      with an attribute per field (pointers as integers, enums as ints,
//                            nested structs by reference: p.pool.block_size = 64),
//   S.STATIC_FIELDS          names of the fields filled once per call signature, in list order,
//   S.CALL_FIELDS            names of the per-call fields in list order ("pool.cache" for nested),
// and launch bindings build each call's struct with with_call_fields(template, values).
// module_local() keeps the registrations of the modules apart when several are loaded.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "sinkops/error.h"
#include "sinkops/sparse_mla_backward_params.h"
#include "sinkops/sparse_mla_params.h"
#include "sinkops/window_attention_backward_params.h"
#include "sinkops/window_attention_params.h"

namespace sinkops::bind {

namespace py = pybind11;

// A leaf field's name: "cache", or "pool.cache" inside a nested struct (one level deep).
struct FieldName {
  const char* outer;  // nullptr at the top level
  const char* leaf;
  std::string str() const { return outer ? std::string(outer) + "." + leaf : std::string(leaf); }
};

// Calls f(kind, access, FieldName) for every leaf field of S in list order; access(s) returns a
// reference to that field of s. Nested structs are walked in place. No allocation: launches use it.
template <class S, class F, class Access>
void for_each_leaf(F&& f, Access access, const char* outer) {
  S::fields([&](FieldKind kind, auto member, const char* name) {
    using Field = std::remove_reference_t<decltype(std::declval<S&>().*member)>;
    auto field_access = [access, member](auto& root) -> auto& { return access(root).*member; };
    if constexpr (std::is_class_v<Field>) {
      if (outer != nullptr) throw Error("params structs nest one level deep only");
      for_each_leaf<Field>(f, field_access, name);
    } else {
      f(kind, field_access, FieldName{outer, name});
    }
  });
}
template <class S, class F>
void for_each_leaf(F&& f) {
  for_each_leaf<S>(f, [](auto& s) -> auto& { return s; }, nullptr);
}

template <class Field>
void assign(Field& field, const py::handle& value, const FieldName& name) {
  if constexpr (std::is_pointer_v<Field>) {
    field = reinterpret_cast<Field>(value.cast<uintptr_t>());
  } else if constexpr (std::is_enum_v<Field>) {
    field = static_cast<Field>(value.cast<int32_t>());
  } else if constexpr (std::is_integral_v<Field>) {
    const int64_t v = value.cast<int64_t>();
    if (v < int64_t(std::numeric_limits<Field>::min()) || v > int64_t(std::numeric_limits<Field>::max()))
      throw Error(name.str() + " = " + std::to_string(v) + " does not fit its " +
                  std::to_string(8 * sizeof(Field)) + "-bit field");
    field = static_cast<Field>(v);
  } else {
    field = value.cast<Field>();
  }
}

// A copy of `tmpl` with its CALL fields set from `values` (a tuple in CALL_FIELDS order).
template <class S>
S with_call_fields(const S& tmpl, const py::tuple& values) {
  S p = tmpl;
  size_t i = 0;
  const size_t n = values.size();
  for_each_leaf<S>([&](FieldKind kind, auto access, const FieldName& name) {
    if (kind != FieldKind::kCall) return;
    if (i >= n) throw Error("too few per-call values for " + name.str());
    assign(access(p), values[i++], name);
  });
  if (i != n) throw Error("per-call values: expected " + std::to_string(i) + ", got " + std::to_string(n));
  return p;
}

template <class S>
py::class_<S> bind_struct(py::module_& m, const char* name) {
  py::class_<S> cls(m, name, py::module_local());
  cls.def(py::init<>());
  py::list static_fields, call_fields;
  for_each_leaf<S>([&](FieldKind kind, auto, const FieldName& leaf) {
    (kind == FieldKind::kCall ? call_fields : static_fields).append(leaf.str());
  });
  cls.attr("STATIC_FIELDS") = py::tuple(static_fields);
  cls.attr("CALL_FIELDS") = py::tuple(call_fields);
  S::fields([&](FieldKind, auto member, const char* field_name) {
    using Field = std::remove_reference_t<decltype(std::declval<S&>().*member)>;
    if constexpr (std::is_class_v<Field>) {
      cls.def_readwrite(field_name, member);  // returned by reference: p.pool.block_size = ... edits p
    } else if constexpr (std::is_pointer_v<Field>) {
      cls.def_property(
          field_name, [member](const S& s) { return reinterpret_cast<uintptr_t>(s.*member); },
          [member](S& s, uintptr_t v) { s.*member = reinterpret_cast<Field>(v); });
    } else if constexpr (std::is_enum_v<Field>) {
      cls.def_property(
          field_name, [member](const S& s) { return static_cast<int32_t>(s.*member); },
          [member](S& s, int32_t v) { s.*member = static_cast<Field>(v); });
    } else {
      cls.def_readwrite(field_name, member);
    }
  });
  return cls;
}

inline void bind_params(py::module_& m) {
  bind_struct<WindowAttentionParams>(m, "WindowAttentionParams");
  bind_struct<WindowAttentionBackwardParams>(m, "WindowAttentionBackwardParams");
  bind_struct<SparseMlaPrefillParams>(m, "SparseMlaPrefillParams");
  bind_struct<SparseMlaBackwardParams>(m, "SparseMlaBackwardParams");
  bind_struct<KvPool>(m, "KvPool");
  bind_struct<SparseMlaDecodeParams>(m, "SparseMlaDecodeParams");
  // Enum values as the Python side mirrors them (sinkops/_native.py checks these).
  py::dict enums;
  enums["DType"] = py::dict(py::arg("float16") = int(DType::kFloat16), py::arg("bfloat16") = int(DType::kBFloat16),
                            py::arg("float32") = int(DType::kFloat32));
  enums["SinkMode"] = py::dict(py::arg("none") = int(SinkMode::kNone), py::arg("key0") = int(SinkMode::kKey0),
                               py::arg("null") = int(SinkMode::kNull));
  enums["KvCacheLayout"] = py::dict(py::arg("v4") = int(KvCacheLayout::kV4), py::arg("v32") = int(KvCacheLayout::kV32));
  m.attr("ENUMS") = enums;
}

}  // namespace sinkops::bind
