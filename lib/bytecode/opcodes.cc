#include <Python.h>

#define DYNAMO_CHECK_OPCODES_AGAINST_HEADERS
#include "lib/bytecode/opcodes.h"

#include <climits>

namespace dynamo::bytecode {

int OpcodeByName(absl::string_view name) {
  for (int op = 0; op < 256; ++op) {
    if (Opcode(op).name != nullptr && name == Opcode(op).name) return op;
  }
  return -1;
}

int StackEffect(int opcode, int oparg, bool jump) {
  // Pure C: no Python state is touched, so no GIL is needed.
  int effect = PyCompile_OpcodeStackEffectWithJump(opcode, oparg, jump ? 1 : 0);
  if (effect == PY_INVALID_STACK_EFFECT) return INT_MIN;
  return effect;
}

}  // namespace dynamo::bytecode
