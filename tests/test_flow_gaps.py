"""Gaps of the data-flow engine named in issue 26: each shape gives what Python computes, or an
unknown - never the value from before the statement that changes it. Hand-written modules."""

from __future__ import annotations

import pytest

from brax_diff.extractors.engine import flow
from brax_diff.extractors.engine.flow import Engine, Loader, plain
from test_flow_loops import MemorySnapshot

PROGRAM = '''
import dataclasses
from dataclasses import dataclass, field

_LR = 0.1
_SCALE = {"k": 1}


def set_lr(value):
  global _LR
  _LR = value


set_lr(0.5)


class Defaults:
  epochs = 4


Defaults.epochs = 8
_SCALE["k"] = 3


@dataclass
class Options:
  lr: float = 0.1
  epochs: int = 4
  tags: tuple = field(default_factory=tuple)


@dataclasses.dataclass(frozen=True)
class Frozen:
  gamma: float
  lam: float = 0.95


def read_lr():
  return _LR


def read_epochs():
  return Defaults.epochs


def read_scale():
  return _SCALE["k"]


def options():
  return Options(lr=0.3).lr, Options(0.2, 16).epochs, Options().lr


def frozen():
  made = Frozen(0.99)
  return made.gamma, made.lam


def keyword_update():
  d = {"lr": 0.1}
  d.update(lr=0.7)
  return d["lr"]


def counter():
  total = 1

  def bump():
    nonlocal total
    total = total * 4

  bump()
  return total


def divide():
  try:
    x = 1 / 0
  except ZeroDivisionError:
    x = 2.0
  return x


def arithmetic():
  try:
    x = 10 // 0
  except ArithmeticError:
    x = 3
  return x
'''


def call(name: str):
    snapshot = MemorySnapshot({"pkg/__init__.py": "", "pkg/prog.py": PROGRAM})
    engine = Engine(Loader(snapshot, ("pkg",)))
    module = engine.module("pkg.prog")
    return engine.call(engine.lookup(module, name))


@pytest.mark.parametrize("name, expected", [
    ("read_lr", 0.5),  # a setter called at import
    ("read_epochs", 8),  # a class attribute set after the class
    ("read_scale", 3),  # a module dict's item set at import
    ("options", (0.3, 16, 0.1)),  # a dataclass's generated __init__
    ("frozen", (0.99, 0.95)),
    ("keyword_update", 0.7),  # dict.update(key=value)
    ("counter", 4),  # nonlocal
    ("divide", 2.0),  # a constant operation that raises: the except runs
    ("arithmetic", 3),
])
def test_the_engine_gives_what_python_computes(name, expected):
    value = call(name)
    assert flow.is_const(value), flow.why_not_constant(value)
    assert plain(value) == expected


ALIASES = '''
def tweak(d, key, value):
  d[key] = value


class Holder:
  def grow(self, items):
    items.append(3)


def through_alias():
  d = {"lr": 0.1}
  e = d
  e["lr"] = 0.2
  return d["lr"]


def in_helper():
  d = {"lr": 0.1}
  tweak(d, "lr", 0.4)
  return d["lr"]


def in_method():
  items = [1, 2]
  Holder().grow(items)
  return len(items)


def rebound_alias_is_separate():
  d = {"lr": 0.1}
  e = d
  e = {"lr": 0.9}
  e["lr"] = 0.5
  return d["lr"]
'''


@pytest.mark.parametrize("name, expected", [
    ("through_alias", 0.2), ("in_helper", 0.4), ("in_method", 3), ("rebound_alias_is_separate", 0.1)])
def test_a_container_changed_through_another_name_is_seen(name, expected):
    snapshot = MemorySnapshot({"pkg/__init__.py": "", "pkg/prog.py": ALIASES})
    engine = Engine(Loader(snapshot, ("pkg",)))
    value = engine.call(engine.lookup(engine.module("pkg.prog"), name))
    assert flow.is_const(value), flow.why_not_constant(value)
    assert plain(value) == expected
