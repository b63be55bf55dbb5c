"""A two-layer MLP in plain NumPy, trained with tape's gradients on scikit-learn's digits.

The model and its loss are ordinary NumPy functions of a dict of parameters; ``grad``
returns a dict of gradients of the same shape, which a few lines of Adam apply. Writes a
PNG of the loss and accuracy curves.

    python examples/mlp_digits.py            # 30 epochs, about 97% test accuracy
    python examples/mlp_digits.py --quick    # 8 epochs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm

from tape import value_and_grad

HERE = Path(__file__).resolve().parent


def init(sizes, rng):
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"W{i}"] = rng.standard_normal((n_in, n_out)) * np.sqrt(1.0 / n_in)
        params[f"b{i}"] = np.zeros(n_out)
    return params


def logits(params, X):
    h = np.tanh(X @ params["W0"] + params["b0"])
    return h @ params["W1"] + params["b1"]


def loss(params, X, onehot, l2=1e-4):
    """Softmax cross-entropy, stable through the max shift, plus an L2 penalty."""
    z = logits(params, X)
    z = z - np.max(z, axis=1, keepdims=True)
    log_p = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    penalty = np.sum(params["W0"] ** 2) + np.sum(params["W1"] ** 2)
    return -np.sum(onehot * log_p) / len(X) + 0.5 * l2 * penalty


def accuracy(params, X, y):
    return float(np.mean(np.argmax(logits(params, X), axis=1) == y))


class Adam:
    def __init__(self, params, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps, self.t = lr, b1, b2, eps, 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, params, grads):
        self.t += 1
        for k, g in grads.items():
            self.m[k] = self.b1 * self.m[k] + (1 - self.b1) * g
            self.v[k] = self.b2 * self.v[k] + (1 - self.b2) * g**2
            m_hat = self.m[k] / (1 - self.b1**self.t)
            v_hat = self.v[k] / (1 - self.b2**self.t)
            params[k] = params[k] - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


def plot(history, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    epochs = np.arange(1, len(history["loss"]) + 1)
    ax_loss.plot(epochs, history["loss"], marker="o", label="training loss")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy", title="Loss", yscale="log")
    ax_loss.legend()
    ax_acc.plot(epochs, history["train"], marker="o", label="train")
    ax_acc.plot(epochs, history["test"], marker="o", label="test")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="Accuracy")
    ax_acc.grid(alpha=0.3)
    ax_acc.legend()
    fig.suptitle("MLP on scikit-learn digits, gradients by tape")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="train for a few epochs only")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", type=Path, default=HERE / "output", help="where the PNG goes")
    args = parser.parse_args(argv)
    epochs = args.epochs or (8 if args.quick else 30)

    digits = load_digits()
    X = digits.data / 16.0
    X_train, X_test, y_train, y_test = train_test_split(
        X, digits.target, test_size=0.25, random_state=0, stratify=digits.target
    )
    onehot = np.eye(10)[y_train]

    rng = np.random.default_rng(0)
    params = init([X.shape[1], args.hidden, 10], rng)
    optimiser = Adam(params)
    loss_and_grad = value_and_grad(loss, argnums=0)
    history = {"loss": [], "train": [], "test": []}

    # a bar in a terminal; in a piped log, a line every tenth epoch instead of every redraw
    interactive = sys.stderr.isatty()
    bar = tqdm(range(epochs), desc="training", unit="epoch", disable=not interactive)
    for epoch in bar:
        order = rng.permutation(len(X_train))
        total = 0.0
        for start in range(0, len(order), args.batch):
            batch = order[start : start + args.batch]
            value, grads = loss_and_grad(params, X_train[batch], onehot[batch])
            optimiser.step(params, grads)
            total += value * len(batch)
        history["loss"].append(total / len(order))
        history["train"].append(accuracy(params, X_train, y_train))
        history["test"].append(accuracy(params, X_test, y_test))
        progress = dict(loss=f"{history['loss'][-1]:.4f}", test=f"{history['test'][-1]:.3f}")
        bar.set_postfix(progress)
        if not interactive and (epoch % 10 == 9 or epoch == epochs - 1):
            print(f"epoch {epoch + 1}/{epochs}: loss {progress['loss']}, test {progress['test']}")

    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / "mlp_digits.png"
    plot(history, png)
    print(f"train accuracy {history['train'][-1]:.3f}")
    print(f"test accuracy  {history['test'][-1]:.3f}")
    print(f"curves written to {png}")
    return history


if __name__ == "__main__":
    main()
