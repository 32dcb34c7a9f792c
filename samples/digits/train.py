"""Train the digits classifier and write it out as tvms files: ``python samples/digits/train.py``.

The data is scikit-learn's bundled 8x8 handwritten digits (1797 images, no download). A small
PyTorch MLP is trained on 80% of it; the model, which ends in ``argmax`` so that it returns the
predicted digit, is exported with ``torch.export`` and imported the way ``tvms import`` does:

- ``digits.tvms``: the model as TVMScript (``main(x, <weights>)``);
- ``digits.npz``: its weights, by parameter name (``tvms run ... --params digits.npz``);
- ``test.npz``: the held-out images as the input ``x``; ``test_labels.npy``: their digits.

Needs torch and scikit-learn (``pip install 'tvms[torch]' scikit-learn``). Training is seeded,
so running it again writes the same model up to floating-point reassociation in PyTorch.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HIDDEN = 64
EPOCHS = 300
SEED = 0


def load_split():
    """(x_train, x_test, y_train, y_test): pixels scaled to [0, 1] as float32, a stratified
    80/20 split with a fixed seed."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    return train_test_split(x, digits.target.astype(np.int64), test_size=0.2, random_state=SEED,
                            stratify=digits.target)


def make_model(hidden: int = HIDDEN):
    import torch
    from torch import nn

    class DigitsMLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(64, hidden)
            self.relu = nn.ReLU()
            self.fc2 = nn.Linear(hidden, 10)

        def logits(self, x):
            return self.fc2(self.relu(self.fc1(x)))

        def forward(self, x):
            return torch.argmax(self.logits(x), dim=1)

    return DigitsMLP()


def train(x_train, y_train):
    import torch

    torch.manual_seed(SEED)
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)
    for _ in range(EPOCHS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model.logits(x), y)
        loss.backward()
        optimizer.step()
    return model.eval()


def main() -> int:
    import torch

    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # a source checkout, not installed
    from tvmscript.cli import main as tvms_main

    x_train, x_test, y_train, y_test = load_split()
    model = train(x_train, y_train)
    with torch.no_grad():
        accuracy = float((model(torch.from_numpy(x_test)).numpy() == y_test).mean())
        batch = torch.export.Dim("batch")  # any number of images, a symbolic dim in digits.tvms
        program = torch.export.export(model, (torch.from_numpy(x_test),), dynamic_shapes={"x": {0: batch}})
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "digits.pt2")
        torch.export.save(program, saved)
        status = tvms_main(["import", saved, "-o", os.path.join(HERE, "digits.tvms"),
                            "--params-out", os.path.join(HERE, "digits.npz")])
    if status:
        return status
    np.savez(os.path.join(HERE, "test.npz"), x=x_test)
    np.save(os.path.join(HERE, "test_labels.npy"), y_test)
    print(f"PyTorch accuracy on the {len(y_test)} held-out digits: {accuracy:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
