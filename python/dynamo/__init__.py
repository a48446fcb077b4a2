"""libdynamo's Python side.

    from dynamo.loader import load
    gm, capture = load("model.pb")            # a torch.fx.GraphModule
    gm(torch.randn(8, 3, 224, 224))

The live shim (dynamo.optimize, explain, export) joins this package later.
"""
