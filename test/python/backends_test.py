"""torch's compilers as dynamo backends: "inductor" and "aot_eager" take our
graphs and give eager's results — resnet18 inference through Inductor, a
resnet18 training step and a GPT-2-style model's loss and gradients through
AOTAutograd (tolerances as torch's own tests use for these models).

    scripts/python test/python/backends_test.py [name ...]
"""
import os
import sys

import torch
import torchvision

import dynamo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_runner  # noqa: E402

TOL = dict(rtol=1e-3, atol=1e-3)


def check_listed():
    names = dynamo.list_backends()
    assert {"eager", "inductor", "aot_eager"} <= set(names), names


def resnet18_inductor_inference():
    torch.manual_seed(0)
    m = torchvision.models.resnet18().eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        want = m(x)
        opt = dynamo.optimize("inductor")(m)
        for _ in range(2):  # the second call is a cache hit on Inductor's code
            torch.testing.assert_close(opt(x), want, **TOL)


def _train_step(model, params, *inputs, loss_fn):
    for p in params:
        p.grad = None
    loss = loss_fn(model(*inputs))
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in params]


def _compare_training(model, inputs, loss_fn, backend):
    params = list(model.parameters())
    state = {k: v.clone() for k, v in model.state_dict().items()}
    want = _train_step(model, params, *inputs, loss_fn=loss_fn)
    model.load_state_dict(state)
    dynamo.reset()
    got = _train_step(dynamo.optimize(backend)(model), params, *inputs, loss_fn=loss_fn)
    torch.testing.assert_close(got, want, **TOL)
    # Buffers (BatchNorm's running statistics) moved the same way.
    after = dict(model.state_dict())
    model.load_state_dict(state)
    _train_step(model, params, *inputs, loss_fn=loss_fn)
    torch.testing.assert_close(after, dict(model.state_dict()), **TOL)


def resnet18_aot_eager_training():
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=10).train()
    x = torch.randn(4, 3, 32, 32)
    target = torch.randint(0, 10, (4,))
    _compare_training(m, (x,), lambda out: torch.nn.functional.cross_entropy(out, target), "aot_eager")


def gpt2_aot_eager_training():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=128, n_positions=32,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    m = GPT2LMHeadModel(config).train()
    ids = torch.randint(0, 128, (2, 16))

    class Loss(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, ids):
            logits = self.lm(ids).logits
            return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                     ids[:, 1:].reshape(-1))

    _compare_training(Loss(m), (ids,), lambda loss: loss, "aot_eager")


TESTS = [check_listed, resnet18_inductor_inference, resnet18_aot_eager_training, gpt2_aot_eager_training]


if __name__ == "__main__":
    sys.exit(check_runner.run(TESTS, sys.argv[1:]))
