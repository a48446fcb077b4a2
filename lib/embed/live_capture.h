// A live capture as Python sees it (issue 18's first call): the ir::Capture
// that capture_call made stays in C++ memory, and Python reads only what it
// needs from it.
//
// Before, capture_call serialized the capture, dynamo.runtime parsed the
// bytes into a Python protobuf to build the backend's forward from its
// nodes, and the frame evaluator parsed them again to compile the guards:
// two round trips and a Python walk of every node, on every first call. Now
//
//   live = dynamo._C.capture_call(...)["capture"]   # a dynamo._C.LiveCapture
//   live.forward_table(local_type, resolve, constant)
//       # the graph's GraphForward table, built here from the nodes
//   live.serialize()        # the bytes (made once), for whatever wants the proto:
//                           # explain, logs, dumps, the FX graph when read
//   live.function_name, live.tensor_inputs, live.has_symbols, live.break_count
//
// and the frame evaluator compiles the guards from LiveCaptureOf(live).
//
// forward_table returns (params, steps, output, names, targets, attributes)
// for dynamo._C.GraphForward (lib/embed/graph_forward.h), or None when the
// capture has no graph or its graph has subgraphs (torch.cond's branches:
// FX builds those). A node's value in the table is local_type(name, slot).
// The Python side decides every object a node names:
//   resolve(kind, target, inferred_on_meta, node_name): a CALL_FUNCTION's
//       callable (kind 0) or a CALL_METHOD's method name (kind 1), from the
//       op registry's list as the loader resolves them;
//   constant(kind, value): the torch object for a "dtype" (its enum),
//       "memory_format" (its enum), "layout" (its name) or "device"
//       ((type, index)) argument.
// names and targets are each step's node name and target text (for a
// failing step's traceback line); attributes are the get_attr targets the
// steps read. A graph this process did not make never reaches here: files go
// through dynamo.loader's checks.
#pragma once

#include <Python.h>

#include "absl/status/status.h"
#include "lib/python/object.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::embed {

// Adds LiveCapture to the module dynamo._C.
absl::Status AddLiveCaptureType(PyObject* module);

// A new dynamo._C.LiveCapture owning `capture`; null with an exception set
// on failure.
python::Object NewLiveCapture(ir::Capture capture);

// The capture inside a dynamo._C.LiveCapture; nullptr if `obj` is not one.
const ir::Capture* LiveCaptureOf(PyObject* obj);

}  // namespace dynamo::embed
