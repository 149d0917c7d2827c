"""Operators, builtins and the library calls the engine models (functools.partial, math,
jax.lax.scan, jax.grad, torch.nn namespaces).
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any, Callable, Iterable

import libcst as cst

from brax_diff.safety.limits import MAX_SEQUENCE, operation_refused, result_refused, template_refused

from .values import (
    Class, Instance, Module, Native, Partial, Super, Sym, Unknown, V, const, describe, is_const, plain, sym, unknown)
from .runtime import MAX_ITERATIONS, Raised

if TYPE_CHECKING:
    from .core import Engine


BIN_OPS = {cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "div", cst.FloorDivide: "floordiv",
            cst.Modulo: "mod", cst.Power: "pow", cst.MatrixMultiply: "matmul", cst.BitAnd: "and", cst.BitOr: "or",
            cst.BitXor: "xor", cst.LeftShift: "lshift", cst.RightShift: "rshift"}


AUG_OPS = {cst.AddAssign: "add", cst.SubtractAssign: "sub", cst.MultiplyAssign: "mul", cst.DivideAssign: "div",
            cst.FloorDivideAssign: "floordiv", cst.ModuloAssign: "mod", cst.PowerAssign: "pow",
            cst.BitOrAssign: "or", cst.BitAndAssign: "and"}


_PY_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
           "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "and": operator.and_,
           "or": operator.or_, "xor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift}


DUNDER = {"add": "__add__", "sub": "__sub__", "mul": "__mul__", "div": "__truediv__"}


COMPARE = {cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt,
            cst.GreaterThan: operator.gt, cst.LessThanEqual: operator.le, cst.GreaterThanEqual: operator.ge}


CONST_METHODS = {"get", "copy", "items", "keys", "values", "pop", "setdefault", "update", "append", "extend",
                 "insert", "reverse", "clear", "remove", "sort", "popitem",
                  "index", "startswith", "endswith", "removeprefix", "removesuffix", "replace", "lower", "upper",
                  "strip", "split", "format", "join", "__copy__", "rstrip", "lstrip", "count", "find"}


STR_METHODS = {"startswith", "endswith", "removeprefix", "removesuffix", "replace", "lower", "upper", "strip",
                "split", "format", "join", "rstrip", "lstrip", "count", "find"}


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "pow": "**", "mod": "%", "lshift": "<<"}


def apply_op(op: str, a: Any, b: Any) -> Any:
    """``a op b`` on constants, refused (ValueError) before computing when the result would pass
    the documented limits (brax_diff.safety.limits): repeated squaring or shifting stops there."""
    if op == "mul" and (isinstance(a, (tuple, list, str)) or isinstance(b, (tuple, list, str))):
        if isinstance(a, (tuple, list, str)) and isinstance(b, int) and b > 10_000 or \
                isinstance(b, (tuple, list, str)) and isinstance(a, int) and a > 10_000:
            raise ValueError("repetition too long")
    if op == "pow" and isinstance(b, (int, float)) and abs(b) > 64:
        raise ValueError("power too large")
    if op == "mod" and isinstance(a, str):
        refused = template_refused(a, "%")
        if refused:
            raise ValueError(refused)
    elif op in _SYMBOLS:
        refused = operation_refused(_SYMBOLS[op], a, b)
        if refused:
            raise ValueError(refused)
    result = _PY_OPS[op](a, b)
    refused = result_refused(result)
    if refused:
        raise ValueError(refused)
    return result


def str_method_refused(name: str, text: str, args: list) -> str | None:
    """Why ``text.name(*args)`` must not be computed: its result (bounded from the operands
    before computing) would pass MAX_SEQUENCE characters, or a format width would."""
    if name == "format":
        return template_refused(text, "{}")
    size = 0
    if name == "join" and args:
        try:
            items = list(args[0])
        except TypeError:
            return None
        if len(items) > MAX_SEQUENCE:
            return f"a join of more than {MAX_SEQUENCE} items (limit)"
        size = sum(len(x) for x in items if isinstance(x, str)) + len(text) * max(len(items) - 1, 0)
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        count = text.count(args[0]) if args[0] else len(text) + 1
        size = len(text) + count * len(args[1])
    if size > MAX_SEQUENCE:
        return f"a string longer than {MAX_SEQUENCE} characters (limit)"
    return None


def _numbers(args: list[V]) -> list | None:
    if not all(is_const(a) for a in args):
        return None
    return [plain(a) for a in args]


def _lines_of(args: Iterable[V]) -> frozenset:
    out: frozenset = frozenset()
    for a in args:
        out |= a.lines
    return out


def _pure(name: str, fn: Callable) -> Native:
    """A builtin that computes on constants and stays symbolic otherwise."""

    def call(args, kwargs, frame, node) -> V:
        values = _numbers(list(args))
        keywords = {k: plain(v) for k, v in kwargs.items()} if all(is_const(v) for v in kwargs.values()) else None
        if values is not None and keywords is not None:
            try:
                return const(fn(*values, **keywords), _lines_of(list(args) + list(kwargs.values())))
            except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError) as exc:
                return unknown(f"{name}(...) cannot be evaluated ({exc})")
        for a in args:
            if isinstance(a.data, Unknown):
                return a
        return sym("call", "", (sym("ext", name), *args), tuple(sorted(kwargs.items())))

    return Native(name, call)


def builtin_functions(engine: Engine) -> dict[str, V]:
    out: dict[str, V] = {}
    for name, fn in (("int", int), ("float", float), ("bool", bool), ("str", str), ("abs", abs), ("min", min),
                     ("max", max), ("round", round), ("len", len), ("sum", sum), ("sorted", sorted),
                     ("tuple", tuple), ("list", list), ("any", any), ("all", all), ("divmod", divmod),
                     ("repr", repr), ("pow", pow)):
        out[name] = V(_pure(name, fn))

    def to_list(args, kwargs, frame, node):
        if not args:
            return V([])
        items = engine._items(args[0])
        return V(list(items)) if items is not None else sym("call", "", (sym("ext", "list"), *args))

    def to_tuple(args, kwargs, frame, node):
        if not args:
            return V(())
        items = engine._items(args[0])
        return V(tuple(items)) if items is not None else sym("call", "", (sym("ext", "tuple"), *args))

    def to_dict(args, kwargs, frame, node):
        out_dict: dict = {}
        if args:
            source = args[0]
            if isinstance(source.data, dict):
                out_dict.update(source.data)
            else:
                items = engine._items(source)
                if items is None:
                    return sym("ext", "dict")
                for item in items:
                    pair = engine._items(item)
                    if pair is None or len(pair) != 2 or not is_const(pair[0]):
                        return sym("ext", "dict")
                    out_dict[plain(pair[0])] = pair[1]
        out_dict.update(kwargs)
        return V(out_dict)

    def length(args, kwargs, frame, node):
        items = engine._items(args[0]) if args else None
        if items is not None:
            return const(len(items), args[0].lines)
        return sym("call", "", (sym("ext", "len"), *args))

    def make_range(args, kwargs, frame, node):
        values = _numbers(args)
        if values is not None and all(isinstance(v, int) for v in values) and len(range(*values)) <= MAX_ITERATIONS:
            return V(Sym("range", "", tuple(args)), _lines_of(args))
        return sym("call", "", (sym("ext", "range"), *args))

    def enumerate_(args, kwargs, frame, node):
        items = engine._items(args[0]) if args else None
        start = kwargs.get("start", args[1] if len(args) > 1 else const(0))
        if items is None or not (is_const(start) and isinstance(plain(start), int)) or set(kwargs) - {"start"}:
            return sym("call", "", (sym("ext", "enumerate"), *args), tuple(sorted(kwargs.items())))
        return V([V((const(i), item)) for i, item in enumerate(items, plain(start))])

    def zip_(args, kwargs, frame, node):
        lists = [engine._items(a) for a in args]
        if any(items is None for items in lists):
            return sym("call", "", (sym("ext", "zip"), *args))
        return V([V(tuple(group)) for group in zip(*lists)])

    def getattr_(args, kwargs, frame, node):
        if len(args) < 2 or not isinstance(args[1].data, str):
            return sym("call", "", (sym("ext", "getattr"), *args))
        try:
            found = engine._getattr(args[0], args[1].data, frame, node)
        except Raised:
            if len(args) > 2:
                return args[2]
            raise
        if len(args) > 2 and isinstance(found.data, Sym) and found.data.op == "attr" and isinstance(
                args[0].data, Instance) and not args[0].data.cls.has_external_base():
            return args[2]  # an attribute never set on an object of read classes: the default
        return found

    def setattr_(args, kwargs, frame, node):
        if len(args) == 3 and isinstance(args[1].data, str):
            engine._setattr(args[0], args[1].data, args[2], frame, node)
        elif len(args) == 3 and isinstance(args[0].data, Instance):  # which attribute it sets is not known
            known = frame is not None and node is not None
            where = f"{frame.module.path}:{engine._line(frame, node)}" if known else "?"
            reason = unknown(f"setattr of the name `{describe(args[1])}` ({where})")
            engine._poison_all(args[0], reason.with_lines(engine._at(frame, node)) if known else reason)
        return const(None)

    def hasattr_(args, kwargs, frame, node):
        if len(args) == 2 and isinstance(args[1].data, str):
            obj = args[0].data
            if isinstance(obj, Instance):
                if args[1].data in obj.attrs or obj.cls.lookup(args[1].data) is not None:
                    return const(True)
                return const(False) if not obj.cls.has_external_base() else sym("ext", "hasattr")
            if isinstance(obj, Module):
                return const(engine._module_name(obj, args[1].data) is not None)
        return sym("call", "", (sym("ext", "hasattr"), *args))

    def isinstance_(args, kwargs, frame, node):
        if len(args) != 2:
            return sym("ext", "isinstance")
        obj, kinds = args
        candidates = engine._items(kinds) if isinstance(kinds.data, tuple) else [kinds]
        python = {"int": int, "float": float, "str": str, "bool": bool, "dict": dict, "list": list,
                  "tuple": tuple, "type(None)": type(None)}
        if all(isinstance(c.data, Native) and c.data.name in python for c in candidates):
            if is_const(obj):
                return const(any(isinstance(plain(obj), python[c.data.name]) for c in candidates))
            if type(obj.data) in (dict, list, tuple):  # a container's kind is known whatever its items are
                return const(any(python[c.data.name] is type(obj.data) for c in candidates))
            if isinstance(obj.data, Instance) and not obj.data.cls.has_external_base():
                return const(False)  # an object of a class read (or modelled) derives from no builtin type
        if isinstance(obj.data, Instance) and all(isinstance(c.data, Class) for c in candidates):
            mro = obj.data.cls.mro()
            if any(c.data in mro for c in candidates):
                return const(True)
            return const(False) if not obj.data.cls.has_external_base() else sym("ext", "isinstance")
        return sym("call", "", (sym("ext", "isinstance"), *args))

    def super_(args, kwargs, frame, node):
        function = frame.function if frame is not None else None
        while function is not None and function.owner is None and function.closure is not None:
            function = function.closure.function
        if function is None or function.owner is None:
            return sym("ext", "super")
        params = function.node.params.params
        receiver = frame.locals.get(params[0].name.value) if params else None
        if receiver is None:
            return sym("ext", "super")
        return V(Super(function.owner, receiver))

    def print_(args, kwargs, frame, node):
        return const(None)

    def exec_(args, kwargs, frame, node):
        """Code in a string can rebind any name: every local of the frame is unknown from here
        (leaving them as they were was a silent wrong value)."""
        if frame is not None:
            why = "exec() of code the engine does not read may have rebound it"
            for name in list(frame.locals):
                frame.locals[name] = unknown(why)
        return const(None)

    def eval_(args, kwargs, frame, node):
        return unknown("eval() of code the engine does not read")

    for name, fn in (("list", to_list), ("tuple", to_tuple), ("dict", to_dict), ("len", length),
                     ("range", make_range), ("enumerate", enumerate_), ("zip", zip_), ("getattr", getattr_),
                     ("setattr", setattr_), ("hasattr", hasattr_), ("isinstance", isinstance_), ("super", super_),
                     ("print", print_), ("exec", exec_), ("eval", eval_)):
        out[name] = V(Native(name, fn))
    for name in ("ValueError", "TypeError", "KeyError", "AssertionError", "NotImplementedError", "RuntimeError",
                 "ImportError", "AttributeError", "IndexError", "Exception", "object", "type", "set", "frozenset",
                 "iter", "next", "map", "filter", "id", "hash", "vars", "open", "callable", "reversed"):
        out.setdefault(name, sym("ext", name))
    out["__name__"] = const("__main__")
    return out


def _partial(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
    if not args:
        return sym("ext", "functools.partial")
    return V(Partial(args[0], tuple(args[1:]), dict(kwargs)))


def _math(fn: Callable, name: str) -> Callable:
    def call(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
        values = _numbers(args)
        if values is not None and not kwargs:
            try:
                return const(fn(*values), _lines_of(args))
            except (TypeError, ValueError, OverflowError) as exc:
                return unknown(f"{name}: {exc}")
        return sym("call", "", (sym("ext", name), *args))
    return call


def _to_array(name: str) -> Callable:
    """``jnp.array(x)`` of a number: that number (a dtype changes its precision, not its meaning)."""
    def call(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
        if args and isinstance(args[0].data, (int, float)) and not isinstance(args[0].data, bool):
            return args[0]
        return sym("call", "", (sym("ext", name), *args), tuple(sorted(kwargs.items())))
    return call


def _argument(args: list[V], kwargs: dict[str, V], index: int, name: str) -> V | None:
    if name in kwargs:
        return kwargs[name]
    return args[index] if index < len(args) else None


def _scan_through(engine: Engine, result: V, args: list[V], kwargs: dict[str, V], frame, node) -> V:
    """``jax.lax.scan(f, init, xs)`` calls ``f(carry, x)`` for each step: run it once with the
    initial carry and one step's slice, so that what ``f`` calls is followed. The result stays
    symbolic; a raise inside counts for one path only."""
    body = _argument(args, kwargs, 0, "f")
    if body is not None:
        init = _argument(args, kwargs, 1, "init") or sym("param", "carry")
        xs = _argument(args, kwargs, 2, "xs")
        step = sym("item", "", (xs, sym("param", "t"))) if xs is not None else sym("param", "x")
        engine._either(lambda: engine._call(body, [init, step], {}, frame, node))
    return result


def _grad_through(engine: Engine, result: V, args: list[V], kwargs: dict[str, V], frame, node) -> V:
    """``jax.grad(fn)`` / ``jax.value_and_grad(fn)``: a function that calls ``fn`` with its own
    arguments (the loss gets exactly what the caller passes). Its result stays symbolic."""
    fn = _argument(args, kwargs, 0, "fun")
    if fn is None:
        return result

    def call(inner_args, inner_kwargs, inner_frame, inner_node) -> V:
        engine._either(lambda: engine._call(fn, list(inner_args), dict(inner_kwargs), inner_frame, inner_node))
        lines = engine._at(inner_frame, inner_node) if inner_frame is not None and inner_node is not None else ()
        return sym("call", "", (result, *inner_args), tuple(sorted(inner_kwargs.items())), lines)
    return V(Native(describe(result), call), result.lines)


def _identity(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
    """``functools.wraps(fn)``: a decorator that keeps the wrapped call's meaning."""
    return V(Native("identity", lambda a, k, f, n: a[0] if a else const(None)))


# Public names of library namespaces that upstream code looks names up in (a spec's loss,
# activation, optimizer or scheduler name): facts about torch 2.x, so that such a lookup
# runs exactly, and a name the library lacks fails where the code would.
TORCH_NN = (
    "Module", "Sequential", "ModuleList", "ModuleDict", "Parameter", "ParameterList", "ParameterDict", "Identity",
    "Linear", "LazyLinear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "Flatten", "Unflatten", "Embedding", "EmbeddingBag",
    "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "Transformer", "TransformerEncoder",
    "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer", "MultiheadAttention",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LayerNorm", "GroupNorm", "RMSNorm",
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm", "Dropout", "Dropout1d", "Dropout2d",
    "Dropout3d", "AlphaDropout", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "ZeroPad2d",
    "ReflectionPad2d", "ReplicationPad2d", "ConstantPad2d", "Upsample", "PixelShuffle",
    "ReLU", "ReLU6", "LeakyReLU", "PReLU", "RReLU", "SELU", "CELU", "GELU", "SiLU", "Mish", "ELU", "Hardshrink",
    "Hardsigmoid", "Hardtanh", "Hardswish", "LogSigmoid", "Sigmoid", "Softplus", "Softshrink", "Softsign", "Tanh",
    "Tanhshrink", "Threshold", "GLU", "Softmin", "Softmax", "Softmax2d", "LogSoftmax",
    "L1Loss", "MSELoss", "CrossEntropyLoss", "CTCLoss", "NLLLoss", "PoissonNLLLoss", "GaussianNLLLoss",
    "KLDivLoss", "BCELoss", "BCEWithLogitsLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
    "MultiLabelMarginLoss", "HuberLoss", "SmoothL1Loss", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
    "CosineEmbeddingLoss", "MultiMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss",
    "init", "functional", "utils", "parameter", "modules",
)


EXTERNAL_NAMESPACES = {"torch.nn": TORCH_NN}


# Library constants configs are written with.
EXTERNAL_CONSTANTS = {"numpy.nan": math.nan, "numpy.inf": math.inf, "math.inf": math.inf, "math.pi": math.pi,
                      "math.e": math.e, "numpy.pi": math.pi, "numpy.float32": "float32"}


ENVIRONMENT_READS = frozenset({"os.getenv", "os.environ.get"})  # answered from Engine.environ


EXTERNAL_CALLS: dict[str, Callable[[Engine, list[V], dict[str, V]], V]] = {
    "functools.partial": _partial,
    "functools.wraps": _identity,
    "math.ceil": _math(math.ceil, "math.ceil"),
    "math.floor": _math(math.floor, "math.floor"),
    "math.sqrt": _math(math.sqrt, "math.sqrt"),
    "math.exp": _math(math.exp, "math.exp"),
    "math.log": _math(math.log, "math.log"),
    "numpy.exp": _math(math.exp, "numpy.exp"),
    "numpy.log": _math(math.log, "numpy.log"),
    "numpy.sqrt": _math(math.sqrt, "numpy.sqrt"),
    "jax.numpy.array": _to_array("jax.numpy.array"),
    "jax.numpy.asarray": _to_array("jax.numpy.asarray"),
}


# Library functions that call a function they are given: followed, so that a value bound
# with functools.partial or passed as a keyword reaches the function that receives it.
CALLS_THROUGH: dict[str, Callable[..., V]] = {
    "jax.lax.scan": _scan_through,
    "jax.grad": _grad_through,
    "jax.value_and_grad": _grad_through,
}
