"""The Brax side: Brax PPO's effective settings per MuJoCo Playground family or env.

Scopes, each layered over the previous one:

1. ``defaults()``: ``train()`` and ``make_ppo_networks()`` signature defaults alone;
2. ``family(f)``: Playground's ``brax_ppo_config`` base ``config_dict.create(...)``
   (its ``network_factory`` goes to ``make_ppo_networks``), no env branch;
3. ``env(e)``: the same function with its ``if/elif`` branches evaluated for ``e``.

The parameters of a scope are then read through Brax's code (:mod:`brax_diff.extractors.brax.code`)
to give every canonical key a value with provenance. Everything is static: files are
read as git blobs and parsed; nothing upstream is imported or run.

Usage::

    brax = Repository("/tmp/google+brax.git", "brax").resolve("main")
    playground = Repository(url, "playground").resolve("main")
    extractor = BraxExtractor(brax, playground)
    extractor.env("PendulumSwingup").to_json()
"""

from __future__ import annotations

import difflib

from brax_diff.errors import BraxDiffError
from brax_diff.facts.model import Extraction, Finding
from brax_diff.facts.scope import BRAX_REFERENCES
from brax_diff.sources.repository import Snapshot
from brax_diff.facts.vocabulary import KEYS, PER_ENVIRONMENT

from .code import PPO_NETWORKS, TRAIN, BraxCode
from ..playground.params import (FAMILY_PATHS, NETWORK_FACTORY, PARAMS_FUNCTION, Config, ParamsFunction, family_error,
                                 registered_envs)
from .learner import LearnerScopes
from ..engine.pyast import Code
from .scope import Scope, Setting
from ..playground.script import ScriptScopes
from .interface import interface_facts
from .setup import setup_facts
from ..playground.env import EnvConfigs

FAMILIES = tuple(FAMILY_PATHS)  # Playground's families, one config module each
REFERENCES = BRAX_REFERENCES  # where Brax's values come from (brax_diff.facts.scope)
assert set(FAMILIES) == set(FAMILY_PATHS)


class _PlaygroundRuns:
    """What Playground's code evaluates to at one snapshot: the family configs and the
    environments' own configs, each run on first use. They read Playground alone."""

    def __init__(self) -> None:
        self.params: dict[str, ParamsFunction] = {}
        self.env_configs: EnvConfigs | None = None


# The runs of each Playground snapshot object, shared by the extractors given it: `history`
# walking Brax with Playground held at one commit gives every Brax commit's extractor that same
# snapshot, which ran the same configs again each time (1,456 evaluations for 26 distinct, a
# fifth of its time). Keyed by identity, so what the runs read goes to that snapshot's reads.
_RUNS: dict[int, tuple[Snapshot, _PlaygroundRuns]] = {}
MAX_RUNS = 4


def _playground_runs(playground: Snapshot | None) -> _PlaygroundRuns:
    if playground is None:
        return _PlaygroundRuns()
    entry = _RUNS.get(id(playground))
    if entry is None or entry[0] is not playground:
        if len(_RUNS) >= MAX_RUNS:
            _RUNS.pop(next(iter(_RUNS)))
        entry = _RUNS[id(playground)] = (playground, _PlaygroundRuns())
    return entry[1]


class BraxExtractor:
    """Canonical facts for Brax PPO at one Brax commit and one Playground commit."""

    def __init__(self, brax: Snapshot, playground: Snapshot | None, reference: str = "params") -> None:
        """``reference``: where Brax's values come from (:data:`REFERENCES`)."""
        if reference not in REFERENCES:
            raise BraxDiffError(f"unknown Brax reference {reference!r} (choose from {', '.join(REFERENCES)})")
        self.brax = brax
        self.playground = playground
        self.reference = reference
        self._learner = LearnerScopes(brax) if reference == "learner" else None
        self._script = ScriptScopes(playground) if reference == "train-script" and playground is not None else None
        self.code = BraxCode(brax)
        self._runs = _playground_runs(playground)
        self._envs: dict[str, list[str]] = {}

    # -- the Playground side ---------------------------------------------------------
    def families(self) -> list[str]:
        return list(FAMILIES)

    def _need_playground(self) -> Snapshot:
        if self.playground is None:
            raise BraxDiffError("family and env scopes need a Playground repository (--playground-repo)")
        return self.playground

    def environments(self, family: str) -> list[str]:
        """Registered env names of a family, sorted, read from its registry module."""
        if family not in FAMILY_PATHS:
            raise family_error(family)
        if family not in self._envs:
            self._envs[family] = registered_envs(self._need_playground(), family)
        return self._envs[family]

    def family_of(self, env: str) -> str:
        for family in FAMILIES:
            if env in self.environments(family):
                return family
        known = [e for f in FAMILIES for e in self.environments(f)]
        close = difflib.get_close_matches(env, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        playground = self._need_playground()
        raise BraxDiffError(f"{env!r} is not a registered Playground environment at {playground.ref} "
                            f"({playground.sha[:12]}){hint}")

    def _params_function(self, family: str) -> ParamsFunction:
        if family not in FAMILY_PATHS:
            raise family_error(family)
        runs = self._runs
        if family not in runs.params:
            if runs.env_configs is None:
                runs.env_configs = EnvConfigs(self._need_playground())
            runs.params[family] = ParamsFunction(self._need_playground(), family, runs.env_configs)
        return runs.params[family]

    # -- scopes --------------------------------------------------------------------------
    def defaults(self) -> Extraction:
        """train()/make_ppo_networks() signature defaults only."""
        return self._extract(self.code.train_defaults(), self.code.network_defaults(),
                             family=None, env=None, findings=self.code.missing_entry_points())

    def family(self, family: str) -> Extraction:
        """The family's base config layered over the signature defaults."""
        if self.reference not in ("params", "train-script"):  # the script's family scope: the config it starts from
            return self._unconfigured(family, None)
        params = self._params_function(family)
        config = params.evaluate(None)
        incomplete = params.rejecting_else()
        return self._layered(family, None, params, config, [incomplete] if incomplete else [])

    def env(self, env: str) -> Extraction:
        """The family config plus that env's if/elif overrides."""
        family = self.family_of(env)
        if self.reference == "train-script":
            return self._script_env(family, env)
        if self.reference != "params":
            return self._unconfigured(family, env)
        params = self._params_function(family)
        config = params.evaluate(env)
        findings = []
        if config.rejected is not None:
            findings.append(Finding("env_rejected", "WARNING",
                                    f"{PARAMS_FUNCTION}({env!r}) raises: no tuned config for this env; "
                                    f"values shown are the family's base config", (config.rejected,)))
        for line, reason in config.unknown:
            findings.append(Finding("unevaluated_condition", "INFO",
                                    f"{PARAMS_FUNCTION}: {reason}; branch treated as not taken",
                                    (params.snapshot.where(params.path, line),)))
        return self._layered(family, env, params, config, findings)

    def _unconfigured(self, family: str, env: str | None) -> Extraction:
        """A reference that reads no Playground config: ``train()``'s signature defaults, or
        Brax's learner.py flags over them; every environment of the family gets the same."""
        train, network = self.code.train_defaults(), self.code.network_defaults()
        findings = self.code.missing_entry_points()
        if self._learner is not None:
            learner_train, learner_network, why = self._learner.scopes()
            if why is not None:
                raise BraxDiffError(f"--brax-reference learner: {why} at this Brax commit")
            train.update(self._accepted(learner_train, TRAIN, "train"))
            network.update(self._accepted(learner_network, PPO_NETWORKS, "make_ppo_networks"))
        return self._extract(train, network, family=family, env=env, findings=findings)

    def _script_env(self, family: str, env: str) -> Extraction:
        """What Playground's learning/train_jax_ppo.py trains ``env`` with at its flag defaults
        (:mod:`brax_diff.extractors.playground.script`), over train()'s defaults."""
        if self._script is None:
            raise BraxDiffError("--brax-reference train-script needs a Playground repository (--playground-repo)")
        script_train, script_network, impl, why = self._script.scopes(env)
        if why is not None:
            raise BraxDiffError(f"--brax-reference train-script: {why} at this Playground commit")
        train = {**self.code.train_defaults(), **self._accepted(script_train, TRAIN, "train")}
        network = {**self.code.network_defaults(), **self._accepted(script_network, PPO_NETWORKS, "make_ppo_networks")}
        return self._extract(train, network, family=family, env=env, findings=self.code.missing_entry_points(),
                             impl=impl)

    def _layered(self, family: str, env: str | None, params: ParamsFunction, config: Config,
                 findings: list[Finding] | None = None) -> Extraction:
        findings = list(findings or []) + self.code.missing_entry_points()
        if params.function is None:
            findings.append(Finding("pattern_not_found", "WARNING",
                                    f"*: function {PARAMS_FUNCTION}() not found in {params.path}; "
                                    f"signature defaults used"))
        envs = self.environments(family)
        findings += params.dead_branches(envs) + params.unregistered_names(envs)
        findings += self._unknown_parameters(family, config)
        train: Scope = {**self._defaults(self.code.train_defaults(), config, "", params, env),
                        **self._accepted(config.train, TRAIN, "train")}
        network: Scope = {**self._defaults(self.code.network_defaults(), config, NETWORK_FACTORY, params, env),
                          **self._accepted(config.network or {}, PPO_NETWORKS, "make_ppo_networks")}
        return self._extract(train, network, family=family, env=env, findings=findings)

    @staticmethod
    def _defaults(defaults: Scope, config: Config, section: str, params: ParamsFunction, env: str | None) -> Scope:
        """A Brax function's defaults under a config section: where the section may hold fields
        the engine cannot list (a write of names it does not know), any of them may be set, so
        none is the default; each is unknown with the reason."""
        opened = next((part for part in dict.fromkeys((section, "")) if config.sections.get(part)), None)
        if opened is None:  # neither the section nor the config around it
            return defaults
        why = config.sections[opened]
        call = f"{PARAMS_FUNCTION}({env!r})" if env is not None else f"{PARAMS_FUNCTION}()"
        at = (params.snapshot.where(params.path, params.module.line(params.function)),)
        return {name: Setting(Code(f"<not known statically: {call} in {params.path} may set it: "
                                   f"{opened or 'the config'} may hold fields not listed: {why}>"),
                              at, f"{section or 'config'} of unknown fields") for name in defaults}

    def _accepted(self, scope: Scope, path: str, function: str) -> Scope:
        """The config keys the Brax function accepts: a key it does not accept is no
        effective value (the function never sees it; it rejects it with a TypeError)."""
        accepted = self.code.parameters(path, function)
        return dict(scope) if accepted is None else {k: v for k, v in scope.items() if k in accepted}

    def _unknown_parameters(self, family: str, config: Config) -> list[Finding]:
        """Config keys the Brax function at this ref does not accept (a TypeError upstream)."""
        out = []
        for scope, function, path in ((config.train, "train", TRAIN),
                                      (config.network or {}, "make_ppo_networks", PPO_NETWORKS)):
            accepted = self.code.parameters(path, function)
            if accepted is None:
                continue
            for name in sorted(set(scope) - accepted):
                out.append(Finding("unknown_parameter", "WARNING",
                                   f"{family} config sets {name!r}, which {function}() in {path} "
                                   f"does not accept: not an effective value (passing it "
                                   f"raises TypeError); the key's value is read without it",
                                   scope[name].provenance))
        return out

    def _extract(self, train: Scope, network: Scope, *, family: str | None, env: str | None,
                 findings: list[Finding], impl: Setting | None = None) -> Extraction:
        sources = {"brax": self.brax.info()}
        if self.playground is not None:
            sources["playground"] = self.playground.info()
        extraction = Extraction(side="brax", sources=sources, scope={"family": family, "env": env})
        # The trainer's facts read the config as written (env_config.episode_length): the environments
        # of a family share one derivation; the setup facts below read each environment's own values.
        written = {name: setting.as_written() for name, setting in train.items()}
        facts, derived_findings = self.code.facts(written, network, "defaults" if family is None else "config")
        for fact in facts:
            extraction.add(fact)
        # The params read each environment's config, and so does learner.py (its env takes its own
        # default config unless --playground_config_overrides is given).
        if self.reference == "learner" and env is not None and self.playground is not None \
                and self._runs.env_configs is None:
            self._runs.env_configs = EnvConfigs(self.playground)
        env_configs = self._runs.env_configs if self.reference in ("params", "learner") else None
        for fact in setup_facts(train, network, family=family, env=env, env_configs=env_configs,
                                reference=self.reference, impl=impl, learner=self.brax):
            # A setup key the code does not let us read gets its finding; a family's per-environment
            # keys are left to the environments (not unread).
            if fact.is_unknown and (env is not None or fact.key not in PER_ENVIRONMENT):
                extraction.unknown(fact.key, fact.unknown, Finding("pattern_not_found", "WARNING", fact.unknown,
                                                                   fact.provenance, fact.key), fact.provenance)
            else:
                extraction.add(fact)
        for fact in interface_facts(self.brax, self.playground, extraction.facts.get("action_distribution"),
                                    self.reference, env, family):
            # As for the setup keys: a family's per-environment keys are left to the environments.
            if env is None and fact.key in PER_ENVIRONMENT:
                extraction.add(fact)
            else:
                extraction.put(fact)
        for finding in findings + derived_findings:
            extraction.find(finding)
        extraction.complete(KEYS, "Brax's trainer and Playground's config")
        return extraction
