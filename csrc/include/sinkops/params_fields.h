// One source of truth for each op's params. An op header lists its fields once, as an X-macro:
//
//   #define SINKOPS_<OP>_PARAMS(STATIC, CALL, NESTED)
//     STATIC(type, name, default)  the same for every call of one layer: dtypes, head counts,
//                                  strides, window, scale, flags. Python fills these once per
//                                  call signature (sinkops/_native.py) and keeps the struct.
//     CALL(type, name, default)    changes per call: data pointers, token / batch counts.
//                                  Python passes them per launch as one tuple, in list order.
//     NESTED(type, name)           a member struct with a list of its own (KvPool).
//
// SINKOPS_PARAMS_STRUCT(Name, LIST) turns the list into the struct and a field visitor. The
// pybind11 bindings (bind_params.h: attributes, STATIC_FIELDS / CALL_FIELDS, the per-call fill)
// are generated from the visitor, and the SYCL kernels take the struct itself by value, so a
// field is added in exactly one place. No torch, CUDA or Python headers: device code includes it.
#pragma once
#include "sinkops/types.h"

#define SINKOPS_PARAMS_MEMBER_(type, name, init) type name = init;
#define SINKOPS_PARAMS_NESTED_MEMBER_(type, name) type name{};
#define SINKOPS_PARAMS_VISIT_STATIC_(type, name, init) f(::sinkops::FieldKind::kStatic, &Self::name, #name);
#define SINKOPS_PARAMS_VISIT_CALL_(type, name, init) f(::sinkops::FieldKind::kCall, &Self::name, #name);
#define SINKOPS_PARAMS_VISIT_NESTED_(type, name) f(::sinkops::FieldKind::kNested, &Self::name, #name);

// Name::fields(f) calls f(kind, &Name::field, "field") for every field, in list order.
#define SINKOPS_PARAMS_STRUCT(Name, LIST)                                                         \
  struct Name {                                                                                   \
    LIST(SINKOPS_PARAMS_MEMBER_, SINKOPS_PARAMS_MEMBER_, SINKOPS_PARAMS_NESTED_MEMBER_)          \
    template <class F>                                                                            \
    static void fields(F&& f) {                                                                   \
      using Self = Name;                                                                          \
      LIST(SINKOPS_PARAMS_VISIT_STATIC_, SINKOPS_PARAMS_VISIT_CALL_, SINKOPS_PARAMS_VISIT_NESTED_) \
    }                                                                                             \
  };
