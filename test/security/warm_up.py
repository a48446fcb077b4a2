"""What both security tests do before arming their audit hooks."""
import contextlib
import io

import torch.fx

from dynamo import trust


def warm_up():
    """A GraphModule call that raises makes torch import torch._dynamo for
    its error message: torch's own lazy import, whatever the graph. Done once
    here, with the allowlist's one import of dynamo._C (libdynamo's own
    module, not one a file names), so the import checks see only what a
    capture causes."""
    g = torch.fx.Graph()
    g.output(g.call_function(torch.add, (g.placeholder("x"),), {"bad": 1}))
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            torch.fx.GraphModule(torch.nn.Module(), g)(torch.ones(1))
    except TypeError:
        pass
    trust._load_allowlist()
