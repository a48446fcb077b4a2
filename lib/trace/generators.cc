// Generators: what the translator knows about generator expressions, and the
// iterators made over them (enumerate, zip, map, filter).
//
//   all(_check_arg_device(x) for x in tensor_args)
//
// Calling a generator expression runs nothing: it makes a kGenerator tracker
// holding the suspended frame (its one argument, the iterator `.0`, already
// bound). Whatever iterates it resumes that frame, inlined like any call,
// until its next YIELD_VALUE, so values are produced one at a time and only
// as many as the consumer takes: any() and all() stop at the deciding value,
// FOR_ITER takes one per iteration, `in` stops at a match. Consumers that
// take everything (list, tuple, sum, sorted, set, unpacking, str.join, ...)
// drain it. A generator that leaves the trace untouched is rebuilt by the
// rewritten code (calling the expression's function again); one the trace
// has started cannot be, and a use the translator does not model (send,
// attributes, passing it to code it cannot see) is a graph break.
#include <Python.h>

#include <algorithm>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/bytecode/opcodes.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {

// The state behind a kGenerator tracker.
struct GeneratorState {
  enum class Kind {
    kFrame, kEnumerate, kZip, kMap, kFilter, kChain, kChainFromIterable, kIslice,
    kCount, kRepeat, kCycle, kAccumulate, kGroupby, kGrouper, kSequence,
  };
  Kind kind = Kind::kFrame;
  // kFrame: the expression's frame, suspended at its start or after a yield.
  std::unique_ptr<Translator::Frame> frame;
  bool started = false;
  bool running = false;  // resuming it from inside itself is Python's ValueError
  bool finished = false;
  VarPtr returned;  // kFrame: what the generator function returned, once it has
  // Adapters: the iterators they pull from (generators or iterator trackers),
  // map's and filter's function, enumerate's next count.
  std::vector<VarPtr> inputs;
  VarPtr function;
  int64_t count = 0;
  // kChain: the iterables, each made an iterator when reached (count: the
  // current one). kIslice: CPython's islice state (count is `cnt`).
  int64_t next = 0, stop = -1, step = 1;
  // kSequence: collections.abc.Sequence.__iter__ over inputs[0], `count`
  // the next index.
  // kCount: the next value and the step; kRepeat: the object (stop: the
  // times left, -1 for ever); kAccumulate: the running total (null before
  // the first value) and `initial` (null once yielded or when not given).
  VarPtr value, increment, initial;
  // kCycle: the values of the first pass, yielded again in turn (`next`).
  std::vector<VarPtr> saved;
  // kGroupby: CPython's groupbyobject (tgtkey, currkey, currvalue; null
  // when unset) and `count` numbers its current grouper. kGrouper:
  // inputs[0] is its groupby, `value` its key, `count` its number.
  VarPtr tgtkey, currkey, currvalue;
};

namespace {

bool AnyGenerator(const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  for (const VarPtr& a : args) {
    if (a->kind == VarKind::kGenerator) return true;
  }
  for (const auto& kv : kwargs) {
    if (kv.second->kind == VarKind::kGenerator) return true;
  }
  return false;
}

VarPtr NewGenerator(GeneratorState::Kind kind) {
  VarPtr v = Var::OfKind(VarKind::kGenerator, python::Object());
  v->generator = std::make_shared<GeneratorState>();
  v->generator->kind = kind;
  return v;
}

// BINARY_OP's index of +, which count and accumulate add with.
int NbAdd() {
  static const int index = BinaryOpIndex("NB_ADD");
  return index;
}

// `sep.join` of a str or bytes: a method that takes all of its iterable.
bool IsJoin(const VarPtr& fn) {
  if (!fn->object || !PyCFunction_Check(fn->object.get())) return false;
  PyObject* self = PyCFunction_GET_SELF(fn->object.get());
  if (self == nullptr || !(PyUnicode_Check(self) || PyBytes_Check(self))) return false;
  return absl::string_view(reinterpret_cast<PyCFunctionObject*>(fn->object.get())->m_ml->ml_name) ==
         "join";
}

}  // namespace

VarPtr Translator::MakeSequenceIterator(const VarPtr& iter_function, VarPtr sequence) {
  VarPtr v = NewGenerator(GeneratorState::Kind::kSequence);
  v->generator->inputs = {sequence};
  // Untouched, it is rebuilt as Python made it: Sequence.__iter__(sequence).
  v->self = iter_function;
  v->items = {std::move(sequence)};
  return v;
}

VarPtr Translator::MakeChain(std::vector<VarPtr> iterables) {
  VarPtr v = NewGenerator(GeneratorState::Kind::kChain);
  v->generator->inputs = std::move(iterables);
  return v;
}

VarPtr Translator::MakeChainFromIterable(VarPtr source) {
  VarPtr v = NewGenerator(GeneratorState::Kind::kChainFromIterable);
  v->generator->inputs = {std::move(source)};
  return v;
}

VarPtr Translator::MakeIslice(VarPtr iterator, int64_t start, int64_t stop, int64_t step) {
  VarPtr v = NewGenerator(GeneratorState::Kind::kIslice);
  v->generator->inputs = {std::move(iterator)};
  v->generator->next = start;
  v->generator->stop = stop;
  v->generator->step = step;
  return v;
}

VarPtr Translator::MakeItertool(const std::string& name, VarPtr iterator, VarPtr function, VarPtr value,
                                VarPtr step, int64_t times) {
  using K = GeneratorState::Kind;
  const K kind = name == "count"        ? K::kCount
                 : name == "repeat"     ? K::kRepeat
                 : name == "cycle"      ? K::kCycle
                 : name == "accumulate" ? K::kAccumulate
                                        : K::kGroupby;
  VarPtr v = NewGenerator(kind);
  GeneratorState& g = *v->generator;
  if (iterator) g.inputs = {std::move(iterator)};
  g.function = std::move(function);
  if (kind == K::kAccumulate) {
    g.initial = std::move(value);
  } else {
    g.value = std::move(value);
  }
  g.increment = std::move(step);
  g.stop = times;
  return v;
}

absl::StatusOr<bool> Translator::GroupbyStep(const VarPtr& groupby) {
  GeneratorState& g = *groupby->generator;
  absl::StatusOr<std::optional<VarPtr>> v = NextValue(g.inputs[0]);
  if (!v.ok()) return v.status();
  if (!*v) return false;
  VarPtr key = **v;
  if (g.function && !g.function->is_none()) {
    absl::StatusOr<VarPtr> k = Call(g.function, {**v}, {});
    if (!k.ok()) return k.status();
    key = *k;
  }
  g.currvalue = **v;
  g.currkey = key;
  return true;
}

absl::StatusOr<bool> Translator::KeysEqual(const VarPtr& a, const VarPtr& b) {
  absl::StatusOr<VarPtr> eq = Compare("==", a, b);
  if (!eq.ok()) return eq.status();
  return Truthy(*eq);
}

bool Translator::IsGeneratorExpression(const bytecode::DecodedCode& code) {
  // Generator functions (def ... yield) may hold try/finally and with blocks
  // that CPython runs when an abandoned generator is closed (GeneratorExit
  // raised at the yield it is suspended at); the trace does not model that,
  // so a generator function is traced only when no handler covers a yield,
  // but the one 3.12+ wraps every generator in (StopIteration to
  // RuntimeError, CALL_INTRINSIC_1 3) and `yield from`'s CLEANUP_THROW
  // (reached by throw() only): closing it then runs no code. Handlers over
  // code without a yield (3.12's inlined comprehensions, a try/except
  // around a computation) run only when that code raises, which the trace
  // models.
  if (!(code.flags & CO_GENERATOR) || (code.flags & (CO_COROUTINE | CO_ASYNC_GENERATOR))) return false;
  if (absl::EndsWith(code.qualname, "<genexpr>")) return true;
  for (const bytecode::ExceptionTableEntry& e : code.exception_table) {
    const bytecode::Instruction* handler = code.At(e.target);
    if (handler != nullptr && handler->name == "CLEANUP_THROW") continue;
    if (handler != nullptr && handler->name == "CALL_INTRINSIC_1" && handler->arg == 3) continue;
    for (const bytecode::Instruction& in : code.instructions) {
      if (in.offset >= e.start && in.offset < e.end && in.name == "YIELD_VALUE") return false;
    }
  }
  return true;
}

VarPtr Translator::MakeGenerator(const VarPtr& function, Frame frame, std::vector<VarPtr> args) {
  VarPtr v = NewGenerator(GeneratorState::Kind::kFrame);
  v->generator->frame = std::make_unique<Frame>(std::move(frame));
  v->self = function;
  v->items = std::move(args);
  return v;
}

absl::Status Translator::ReturnGenerator(Frame& f) {
  if (!f.generator) {
    return Break(ir::GraphBreak::UNSUPPORTED_OPCODE, "generator functions are not traced",
                 "use a generator expression or a list comprehension");
  }
  // The frame starts where RETURN_GENERATOR returned the generator; the
  // first resumption sends None, which the following POP_TOP drops.
  f.stack.push_back(Var::Constant(python::None()));
  return absl::OkStatus();
}

absl::Status Translator::YieldValue(Frame& f, std::optional<VarPtr>& result) {
  if (!f.generator || f.stack.empty()) return absl::InternalError("YIELD_VALUE outside a generator");
  result = std::move(f.stack.back());
  f.stack.pop_back();
  f.yielded = true;
  ++f.ip;  // resumes after the yield
  return absl::OkStatus();
}

VarPtr Translator::ReturnedValue(const VarPtr& exhausted) {
  if (exhausted->kind == VarKind::kGenerator && exhausted->generator->returned) return exhausted->generator->returned;
  return Var::Constant(python::None());
}

absl::StatusOr<std::optional<VarPtr>> Translator::NextValue(const VarPtr& it) {
  if (it->kind == VarKind::kIterator) return IteratorNext(it);
  if (it->kind != VarKind::kGenerator) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("iterating over ", Describe(*it)),
                 "iterate over sequences, ranges, dicts, tensors or generator expressions");
  }
  GeneratorState& g = *it->generator;
  if (g.finished) return std::nullopt;
  if (g.running) {
    return Break(ir::GraphBreak::OTHER, "a generator resumes itself",
                 "the function would raise ValueError: generator already executing");
  }
  g.running = true;
  ++it->position;
  struct Done {
    GeneratorState& g;
    ~Done() { g.running = false; }
  } done{g};
  auto end = [&g]() -> std::optional<VarPtr> {
    g.finished = true;
    g.frame.reset();
    g.inputs.clear();
    return std::nullopt;
  };
  switch (g.kind) {
    case GeneratorState::Kind::kFrame: {
      if (frames_.size() >= kMaxInlineDepth) {
        return Break(ir::GraphBreak::OTHER, "generators nest deeper than the translator inlines",
                     "recursion is not traced");
      }
      Frame& f = *g.frame;
      if (g.started) f.stack.push_back(Var::Constant(python::None()));  // the value sent in
      g.started = true;
      absl::StatusOr<VarPtr> value = RunFrame(f);
      if (!value.ok()) {
        if (IsRaised(value.status())) end();  // a generator that raised is finished
        return value.status();
      }
      if (!f.yielded) {  // returned: StopIteration(value)
        g.returned = *value;
        return end();
      }
      f.yielded = false;
      return *value;
    }
    case GeneratorState::Kind::kEnumerate: {
      absl::StatusOr<std::optional<VarPtr>> v = NextValue(g.inputs[0]);
      if (!v.ok()) return v.status();
      if (!*v) return end();
      return Var::Tuple({Var::Constant(python::FromLong(g.count++)), **v});
    }
    case GeneratorState::Kind::kZip:
    case GeneratorState::Kind::kMap: {
      // Pulled in order, stopping at the first exhausted one, as zip does.
      std::vector<VarPtr> row;
      for (const VarPtr& input : g.inputs) {
        absl::StatusOr<std::optional<VarPtr>> v = NextValue(input);
        if (!v.ok()) return v.status();
        if (!*v) return end();
        row.push_back(**v);
      }
      if (g.kind == GeneratorState::Kind::kZip) return Var::Tuple(std::move(row));
      absl::StatusOr<VarPtr> r = Call(g.function, std::move(row), {});
      if (!r.ok()) return r.status();
      return *r;
    }
    case GeneratorState::Kind::kChain:
      // itertools.chain: iter() of each iterable only once the previous
      // one is exhausted, as chain_next does.
      while (g.count < static_cast<int64_t>(g.inputs.size())) {
        VarPtr& current = g.inputs[static_cast<size_t>(g.count)];
        if (current->kind != VarKind::kIterator && current->kind != VarKind::kGenerator) {
          absl::StatusOr<VarPtr> iter = GetIter(current);
          if (!iter.ok()) return iter.status();
          current = *iter;
        }
        absl::StatusOr<std::optional<VarPtr>> v = NextValue(current);
        if (!v.ok()) return v.status();
        if (*v) return **v;
        ++g.count;
      }
      return end();
    case GeneratorState::Kind::kChainFromIterable:
      // chain.from_iterable: the next iterable is taken from the source
      // only once the active one is exhausted (chain_next).
      for (;;) {
        if (g.inputs.size() < 2) {
          absl::StatusOr<std::optional<VarPtr>> iterable = NextValue(g.inputs[0]);
          if (!iterable.ok()) return iterable.status();
          if (!*iterable) return end();
          absl::StatusOr<VarPtr> active = GetIter(**iterable);
          if (!active.ok()) return active.status();
          g.inputs.push_back(*active);
        }
        absl::StatusOr<std::optional<VarPtr>> v = NextValue(g.inputs[1]);
        if (!v.ok()) return v.status();
        if (*v) return **v;
        g.inputs.pop_back();
      }
    case GeneratorState::Kind::kIslice: {
      // itertools.islice's islice_next: skip up to `next`, stop at `stop`.
      while (g.count < g.next) {
        absl::StatusOr<std::optional<VarPtr>> v = NextValue(g.inputs[0]);
        if (!v.ok()) return v.status();
        if (!*v) return end();
        ++g.count;
      }
      if (g.stop != -1 && g.count >= g.stop) return end();
      absl::StatusOr<std::optional<VarPtr>> v = NextValue(g.inputs[0]);
      if (!v.ok()) return v.status();
      if (!*v) return end();
      ++g.count;
      int64_t old_next = g.next;
      g.next += g.step;
      if (g.next < old_next || (g.stop != -1 && g.next > g.stop)) g.next = g.stop;
      return **v;
    }
    case GeneratorState::Kind::kSequence: {
      // Sequence.__iter__: self[i] for i = 0, 1, ... until it raises
      // IndexError, which ends the iteration (any other exception passes).
      absl::StatusOr<VarPtr> item = Subscript(g.inputs[0], Var::Constant(python::FromLong(g.count)));
      if (!item.ok()) {
        if (IsRaised(item.status()) && raised_ && raised_->object &&
            PyErr_GivenExceptionMatches(raised_->object.get(), PyExc_IndexError)) {
          raised_ = nullptr;
          return end();
        }
        if (IsRaised(item.status())) end();
        return item.status();
      }
      ++g.count;
      return *item;
    }
    case GeneratorState::Kind::kCount: {
      // count_next: the value, then value + step (PyNumber_Add).
      VarPtr current = g.value;
      absl::StatusOr<VarPtr> after = BinaryOp(NbAdd(), current, g.increment);
      if (!after.ok()) return after.status();
      g.value = *after;
      return current;
    }
    case GeneratorState::Kind::kRepeat:
      if (g.stop == 0) return end();
      if (g.stop > 0) --g.stop;
      return g.value;
    case GeneratorState::Kind::kCycle: {
      // cycle_next: the first pass saves each value; then the saved ones
      // in turn (none saved: exhausted).
      if (!g.inputs.empty()) {
        absl::StatusOr<std::optional<VarPtr>> v = NextValue(g.inputs[0]);
        if (!v.ok()) return v.status();
        if (*v) {
          g.saved.push_back(**v);
          return **v;
        }
        g.inputs.clear();
      }
      if (g.saved.empty()) return end();
      VarPtr item = g.saved[static_cast<size_t>(g.next)];
      if (++g.next >= static_cast<int64_t>(g.saved.size())) g.next = 0;
      return item;
    }
    case GeneratorState::Kind::kAccumulate: {
      // accumulate_next: `initial` first, as the starting total.
      if (g.initial && !g.initial->is_none()) {
        g.value = g.initial;
        g.initial = nullptr;
        return g.value;
      }
      absl::StatusOr<std::optional<VarPtr>> v = NextValue(g.inputs[0]);
      if (!v.ok()) return v.status();
      if (!*v) return end();
      if (!g.value) {
        g.value = **v;
        return g.value;
      }
      absl::StatusOr<VarPtr> total = g.function && !g.function->is_none() ? Call(g.function, {g.value, **v}, {})
                                                                         : BinaryOp(NbAdd(), g.value, **v);
      if (!total.ok()) return total.status();
      g.value = *total;
      return g.value;
    }
    case GeneratorState::Kind::kGroupby: {
      // groupby_next: skip what is left of the current group, then a new
      // grouper for the next key.
      ++g.count;  // the previous grouper yields nothing more
      for (;;) {
        if (g.currkey) {
          if (!g.tgtkey) break;
          absl::StatusOr<bool> same = KeysEqual(g.tgtkey, g.currkey);
          if (!same.ok()) return same.status();
          if (!*same) break;
        }
        absl::StatusOr<bool> stepped = GroupbyStep(it);
        if (!stepped.ok()) return stepped.status();
        if (!*stepped) return end();
      }
      g.tgtkey = g.currkey;
      VarPtr grouper = NewGenerator(GeneratorState::Kind::kGrouper);
      grouper->generator->inputs = {it};
      grouper->generator->value = g.tgtkey;
      grouper->generator->count = g.count;
      return Var::Tuple({g.currkey, grouper});
    }
    case GeneratorState::Kind::kGrouper: {
      // _grouper_next: only the groupby's current grouper yields, while
      // the values' keys equal its own.
      const VarPtr& parent = g.inputs[0];
      GeneratorState& p = *parent->generator;
      if (p.count != g.count || p.finished) return end();
      if (!p.currvalue) {
        if (p.running) {
          return Break(ir::GraphBreak::OTHER, "a groupby's grouper advances it from inside",
                       "the function would raise ValueError: generator already executing");
        }
        p.running = true;
        absl::StatusOr<bool> stepped = GroupbyStep(parent);
        p.running = false;
        if (!stepped.ok()) return stepped.status();
        if (!*stepped) return end();
      }
      absl::StatusOr<bool> same = KeysEqual(g.value, p.currkey);
      if (!same.ok()) return same.status();
      if (!*same) return end();
      VarPtr r = p.currvalue;
      p.currvalue = nullptr;
      return r;
    }
    case GeneratorState::Kind::kFilter:
      for (;;) {
        absl::StatusOr<std::optional<VarPtr>> v = NextValue(g.inputs[0]);
        if (!v.ok()) return v.status();
        if (!*v) return end();
        VarPtr test = **v;
        if (!g.function->is_none()) {
          absl::StatusOr<VarPtr> r = Call(g.function, {**v}, {});
          if (!r.ok()) return r.status();
          test = *r;
        }
        absl::StatusOr<bool> keep = Truthy(test);
        if (!keep.ok()) return keep.status();
        if (*keep) return **v;
      }
  }
  return absl::InternalError("unknown generator kind");
}

absl::StatusOr<std::vector<VarPtr>> Translator::DrainGenerator(const VarPtr& generator) {
  std::vector<VarPtr> items;
  for (;;) {
    absl::StatusOr<std::optional<VarPtr>> v = NextValue(generator);
    if (!v.ok()) return v.status();
    if (!*v) return items;
    if (items.size() >= 100000) {
      return Break(ir::GraphBreak::OTHER, "a generator of more than 100,000 values",
                   "loops are unrolled; use a tensor operation instead");
    }
    items.push_back(**std::move(v));
  }
}

absl::Status Translator::ForIterGenerator(Frame& f, const bytecode::Instruction& in) {
  VarPtr generator = f.stack.back();
  absl::StatusOr<std::optional<VarPtr>> v = NextValue(generator);
  if (!v.ok()) return v.status();
  if (*v) {
    f.stack.push_back(**std::move(v));
    return absl::OkStatus();
  }
  return EndLoop(f, in);
}

absl::StatusOr<bool> Translator::GeneratorContains(const VarPtr& generator, const VarPtr& item) {
  for (;;) {
    absl::StatusOr<std::optional<VarPtr>> v = NextValue(generator);
    if (!v.ok()) return v.status();
    if (!*v) return false;
    absl::StatusOr<VarPtr> eq = Compare("==", item, **v);
    if (!eq.ok()) return eq.status();
    if ((*eq)->kind != VarKind::kConstant) {
      return Break(ir::GraphBreak::DATA_DEPENDENT_BRANCH, "'in' over tensors",
                   "membership of tensors depends on their values");
    }
    if ((*eq)->object.get() == Py_True) return true;
  }
}

python::Object GeneratorClass(const Var& v) {
  using Kind = GeneratorState::Kind;
  if (!v.generator) return python::Object();
  auto builtin = [](PyTypeObject* t) { return python::Object::Borrow(reinterpret_cast<PyObject*>(t)); };
  auto itertools = [](const char* name) { return python::Object::Borrow(StdlibObject("itertools", name)); };
  switch (v.generator->kind) {
    case Kind::kFrame:
    case Kind::kSequence:  // collections.abc.Sequence.__iter__ is a generator function
      return python::Object::Borrow(StdlibObject("types", "GeneratorType"));
    case Kind::kEnumerate: return builtin(&PyEnum_Type);
    case Kind::kZip: return builtin(&PyZip_Type);
    case Kind::kMap: return builtin(&PyMap_Type);
    case Kind::kFilter: return builtin(&PyFilter_Type);
    case Kind::kChain:
    case Kind::kChainFromIterable: return itertools("chain");
    case Kind::kIslice: return itertools("islice");
    case Kind::kCount: return itertools("count");
    case Kind::kRepeat: return itertools("repeat");
    case Kind::kCycle: return itertools("cycle");
    case Kind::kAccumulate: return itertools("accumulate");
    case Kind::kGroupby: return itertools("groupby");
    case Kind::kGrouper: return itertools("_grouper");
  }
  return python::Object();
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallWithGenerator(const VarPtr& fn,
                                                                    std::vector<VarPtr>& args,
                                                                    Kwargs& kwargs) {
  if (!AnyGenerator(args, kwargs)) return std::nullopt;
  // Code the translator inlines iterates the generator as Python would.
  if (fn->kind == VarKind::kFunction || fn->kind == VarKind::kNNModule ||
      fn->kind == VarKind::kMethod) {
    return std::nullopt;
  }
  // Replaces each generator argument by a tuple of all its values.
  auto drain = [&]() -> absl::Status {
    for (VarPtr& a : args) {
      if (a->kind != VarKind::kGenerator) continue;
      absl::StatusOr<std::vector<VarPtr>> items = DrainGenerator(a);
      if (!items.ok()) return items.status();
      a = Var::Tuple(*std::move(items));
    }
    return absl::OkStatus();
  };
  auto refuse = [&]() -> absl::StatusOr<VarPtr> {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                 absl::StrCat("passing a generator to ", Describe(*fn)),
                 "generators are traced when iterated by the function itself or by a builtin "
                 "that consumes them (all, any, sum, list, tuple, ...); pass a list instead");
  };
  if (IsJoin(fn) && args.size() == 1 && kwargs.empty()) {
    if (absl::Status s = drain(); !s.ok()) return s;
    return std::nullopt;
  }
  if (fn->kind != VarKind::kBuiltin) return refuse();
  const std::string& name = fn->name;
  const bool one_generator = args.size() == 1 && args[0]->kind == VarKind::kGenerator;

  if ((name == "list" || name == "tuple" || name == "set" || name == "frozenset" ||
       name == "sorted" || name == "sum") &&
      !args.empty() && args[0]->kind == VarKind::kGenerator) {
    return std::nullopt;  // they take all of it (Materialize drains it)
  }
  if ((name == "min" || name == "max") && one_generator) {
    if (absl::Status s = drain(); !s.ok()) return s;
    return std::nullopt;
  }
  if (name == "dict" && one_generator && kwargs.empty()) {
    absl::StatusOr<std::vector<VarPtr>> pairs = DrainGenerator(args[0]);
    if (!pairs.ok()) return pairs.status();
    std::vector<VarPtr> keys, values;
    for (const VarPtr& pair : *pairs) {
      absl::StatusOr<std::vector<VarPtr>> kv = Unpack(pair, 2);
      if (!kv.ok()) return kv.status();
      // A repeated key keeps its first place and its last value.
      if (absl::Status s = AddDictEntry(keys, values, (*kv)[0], (*kv)[1]); !s.ok()) return s;
    }
    return Var::Dict(std::move(keys), std::move(values));
  }
  if (name == "iter" && one_generator) return args[0];
  // They ask only its class (GeneratorClass), never its values.
  if ((name == "isinstance" || name == "type") && args.size() <= 2 && kwargs.empty() &&
      args[0]->kind == VarKind::kGenerator && (args.size() == 1 || args[1]->kind != VarKind::kGenerator)) {
    return std::nullopt;
  }
  if (name == "next" && (args.size() == 1 || args.size() == 2) &&
      args[0]->kind == VarKind::kGenerator) {
    absl::StatusOr<std::optional<VarPtr>> v = NextValue(args[0]);
    if (!v.ok()) return v.status();
    if (*v) return **v;
    if (args.size() == 2) return args[1];
    // StopIteration carries what a generator function returned.
    const VarPtr& returned = args[0]->generator->returned;
    if (returned && !returned->is_none()) {
      return Break(ir::GraphBreak::OTHER, "next() on a generator that returned a value",
                   "the function would raise StopIteration(value)");
    }
    return absl::StatusOr<VarPtr>(RaiseNew(PyExc_StopIteration, ""));
  }
  if ((name == "any" || name == "all") && one_generator && kwargs.empty()) {
    const bool any = name == "any";
    for (;;) {
      absl::StatusOr<std::optional<VarPtr>> v = NextValue(args[0]);
      if (!v.ok()) return v.status();
      if (!*v) return Var::Constant(python::FromBool(!any));
      absl::StatusOr<bool> t = Truthy(**v);
      if (!t.ok()) return t.status();
      if (*t == any) return Var::Constant(python::FromBool(any));
    }
  }
  if (std::optional<absl::StatusOr<VarPtr>> lazy = LazyAdapter(name, args, kwargs)) return *std::move(lazy);
  return refuse();
}

std::optional<absl::StatusOr<VarPtr>> Translator::LazyAdapter(const std::string& name,
                                                              const std::vector<VarPtr>& args,
                                                              const Kwargs& kwargs) {
  auto refuse = [&]() -> std::optional<absl::StatusOr<VarPtr>> { return std::nullopt; };
  // Each value is pulled when it is taken.
  if (name == "enumerate" && !args.empty() && args.size() <= 2) {
    VarPtr start = args.size() == 2 ? args[1] : nullptr;
    for (const auto& [k, v] : kwargs) {
      if (k != "start") return refuse();
      start = v;
    }
    VarPtr out = NewGenerator(GeneratorState::Kind::kEnumerate);
    if (start) {
      absl::StatusOr<int64_t> n = AsInt(start);
      if (!n.ok()) return refuse();
      out->generator->count = *n;
    }
    absl::StatusOr<VarPtr> it = GetIter(args[0]);
    if (!it.ok()) return it.status();
    out->generator->inputs = {*it};
    return out;
  }
  const bool mapping = name == "map" || name == "filter";
  if ((name == "zip" || mapping) && kwargs.empty() && (!mapping || args.size() >= 2) &&
      (name != "filter" || args.size() == 2)) {
    VarPtr out = NewGenerator(name == "zip"   ? GeneratorState::Kind::kZip
                              : name == "map" ? GeneratorState::Kind::kMap
                                              : GeneratorState::Kind::kFilter);
    for (size_t i = mapping ? 1 : 0; i < args.size(); ++i) {
      absl::StatusOr<VarPtr> it = GetIter(args[i]);
      if (!it.ok()) return it.status();
      out->generator->inputs.push_back(*it);
    }
    if (mapping) {
      if (args[0]->kind == VarKind::kGenerator) return refuse();
      out->generator->function = args[0];
    }
    return out;
  }
  return refuse();
}

std::optional<absl::StatusOr<VarPtr>> Translator::LazyOverList(const std::string& name,
                                                               const std::vector<VarPtr>& args,
                                                               const Kwargs& kwargs) {
  // A list may change before these take their values (CPython's iterators
  // read it live): they pull lazily, as they do over generators.
  if (name != "enumerate" && name != "zip" && name != "map" && name != "filter") return std::nullopt;
  const size_t first = name == "map" || name == "filter" ? 1 : 0;
  bool any_list = false;
  for (size_t i = first; i < args.size(); ++i) any_list |= args[i]->kind == VarKind::kList;
  if (!any_list) return std::nullopt;
  return LazyAdapter(name, args, kwargs);
}

namespace {

// Where nn.Module's generators look for each kind of member.
const char* MemberDict(absl::string_view kind) {
  if (kind == "parameters") return "_parameters";
  if (kind == "buffers") return "_buffers";
  return "_modules";
}

// The path to a module's member `name` in its dict (module._modules['0'],
// module._parameters['weight']): exact whatever the name, where an
// attribute read could find a class attribute first.
SourcePtr MemberPath(const SourcePtr& module, const char* dict, const std::string& name) {
  return Source::Item(Source::Attr(module, dict), name);
}

}  // namespace

absl::Status Translator::GuardModuleTree(PyObject* module, const SourcePtr& source, bool recurse,
                                         absl::string_view kind, absl::flat_hash_set<PyObject*>& seen) {
  if (!seen.insert(module).second) return absl::OkStatus();
  // The children: the dict's type, length and every entry (a module's
  // identity, or None).
  python::Object children = Attr(module, "_modules");
  if (!children || !PyDict_Check(children.get())) return absl::InternalError("a module without _modules");
  absl::StatusOr<VarPtr> wrapped = Wrap(children, Source::Attr(source, "_modules"));
  if (!wrapped.ok()) return wrapped.status();
  if (kind != "modules" && kind != "children") {
    // Parameters or buffers: which names hold None (skipped by the
    // generators) and which tensor each other name holds, yielded or not
    // (a tied weight is yielded once: untying it yields one more).
    const char* dict_name = MemberDict(kind);
    python::Object members = Attr(module, dict_name);
    if (!members || !PyDict_Check(members.get())) return absl::InternalError("a module without its members");
    SourcePtr dict_source = Source::Attr(source, dict_name);
    guards_.LengthMatch(dict_source, PyDict_Size(members.get()));
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(members.get(), &pos, &key, &value)) {
      absl::StatusOr<std::string> name = python::AsString(python::Object::Borrow(key));
      if (!name.ok()) return name.status();
      if (value == Py_None) {
        guards_.EqualsMatch(Source::Item(dict_source, *name), python::Object::Borrow(value));
      } else {
        guards_.IdMatch(Source::Item(dict_source, *name), python::Object::Borrow(value));
      }
    }
  }
  if (!recurse) return absl::OkStatus();
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(children.get(), &pos, &key, &value)) {
    if (value == Py_None) continue;
    absl::StatusOr<std::string> name = python::AsString(python::Object::Borrow(key));
    if (!name.ok()) return name.status();
    if (absl::Status s = GuardModuleTree(value, MemberPath(source, "_modules", *name), true, kind, seen); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallModuleTreeGenerator(
    const VarPtr& fn, const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  if (!fn->self || fn->self->kind != VarKind::kNNModule || !fn->object ||
      !PyFunction_Check(fn->object.get()) || !fn->self->source) {
    return std::nullopt;
  }
  PyObject* code = PyFunction_GetCode(fn->object.get());
  if (!(reinterpret_cast<PyCodeObject*>(code)->co_flags & CO_GENERATOR)) return std::nullopt;
  python::Object qualname =
      python::Object::Steal(PyObject_GetAttrString(fn->object.get(), "__qualname__"));
  absl::StatusOr<std::string> name = qualname ? python::AsString(qualname) : absl::NotFoundError("");
  python::ClearError();
  // torch's own implementations (not an override): they only read the
  // module tree, so running them for real has no effect to replay. Each is
  // run as its named_ form, whose names are the paths of what it yields.
  static constexpr std::pair<absl::string_view, absl::string_view> kTree[] = {
      {"Module.modules", "modules"},       {"Module.named_modules", "modules"},
      {"Module.children", "children"},     {"Module.named_children", "children"},
      {"Module.parameters", "parameters"}, {"Module.named_parameters", "parameters"},
      {"Module.buffers", "buffers"},       {"Module.named_buffers", "buffers"}};
  if (!name.ok()) return std::nullopt;
  const auto* entry = std::find_if(std::begin(kTree), std::end(kTree), [&](const auto& e) { return e.first == *name; });
  if (entry == std::end(kTree)) return std::nullopt;
  const absl::string_view kind = entry->second;
  const bool named = absl::StartsWith(*name, "Module.named_");
  // Only the arguments that keep names as paths from the module: modules'
  // memo and prefix, and parameters'/buffers' recurse flag.
  bool recurse = kind == "modules";
  if (kind == "parameters" || kind == "buffers") {
    recurse = true;
    // parameters(recurse) takes it by position; named_parameters' first
    // positional is the prefix.
    if (kwargs.size() > 1 || args.size() > (named ? 0u : 1u) || args.size() + kwargs.size() > 1) return std::nullopt;
    const VarPtr* flag = !args.empty() ? &args[0] : nullptr;
    for (const auto& [k, v] : kwargs) {
      if (k != "recurse") return std::nullopt;
      flag = &v;
    }
    if (flag) {
      if (!(*flag)->is_constant() || !PyBool_Check((*flag)->object.get())) return std::nullopt;
      recurse = (*flag)->object.get() == Py_True;
    }
  } else if (!args.empty() || !kwargs.empty()) {
    return std::nullopt;
  }
  PyObject* module = fn->self->object.get();
  absl::flat_hash_set<PyObject*> seen;
  if (absl::Status s = GuardModuleTree(module, fn->self->source, recurse, kind, seen); !s.ok()) {
    return absl::StatusOr<VarPtr>(s);
  }
  std::string method = absl::StrCat("named_", kind);
  python::Object bound = Attr(module, method.c_str());
  python::Object call_kwargs = python::Object::Steal(PyDict_New());
  if (kind == "parameters" || kind == "buffers") {
    PyDict_SetItemString(call_kwargs.get(), "recurse", recurse ? Py_True : Py_False);
  }
  python::Object no_args = python::Object::Steal(PyTuple_New(0));
  python::Object generator = bound ? python::Object::Steal(PyObject_Call(bound.get(), no_args.get(), call_kwargs.get()))
                                   : python::Object();
  python::Object list = generator ? python::Object::Steal(PySequence_List(generator.get()))
                                  : python::Object();
  if (!list) return absl::StatusOr<VarPtr>(python::FetchError(*name));
  std::vector<VarPtr> items;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list.get()); ++i) {
    PyObject* pair = PyList_GET_ITEM(list.get(), i);
    absl::StatusOr<std::string> dotted = python::AsString(python::Object::Borrow(PyTuple_GET_ITEM(pair, 0)));
    if (!dotted.ok()) return absl::StatusOr<VarPtr>(dotted.status());
    // The dotted name is the path: modules through _modules, then the
    // member in its own dict.
    SourcePtr path = fn->self->source;
    std::vector<std::string> parts = absl::StrSplit(*dotted, '.', absl::SkipEmpty());
    for (size_t k = 0; k < parts.size(); ++k) {
      const bool last = k + 1 == parts.size();
      path = MemberPath(path, last ? MemberDict(kind) : "_modules", parts[k]);
    }
    absl::StatusOr<VarPtr> w = Wrap(python::Object::Borrow(PyTuple_GET_ITEM(pair, 1)), path);
    if (!w.ok()) return absl::StatusOr<VarPtr>(w.status());
    items.push_back(named ? Var::Tuple({Var::Constant(python::FromString(*dotted)), *w}) : *w);
  }
  return absl::StatusOr<VarPtr>(Var::Iterator(std::move(items)));
}

}  // namespace dynamo::trace
