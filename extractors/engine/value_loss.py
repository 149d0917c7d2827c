"""What form a value loss has, read from the value the engine computed for it (both sides).

The value loss is taken apart as ``coefficient x atom`` (:func:`brax_diff.extractors.engine.flow.linear`);
the atom says the form: ``mean(e * e)``, ``mean(e ** 2)``, ``mean(square(e))`` or a
``MSELoss`` module are the mean squared error; ``mean(abs(e))`` or ``L1Loss`` the mean
absolute error; a Huber / smooth-L1 loss is ``huber``; a loss made from a quantile
Huber loss is ``distributional``. Value clipping (``maximum`` of a clipped and an
unclipped squared error) keeps the squared form. Anything else is not guessed.
"""

from __future__ import annotations

from typing import Iterable

from . import flow

# Loss classes and functions, by last name, and the form each computes.
LOSS_NAMES = {
    "MSELoss": "mse", "mse_loss": "mse", "squared_error": "mse", "l2_loss": "mse",
    "L1Loss": "l1", "l1_loss": "l1",
    "SmoothL1Loss": "huber", "HuberLoss": "huber", "huber_loss": "huber", "smooth_l1_loss": "huber",
}
REDUCTIONS = {"mean", "nanmean", "sum"}


def value_loss_form(atoms: Iterable[flow.V], distributional_results: Iterable[flow.V] = ()) -> tuple[str | None, str]:
    """(form, why): the form of the one atom of a value loss, or None and the reason."""
    atoms = list(atoms)
    results = list(distributional_results)
    if results and any(flow.mentions(a, lambda v: any(v is r for r in results)) for a in atoms):
        return "distributional", "made from a quantile Huber loss"
    if len(atoms) != 1:
        shown = " x ".join(flow.describe(a) for a in atoms) or "a constant"
        return None, f"the value loss `{shown}` is not one loss term times constants"
    atom = atoms[0]
    module = _loss_module(atom)
    if module is not None:
        return module
    name = flow.call_name(atom)
    if name in REDUCTIONS:
        operand = flow.call_operand(atom)
        form = _elementwise(operand) if operand is not None else None
        if form is not None:
            return form, f"{name} of {'squared' if form == 'mse' else form} errors"
    if name in LOSS_NAMES:
        return LOSS_NAMES[name], f"{name}(...)"
    return None, f"the value loss `{flow.describe(atom)}` is not a form the extractor recognises"


def _loss_module(atom: flow.V) -> tuple[str | None, str] | None:
    """``torch.nn.MSELoss()(pred, target)``: a call of a loss module made from a class."""
    data = atom.data
    if not (isinstance(data, flow.Sym) and data.op == "call" and data.args):
        return None
    callee = data.args[0]
    if isinstance(callee.data, flow.Sym) and callee.data.op == "call" and callee.data.args:
        name = flow.short_name(callee.data.args[0])
        if name in LOSS_NAMES:
            reduction = dict(callee.data.kwargs).get("reduction")
            if reduction is not None and not (flow.is_const(reduction) and flow.plain(reduction) == "mean"):
                # A sum (or no reduction) is not the mean the forms compare; falling through to the
                # class name read it as one.
                shown = repr(flow.plain(reduction)) if flow.is_const(reduction) else flow.describe(reduction)
                return None, f"torch.nn.{name}(reduction={shown}) is not a mean over elements"
            return LOSS_NAMES[name], f"torch.nn.{name} (a mean over elements)"
    return None


def _elementwise(value: flow.V) -> str | None:
    """The per-element form: squared error, absolute error, Huber."""
    data = value.data
    if isinstance(data, flow.Phi):
        forms = {_elementwise(o) for o in data.options}
        return forms.pop() if len(forms) == 1 else None
    if not isinstance(data, flow.Sym):
        return None
    if data.op == "mul" and len(data.args) == 2 and flow.identical(data.args[0], data.args[1]) is True:
        return "mse"
    if data.op == "pow" and len(data.args) == 2 and flow.is_const(data.args[1]) and flow.plain(data.args[1]) == 2:
        return "mse"
    if data.op == "call":
        name = flow.call_name(value)
        operand = flow.call_operand(value)
        if name == "square":
            return "mse"
        if name == "abs":
            return "l1"
        if name in LOSS_NAMES and LOSS_NAMES[name] == "huber":
            return "huber"
        if name in ("maximum", "max") and len(data.args) >= 3:  # clipped and unclipped: the larger one
            forms = {_elementwise(a) for a in data.args[1:3]}
            return forms.pop() if len(forms) == 1 else None
        if name in flow.LINEAR_CALLS and operand is not None:
            return _elementwise(operand)
    return None
