"""HistGradientBoosting sized for the labels a user gives (classification and regression use it alike).

scikit-learn's default leaf (min_samples_leaf=20) suits thousands of rows: with fewer than 40 labels no tree can
split, and the model predicts one constant everywhere.  Here a leaf holds a tenth of the labels, between 1 and 20
(the default from 200 labels up), so a few clicked labels per class give a model, and many give scikit-learn's own.
"""
from __future__ import annotations


def min_leaf(n_train: int) -> int:
    return max(1, min(20, n_train // 10))


def classifier(n_train: int, seed: int):
    from sklearn.ensemble import HistGradientBoostingClassifier
    return HistGradientBoostingClassifier(min_samples_leaf=min_leaf(n_train), random_state=seed)


def regressor(n_train: int, seed: int):
    from sklearn.ensemble import HistGradientBoostingRegressor
    return HistGradientBoostingRegressor(min_samples_leaf=min_leaf(n_train), random_state=seed)
