// Torch operators the op registry has no entry for (issue 15): the registry
// stays the fast path, and an operator without an entry (meta_fallback.h
// says which callables are operators) gets its output metadata from torch's
// own meta kernels, the way torch._dynamo's fake tensors do, and stays in
// the graph. The node is flagged (ir::Node.inferred_on_meta) so reports
// count it and loaders resolve its target by the operator rule.
//
// What meta cannot know stays a graph break with its reason:
//   - data-dependent output sizes (nonzero, unique, masked_select,
//     repeat_interleave without output_size): torch has no meta kernel or
//     says the size needs values;
//   - reading values (item, tolist, equal, allclose, is_nonzero): meta
//     tensors have none;
//   - effects beyond the outputs: out= (it writes a tensor the trace holds),
//     a call that returns nothing (printing, asserting), an in-place change
//     of an argument's sizes, strides, dtype or requires_grad; an in-place
//     update of an input or parameter when breaks are not allowed (as for
//     the registry's in-place ops);
//   - a Python value computed from tensors that reads state the trace does
//     not model: the call runs a second time on tensors that sit one element
//     into a larger storage, and the answers must agree (data_ptr,
//     storage_offset, _is_view fail this); memory placement, inference mode
//     and the lazy conj/neg/zero bits, which meta tensors cannot vary, are
//     named (kUnmodelledState).
// A Python value computed from tensors that passes is a constant: it
// depends only on dtypes, sizes, strides, device and requires_grad, which
// the input guards pin (Tensor.element_size, torch.is_complex). A call
// without tensor arguments whose result holds no tensor is a function of
// its (guarded) constants: torch.promote_types, torch.can_cast.
//
// Random operators are fine: meta kernels draw no random numbers, the graph
// runs the real op in program order, so the generator's stream is eager's.
// Fallback nodes are never dropped as dead code, since their effects are
// not described anywhere.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/ops/proto_conversion.h"
#include "lib/trace/meta_fallback.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using python::Object;

// Tensor state outside ir::TensorMeta that a meta tensor cannot be given, so
// the storage probe cannot see a call read it.
constexpr const char* kUnmodelledState[] = {"is_pinned", "is_shared", "is_inference",
                                            "is_conj", "is_neg", "_is_zerotensor"};


std::string OpName(const std::string& target) {
  std::string name = target.substr(target.rfind('.') + 1);
  // torch.ops.aten.<op>.<overload>: the op.
  if (absl::StartsWith(target, "torch.ops.aten.") && std::count(target.begin(), target.end(), '.') == 4) {
    std::string packet = target.substr(0, target.rfind('.'));
    name = packet.substr(packet.rfind('.') + 1);
  }
  return name;
}

// A meta run's error as a graph break reason and message.
std::pair<ir::GraphBreak::Reason, std::string> Classify(const std::string& target, absl::string_view error) {
  if (absl::StrContains(error, "DynamicOutputShape") || absl::StrContains(error, "data-dependent") ||
      absl::StrContains(error, "without output_size") || absl::StrContains(error, "data dependent")) {
    return {ir::GraphBreak::DATA_DEPENDENT_SHAPE,
            absl::StrCat(target, " has an output size that depends on tensor values (", error, ")")};
  }
  if (absl::StrContains(error, "item() cannot be called on meta")) {
    return {ir::GraphBreak::DATA_DEPENDENT_BRANCH, absl::StrCat(target, " reads the tensor's values")};
  }
  if (absl::StrContains(error, "no data!")) {  // Tensor.tolist, Tensor.cpu of a meta tensor
    return {ir::GraphBreak::DATA_DEPENDENT_BRANCH,
            absl::StrCat(target, " needs the tensor's data (it reads values or copies them to another device)")};
  }
  if (absl::StrContains(error, "no fake impl or Meta kernel") || absl::StrContains(error, "raises unimplemented")) {
    return {ir::GraphBreak::UNKNOWN_OP,
            absl::StrCat(target, " has no entry in the op registry and no meta kernel in torch (its output "
                                 "may depend on tensor values)")};
  }
  return {ir::GraphBreak::OTHER, absl::StrCat(target, " cannot be inferred on meta tensors: ", error)};
}

}  // namespace

absl::StatusOr<VarPtr> Translator::CallOutVariant(const std::string& target, ir::Node::Kind kind,
                                                  const std::vector<VarPtr>& args, const Kwargs& kwargs,
                                                  const ops::Value& result, const VarPtr& out) {
  // Kept in the graph when `out` already has the result's sizes, dtype and
  // device: torch then writes into it in place. A resize (or a cast into
  // another dtype) would leave the trace's description of `out` stale.
  const ops::TensorMeta& into = out->meta;
  if (!result.is_tensor() || result.as_tensor().sizes != into.sizes || result.as_tensor().dtype != into.dtype ||
      result.as_tensor().device != into.device || into.requires_grad || result.as_tensor().requires_grad) {
    return Break(ir::GraphBreak::SIDE_EFFECT,
                 absl::StrCat(target, "(out=...) into a ", ops::ToString(into), " tensor, for a result of ",
                              ops::ToString(result)),
                 "out= is traced where the tensor already has the result's sizes, dtype and device (no resize)");
  }
  if (out->source && !allow_breaks_) {
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat(target, "(out=...) mutates ", out->source->ToString()),
                 "in-place updates of inputs are side effects a single graph cannot hold; use the form that "
                 "returns its result");
  }
  absl::StatusOr<std::string> added = AddCallNode(kind, target, args, kwargs, ops::Value(into));
  if (!added.ok()) return added.status();
  graph_.MarkLastInferredOnMeta();
  absl::StatusOr<VarPtr> v = NewVarFromResult(*added, ops::Value(into));
  // The op returns `out` itself: the same tensor object.
  if (v.ok()) (*v)->identity = out->tensor_identity();
  return v;
}

absl::StatusOr<VarPtr> Translator::CallOpOnMeta(const Object& op, const std::string& target, ir::Node::Kind kind,
                                                const std::vector<ops::Value>& values,
                                                const std::vector<ops::Kwarg>& kw, const std::vector<VarPtr>& args,
                                                const Kwargs& kwargs) {
  const std::string hint = "torch's meta kernels describe this op's output only when it depends on metadata alone";
  // out=: the op writes its result into a tensor the caller passed and
  // returns that tensor. The result is inferred without it.
  VarPtr out_arg;
  std::vector<ops::Kwarg> result_kw;
  for (const ops::Kwarg& k : kw) {
    if (k.name != "out") {
      result_kw.push_back(k);
      continue;
    }
    for (const auto& [name, value] : kwargs) {
      if (name == "out") out_arg = value;
    }
    if (!out_arg || !out_arg->is_tensor() || out_arg->is_ndarray) {
      return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat(target, "(out=...) given no single tensor"),
                   "use the form that returns its result");
    }
  }
  // Under autocast: on fake tensors, with torch's autocast kernels (autocast.cc).
  const MetaOptions options = CallOptions(values, result_kw);
  if (AutocastApplies(values, result_kw) && !options.fake_mode) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat(target, " under autocast"),
                 "torch's FakeTensorMode is unavailable to infer its dtypes");
  }
  absl::StatusOr<MetaCall> call = InferOnMeta(op, values, result_kw, options);
  if (!call.ok()) {
    std::string error(call.status().message());
    if (absl::StartsWith(error, "on meta tensors it raises ")) error = error.substr(26);
    auto [reason, message] = Classify(target, error);
    return Break(reason, std::move(message), hint);
  }
  if (out_arg) return CallOutVariant(target, kind, args, kwargs, call->result, out_arg);
  bool input_tensor = false, sourced_tensor = false;
  for (size_t i = 0; i < args.size() + kwargs.size(); ++i) {
    const VarPtr& a = i < args.size() ? args[i] : kwargs[i - args.size()].second;
    input_tensor |= ContainsTensor(a);
    sourced_tensor |= a->is_tensor() && a->source != nullptr;
  }
  if (call->changes_input_metadata) {
    return Break(ir::GraphBreak::SIDE_EFFECT,
                 absl::StrCat(target, " changes the sizes, strides, dtype or requires_grad of an argument in place"),
                 "the trace's description of that tensor would be stale; use an out-of-place form");
  }
  // As for the registry's in-place ops: with breaks allowed the rewritten
  // code runs the graph on the real inputs, so the update happens there.
  if (call->mutates_input && sourced_tensor && !allow_breaks_) {
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat(target, " mutates an input in place"),
                 "in-place updates of inputs and parameters are side effects a single graph "
                 "cannot hold; use the out-of-place form");
  }
  if (!HasTensor(call->result)) {
    if (call->result.is_none() && !call->mutates_input) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                   absl::StrCat(target, " returns nothing: its effect (printing, asserting) is outside the tensors"),
                   "it runs in Python");
    }
    if (input_tensor && !call->mutates_input) {
      for (const char* state : kUnmodelledState) {
        if (OpName(target) == state) {
          return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                       absl::StrCat(target, " reads tensor state the trace does not model"), hint);
        }
      }
      MetaOptions offset = options;
      offset.offset_storage = true;
      absl::StatusOr<MetaCall> probe = InferOnMeta(op, values, kw, offset);
      if (!probe.ok() || !(probe->result == call->result)) {
        return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                     absl::StrCat(target, " reads the storage behind a tensor (",
                                  probe.ok() ? ops::ToString(probe->result) : std::string(probe.status().message()),
                                  " at another offset, ", ops::ToString(call->result), " here)"),
                     hint);
      }
    }
    // A Python value of guarded metadata or of constants: a constant.
    if (!call->mutates_input) return FromValue(call->result);
  }
  absl::StatusOr<std::string> added = AddCallNode(kind, target, args, kwargs, call->result);
  if (!added.ok()) return added.status();
  const std::string& node = *added;
  graph_.MarkLastInferredOnMeta();
  absl::StatusOr<VarPtr> out = NewVarFromResult(node, call->result);
  if (out.ok() && (*out)->kind == VarKind::kTuple) (*out)->fields = call->fields;
  return out;
}

}  // namespace dynamo::trace
