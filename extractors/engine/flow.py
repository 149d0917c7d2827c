"""A small data-flow engine over libcst: follow a setting from where it is read to where it acts.

Both sides' readers ask this engine instead of matching one code shape each. It runs
the upstream code *abstractly*: a function is called with the values a scope gives it
(a ``train()`` parameter, a spec dict read from YAML) and its statements are executed
one by one, through assignments, augmented assignments, ``if``/``elif``, loops over known
sequences, calls into functions and classes of the files read (arguments bound to
parameters, ``self.attr`` written by constructors), attribute reads, ``functools.partial``
and the few builtins configs are written with. Constants fold as they go (``*``, ``+``,
``/``, tuple repetition, several statements). Nothing upstream is imported or run.
Library functions that call a function they are given (``jax.lax.scan``, ``jax.grad``,
``jax.value_and_grad``) call it, so a value bound with ``functools.partial``, passed as a
keyword or forwarded through ``**kwargs`` is followed to the function that receives it;
:meth:`Engine.observing` records what an observed function receives at each call.

What the engine does not compute stays symbolic: a :class:`Sym` stands for a runtime
value (a tensor, an environment, a call into a library outside the files read), so
``jnp.mean(v_loss) * 0.5 * vf_coefficient`` becomes a product of a symbol and two
numbers that :func:`linear` can take apart. A condition the engine cannot decide runs
both branches and merges them: a name that differs afterwards is a :class:`Phi`, which
says what it depends on. Anything the engine cannot follow is an :class:`Unknown` with
the reason, never a default.

A ``raise`` (or a failing ``assert``, a missing dict key, a missing module attribute, an
unexpected keyword argument) reached on a path every run takes is recorded as a
definite :class:`Failure` with its line (the run cannot get past it), and the engine goes
on after it so that readers still see what follows. A raise that only some paths reach
drops those paths.

Every value carries the lines that made it (the literal or spec line it was written
on, the lines of the operations applied to it, the line of an attribute assignment that
sets it on an object; not the lines that merely pass it on), so a fact cites where a
number is written, where it is transformed and where it is set.
"""

from __future__ import annotations

from .values import (
    Bound, Class, ENUM_BASES, Function, Instance, Lazy, MAX_OPTIONS, Method, Module, Native, NativeMethod, Partial,
    Phi, SKIP, Super, Sym, UNBOUND, UNBOUND_V, Unknown, V, all_lines, const, describe, identical, is_const, merge,
    plain, qualified_name, short_name, sym, unknown, why_not_constant)  # noqa: F401 (the engine's API)
from .runtime import (
    CallRecord, EXACT_PASSES, Failure, Frame, Invocation, Loader, MAX_DEPTH, MAX_ITERATIONS, Observation, OutOfBudget,
    Raised, STEP_BUDGET, WIDEN_STEPS)  # noqa: F401 (the engine's API)
from .builtins import ENVIRONMENT_READS, EXTERNAL_CONSTANTS, EXTERNAL_NAMESPACES, TORCH_NN  # noqa: F401 (the engine's API)
from .reading import LINEAR_CALLS, Linear, MAX_WALK, call_name, call_operand, linear, mentions, spec_value, terms  # noqa: F401 (the engine's API)
from .core import Engine  # noqa: F401 (the engine's API)
