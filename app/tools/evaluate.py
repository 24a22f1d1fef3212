"""Held-out evaluation of a classifier fitted on the labels: what the class map's accuracy can honestly be said to be.

The labelled pixels are split by a seeded stratified k-fold (scikit-learn's StratifiedKFold, shuffled with the
classifier's seed; k = FOLDS, or fewer when a class has fewer labels; none when a class has a single label): each
fold's labels are predicted by a model fitted on the other folds' (the same estimator the map uses, built by
`make(n_train)`).  From those held-out predictions: accuracy, per-class precision, recall, F1 and support, and the
confusion matrix (rows: true class, columns: predicted).  The learning curve repeats the k-fold with each fold's
training labels cut to a seeded fraction (CURVE of them): held-out accuracy against the mean number of training
labels.  Each fit yields to the event loop (the page stays responsive).
"""
from __future__ import annotations

import asyncio

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


async def classification(make, X: np.ndarray, y: np.ndarray, names: list[str], seed: int, method: str = "") -> dict:
    """The held-out report (plain JSON values) of estimator `make(n_train)` on labels X (N, B), y (N,) in 0..n-1."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support
    from sklearn.model_selection import StratifiedKFold
    k, why = folds_for(y, names)
    base = {"method": method, "seed": int(seed), "labels": int(len(y))}
    if not k:
        return dict(base, error=why)
    splits = list(StratifiedKFold(k, shuffle=True, random_state=seed).split(X, y))
    pred = np.empty_like(y)
    curve = []
    rng = np.random.default_rng(seed)
    for frac in CURVE:
        hits, used = 0, []
        for train, test in splits:
            if frac < 1.0:
                train = np.sort(rng.permutation(train)[:max(2, int(round(frac * len(train))))])
            used.append(len(train))
            if len(np.unique(y[train])) < 2:  # one class: a classifier cannot be fitted; counts as all wrong
                continue
            got = make(len(train)).fit(X[train], y[train]).predict(X[test])
            hits += int((got == y[test]).sum())
            if frac == 1.0:
                pred[test] = got
            await asyncio.sleep(0)
        curve.append({"labels": int(round(np.mean(used))), "accuracy": hits / len(y)})
    p, r, f, s = precision_recall_fscore_support(y, pred, labels=range(len(names)), zero_division=0)
    return dict(base, folds=k, accuracy=float((pred == y).mean()),
                classes=[{"name": n, "precision": float(a), "recall": float(b), "f1": float(c), "support": int(d)}
                         for n, a, b, c, d in zip(names, p, r, f, s)],
                confusion=confusion_matrix(y, pred, labels=range(len(names))).tolist(), learning_curve=curve)
