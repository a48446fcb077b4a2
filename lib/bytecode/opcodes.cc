#include <Python.h>

#define DYNAMO_CHECK_OPCODES_AGAINST_HEADERS
#include "lib/bytecode/opcodes.h"

#include <climits>

namespace dynamo::bytecode {

int StackEffect(int opcode, int oparg, bool jump) {
  // Pure C: no Python state is touched, so no GIL is needed.
  int effect = PyCompile_OpcodeStackEffectWithJump(opcode, oparg, jump ? 1 : 0);
  if (effect == PY_INVALID_STACK_EFFECT) return INT_MIN;
  return effect;
}

}  // namespace dynamo::bytecode
