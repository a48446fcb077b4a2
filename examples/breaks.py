"""A function with two graph breaks, as `dynamo-inspect` and
`dynamo-export --allow-breaks` show them (test/cli/golden/inspect_breaks.txt):

    dynamo-inspect examples/breaks.py --fn normalize -i f32[4,8] -i f32[8]
"""
import torch


def normalize(x, scale):
    h = torch.relu(x) * scale
    print("normalizing", tuple(h.shape))
    if h.sum() > 0:
        h = h / h.sum()
    return h + 1
