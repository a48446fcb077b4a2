// torch's function-mode stack, as the translator reads it and guards check
// it. torch.set_default_device and `with torch.device(...)` work through
// this stack (a DeviceContext mode that fills in factory functions'
// device=), and so does any user TorchFunctionMode, which can change what
// every torch call returns: a trace depends on the stack, so a capture
// holds only under the stack it was traced under.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace dynamo::python {

// The stack, bottom first, one entry per mode joined by ",": "" when no mode
// is active (or torch is not imported); "device=cuda:0" for a DeviceContext,
// its device with a cuda index resolved as torch resolves it (the current
// device); "mode=<module>.<qualname>" for any other mode.
absl::StatusOr<std::string> TorchFunctionModes();

}  // namespace dynamo::python
