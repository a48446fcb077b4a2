// A captured graph's forward as a C callable (issue 18): what a live capture
// hands its backend as gm.forward until something reads the FX graph.
//
// Generating a forward's Python source and compiling it took a third of a
// first call on resnet18 (the walk that writes the text, then compile()),
// and its frame was most of a warm call's overhead on a small graph. This
// runs the same steps from a table instead: each node is one vectorcall of
// its target on values kept in slots, and each value is dropped after its
// last use, as FX's forward drops it.
//
//   dynamo._C.GraphForward(params, steps, output, local_type, describe, filename)
//     params:     the placeholders' names, in order (the call takes self, then
//                 one value for each, by position or by name);
//     steps:      (kind, target, args, kwargs, slot) for each node but the
//                 output: kind 0 calls target(*args, **kwargs), 1 calls the
//                 method named target on args[0], 2 reads the attribute path
//                 target (a tuple of names) from self; slot is where its
//                 value goes (-1: nowhere). Placeholders hold slots 0..P-1;
//     output:     what the call returns;
//     local_type: the class of the objects that stand for a slot in args,
//                 kwargs and output (their `slot` attribute): anywhere inside
//                 lists, tuples, dicts and slices. A tuple, dict or slice
//                 with no slot in it is passed as it is; a list is made
//                 afresh on every call, as a Python forward would;
//     describe:   None, or describe(i) called when step i raises (with the
//                 exception still pending afterwards), to make the line
//                 the traceback entry below shows readable;
//     filename:   the traceback entry's file: the error of step i gets the
//                 entry ("forward", filename, i + 2), line 1 being the def.
//
// It binds as a method (gm.forward is a bound GraphForward), and it has no
// frame: the frame evaluator has nothing of it to capture.
#pragma once

#include <Python.h>

#include "absl/status/status.h"

namespace dynamo::embed {

// A step's kind, as `steps` gives it.
enum GraphForwardStep { kStepCall = 0, kStepMethod = 1, kStepAttributes = 2 };

// Adds GraphForward, and Local (name, slot: what a table's `local_type`
// is in dynamo.deferred), to the module dynamo._C.
absl::Status AddGraphForwardType(PyObject* module);

}  // namespace dynamo::embed
