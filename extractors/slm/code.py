"""What SLM-Lab's code does with a spec, read statically (libcst) at one commit.

Each reader looks for one shape of code (a default dict passed to ``util.set_attr``,
a ``torch.clamp`` on the log-std, a ``clip_grad_norm_`` call, ...) and returns what it
found with the line it found it on, or ``None`` when the shape is not there at this
ref; the extractor turns a ``None`` into a WARNING finding instead of guessing.

What the code computes from a spec (the batch guard, the losses, the schedulers, the env
wrapper chain) is not matched here but run by the data-flow engine (``slm_run``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import libcst as cst

from brax_diff.errors import SourceError
from brax_diff.sources.repository import Snapshot

from ..engine.pyast import NotLiteral, PyModule, calls_named, descendants, dotted_name, literal, parse_file

ALGORITHM_DIR = "slm_lab/agent/algorithm"
POLICY_UTIL = "slm_lab/agent/algorithm/policy_util.py"
ACTOR_CRITIC = "slm_lab/agent/algorithm/actor_critic.py"
NET_DIR = "slm_lab/agent/net"
NET_UTIL = "slm_lab/agent/net/net_util.py"
NET_BASE = "slm_lab/agent/net/base.py"
MEMORY_DIR = "slm_lab/agent/memory"
LIB_DIR = "slm_lab/lib"
MATH_UTIL = "slm_lab/lib/math_util.py"
ENV_INIT = "slm_lab/env/__init__.py"
ENV_WRAPPERS = "slm_lab/env/wrappers.py"

# torch.optim.lr_scheduler classes SLM-Lab's fallback ``getattr`` can find (torch 2.x).
TORCH_LR_SCHEDULERS = frozenset({
    "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
    "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR",
    "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR", "LRScheduler",
})
# torch.optim optimizers and torch.distributions classes the code reaches by name.
TORCH_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
                              "RAdam", "ASGD", "LBFGS", "Rprop", "SparseAdam"})


@dataclass(frozen=True)
class Found:
    """A value read from code and where: ``path`` at 1-based ``line``."""

    value: Any
    path: str
    line: int


class SourceTree:
    """Parsed Python files of one snapshot, each parsed once."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._modules: dict[str, PyModule | None] = {}
        self._answers: dict[tuple, Any] = {}

    def ask(self, reader, *args) -> Any:
        """``reader(self, *args)``, computed once per snapshot: variants share the code."""
        key = (reader.__name__, *(a if isinstance(a, (str, int)) else id(a) for a in args))
        if key not in self._answers:
            self._answers[key] = reader(self, *args)
        return self._answers[key]

    def module(self, path: str) -> PyModule | None:
        if path not in self._modules:
            try:
                self._modules[path] = parse_file(self.snapshot, path)  # shared with the engine's runs
            except (SourceError, SyntaxError):
                self._modules[path] = None
        return self._modules[path]

    def python_files(self, directory: str) -> list[str]:
        return [f"{directory}/{name}" for name in self.snapshot.listdir(directory) if name.endswith(".py")]

    def _mentions(self, path: str, pattern: str) -> bool:
        """A cheap text test before parsing: libcst parses are the slow part."""
        try:
            return re.search(pattern, self.snapshot.read(path), re.MULTILINE) is not None
        except SourceError:
            return False

    def find_class(self, directory: str, name: str) -> tuple[PyModule, cst.ClassDef] | None:
        for path in self.python_files(directory):
            if not self._mentions(path, rf"^\s*class {re.escape(name)}\b"):
                continue
            module = self.module(path)
            if module is not None and module.classes(name):
                return module, module.classes(name)[0]
        return None

    def find_function(self, directory: str, name: str) -> tuple[PyModule, cst.FunctionDef] | None:
        for path in self.python_files(directory):
            if not self._mentions(path, rf"^\s*def {re.escape(name)}\b"):
                continue
            module = self.module(path)
            if module is not None and module.function(name) is not None:
                return module, module.function(name)
        return None


# -- small matchers ---------------------------------------------------------------------

def method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    """The class's ``def name``: the last one, as Python binds it."""
    found = None
    for statement in cls.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            found = statement
    return found


def calls(module: PyModule, within: cst.CSTNode, name: str) -> list[cst.Call]:
    """Calls in ``within`` whose callee's dotted name is ``name`` or ends with ``.name``."""
    return calls_named(within, name)


def string_keys_read(module: PyModule, within: cst.CSTNode, holders: set[str]) -> dict[str, Found]:
    """Keys read from a dict named in ``holders``: ``h.get("k", d)`` and ``h["k"]``.

    The value is the ``.get`` default when it is a literal the code uses as it is (else None:
    ``h.get("k", 1) * 2`` does not run with 1).
    """
    out: dict[str, Found] = {}
    # ``h.get("k", 1) * 2``: the code uses the default transformed, not the default (issue 26)
    operands = {id(side) for node in descendants(within) if isinstance(node, (cst.BinaryOperation, cst.UnaryOperation))
                for side in ((node.left, node.right) if isinstance(node, cst.BinaryOperation) else (node.expression,))}
    for node in descendants(within):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get":
            holder = dotted_name(node.func.value) or ""
            if holder.split(".")[-1] in holders and node.args and isinstance(node.args[0].value, cst.SimpleString):
                default = None
                if len(node.args) > 1 and id(node) not in operands:
                    try:
                        default = literal(node.args[1].value)
                    except NotLiteral:
                        default = None
                out.setdefault(node.args[0].value.evaluated_value, Found(default, module.path, module.line(node)))
        elif isinstance(node, cst.Subscript):
            holder = dotted_name(node.value) or ""
            if holder.split(".")[-1] in holders and len(node.slice) == 1:
                index = node.slice[0].slice
                if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                    out.setdefault(index.value.evaluated_value, Found(None, module.path, module.line(node)))
    return out


def set_attr_calls(module: PyModule, fn: cst.FunctionDef) -> tuple[dict[str, Found], dict[str, Found]]:
    """``util.set_attr(self, dict(k=v, ...))`` defaults and ``util.set_attr(self, spec, [keys])`` keys."""
    defaults: dict[str, Found] = {}
    keys: dict[str, Found] = {}
    for call in calls(module, fn, "set_attr"):
        if len(call.args) < 2:
            continue
        source = call.args[1].value
        if isinstance(source, cst.Call) and dotted_name(source.func) == "dict":
            for arg in source.args:
                if arg.keyword is None:
                    continue
                try:
                    value = literal(arg.value)
                except NotLiteral:
                    value = module.code(arg.value)
                defaults[arg.keyword.value] = Found(value, module.path, module.line(arg))
        elif len(call.args) >= 3 and isinstance(call.args[2].value, cst.List):
            for element in call.args[2].value.elements:
                if isinstance(element.value, cst.SimpleString):
                    keys[element.value.evaluated_value] = Found(True, module.path, module.line(element))
    return defaults, keys


# -- readers, one per question -------------------------------------------------------------

@dataclass
class AlgorithmCode:
    """The algorithm class named by the spec: its defaults, the keys it reads, its guard."""

    path: str
    class_line: int
    defaults: dict[str, Found]
    keys: dict[str, Found]
    init: cst.FunctionDef | None
    module: PyModule
    cls: cst.ClassDef

    @property
    def init_line(self) -> int:
        return self.module.line(self.init) if self.init is not None else self.class_line


def read_algorithm(tree: SourceTree, name: str) -> AlgorithmCode | None:
    found = tree.find_class(ALGORITHM_DIR, name)
    if found is None:
        return None
    module, cls = found
    init = method(cls, "init_algorithm_params")
    defaults, keys = set_attr_calls(module, init) if init is not None else ({}, {})
    return AlgorithmCode(module.path, module.line(cls), defaults, keys, init, module, cls)


def find_line(module: PyModule, within: cst.CSTNode, needle: str) -> int | None:
    """The first line in ``within`` whose source contains ``needle`` (a last-resort locator)."""
    start = module.line(within)
    for offset, text in enumerate(module.code(within).splitlines()):
        if needle in text:
            return start + offset
    return None


def read_advantage_standardization(algorithm: AlgorithmCode) -> Found | None:
    """``math_util.standardize(advs)`` inside the policy loss, which runs per minibatch."""
    fn = method(algorithm.cls, "calc_policy_loss")
    if fn is None:
        return None
    found = calls(algorithm.module, fn, "standardize")
    return Found("minibatch", algorithm.path, algorithm.module.line(found[0])) if found else None


def read_minibatch_split(tree: SourceTree, algorithm: AlgorithmCode) -> Found | None:
    """How ``split_minibatch`` counts minibatches: a leftover chunk makes it ceil."""
    train = method(algorithm.cls, "train")
    if train is None or not calls(algorithm.module, train, "split_minibatch"):
        return None
    found = tree.find_function(LIB_DIR, "split_minibatch")
    if found is None:
        return None
    module, fn = found
    leftover = find_line(module, fn, "leftover") or find_line(module, fn, "% mb_size")
    rounding = "ceil" if leftover else "floor"
    return Found(rounding, module.path, leftover or module.line(fn))


def read_training_trigger(tree: SourceTree, memory_name: str) -> Found | None:
    """The memory flags training when it holds ``training_frequency`` steps of all envs."""
    found = tree.find_class(MEMORY_DIR, memory_name)
    if found is None:
        return None
    module, cls = found
    line = find_line(module, cls, "algorithm.training_frequency") or find_line(module, cls, "training_frequency")
    return Found("training_frequency", module.path, line) if line else Found(None, module.path, module.line(cls))


def read_log_std_clamp(tree: SourceTree) -> Found | None:
    """``torch.clamp(scale, min=lo, max=hi).exp()`` in ``init_action_pd`` -> (lo, hi)."""
    module = tree.module(POLICY_UTIL)
    fn = module.function("init_action_pd") if module else None
    if fn is None:
        return None
    for call in calls(module, fn, "clamp"):
        kwargs = {arg.keyword.value: arg.value for arg in call.args if arg.keyword}
        positional = [arg.value for arg in call.args if arg.keyword is None]
        lo = kwargs.get("min", positional[1] if len(positional) > 1 else None)
        hi = kwargs.get("max", positional[2] if len(positional) > 2 else None)
        try:
            bounds = (literal(lo) if lo is not None else None, literal(hi) if hi is not None else None)
        except NotLiteral:
            continue
        return Found(bounds, module.path, module.line(call))
    return None


def read_action_pds(tree: SourceTree) -> Found | None:
    """Distribution names a continuous policy may use (ACTION_PDS' continuous lists) and the
    one ``action_pdtype: default`` picks for multi-dimensional actions."""
    module = tree.module(POLICY_UTIL)
    if module is None:
        return None
    for node in module.walk(lambda n: isinstance(n, cst.Assign) and len(n.targets) == 1
                            and isinstance(n.targets[0].target, cst.Name) and n.targets[0].target.value == "ACTION_PDS"):
        try:
            table = literal(node.value)
        except NotLiteral:
            return None
        names = sorted({n for kind in ("continuous", "multi_continuous") for n in table.get(kind, [])})
        firsts = table.get("multi_continuous") or table.get("continuous") or [None]
        return Found({"names": names, "default": firsts[0]}, module.path, module.line(node))
    return None


def read_net_class(tree: SourceTree, name: str) -> tuple[AlgorithmCode, dict[str, Found]] | None:
    """The net class a spec's ``type`` names: its defaults and every net_spec key it reads."""
    found = tree.find_class(NET_DIR, name)
    if found is None:
        return None
    module, cls = found
    init = method(cls, "__init__")
    defaults, keys = set_attr_calls(module, init) if init is not None else ({}, {})
    read = dict(keys)
    read.update(string_keys_read(module, cls, {"net_spec"}))
    return AlgorithmCode(module.path, module.line(cls), defaults, keys, init, module, cls), read


def read_net_spec_keys_in_algorithms(tree: SourceTree) -> dict[str, Found]:
    """net_spec keys the actor-critic reads itself (``shared``, ``type``, ``use_same_optim``)."""
    module = tree.module(ACTOR_CRITIC)
    if module is None:
        return {}
    return string_keys_read(module, module.module, {"net_spec", "actor_net_spec", "critic_net_spec"})


def read_log_std_param(tree: SourceTree) -> Found | None:
    """``build_tails`` makes a state-independent ``nn.Parameter`` when ``log_std_init`` is set."""
    module = tree.module(NET_UTIL)
    fn = module.function("build_tails") if module else None
    if fn is None:
        return None
    line = find_line(module, fn, "log_std_init is not None")
    return Found("parameter_when_log_std_init", module.path, line) if line else None


def read_init_gain(tree: SourceTree) -> Found | None:
    """``init_layers`` passes ``gain=calculate_gain(hid_layers_activation)`` to orthogonal/xavier."""
    module = tree.module(NET_UTIL)
    fn = module.function("init_layers") if module else None
    if fn is None:
        return None
    line = find_line(module, fn, "calculate_gain")
    return Found("calculate_gain(hid_layers_activation)", module.path, line) if line else None


@dataclass
class SchedulerCode:
    """``get_lr_scheduler``: names with their own branch, and the generic fallback."""

    path: str
    custom: dict[str, Found]  # name -> branch line; value: the branch's source text
    custom_keys: dict[str, dict[str, Found]]  # name -> lr_scheduler_spec keys the branch reads
    noop_line: int | None  # `if not lr_scheduler_spec:` -> constant
    fallback_line: int | None  # getattr(torch.optim.lr_scheduler, name)


def read_lr_scheduler(tree: SourceTree) -> SchedulerCode | None:
    module = tree.module(NET_UTIL)
    fn = module.function("get_lr_scheduler") if module else None
    if fn is None:
        return None
    custom: dict[str, Found] = {}
    custom_keys: dict[str, dict[str, Found]] = {}
    noop_line = fallback_line = None
    for node in descendants(fn):
        if not isinstance(node, cst.If):
            continue
        test = node.test
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            noop_line = module.line(node)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(
                test.comparisons[0].operator, cst.Equal):
            right = test.comparisons[0].comparator
            if isinstance(right, cst.SimpleString):
                name = right.evaluated_value
                custom[name] = Found(module.code(node.body), module.path, module.line(node))
                custom_keys[name] = string_keys_read(module, node.body, {"lr_scheduler_spec"})
        if isinstance(node.orelse, cst.Else) and "lr_scheduler" in module.code(node.orelse.body):
            fallback_line = find_line(module, node.orelse.body, "getattr")
    return SchedulerCode(module.path, custom, custom_keys, noop_line, fallback_line)


def read_optimizers(tree: SourceTree) -> set[str]:
    """Optimizer names ``getattr(torch.optim, name)`` finds: torch's plus ones SLM-Lab registers."""
    names = set(TORCH_OPTIMIZERS)
    module = tree.module(NET_UTIL)
    if module is not None:
        for call in calls(module, module.module, "setattr"):
            if len(call.args) >= 2 and isinstance(call.args[1].value, cst.SimpleString):
                names.add(call.args[1].value.evaluated_value)
    return names


def read_grad_clip(tree: SourceTree) -> Found | None:
    """``clip_grad_norm_(self.parameters(), self.clip_grad_val)`` in ``Net.train_step``: per network."""
    module = tree.module(NET_BASE)
    if module is None:
        return None
    for call in calls(module, module.module, "clip_grad_norm_"):
        scope = "per_network" if "self.parameters()" in module.code(call) else "other"
        return Found(scope, module.path, module.line(call))
    return None


def read_var_schedulers(tree: SourceTree) -> set[str]:
    """Names ``VarScheduler`` resolves with ``getattr(math_util, name)``: math_util's functions."""
    module = tree.module(MATH_UTIL)
    if module is None:
        return set()
    return {node.name.value for node in module.module.body if isinstance(node, cst.FunctionDef)}


@dataclass
class EnvCode:
    """``make_env`` for playground envs: the env-spec keys it reads and what its wrappers do."""

    keys: dict[str, Found]  # env spec key -> where it is read, with its .get default
    reward_scale: Found | None  # the reward wrapper line, if any
    obs_norm_gpu: Found | None  # TorchNormalizeObservation (device given)
    obs_norm_cpu: Found | None  # gymnasium's NormalizeObservation (no device)
    obs_clip_cpu: Found | None  # ClipObservation(bound=clip_obs) (no device)
    obs_eps: Found | None  # epsilon of the torch normalizer
    playground_line: int  # where playground envs are built (1 when absent)
    passthrough: Found | None = None  # `{k: v for k, v in env_spec.items() ...}`: gym.make kwargs


def read_env(tree: SourceTree) -> EnvCode | None:
    module = tree.module(ENV_INIT)
    if module is None:
        return None
    keys = string_keys_read(module, module.module, {"env_spec"})
    for fn_name in ("_set_env_attributes", "make_env"):
        fn = module.function(fn_name)
        if fn is not None:
            for call in calls(module, fn, "set_attr"):
                if len(call.args) >= 3 and "env_spec" in module.code(call.args[1].value) and isinstance(
                        call.args[2].value, cst.List):
                    for element in call.args[2].value.elements:
                        if isinstance(element.value, cst.SimpleString):
                            keys.setdefault(element.value.evaluated_value,
                                            Found(None, module.path, module.line(element)))
    # Playground envs got their own builder later; before that they were vector envs.
    playground = module.function("_make_playground_env") or module.function("_make_vector_env")
    reward = gpu = cpu = clip = None
    if playground is not None:
        for call in calls(module, playground, "TransformReward") + calls(module, playground,
                                                                          "VectorTransformReward"):
            if "reward_scale" in module.code(call):
                reward = Found("env", module.path, module.line(call))
        for call in calls(module, playground, "TorchNormalizeObservation"):
            gpu = Found("welford", module.path, module.line(call))
        for call in calls(module, playground, "VectorNormalizeObservation"):
            cpu = Found("welford", module.path, module.line(call))
        for call in calls(module, playground, "VectorClipObservation"):
            clip = Found("clip_obs", module.path, module.line(call))
    eps = None
    wrappers = tree.module(ENV_WRAPPERS)
    if wrappers is not None and wrappers.classes("TorchNormalizeObservation"):
        init = method(wrappers.classes("TorchNormalizeObservation")[0], "__init__")
        if init is not None:
            default = wrappers.signature_defaults(init).get("epsilon")
            if default is not None:
                eps = Found(default.value, wrappers.path, default.line)
    passthrough = None
    for node in module.walk(lambda n: isinstance(n, cst.DictComp)):
        if "env_spec.items()" in module.code(node):
            passthrough = Found("make_kwargs", module.path, module.line(node))
            break
    return EnvCode(keys, reward, gpu, cpu, clip, eps, module.line(playground) if playground is not None else 1,
                   passthrough)


# -- evaluation protocol ------------------------------------------------------------------
CONTROL = "slm_lab/experiment/control.py"


@dataclass(frozen=True)
class EvalCode:
    """How a session scores its agent (``control.py``) and at which frames (``make_env``'s
    ``_set_env_attributes``); a field is None where the code has another shape."""

    rigorous_default: Found | None  # ``.get("rigorous_eval", default)``: a separate eval env when truthy
    shared_env: Found | None  # ``self.eval_env = self.env``: without it, the training env is the one scored
    frequency_defaults: dict[str, Found]  # eval_frequency / log_frequency -> ``defaults = dict(...)``
    frequency_from_meta: Found | None  # ``set_attr(env, spec["meta"], [...])``: the spec's meta overrides them
    loop: Found | None  # run_rl's ``while``: value 0 = no reset of a vector env inside it
    loop_resets: tuple[Found, ...]  # the resets inside the loop, each only when the env is not a vector env
    sampler: Found | None  # ``action_pd.sample()`` in policy_util.sample_action: the policy samples


def _literal_or_none(node: cst.CSTNode) -> Any:
    try:
        return literal(node)
    except NotLiteral:
        return None


def read_evaluation(tree: SourceTree) -> EvalCode | None:
    control = tree.module(CONTROL)
    if control is None:
        return None
    rigorous = shared = loop = None
    resets: list[Found] = []
    for node in descendants(control.module):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" \
                and len(node.args) == 2 and _literal_or_none(node.args[0].value) == "rigorous_eval":
            rigorous = Found(_literal_or_none(node.args[1].value), control.path, control.line(node))
        if isinstance(node, cst.Assign) and control.code(node).replace(" ", "") == "self.eval_env=self.env":
            shared = Found(True, control.path, control.line(node))
    run_rl = next((f for f in control.walk(lambda n: isinstance(n, cst.FunctionDef) and n.name.value == "run_rl")),
                  None)
    if run_rl is not None:
        whiles = [n for n in descendants(run_rl) if isinstance(n, cst.While)]
        if len(whiles) == 1:
            loop = Found(0, control.path, control.line(whiles[0]))
            guarded = {id(c) for n in descendants(whiles[0]) if isinstance(n, cst.If)
                       and "is_venv" in control.code(n.test) and control.code(n.test).startswith("not ")
                       for c in calls_named(n.body, "reset")}
            for call in calls_named(whiles[0], "reset"):
                resets.append(Found(id(call) in guarded, control.path, control.line(call)))
    frequencies: dict[str, Found] = {}
    from_meta = None
    env_init = tree.module(ENV_INIT)
    attributes = env_init.function("_set_env_attributes") if env_init is not None else None
    if attributes is not None:
        for call in calls_named(attributes, "dict"):
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value in ("eval_frequency", "log_frequency"):
                    frequencies[arg.keyword.value] = Found(_literal_or_none(arg.value), env_init.path,
                                                           env_init.line(call))
        for call in calls_named(attributes, "set_attr"):
            if len(call.args) >= 3 and "meta" in env_init.code(call.args[1].value) and \
                    "eval_frequency" in env_init.code(call.args[2].value):
                from_meta = Found(True, env_init.path, env_init.line(call))
    sampler = None
    policy_util = tree.module(POLICY_UTIL)
    sample_action = policy_util.function("sample_action") if policy_util is not None else None
    if sample_action is not None:
        samples = [c for c in calls_named(sample_action, "sample") if isinstance(c.func, cst.Attribute)]
        if samples:
            sampler = Found("sampled", policy_util.path, policy_util.line(samples[0]))
    return EvalCode(rigorous, shared, frequencies, from_meta, loop, tuple(resets), sampler)
