"""Held-out evaluation of a model fitted on the labels: what its map's score can honestly be said to be.

The labelled pixels are split by a seeded shuffled k-fold (k = FOLDS, or fewer with fewer labels): each fold's
labels are predicted by a model fitted on the other folds'.  `learning_curve` is the one rule of the held-out
predictions and the learning curve, for classes and values alike: it repeats the k-fold with each fold's training
labels cut to a seeded fraction (CURVE of them; numpy's default_rng(seed), drawn fraction by fraction and fold by
fold), and gives the score of the pooled held-out predictions against the mean number of training labels; its
last point (all of each fold's labels) is the headline score.  Each fit yields to the event loop (the page stays
responsive) and is counted to the step's `counter` when given (app/tools/steps.py): "held-out fit 7 of 25".

`classification`: a stratified k-fold (StratifiedKFold, shuffled with the classifier's seed; none when a class has
a single label; the estimator built by `make(n_train)`): accuracy, per-class precision, recall, F1 and support,
and the confusion matrix (rows: true class, columns: predicted).  Regression (app/tools/regress.py) scores R².
"""
from __future__ import annotations

import asyncio
from typing import Callable

import numpy as np

FOLDS = 5
CURVE = (0.2, 0.4, 0.6, 0.8, 1.0)


def folds_for(y: np.ndarray, names: list[str]) -> tuple[int, str | None]:
    """(number of folds, None) or (0, why there is no held-out score)."""
    counts = np.bincount(y, minlength=len(names))
    low = int(counts.min()) if len(counts) else 0
    if low < 2:
        few = [n for n, c in zip(names, counts) if c < 2]
        return 0, (f"no held-out score: each class needs at least 2 labels ({', '.join(few)[:200]} has fewer)")
    return min(FOLDS, low), None


def plan(n: int, k: int) -> str:
    """What a fit on n labels with a k-fold held-out evaluation (0: none) does, as its step says it."""
    return f"fitting on {n:,} labels, " + (f"{k}-fold held-out evaluation" if k else "no held-out evaluation")


def fits(k: int) -> int:
    """The number of fits of a k-fold learning curve."""
    return len(CURVE) * k


async def learning_curve(predict: Callable, splits: list, n: int, seed: int, score: Callable,
                         key: str, step=None) -> tuple[np.ndarray, list[dict]]:
    """(the held-out predictions of all n labels with all of each fold's training labels, the curve: [{"labels":
    mean training labels, key: score(predictions)}] at each fraction of CURVE).  predict(train, test): the
    predictions of labels `test` by a model fitted on labels `train` (index arrays); `step`: the tool's step, told
    each fit."""
    rng = np.random.default_rng(seed)
    curve, pred = [], None
    count = step.counter(fits(len(splits)), "held-out fit") if step is not None else None
    done = 0
    for frac in CURVE:
        pred, used = None, []
        for train, test in splits:
            if frac < 1.0:
                train = np.sort(rng.permutation(train)[:max(2, int(round(frac * len(train))))])
            used.append(len(train))
            got = np.asarray(predict(train, test))
            if pred is None:
                pred = np.empty(n, got.dtype)
            pred[test] = got
            done += 1
            if count is not None:
                count.at(done)
            await asyncio.sleep(0)
        curve.append({"labels": int(round(np.mean(used))), key: float(score(pred))})
    if count is not None:
        count.end()
    return pred, curve


async def classification(make, X: np.ndarray, y: np.ndarray, names: list[str], seed: int, method: str = "",
                         step=None) -> dict:
    """The held-out report (plain JSON values) of estimator `make(n_train)` on labels X (N, B), y (N,) in 0..n-1."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support
    from sklearn.model_selection import StratifiedKFold
    k, why = folds_for(y, names)
    base = {"method": method, "seed": int(seed), "labels": int(len(y))}
    if not k:
        return dict(base, error=why)

    def predict(train, test):
        if len(np.unique(y[train])) < 2:  # one class: a classifier cannot be fitted; counts as all wrong (-1)
            return np.full(len(test), -1, y.dtype)
        return make(len(train)).fit(X[train], y[train]).predict(X[test])
    splits = list(StratifiedKFold(k, shuffle=True, random_state=seed).split(X, y))
    pred, curve = await learning_curve(predict, splits, len(y), seed, lambda p: (p == y).mean(), "accuracy",
                                       step)
    p, r, f, s = precision_recall_fscore_support(y, pred, labels=range(len(names)), zero_division=0)
    return dict(base, folds=k, accuracy=float((pred == y).mean()),
                classes=[{"name": n, "precision": float(a), "recall": float(b), "f1": float(c), "support": int(d)}
                         for n, a, b, c, d in zip(names, p, r, f, s)],
                confusion=confusion_matrix(y, pred, labels=range(len(names))).tolist(), learning_curve=curve)
